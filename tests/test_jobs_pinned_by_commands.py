"""Every reader of a command reads the job records its command's snapshot holds (one snapshot per
command: service/core/snapshot_pins.py), however a job source is read again meanwhile: `runs`'
span of one run and its no-bill path, the job-rule and shared-node notes, and the rules' lookups.

As tests/test_jobs_held_by_readers.py: p5's instance i-a bills $80 for 10:00-11:00 on 2026-11-02.
Jobs version A: run r1 holds its 8 GPUs 10:00-10:30 ($40 to r1, $40 idle). Version B, the same
day's snapshot read again: run r2 holds them the whole hour. Each test re-ingests B after the
command took its snapshot and before the reader it tests reads: the reader answers A."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal as D

from service.attribution import AttributionQuery, RunsQuery, answer_notes, attribute_query, job_rules, run_rows, runs
from service.attribution.answer_notes import with_notes
from service.core.config import parse_config
from service.findings import run as findings_run
from service.core.lake import Lake
from service.core.timewindow import Window
from tests.attribution_helpers import add_jobs
from tests.test_clusters_allocation import NOVEMBER, gpu_line, job, setup
from tests.test_job_sources_sharing_nodes import ELSEWHERE, _both as both
from tests.test_runs import whole_config

A = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1")]
B = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="r2")]
NAIVE_NOVEMBER = (datetime(2026, 11, 1), datetime(2026, 12, 1))
HOUR_OF_R1 = Window(datetime(2026, 11, 2, 10, tzinfo=timezone.utc), datetime(2026, 11, 2, 11, tzinfo=timezone.utc))


def read_again_first(monkeypatch, module, name: str, lake: Lake) -> list:
    """`module.name` re-ingests B once before it runs (the command has its snapshot by then)."""
    reader, ingested = getattr(module, name), []

    def jobs_read_again_first(*args, **kwargs):
        if not ingested:
            add_jobs(lake, B)
            ingested.append(True)
        return reader(*args, **kwargs)

    monkeypatch.setattr(module, name, jobs_read_again_first)
    return ingested


def test_a_runs_own_span_is_that_of_the_jobs_its_command_holds(tmp_path, monkeypatch):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], A)
    ingested = read_again_first(monkeypatch, run_rows, "run_span", lake)
    result = runs(lake, cfg, RunsQuery.parse(since=None, run="r1"))
    assert ingested and result.window == HOUR_OF_R1  # not the bill's months: r1 is gone from B
    assert [(r.run, r.cost, r.gpu_hours) for r in result.rows] == [("r1", D(40), D(4))]


def test_a_running_runs_own_span_ends_at_the_bills_end_its_command_read(tmp_path, monkeypatch):
    """A running run's span runs to the bill's end: that of the snapshot its costs are read in,
    not the ledger's when the span is read. An ingest commits a later hour each time the span is
    read (as on a lake read past READ_PATIENCE): the second read's answer stands, its data through
    12:00 and its window to 12:00 (it was to 13:00, the hour of the delivery after the costs read)."""
    from service.core import snapshot as snapshot_module
    from tests.attribution_helpers import relation

    running = [job("1", 8, "2026-11-02T10:00:00", None, state="RUNNING", instance_ids=["i-a"], run_id="r1")]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], running)
    monkeypatch.setattr(snapshot_module, "READ_PATIENCE", 0.0)
    span, deliveries = run_rows.run_span, []

    def a_later_hour_each_read(*args):
        deliveries.append(f"d{len(deliveries) + 2}")
        con = lake.connect()
        lake.commit_costs(con, relation(con, [gpu_line("i-a", start=f"2026-11-02T{10 + n}:00:00")
                                              for n in range(len(deliveries) + 1)]),
                          source="cur", delivery_id=deliveries[-1], periods=None)
        con.close()
        return span(*args)

    monkeypatch.setattr(run_rows, "run_span", a_later_hour_each_read)
    result = runs(lake, cfg, RunsQuery.parse(since=None, run="r1"))
    noon = datetime(2026, 11, 2, 12, tzinfo=timezone.utc)
    assert deliveries == ["d2", "d3"] and result.data_through == noon
    assert result.window == Window(HOUR_OF_R1.since, noon)
    assert [(r.run, r.cost, r.gpu_hours) for r in result.rows] == [("r1", D(160), D(16))]


def test_the_runs_of_a_lake_without_a_bill_are_those_of_the_jobs_its_command_holds(tmp_path, monkeypatch):
    lake = Lake(tmp_path / "lake")
    add_jobs(lake, A)
    ingested = read_again_first(monkeypatch, run_rows, "job_records", lake)
    result = runs(lake, parse_config(whole_config(tmp_path, lake)), RunsQuery.parse(since="2026-11-02",
                                                                                    until="2026-11-03"))
    assert ingested and result.lake_empty
    assert [(r.run, r.gpu_hours) for r in result.rows] == [("r1", D(4))]  # not r2's 8


def noted(lake: Lake, attribution, by: tuple[str, ...]):
    """`attribute`'s answer with its notes and warnings, as the command and the API give it."""
    query = AttributionQuery(NOVEMBER, by, {}, "billed", "total", None, False, False).validated(
        attribution, naming=lambda name: name)
    return with_notes(lake, attribution, query, attribute_query(lake, attribution, query))


def test_the_job_rules_an_answer_warns_of_are_checked_on_the_jobs_it_read(tmp_path, monkeypatch):
    rules = [{"match": {"job_name": "^train-a"}, "value": "pretrain"}]
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], [{**A[0], "name": "train-a"}],
                      dimensions={"job_type": {"rules": rules}})
    assert noted(lake, cfg.attribution, ("job_type",)).warnings == ()
    monkeypatch.setattr(job_rules, "_CHECKED", type(job_rules._CHECKED)())  # no check kept from the read above
    ingested = read_again_first(monkeypatch, answer_notes, "idle_job_rules", lake)  # B's job has no name
    result = noted(lake, cfg.attribution, ("job_type",))
    assert ingested and {r.values["job_type"]: r.cost for r in result.rows} == {"pretrain": D(40), "idle": D(40)}
    assert result.warnings == ()  # not "rules[0] (job_name '^train-a') matches no job record": B's


def test_the_shared_nodes_an_answer_warns_of_are_those_of_the_jobs_it_read(tmp_path, monkeypatch):
    path, lake, attribution = both(tmp_path, ELSEWHERE)  # west's and east's jobs both on gpu-001: over-booked
    east_elsewhere = [job("e1", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", nodes=["gpu-002"], cluster="east")]
    reader, ingested = answer_notes.shared_nodes, []

    def east_read_again_first(*args, **kwargs):
        if not ingested:
            add_jobs(lake, east_elsewhere, source="east")
            ingested.append(True)
        return reader(*args, **kwargs)

    monkeypatch.setattr(answer_notes, "shared_nodes", east_read_again_first)
    result = noted(lake, attribution, ("run",))
    assert ingested and result.overbooked
    assert [w for w in result.warnings if "gpu-001" in w and "east and west" in w]  # the nodes of the jobs it read


def test_the_rules_lookups_read_the_jobs_of_the_rules_runs_snapshot(tmp_path, monkeypatch):
    lake, _ = setup(tmp_path, [gpu_line("i-a")], A)
    # its job source declared (the rules read the lake through the config), and a budget on run r1
    cfg = parse_config({**whole_config(tmp_path, lake), "budgets": [
        {"name": "r1-gpu", "dimension": "run", "value": "r1", "amount": 100, "currency": "USD"}]})
    engine, seen = findings_run.run, []

    def lookups_after_a_re_ingest(rules, ctx, *args):  # the run has its snapshot and connection by now
        add_jobs(lake, B)
        seen.append(([cost.run for cost in ctx.run_costs(NOVEMBER, "BilledCost")],
                     sorted(ctx.held_hours(NOVEMBER, "BilledCost").values()),
                     sorted((s.value, s.cost) for s in ctx.direct_daily("run", *NAIVE_NOVEMBER, ("resource",))),
                     [status.outlook.actual for status in ctx.budget_outlooks()]))
        return engine(rules, ctx, *args)

    monkeypatch.setattr(findings_run, "run", lookups_after_a_re_ingest)
    findings_run.run_rules(cfg, only=(), dry_run=True)
    assert seen == [(["r1"], [D(40)], [("idle", D(40)), ("r1", D(40))], [D(40)])]  # not r2's $80 hour
