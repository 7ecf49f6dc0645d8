"""failed-reruns: the failed attempts of a run that were launched again, at their allocated cost.
Figures by hand (p5.48xlarge: 8 GPUs, $80 an hour; i-a and i-b billed 10:00-11:00 and 11:00-12:00):

- run r1 (team nlp) on i-a: job 1 FAILED 10:00-10:20 on 8 GPUs: 80 · 20/60 = $26.666…; job 2
  NODE_FAIL 10:25-10:32 on 4 GPUs: 80 · 4·7/(8·60) = $4.666…; job 3 COMPLETED 11:00-12:00 on 8
  GPUs: $80. Impact: the two failed attempts, $31.333… → $31.33, GPU-hours 8/3 + 4·7/60 = 3.13.
- run r2 on i-b: job 4 CANCELLED 10:00-10:30, job 5 COMPLETED 10:30-11:00: CANCELLED is not counted.
- run r3 on i-b: job 6, one COMPLETED job 11:00-11:30: nothing failed.
- run r4 on i-b: job 7 FAILED 11:30-12:00 (8 GPUs: $40), nothing after it: not re-launched.
"""

from __future__ import annotations

import csv
import gc
import json
import random
import time
import weakref
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from rules.base import configure
from rules.context import JobAttempt, Owner, RuleContext, RunCost
from rules.failed_reruns import FailedReruns, FailedRerunsConfig
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.core.job_states import same_work
from service.core.lake import Lake
from service.core.timewindow import Window
from service.findings.owners import fill_owners
from service.findings.run import rule_context, run_rules
from service.serve.metrics import LakeCollector
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import whole_config

D = Decimal
WINDOW = Window(datetime(2026, 11, 2, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))
OWNER = {"team": "nlp", "project": "llm", "experiment": "e1"}


def hand_lake(tmp_path):
    """The lake and a config declaring its bill and job source, as `spendlake` reads it."""
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:20:00", instance_ids=["i-a"], run_id="r1",
                state="FAILED", **OWNER),
            job("2", 4, "2026-11-02T10:25:00", "2026-11-02T10:32:00", instance_ids=["i-a"], run_id="r1",
                state="NODE_FAIL", **OWNER),
            job("3", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r1", **OWNER),
            job("4", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                state="CANCELLED"),
            job("5", 8, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-b"], run_id="r2"),
            job("6", 8, "2026-11-02T11:00:00", "2026-11-02T11:30:00", instance_ids=["i-b"], run_id="r3"),
            job("7", 8, "2026-11-02T11:30:00", "2026-11-02T12:00:00", instance_ids=["i-b"], run_id="r4",
                state="FAILED")]
    lines = [gpu_line(i, start=s) for i in ("i-a", "i-b") for s in ("2026-11-02T10:00:00", "2026-11-02T11:00:00")]
    lake, _ = setup(tmp_path, lines, jobs)
    cfg = parse_config(whole_config(tmp_path, lake))
    return Lake.of(cfg), cfg


def evaluate(lake, cfg, window=WINDOW, **settings):
    with lake.query() as con:
        ctx = rule_context(lake, cfg, window, con)
        return fill_owners(FailedReruns(FailedRerunsConfig(**settings)).evaluate(ctx), ctx.owner_of)


def test_two_failed_attempts_then_a_completed_one_cost_their_allocated_cost_to_the_cent(tmp_path):
    lake, cfg = hand_lake(tmp_path)
    [finding] = evaluate(lake, cfg)
    assert (finding.resource_id, finding.category, finding.impact_usd, finding.monthly_waste_usd) == (
        "run:r1", "waste", D("31.33"), D("31.33"))
    assert (finding.team, finding.project, finding.experiment) == ("nlp", "llm", "e1")  # routed to the run's team
    evidence = finding.evidence
    assert [(j["job"], j["state"], j["cost_usd"]) for j in evidence["jobs"]] == [
        ("1", "FAILED", "26.67"), ("2", "NODE_FAIL", "4.67")]
    assert (evidence["states"], evidence["gpu_hours"], evidence["cost_usd"]) == (
        {"FAILED": 1, "NODE_FAIL": 1}, "3.13", "31.33")
    assert (evidence["first_failure"], evidence["last_failure"]) == ("2026-11-02T10:20:00", "2026-11-02T10:32:00")
    assert "run r1 of team nlp: 2 attempt(s) that failed (1 FAILED, 1 NODE_FAIL) cost $31.33" in finding.summary


@pytest.mark.parametrize("until, typed", [(WINDOW.until, "2026-11-03"),
                                          (datetime(2026, 11, 2, 12, tzinfo=timezone.utc), "2026-11-02T12:00:00Z")])
def test_the_command_the_finding_names_shows_its_attempts_at_its_cost(tmp_path, until, typed):
    """The summary said `spendlake runs --run X`: without a window that reads the run's whole span
    (the demo's llama-405b-r1: $1,503,361.77 over 22 attempts against the finding's $106,253.63 of
    the rules' 7 days); the command it names now reads the rules' window and cost column."""
    lake, cfg = hand_lake(tmp_path)
    [finding] = evaluate(lake, cfg, Window(WINDOW.since, until))
    command = f"spendlake runs --run r1 --since 2026-11-02 --until {typed}"
    assert f"see why with `{command}` before the next launch." in finding.summary
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps(whole_config(tmp_path, lake)))
    out = CliRunner().invoke(cli, ["--config", str(config), *command.split()[1:], "--format", "json"])
    assert out.exit_code == 0, out.output
    failed = [(j["job"], j["state"], D(j["cost"])) for j in json.loads(out.stdout)["jobs"] if j["state"] != "COMPLETED"]
    cent = D("0.01")
    assert [(job, state, cost.quantize(cent)) for job, state, cost in failed] == [
        (j["job"], j["state"], D(j["cost_usd"])) for j in finding.evidence["jobs"]]
    assert sum(cost for *_, cost in failed).quantize(cent) == finding.impact_usd == D("31.33")
    [effective] = evaluate(lake, cfg, Window(WINDOW.since, until), cost_column="EffectiveCost")
    assert f"see why with `{command} --cost effective` before" in effective.summary


def test_a_runs_story_says_what_failed_and_was_run_again_as_the_rule_counts_it(tmp_path, monkeypatch):
    """"What went to failed re-runs?" The story said the unfinished attempts' cost and that the rule
    counts otherwise, not the rule's figure: it says it now, with the rule's states as `rules:` sets them."""
    monkeypatch.setenv("COLUMNS", "400")  # one line each
    lake, _ = hand_lake(tmp_path)
    config = tmp_path / "spendlake.yaml"
    default = "FAILED, NODE_FAIL, OUT_OF_MEMORY, TIMEOUT, then an attempt of the same work"
    for settings, run, said in [
            ({}, "r1", f"{default}): USD 31.33 of 111.33 (28.1%)"),
            ({}, "r2", f"{default}): USD 0.00 of 80.00 (0.0%)"),  # CANCELLED is not counted unless named
            ({"states": ["cancelled"]}, "r2", "CANCELLED, then an attempt of the same work): USD 40.00 of 80.00 (50.0%)")]:
        config.write_text(json.dumps({**whole_config(tmp_path, lake), "rules": {"failed-reruns": settings}}))
        out = CliRunner().invoke(cli, ["--config", str(config), "runs", "--run", run, "--since", "2026-11-02",
                                       "--until", "2026-11-03", "--format", "table"])
        assert out.exit_code == 0, out.output
        lines = [line for line in out.stdout.splitlines() if line.startswith("failed and run again")]
        assert lines == [f"failed and run again (the failed-reruns rule's count: {said}"], out.stdout


def test_a_last_failure_counts_only_when_asked_and_cancelled_only_when_named(tmp_path):
    lake, cfg = hand_lake(tmp_path)
    unrelaunched = {f.resource_id: f.impact_usd for f in evaluate(lake, cfg, count_unrelaunched=True)}
    assert unrelaunched == {"run:r1": D("31.33"), "run:r4": D("40.00")}
    cancelled = {f.resource_id: f.impact_usd for f in evaluate(lake, cfg, states=["cancelled"])}
    assert cancelled == {"run:r2": D("40.00")}  # job 4: 8 GPUs for 30 minutes, re-launched by job 5
    assert evaluate(lake, cfg, min_cost_usd=32) == []


def test_another_benchmark_after_a_failed_one_is_no_rerun_its_resubmission_is(tmp_path):
    # eval suite r5 on i-a: gsm8k fails 10:00-10:30 (8 GPUs: $40), safety runs after it (another
    # benchmark, not a re-run); in suite r6 on i-b the failed gsm8k is submitted again: $40 paid twice
    suite = [("r5", "8", "eval-gsm8k", "FAILED", "i-a"), ("r5", "9", "eval-safety", "COMPLETED", "i-a"),
             ("r6", "10", "eval-gsm8k", "FAILED", "i-b"), ("r6", "11", "eval-gsm8k", "COMPLETED", "i-b")]
    jobs = [job(record, 8, start, end, instance_ids=[instance], run_id=run, name=name, state=state, **OWNER)
            for (run, record, name, state, instance), (start, end) in zip(suite, [
                ("2026-11-02T10:00:00", "2026-11-02T10:30:00"), ("2026-11-02T10:30:00", "2026-11-02T11:00:00")] * 2)]
    lake, _ = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs)
    cfg = parse_config(whole_config(tmp_path, lake))
    assert {f.resource_id: f.impact_usd for f in evaluate(Lake.of(cfg), cfg)} == {"run:r6": D("40.00")}


def test_no_shared_clusters_no_findings(tmp_path):
    lake, cfg = hand_lake(tmp_path)
    bare = cfg.model_copy(update={"attribution": cfg.attribution.model_copy(update={"clusters": None})})
    assert evaluate(lake, bare) == []


def test_the_settings_are_checked_with_their_path():
    assert configure({"failed-reruns": {"states": [" timeout "]}})[
        [r.name for r in configure({})].index("failed-reruns")].config.states == ("TIMEOUT",)
    with pytest.raises(ConfigError, match=r"rules\.failed-reruns\.min_cost_usd"):
        configure({"failed-reruns": {"min_cost_usd": -1}})


def test_a_state_no_job_carries_is_refused_naming_its_place_and_the_closest_one(tmp_path):
    """`FIALED` matched no job record: the rule flagged nothing, silently."""
    with pytest.raises(ConfigError, match=r"rules\.failed-reruns\.states\[1\]: no job state 'FIALED'; "
                                          r"closest states: FAILED") as refused:
        configure({"failed-reruns": {"states": ["timeout", "FIALED"]}})
    assert refused.value.exit_code == 2
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "rules": {"failed-reruns": {"states": ["oom_kill"]}}}))
    out = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert out.exit_code == 2 and "rules.failed-reruns.states[0]: no job state 'oom_kill'" in out.output, out.output


def test_rules_run_on_the_demo_lake_flags_the_failed_reruns_routed_to_their_team(demo_run):
    out = CliRunner().invoke(cli, ["--config", str(demo_run.config_path), "rules", "run", "--rule", "failed-reruns",
                                   "--dry-run"])
    assert out.exit_code == 0, out.output
    found = json.loads(out.stdout[out.stdout.index("["):])
    assert found and {f["rule"] for f in found} == {"failed-reruns"}
    for f in found:
        jobs = f["evidence"]["jobs"]
        assert f["team"] not in ("unallocated", "")
        assert D(f["impact_usd"]) == D(f["monthly_waste_usd"]) == D(f["evidence"]["cost_usd"])
        assert abs(D(f["impact_usd"]) - sum(D(j["cost_usd"]) for j in jobs)) <= D("0.01") * len(jobs)
        assert {j["state"] for j in jobs} <= {"FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT"}
    # the demo's own run stored them, as its findings and its report show
    assert any(f.rule == "failed-reruns" and f.category == "waste" for f in demo_run.findings)
    with open(Path(demo_run.report.location) / "open_findings.csv", newline="") as listed:
        assert "failed-reruns" in {row["rule"] for row in csv.DictReader(listed)}


def test_a_stored_finding_is_the_teams_waste_on_the_metrics_alertmanager_routes(tmp_path):
    lake, cfg = hand_lake(tmp_path)
    run_rules(cfg, only=("failed-reruns",), since="1d")
    registry = CollectorRegistry()
    registry.register(LakeCollector(cfg))
    waste = {(s.labels["rule"], s.labels["team"]): s.value for m in registry.collect()
             if m.name == "spendlake_waste_monthly_usd" for s in m.samples}
    assert waste == {("failed-reruns", "nlp"): 31.33}  # SpendlakeFailedReruns sums it by team


def _attempts(n: int, seed: int) -> tuple[JobAttempt, ...]:
    """`n` attempts of one run: a sweep's tasks (some telling no work), failed or completed, some
    of no length, with starts and ends on a coarse grid so that many tie."""
    pick = random.Random(seed)
    hour = datetime(2026, 11, 2)
    out = []
    for i in range(n):
        start = hour + timedelta(minutes=10 * pick.randrange(60))
        end = start + timedelta(minutes=10 * pick.randrange(3))
        work = pick.choice([None, ("sweep", "1"), ("sweep", "2"), ("eval", None)])
        out.append(JobAttempt(str(i), pick.choice(["FAILED", "COMPLETED", "TIMEOUT"]), start, end, D(1), D(20),
                              "USD", work))
    return tuple(out)


@pytest.mark.parametrize("seed", range(20))
def test_an_attempt_is_rerun_when_another_doing_its_work_starts_at_or_after_its_end(seed):
    attempts = _attempts(30, seed)
    rerun = [a for a in attempts if a.state != "COMPLETED" and any(
        o is not a and o.start >= a.end and same_work(a.work, o.work) for o in attempts)]
    assert FailedReruns(FailedRerunsConfig()).rerun_failures(attempts) == rerun


def test_a_sweep_of_thousands_of_failed_tasks_is_judged_without_comparing_each_with_each():
    # 5,000 array tasks failed at 10:00, each submitted again at 11:00: comparing each failure with
    # each attempt until its own re-run took about 15 CPU s; looked up, a small part of one
    tasks = range(5_000)
    hour = datetime(2026, 11, 2, 10)
    attempts = tuple(JobAttempt(f"7_{t}", state, hour + timedelta(hours=h), hour + timedelta(hours=h, minutes=30),
                                D(8), D(40), "USD", ("sweep", str(t)))
                     for h, state in ((0, "FAILED"), (1, "COMPLETED")) for t in tasks)
    ctx = RuleContext(con=None, window=WINDOW, run_costs=lambda window, cost: [RunCost("sweep", Owner(), attempts)])
    started = time.process_time()
    [finding] = FailedReruns(FailedRerunsConfig()).evaluate(ctx)
    assert time.process_time() - started < 3
    assert (finding.evidence["states"], finding.impact_usd) == ({"FAILED": 5_000}, D(200_000))


def test_the_runs_attempts_read_for_failed_reruns_are_not_kept_through_the_rules_after_it(tmp_path):
    # at 10M lines (200k jobs) they were ~560 MB, held to the end of `rules run`, beside
    # spend-anomaly's and unallocated-spend's attributions
    lake, cfg = hand_lake(tmp_path)
    with lake.query() as con:
        ctx = rule_context(lake, cfg, WINDOW, con)
        runs = ctx.run_costs(WINDOW, "BilledCost")
        read = weakref.ref(runs[0])
        assert [run.run for run in runs] == ["r1", "r2", "r3", "r4"]
        del runs
        gc.collect()
        assert read() is None


def test_the_runs_job_records_are_read_once_the_allocations_session_gave_its_memory_back(tmp_path, monkeypatch):
    # at 10M lines the session's DuckDB (the month rolled up and allocated in memory) stayed open
    # while 200k job records came into Python beside the jobs' parts: failed-reruns peaked at 1,043 MB
    from service.attribution import run_costs as run_costs_module
    from service.attribution.compute import RollupSession

    lake, cfg = hand_lake(tmp_path)
    sessions, open_at_read = [], []
    opened, read = RollupSession.__init__, run_costs_module.run_records

    def recorded(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        sessions.append(self)

    def records(*args):
        for session in sessions:
            try:
                session.con.execute("SELECT 1")
                open_at_read.append(session)
            except duckdb.ConnectionException:  # closed
                pass
        return read(*args)

    monkeypatch.setattr(RollupSession, "__init__", recorded)
    monkeypatch.setattr(run_costs_module, "run_records", records)
    [finding] = evaluate(lake, cfg)
    assert (finding.resource_id, finding.impact_usd) == ("run:r1", D("31.33"))
    assert sessions and open_at_read == []
