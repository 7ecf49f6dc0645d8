"""The allocation's stages before its statement (service/attribution/allocation_stage.py): the
lines' Tags are read in one pass, and the instances' lines that pass does not hold (no node or
cluster tag on them) are still split. p5.48xlarge billed $80 an hour: 8 GPUs, $10 a GPU-hour."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import duckdb

from service.attribution import attribute, materialise
from service.attribution.jobs import allocation_inputs
from service.attribution.needs import Needs
from service.attribution.rollup import narrowed_to
from service.attribution.rollup_versions import cost_partitions
from service.attribution.sql import rollup_sql
from service.attribution.statement import used
from service.core.timewindow import Window
from tests.attribution_helpers import line
from tests.test_clusters_allocation import gpu_line, job, setup

NOVEMBER = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
D = Decimal


def runs(lake, cfg, **kwargs) -> dict:
    out: dict = {}
    for row in attribute(lake, cfg, NOVEMBER, by=("run",), **kwargs).rows:
        out[row.values["run"]] = out.get(row.values["run"], D(0)) + row.cost
    return {run: cost for run, cost in out.items() if cost}


def raw_and_stored(lake, cfg, **kwargs) -> dict:
    raw = runs(lake, cfg, **kwargs)
    materialise(lake, cfg)
    assert runs(lake, cfg, **kwargs) == raw
    return raw


def _tags_read(operator: dict) -> int:
    """Lines the Parquet scans under `operator` that read the Tags column emitted."""
    info = operator.get("extra_info", {})
    own = operator.get("intermediate_rows", 0) if (operator.get("name") == "READ_PARQUET"
                                                   and "Tags" in info.get("Projections", [])) else 0
    return own + sum(_tags_read(child) for child in operator.get("children", []))


def rollup_statement(lake, cfg, needs: Needs):
    """A connection over `lake` and the period's rollup in memory for `needs` (its stages and
    the statement, as `attribute` runs them)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    lake.create_views(con)
    [part] = cost_partitions(lake)
    keys = [row[0] for row in con.execute("SELECT DISTINCT unnest(map_keys(Tags)) FROM costs").fetchall()]
    period = {"source": part.source, "period": part.period}
    inputs = allocation_inputs(lake, cfg.attribution, con, "source = $source AND billing_period = $period", period)
    return con, rollup_sql(cfg.attribution, keys, part.source, part.period, None, inputs, needs,
                           narrow=narrowed_to(cfg.attribution, needs, keys, None))


def tag_reads(tmp_path, lake, cfg, needs: Needs) -> int:
    """Over every statement of the period's rollup in memory for `needs`, the lines whose Tags
    a Parquet scan decoded and passed on (DuckDB's profile of each)."""
    con, sql = rollup_statement(lake, cfg, needs)
    read = 0
    for number, step in enumerate([*sql.setup, sql]):
        profile = tmp_path / f"profile-{number}.json"
        con.execute("SET enable_profiling = 'json'")
        con.execute(f"SET profiling_output = '{profile}'")
        con.execute(step.text, used(step.text, step.params)).fetchall()
        con.execute("SET enable_profiling = 'no_output'")
        read += sum(_tags_read(operator) for operator in json.loads(profile.read_text())["operator"])
    return read


def test_a_cluster_query_decodes_each_lines_tags_once(tmp_path):
    # 4 p5 instances (8 hours each, node-tagged), 6 other instances' hours, 6 volumes of the
    # cluster and 20 lines outside it. Scans that decoded Tags passed on, before: the 38 instance
    # lines (members' stage), the 32 p5 lines (held lines), the 38 lines with a cluster tag (the
    # statement's `--where`): 108. Now one pass, the 38 lines holding a node or cluster tag.
    lines = [gpu_line(f"i-{n}", start=f"2026-11-02T{10 + h}:00:00", cluster="p5", **{"slurm-node": f"p5-{n}"})
             for n in range(4) for h in range(8)]
    lines += [line(f"2026-11-03T0{h}:00:00", "1", resource=f"i-o{h}", instance_type="m5.large") for h in range(6)]
    lines += [line("2026-11-02T10:00:00", "5", resource=f"vol-{n}", tags={"cluster": "p5"}) for n in range(6)]
    lines += [line(f"2026-11-04T{h:02d}:00:00", "7", resource=f"bucket-{h}", tags={"team": "web"}) for h in range(20)]
    jobs = [job(str(n), 8, "2026-11-02T10:00:00", "2026-11-02T14:00:00", nodes=[f"p5-{n}"]) for n in range(4)]
    lake, cfg = setup(tmp_path, lines, jobs, {"node_tag": "slurm-node", "cluster_tag": "cluster"})
    needs = Needs(("run", "cluster"), ("billed",), hows=False, where=(("cluster", ("p5",)),))
    assert tag_reads(tmp_path, lake, cfg, needs) == 32 + 6
    # each job held its node 4 of its 8 hours ($320), the other 4 idle; the volumes keep the default
    assert raw_and_stored(lake, cfg, where={"cluster": ("p5",)}) == {
        **{str(n): D(320) for n in range(4)}, "idle": D(1280), "unallocated": D(30)}


def test_the_lines_of_a_node_whose_tag_is_gone_mid_month_are_split(tmp_path):
    # i-a carries its node tag the first hour only: both hours are its (one instance), the job
    # holds 8 GPUs both hours ($160); i-b's line (no tag) is no cluster's and stays as it is.
    lines = [gpu_line("i-a", **{"slurm-node": "p5-001"}), gpu_line("i-a", start="2026-11-02T11:00:00"),
             gpu_line("i-b", cost="30", start="2026-11-02T11:00:00")]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", nodes=["p5-001"])]
    lake, cfg = setup(tmp_path, lines, jobs, {"node_tag": "slurm-node"})
    assert raw_and_stored(lake, cfg) == {"1": D(160), "unallocated": D(30)}


def test_an_instance_reached_by_its_id_without_tags_is_split_under_a_cluster_query(tmp_path):
    # i-a has no tag at all: the job names it, 4 GPUs for its two hours ($40 + $40, idle $80);
    # its cluster is the job's. A volume tagged p5 keeps the default; i-z (no job) is outside.
    lines = [gpu_line("i-a"), gpu_line("i-a", start="2026-11-02T11:00:00"),
             line("2026-11-02T10:00:00", "5", resource="vol-1", tags={"cluster": "p5"}),
             gpu_line("i-z", cost="9")]
    jobs = [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"])]
    lake, cfg = setup(tmp_path, lines, jobs, {"cluster_tag": "cluster"})
    assert raw_and_stored(lake, cfg, where={"cluster": ("p5",)}) == {"1": D(80), "idle": D(80), "unallocated": D(5)}


def test_the_members_staged_lines_are_read_where_they_were_staged_not_copied(tmp_path):
    # i-a and i-b carry their node tags on every line: `stage.lines` holds all 4 of their lines,
    # `stage.held` none (before, a copy of all 4: at 10M lines 180k rows, 0.15 CPU s); i-c's
    # second hour lost its tag: only that line is read again into `stage.held`. Each job held
    # its node's 8 GPUs for its first hour ($80 each), the rest is idle.
    lines = [gpu_line(i, start=f"2026-11-02T1{h}:00:00", **{"slurm-node": f"p5-{i}"}) for i in ("i-a", "i-b", "i-c")
             for h in range(2) if (i, h) != ("i-c", 1)] + [gpu_line("i-c", start="2026-11-02T11:00:00")]
    jobs = [job(i, 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=[f"p5-{i}"]) for i in ("i-a", "i-b", "i-c")]
    lake, cfg = setup(tmp_path, lines, jobs, {"node_tag": "slurm-node"})
    con, sql = rollup_statement(lake, cfg, Needs(("run",), ("billed",), hows=False))
    for step in sql.setup:
        con.execute(step.text, used(step.text, step.params))
    assert con.execute(f"SELECT ResourceId, cp_start FROM {sql.stage.held}").fetchall() == [
        ("i-c", datetime(2026, 11, 2, 11))]
    assert con.execute(f"SELECT count(*) FROM {sql.stage.lines}").fetchone() == (5,)
    assert raw_and_stored(lake, cfg) == {"i-a": D(80), "i-b": D(80), "i-c": D(80), "idle": D(240)}


JOB_COLUMNS = ("record_id VARCHAR, job_id VARCHAR, run_id VARCHAR, scheduler VARCHAR, cluster VARCHAR, "
               "state VARCHAR, submit_time TIMESTAMP, start_time TIMESTAMP, end_time TIMESTAMP, gpus DOUBLE, "
               "nodes VARCHAR[], instance_ids VARCHAR[], \"user\" VARCHAR, account VARCHAR, partition VARCHAR, "
               "qos VARCHAR, namespace VARCHAR, name VARCHAR, team VARCHAR, project VARCHAR, experiment VARCHAR, "
               "job_type VARCHAR, labels MAP(VARCHAR, VARCHAR), snapshot_date VARCHAR, source VARCHAR")


def test_the_staged_job_records_rank_only_those_sharing_a_job_and_equal_every_records_ranks():
    """`Stage.jobs` ranks (settled_records' windows) only the records that share their job id and
    submit time with another, or are pods without a submit time; a record alone is its job's
    newest. The stage equals the newest of every record ranked, over attempts seen again, a
    job in two sources, records without a submit time in two snapshots, pods by uid and by name."""
    from service.attribution.allocation import FAR, AllocationInputs, jobs_sql, settled_records

    con = duckdb.connect()
    con.execute(f"CREATE TABLE jobs ({JOB_COLUMNS})")
    con.execute("CREATE TABLE job_snapshots (source VARCHAR, snapshot_date VARCHAR, taken_at TIMESTAMP)")
    con.execute("INSERT INTO job_snapshots VALUES ('s', '2026-11-01', '2026-11-01 06:00'), "
                "('s', '2026-11-02', '2026-11-02 06:00'), ('t', '2026-11-02', '2026-11-02 07:00'), "
                "('k', '2026-11-01', '2026-11-01 06:00'), ('k', '2026-11-02', '2026-11-02 06:00')")
    records = [  # record_id, job_id, scheduler, submit, start, end, snapshot, source
        ("c/7@100", "7", "slurm", "2026-11-01 00:00", "2026-11-01 01:00", None, "2026-11-01", "s"),  # running, then
        ("c/7@100", "7", "slurm", "2026-11-01 00:00", "2026-11-01 01:00", "2026-11-01 05:00", "2026-11-02", "s"),
        ("c/7@100", "7", "slurm", "2026-11-01 00:00", "2026-11-01 01:00", None, "2026-11-02", "t"),  # another source
        ("c/8@200", "8", "slurm", "2026-11-01 02:00", "2026-11-01 02:00", None, "2026-11-01", "s"),  # gone next day
        ("c/9@300", "9", "slurm", "2026-11-02 02:00", "2026-11-02 02:00", None, "2026-11-02", "s"),  # alone
        ("f-1", "f-1", "file", None, "2026-11-01 00:00", None, "2026-11-01", "s"),  # no submit time, seen twice
        ("f-1", "f-1", "file", None, "2026-11-01 00:00", "2026-11-01 09:00", "2026-11-02", "s"),
        ("f-2", "f-2", "file", None, "2026-11-01 00:00", "2026-11-01 03:00", "2026-11-01", "s"),
        ("k8/uid-1", "ns/p", "kubernetes", "2026-11-01 00:00", "2026-11-01 00:00", None, "2026-11-02", "k"),
        ("k8/ns/p@1", "ns/p", "kubernetes", "2026-11-01 00:00", "2026-11-01 00:00", None, "2026-11-01", "k"),
        ("k8/ns/q@2", "ns/q", "kubernetes", None, "2026-11-01 00:00", None, "2026-11-01", "k"),  # no submit time
        ("k8/ns/q@3", "ns/q", "kubernetes", None, "2026-11-01 04:00", "2026-11-01 08:00", "2026-11-02", "k"),
    ]
    for record_id, job_id, scheduler, submit, start, end, snapshot, source in records:
        con.execute("INSERT INTO jobs (record_id, job_id, run_id, scheduler, cluster, submit_time, start_time, "
                    "end_time, gpus, snapshot_date, source) VALUES (?, ?, ?, ?, 'k8', ?, ?, ?, 8, ?, ?)",
                    [record_id, job_id, f"{source}:{snapshot}:{record_id}", scheduler, submit, start, end, snapshot,
                     source])
    every_ranked = (f"SELECT record_id, run_id, start_time AS j_start, coalesce(end_time, {FAR}) AS j_end FROM "
                    f"({settled_records('a_newest')}) AS j WHERE a_newest = 1 AND start_time IS NOT NULL "
                    f"AND gpus > 0 AND coalesce(end_time, {FAR}) > start_time")
    staged = f"SELECT record_id, run_id, j_start, j_end FROM ({jobs_sql(AllocationInputs(None, True, False))})"
    expected = sorted(con.execute(every_ranked).fetchall())
    assert sorted(con.execute(staged).fetchall()) == expected
    assert [row[1] for row in expected] == [  # each job once: its newest record, or another source's end
        "s:2026-11-02:c/7@100", "s:2026-11-01:c/8@200", "s:2026-11-02:c/9@300", "s:2026-11-02:f-1",
        "s:2026-11-01:f-2", "k:2026-11-01:k8/ns/q@2", "k:2026-11-02:k8/ns/q@3", "k:2026-11-02:k8/uid-1"]
