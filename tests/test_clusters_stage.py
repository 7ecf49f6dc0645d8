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
