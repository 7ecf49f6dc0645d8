"""Shared GPU clusters: each instance-hour's cost on the jobs that held its GPUs, the rest on the
cluster's idle, exactly. Every expected figure is worked out by hand in the test's comment
(p5.48xlarge: 8 GPUs, billed $80 an hour here, i.e. $10 a GPU-hour)."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from connectors.jobs_base import job_row
from service.attribution import attribute, cluster_usage, direct_daily_lookup, materialise, reconcile
from service.cli.main import cli
from service.core.errors import ConfigError, UsageError
from service.core.timewindow import Window
from tests.attribution_helpers import (add_jobs, config, declared_sources, line, make_lake, query_memory_limits,
                                      readers_memory_limit)

NOVEMBER = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
D = Decimal


def gpu_line(instance: str, cost: str = "80", start: str = "2026-11-02T10:00:00", end: str | None = None,
             instance_type: str = "p5.48xlarge", **tags: str) -> dict:
    return line(start, cost, end=end, resource=instance, instance_type=instance_type,
                tags={"team": "platform", **tags})


def job(record: str, gpus: float, start: str, end: str | None, **fields) -> dict:
    """A job record as a source of `cluster` (default p5) writes it: its record id `<cluster>/<id>`."""
    cluster = fields.pop("cluster", "p5")
    return job_row(record_id=f"{cluster}/{record}", job_id=record, cluster=cluster,
                   state=fields.pop("state", "COMPLETED"), start_time=datetime.fromisoformat(start),
                   end_time=datetime.fromisoformat(end) if end else None, gpus=float(gpus), **fields)


def setup(tmp_path, lines, jobs, clusters: dict | None = None, **attribution):
    lake = make_lake(tmp_path, lines)
    if jobs:
        add_jobs(lake, jobs)
    cfg = config({"clusters": clusters if clusters is not None else {}, **attribution}, lake)
    return lake, cfg


def by(lake, cfg, dims, window=NOVEMBER, **kwargs) -> dict:
    result = attribute(lake, cfg, window, by=tuple(dims), **kwargs)
    out: dict = {}
    for row in result.rows:
        key = tuple(row.values[d] for d in dims)
        out[key if len(dims) > 1 else key[0]] = out.get(key if len(dims) > 1 else key[0], D(0)) + row.cost
    return {k: v for k, v in out.items() if v != 0}


def assert_ties_out(lake, cfg):
    results = reconcile(lake, cfg)
    assert results and all(r.ok for r in results), [(r.cost, r.difference) for r in results if not r.ok]


def test_the_job_helper_names_a_record_by_its_own_cluster():
    """job() named every record p5/<id>, whatever its cluster: east's job 9 and p5's were one record
    id, so a test of two sources' same job id had to spell the record id itself."""
    assert [job("9", 8, "2026-11-02T10:00:00", None, **extra)["record_id"]
            for extra in ({}, {"cluster": "east"})] == ["p5/9", "east/9"]


def test_a_job_spanning_two_instances(tmp_path):
    # 16 GPUs on i-a and i-b (8 each) for half an hour: each instance's hour is 8·30 / (8·60)
    # = 1/2 the job's ($40), the other half idle ($40): job $80, idle $80.
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")],
                      [job("1", 16, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a", "i-b"])])
    assert by(lake, cfg, ["run"]) == {"1": D(80), "idle": D(80)}
    assert by(lake, cfg, ["cluster", "job_type"]) == {("p5", "unallocated"): D(80), ("p5", "idle"): D(80)}
    assert_ties_out(lake, cfg)


def test_two_jobs_sharing_an_hour_through_the_node_tag(tmp_path):
    # On one node: 4 GPUs for the hour (4/8 → $40) and 2 GPUs for 30 minutes (2·30/(8·60) =
    # 1/8 → $10); idle $30.
    lines = [gpu_line("i-a", **{"slurm-node": "p5-001"})]
    jobs = [job("a", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["p5-001"]),
            job("b", 2, "2026-11-02T10:15:00", "2026-11-02T10:45:00", nodes=["P5-001"])]
    lake, cfg = setup(tmp_path, lines, jobs, {"node_tag": "slurm-node"})
    assert by(lake, cfg, ["run"]) == {"a": D(40), "b": D(10), "idle": D(30)}
    assert_ties_out(lake, cfg)


def test_an_over_booked_hour_is_scaled_to_capacity_and_counted(tmp_path):
    # 8 GPUs for 60 min and 4 GPUs for 30 min hold 600 GPU-minutes of an instance that has 480:
    # shared in proportion, 480/600 → $64 and 120/600 → $16, nothing idle, no dollar made up.
    jobs = [job("a", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"]),
            job("b", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"])]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs)
    assert by(lake, cfg, ["run"]) == {"a": D(64), "b": D(16)}
    assert attribute(lake, cfg, NOVEMBER, by=("run",)).overbooked == 1
    assert cluster_usage(lake, cfg, NOVEMBER).overbooked == 1
    assert_ties_out(lake, cfg)


def test_a_job_without_a_node_list_takes_the_free_gpus_of_its_cluster_pool(tmp_path):
    # i-a and i-b carry cluster=p5. Job a holds all of i-a ($80). Job c names no node: its 4
    # GPU-hours take half of the pool's free capacity (i-b's 8), so $40 of i-b; i-b's other
    # half is idle ($40). A cluster-tagged instance of a type with no GPUs is not capacity.
    lines = [gpu_line("i-a", cluster="p5"), gpu_line("i-b", cluster="p5"),
             gpu_line("i-login", "0.5", instance_type="m5.large", cluster="p5")]
    jobs = [job("a", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"]),
            job("c", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["p5-099"])]
    lake, cfg = setup(tmp_path, lines, jobs, {"cluster_tag": "cluster"})
    assert by(lake, cfg, ["run", "team"]) == {("a", "unallocated"): D(80), ("c", "unallocated"): D(40),
                                              ("idle", "platform"): D(40), ("unallocated", "platform"): D("0.5")}
    # the login node keeps its own values; its `cluster` tag is read as the cluster dimension
    assert by(lake, cfg, ["cluster"]) == {"p5": D("160.5")}
    assert_ties_out(lake, cfg)


def test_mig_slices_count_as_their_fraction_of_a_gpu(tmp_path):
    # p4d.24xlarge, 8 GPUs, $70 an hour. A 3g.40gb slice is 3/7 of a GPU: 70 · (3/7) / 8 =
    # $3.75; a 1g.10gb slice 70 · (1/7) / 8 = $1.25; idle $65.
    lines = [gpu_line("i-m", "70", instance_type="p4d.24xlarge", node="a100-01")]
    jobs = [job("m3", 3 / 7, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["a100-01"]),
            job("m1", 1 / 7, "2026-11-02T10:00:00", "2026-11-02T11:00:00", nodes=["a100-01"])]
    lake, cfg = setup(tmp_path, lines, jobs, {"node_tag": "node"})
    assert by(lake, cfg, ["run"]) == {"m3": D("3.75"), "m1": D("1.25"), "idle": D(65)}
    assert_ties_out(lake, cfg)


def test_two_lines_of_one_instance_in_one_hour_with_other_ends_are_split_each_over_its_own_span(tmp_path):
    # i-a bills $40 for 10:00-10:30 and $80 for 10:00-11:00 (two slots that differ only in their
    # end); the job holds all 8 GPUs 10:00-10:30: the first line whole ($40), half the second
    # (8·30 / (8·60) → $40), the other half idle ($40). A slot keyed without its end would join
    # each line to both slots' weights.
    lines = [gpu_line("i-a", "40", end="2026-11-02T10:30:00"), gpu_line("i-a", "80", end="2026-11-02T11:00:00")]
    jobs = [job("a", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"])]
    lake, cfg = setup(tmp_path, lines, jobs)
    assert by(lake, cfg, ["run"]) == {"a": D(80), "idle": D(40)}
    assert_ties_out(lake, cfg)


def test_a_daily_line_is_spread_over_its_hours_and_windows_cut_the_parts(tmp_path):
    # $1,920 for a day = $80 an hour; the job holds all 8 GPUs from 10:00 to 12:00: $160, idle
    # $1,760. The window 10:00-10:30 holds half of the job's first hour: $40.
    lines = [gpu_line("i-a", "1920", start="2026-11-02T00:00:00", end="2026-11-03T00:00:00")]
    jobs = [job("a", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"])]
    lake, cfg = setup(tmp_path, lines, jobs)
    assert by(lake, cfg, ["run"]) == {"a": D(160), "idle": D(1760)}
    half_hour = Window(datetime(2026, 11, 2, 10, tzinfo=timezone.utc), datetime(2026, 11, 2, 10, 30, tzinfo=timezone.utc))
    assert by(lake, cfg, ["run"], window=half_hour) == {"a": D(40)}
    assert_ties_out(lake, cfg)


def test_every_dollar_lands_once_with_the_exact_remainder_rule(tmp_path):
    # $1 over three jobs of 8/3 GPUs each: 1/3 each, rounded to 0.333333333333; the remainder
    # (1e-12) goes to the largest share, ties to the first job in byte order (p5/a).
    jobs = [job(name, 8 / 3, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"]) for name in "cba"]
    lake, cfg = setup(tmp_path, [gpu_line("i-a", "1")], jobs)
    assert by(lake, cfg, ["run"]) == {"a": D("0.333333333334"), "b": D("0.333333333333"), "c": D("0.333333333333")}
    assert_ties_out(lake, cfg)


def test_a_credit_and_other_measures_split_alike(tmp_path):
    # A Savings Plan negation of the same hour (-$50 billed) and an effective cost of $30 are
    # split like the usage: the job holds half the hour.
    lines = [line("2026-11-02T10:00:00", "80", resource="i-a", instance_type="p5.48xlarge", effective="30"),
             line("2026-11-02T10:00:00", "-50", resource="i-a", instance_type="p5.48xlarge", category="Credit",
                  effective="0")]
    jobs = [job("a", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"])]
    lake, cfg = setup(tmp_path, lines, jobs)
    assert by(lake, cfg, ["run"]) == {"a": D(15), "idle": D(15)}
    assert by(lake, cfg, ["run"], cost="effective") == {"a": D(15), "idle": D(15)}
    assert_ties_out(lake, cfg)


def test_jobs_bring_their_own_values_and_idle_keeps_the_owners(tmp_path):
    # Job values: a column the source states wins over its labels; labels through the
    # dimensions' tag keys (project from the Slurm account); virtual rules on the job's name,
    # partition and QOS. Idle keeps the instance line's team; a line on no cluster gets the
    # job dimensions' default.
    lines = [gpu_line("i-a", cluster="p5"), line("2026-11-02T10:00:00", "5", resource="vol-1", tags={"team": "nlp"})]
    jobs = [job("1", 2, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], team="research",
                labels={"team": "nlp", "experiment": "exp-7"}, account="llama", name="eval-mmlu", user="ada",
                state="FAILED"),
            job("2", 2, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], account="llama",
                qos="debug", name="notebook", labels={"Owner-Team": "nlp"}, partition="train", run_id="r-2")]
    attribution = {"dimensions": {
        "team": {"tags": ["team", "owner-team"]},
        "project": {"tags": ["project", "account"]},
        "job_type": {"rules": [{"match": {"job_name": "^eval"}, "value": "eval"},
                               {"match": {"qos": "debug"}, "value": "debug"},
                               {"match": {"partition": "train"}, "value": "pretrain"}]}}}
    lake, cfg = setup(tmp_path, lines, jobs, {"cluster_tag": "cluster"}, **attribution)
    got = by(lake, cfg, ["team", "project", "experiment", "run", "job_type", "job_state", "user", "cluster"])
    assert got == {
        ("research", "llama", "exp-7", "1", "eval", "FAILED", "ada", "p5"): D(20),
        ("nlp", "llama", "unallocated", "r-2", "debug", "COMPLETED", "unallocated", "p5"): D(20),
        ("platform", "unallocated", "unallocated", "idle", "idle", "idle", "unallocated", "p5"): D(40),
        ("nlp", "unallocated", "unallocated", "unallocated", "unallocated", "unallocated", "unallocated",
         "unallocated"): D(5),
    }
    assert by(lake, cfg, ["job_state"], where={"team": ["RESEARCH"]}) == {"FAILED": D(20)}
    assert_ties_out(lake, cfg)


def test_rules_read_the_allocated_lines(tmp_path):
    # what spend-anomaly and unallocated-spend read: direct spend per day, jobs' parts included
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00",
                                                      instance_ids=["i-a"], state="FAILED", labels={"team": "nlp"})])
    daily = direct_daily_lookup(lake, cfg)
    spend = daily("job_state", datetime(2026, 11, 1), datetime(2026, 12, 1))
    assert sorted((s.value, s.resource, s.cost) for s in spend) == [("failed", "i-a", D(40)), ("idle", "i-a", D(40))]
    assert sorted((s.value, s.cost) for s in daily("team", datetime(2026, 11, 1), datetime(2026, 12, 1))) == [
        ("nlp", D(40)), ("platform", D(40))]


def test_explain_names_the_job_and_the_idle_cluster(tmp_path):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")],
                      [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"])])
    result = attribute(lake, cfg, NOVEMBER, by=("team",), explain=True)
    assert {(c.how, c.cost) for row in result.rows for c in row.explain} == {("job:1", D(40)), ("idle:p5", D(40))}


def test_cluster_usage_gives_jobs_runs_and_idle(tmp_path):
    jobs = [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r"),
            job("2", 2, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r",
                state="FAILED")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), line("2026-11-02T10:00:00", "5", resource="vol-1")], jobs)
    usage = cluster_usage(lake, cfg, NOVEMBER)
    assert [(j.cluster, j.job, j.values["job_state"], j.cost) for j in usage.jobs] == [
        ("p5", "1", "COMPLETED", D(40)), ("p5", "2", "FAILED", D(20))]
    assert usage.runs() == {("r", "USD"): (D(60), {"team": "unallocated", "project": "unallocated",
                                                  "experiment": "unallocated", "run": "r", "job_type": "unallocated",
                                                  "job_state": "several", "user": "unallocated",
                                                  "parent_run": "unallocated"})}
    [p5] = usage.clusters
    assert (p5.cluster, p5.cost, p5.idle) == ("p5", D(80), D(20))


def test_a_new_jobs_snapshot_re_attributes_the_stored_rollups(tmp_path):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")],
                      [job("1", 8, "2026-11-02T10:00:00", None, instance_ids=["i-a"], state="RUNNING")])
    assert materialise(lake, cfg).built == 1
    assert by(lake, cfg, ["job_state"]) == {"RUNNING": D(80)}
    # the next day's snapshot: the job ended at 10:30
    add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"],
                        state="COMPLETED")], snapshot="2026-11-04")
    assert by(lake, cfg, ["job_state"]) == {"COMPLETED": D(40), "idle": D(40)}
    assert materialise(lake, cfg).built == 1


def test_a_config_without_clusters_is_unchanged_by_jobs(tmp_path):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")],
                      [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"])])
    plain = config({}, lake)
    assert by(lake, plain, ["team"]) == {"platform": D(80)}
    with pytest.raises(UsageError, match="'run' is a dimension of shared GPU clusters: add `clusters:` under `attribution:`"):
        attribute(lake, plain, NOVEMBER, by=("run",))


@pytest.mark.parametrize("attribution, says", [
    ({"clusters": {"gpus_per_instance": {"p5.48xlarge": -1}}}, "attribution.clusters.gpus_per_instance"),
    ({"clusters": {"node_tags": "x"}}, "attribution.clusters.node_tags: unknown key"),
    ({"dimensions": {"job_type": {"rules": [{"match": {"qos": "debug"}, "value": "debug"}]}}},
     "attribution.dimensions.job_type.rules[0].match.qos: qos is a job's field"),
    ({"clusters": {}, "dimensions": {"job_type": {"rules": [{"match": {"job_name": "(["}, "value": "x"}]}}},
     "attribution.dimensions.job_type.rules[0].match.job_name: not a valid regular expression"),
])
def test_cluster_config_errors_name_the_dotted_path(attribution, says):
    with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("(", r"\(")):
        config(attribution)


def test_the_cli_checks_explains_and_warns(tmp_path):
    jobs = [job("a", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"]),
            job("b", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"])]
    lake, _ = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake),
                                    "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs")}],
                                    "attribution": {"clusters": {}}}))
    runner = CliRunner()
    check = runner.invoke(cli, ["--config", str(path), "attribute", "--check", "--format", "json"])
    assert check.exit_code == 0, check.output
    shown = runner.invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11-01", "--until", "2026-12-01",
                                "--by", "job_type", "--explain", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert "1 instance-hour(s) in the window were over-booked" in shown.stderr
    rows = yaml.safe_load(shown.stdout)["rows"]
    # i-a's over-booked hour goes to its jobs whole; i-b, which no job reaches and no cluster
    # tag names, stays the line it is
    assert {(r["job_type"], p["how"], p["cost"]) for r in rows for p in r["explain"]} == {
        ("unallocated", "job:a", "64.000000000000"), ("unallocated", "job:b", "16.000000000000"),
        ("unallocated", "default", "80.000000000000")}


def test_an_instance_billing_two_types_in_the_month_has_all_its_lines_allocated(tmp_path):
    # i-a resized from p4d.24xlarge to p5.48xlarge (8 GPUs each) between two hours, held whole by
    # one 8-GPU job: both hours are the job's ($80 + $80), none idle. The held lines' scan is
    # filtered by the types the member's lines bill: each of them, not one per instance.
    lines = [gpu_line("i-a", start="2026-11-02T10:00:00", instance_type="p4d.24xlarge"),
             gpu_line("i-a", start="2026-11-02T11:00:00")]
    lake, cfg = setup(tmp_path, lines, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"])])
    assert by(lake, cfg, ["run"]) == {"1": D(160)}
    assert by(lake, cfg, ["run"], where={"cluster": ("p5",)}) == {"1": D(160)}
    assert_ties_out(lake, cfg)


def test_a_session_rolling_up_a_cluster_in_memory_keeps_no_allocation_stage_tables(tmp_path):
    # An allocation stages the job records and instance lines (at 10M lines ~150 MB) for its one
    # statement; a session kept them to its end, beside every later allocation's own
    # (`spendlake runs` places the window's parts again for the idle shares: two sets).
    from service.attribution.compute import RollupSession
    from service.attribution.run_inputs import idle_shares
    lake, cfg = setup(tmp_path, [gpu_line("i-a")],
                      [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")])
    session = RollupSession(lake, cfg.attribution)

    def staged() -> list:
        return session.con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'a_stage%'").fetchall()

    try:
        assert staged() == []
        assert idle_shares(lake, session, cfg.attribution, NOVEMBER, "billed") == {("r1", "USD"): D("0.5")}
        assert staged() == []
    finally:
        session.con.close()


def test_a_session_rolling_up_in_memory_gives_duckdb_less_than_a_writer(tmp_path):
    # `spendlake runs` at 10M lines held ~450 MB in Python and the libraries beside the writer's
    # 600 MB of DuckDB (1,120 MB peak): a reader spills sooner (the same CPU seconds there).
    import duckdb

    from service.attribution.compute import RollupSession
    from service.core.lake import READER_MEMORY_LIMIT, WRITER_MEMORY_LIMIT

    lake, cfg = setup(tmp_path, [gpu_line("i-a")], [])
    session = RollupSession(lake, cfg.attribution)
    try:
        limit = session.con.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    finally:
        session.con.close()
    spelled = duckdb.connect(config={"memory_limit": READER_MEMORY_LIMIT})
    assert limit == spelled.execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert int(READER_MEMORY_LIMIT.removesuffix("MB")) < int(WRITER_MEMORY_LIMIT.removesuffix("MB"))


@pytest.mark.parametrize("allocating", ["runs", "runs --run", "export"])
def test_an_allocation_beside_stored_rollups_gives_duckdb_a_readers_memory(tmp_path, monkeypatch, allocating):
    # `runs` places the window's cluster lines again for its idle shares (and a run's story), an
    # export with attribution allocates its lines, both on the session's connection: over stored
    # rollups that had no limit (DuckDB may take 80% of the machine's memory); a reader's now.
    # Job 1 held 4 of i-a's 8 GPUs for its hour: $40 the job's, $40 the cluster's idle.
    import duckdb

    from service.attribution import RunsQuery, runs
    from service.core.config import parse_config
    from service.core.lake import EXPORT_MEMORY_LIMIT
    from service.export import ExportOptions, export_focus

    lake, _ = setup(tmp_path, [gpu_line("i-a")],
                    [job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r1")])
    cfg = parse_config({"lake": str(lake.root), "sources": declared_sources(lake, inventory=True),
                        "attribution": {"clusters": {}}})  # the job source too: an export reads the sources declared
    assert materialise(lake, cfg).built == 1  # the session rolls nothing up in memory
    limits = query_memory_limits(monkeypatch)
    if allocating == "export":
        export_focus(cfg, ExportOptions(str(tmp_path / "out"), "1.3", attribution=True))
        parts = duckdb.sql(f"SELECT x_run, BilledCost FROM read_parquet('{tmp_path}/out/*/*.parquet')").fetchall()
        assert sorted(parts) == [("idle", D(40)), ("r1", D(40))]
    else:
        result = runs(lake, cfg, RunsQuery(NOVEMBER, run="r1" if allocating == "runs --run" else None))
        assert [(row.run, row.cost, row.idle_share) for row in result.rows] == [("r1", D(40), D("0.5"))]
    # an export's own limit (EXPORT_MEMORY_LIMIT: export46, its batches smaller to pay for it), still a limit
    expected = readers_memory_limit() if allocating != "export" else duckdb.connect(
        config={"memory_limit": EXPORT_MEMORY_LIMIT}).execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    assert limits and set(limits) == {expected}
