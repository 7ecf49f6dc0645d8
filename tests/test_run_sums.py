"""`runs` sums each run's cost in one statement over the rollups' job rows (run_sums.py) where
that is exact, and its jobs' parts in Python (clusters.usage_in) where it is not. Figures by
hand (p5.48xlarge: 8 GPUs, $80 an hour, $10 a GPU-hour), the window 2026-11-02 (a day):

- run r1: job 1 (8 GPUs of i-a, 10:00-10:30, team nlp, project llm) and job 2 (8 GPUs of i-a,
  10:30-11:00, run id R1, team NLP, project evals, cluster P5): $80; team nlp in two spellings is
  one value, shown as its most common (a tie: byte order, NLP), project `several`; its parts are on
  i-a of cluster p5 (a part's cluster is its instance's), the record's P5 adds to the row;
- run r2: job 3 (4 GPUs of i-b, 10:00-10:30): $20; i-b idle for $60;
- run r3: job 4 (2 GPUs of i-z, not billed): no cost, no part.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from service.attribution import run_rows
from service.attribution.clusters import usage_dims, usage_in
from service.attribution.compute import RollupSession
from service.attribution.needs import Needs
from service.attribution.run_rows import _summed, runs
from service.attribution.run_sums import run_sums
from service.core.timewindow import Window
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import query

D = Decimal


def lake_with_spellings(tmp_path, lines=None, **attribution):
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"], run_id="r1",
                team="nlp", project="llm"),
            job("2", 8, "2026-11-02T10:30:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="R1",
                team="NLP", project="evals", cluster="P5"),
            job("3", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-b"], run_id="r2",
                team="cv", state="CANCELLED"),
            job("4", 2, "2026-11-02T10:00:00", None, instance_ids=["i-z"], run_id="r3", state="RUNNING")]
    return setup(tmp_path, lines or [gpu_line("i-a"), gpu_line("i-b")], jobs, **attribution)


def sums_both_ways(lake, cfg, window: Window):
    """run_sums' answer, and the per-job parts summed as before, on one session."""
    attribution = cfg.attribution
    session = RollupSession(lake, attribution, needs=Needs(usage_dims(attribution), ("billed",)))
    try:
        usage = usage_in(session, attribution, window, "billed")
        parts = {key: tuple(held) for key, held in _summed(run_rows.RunsQuery(window), usage).items()}
        summed = run_sums(session, attribution, window, "billed")
    finally:
        session.con.close()
    return summed, parts, usage


def test_each_runs_cost_values_clusters_and_jobs_are_what_its_jobs_parts_sum_to(tmp_path):
    lake, cfg = lake_with_spellings(tmp_path)
    window = query().window
    summed, parts, usage = sums_both_ways(lake, cfg, window)
    sums, cluster_usage = summed
    assert {key: (s.name, s.cost, s.values, s.jobs, s.clusters) for key, s in sums.items()} == parts
    r1 = sums[("r1", "USD")]
    assert (r1.cost, r1.values["team"], r1.values["project"], r1.clusters) == (D(80), "NLP", "several", {"p5"})
    assert r1.jobs == {("p5", "1"), ("p5", "2")}
    assert set(sums) == {("r1", "USD"), ("r2", "USD")}  # r3 has no part
    assert (cluster_usage.clusters, cluster_usage.overbooked, cluster_usage.jobs) == (usage.clusters, usage.overbooked,
                                                                                     ())


def test_runs_sums_the_window_in_one_statement_without_the_jobs_parts(tmp_path, monkeypatch):
    lake, cfg = lake_with_spellings(tmp_path)
    with monkeypatch.context() as patched:  # as before: every job's parts into Python
        patched.setattr(run_rows, "run_sums", lambda *args: None)
        before = runs(lake, cfg, query())

    def unread(*args):
        raise AssertionError("the jobs' parts were read into Python")

    monkeypatch.setattr(run_rows, "usage_in", unread)
    after = runs(lake, cfg, query())
    assert after.to_json() == before.to_json()
    # R1 and r1: one run, named as its parts spell it most (a tie: byte order); clusters sorted by folded name
    assert [(r.run, r.cost, r.values["project"], r.values["cluster"]) for r in after.rows] == [
        ("R1", D(80), "several", "P5,p5"), ("r2", D(20), "unallocated", "p5"), ("r3", D(0), "unallocated", "p5")]


@pytest.mark.parametrize("case", ["shared-job-line", "window-cuts-a-line", "ids-fold-together"])
def test_where_one_statement_is_not_exact_the_jobs_parts_are_summed(tmp_path, monkeypatch, case):
    # a shared rule's job rows are split by the window's spend; a daily line the window cuts is
    # prorated; two run ids that DuckDB lowers apart and `folded` composes into one
    window = query().window
    lines, attribution = None, {}
    if case == "shared-job-line":
        attribution = {"shared": [{"match": {"resource_id": "^i-b$"}, "by": "team", "split": "even"}]}
    elif case == "window-cuts-a-line":
        lines = [gpu_line("i-a", "1920", start="2026-11-02T00:00:00", end="2026-11-03T00:00:00"), gpu_line("i-b")]
        window = Window(window.since.replace(hour=10), window.since.replace(hour=10, minute=30))
    lake, cfg = lake_with_spellings(tmp_path, lines, **attribution)
    if case == "ids-fold-together":
        lake, cfg = setup(tmp_path / "nfc", [gpu_line("i-a")], [
            job("1", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="caf\u00e9"),
            job("2", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="cafe\u0301")])
    summed, parts, _ = sums_both_ways(lake, cfg, window)
    assert summed is None and parts
    calls = []
    monkeypatch.setattr(run_rows, "usage_in", lambda *args: calls.append(args) or usage_in(*args))
    result = runs(lake, cfg, run_rows.RunsQuery(window))
    assert len(calls) == 1 and sum(r.cost for r in result.rows) == sum(held[1] for held in parts.values())


def test_a_job_row_outside_the_window_leaves_the_statement_exact(tmp_path, monkeypatch):
    # a daily line cut by the window is prorated only where the window holds it: a line of the
    # 3rd, wholly outside the 2nd, does not send the 2nd's sums back to Python
    lines = [gpu_line("i-a"), gpu_line("i-b"), gpu_line("i-a", "1920", start="2026-11-03T00:00:00",
                                                        end="2026-11-04T00:00:00")]
    lake, cfg = lake_with_spellings(tmp_path, lines)
    summed, parts, _ = sums_both_ways(lake, cfg, query().window)
    assert summed is not None
    assert {key: s.cost for key, s in summed[0].items()} == {key: held[1] for key, held in parts.items()}
