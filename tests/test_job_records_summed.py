"""`runs`' job records are summed per run in SQL (run_inputs._summed_records), the same figures
the per-record Python loop gives, which is what is left where SQL would read a text otherwise
(not printable ASCII). Window 2026-11-02 (a day); GPUs and times by hand:

- run `sweep` (array tasks 7_1, 7_2 side by side, 7_1 FAILED at 10:30; 7_3 after it is other work;
  job `train` FAILED at 10:40 and `train-retry2` after it: a restart), team nlp, project llm or
  evals (`several`), clusters p5 and p5-east, 1 + 2 + 1 + 4 + 4 GPUs;
- run `late`: a FAILED job on the 1st (before the window) and two re-runs on the 2nd: 2 restarts,
  2 jobs, one of 3 GPUs for 16,949.000007 s (float seconds lose the last microsecond);
- run `tie`: two jobs ending together at 11:00, the one started later is last (CANCELLED), and a
  job without a state.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from service.attribution import run_inputs
from service.attribution.run_inputs import gpu_hours_of, job_records
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_month_jobs_memory import seen
from tests.test_runs import query

D = Decimal


def jobs(name_of_train: str = "train") -> list[dict]:
    return [
        job("7_1", 1, "2026-11-02T10:00:00", "2026-11-02T10:30:00", run_id="sweep", name="sweep", state="FAILED",
            team="nlp", project="llm", instance_ids=["i-a"]),
        job("7_2", 2, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="sweep", name="sweep", team="nlp",
            project="llm", instance_ids=["i-a"]),
        job("7_3", 1, "2026-11-02T10:45:00", "2026-11-02T11:00:00", run_id="sweep", name="sweep", team="nlp",
            project="evals", instance_ids=["i-a"], cluster="p5-east"),
        job("8", 4, "2026-11-02T10:00:00", "2026-11-02T10:40:00", run_id="sweep", name=name_of_train, state="FAILED",
            team="nlp", instance_ids=["i-b"]),
        job("9", 4, "2026-11-02T10:40:00", None, run_id="Sweep", name=f"{name_of_train}-retry2", state="RUNNING",
            team="nlp", instance_ids=["i-b"]),
        job("1", 8, "2026-11-01T10:00:00", "2026-11-01T11:00:00", run_id="late", name="big", state="FAILED"),
        job("2", 8, "2026-11-02T09:00:00", "2026-11-02T10:00:00", run_id="late", name="big"),
        job("3", 3, "2026-11-02T12:00:00", "2026-11-02T16:42:29.000007", run_id="late", name="big"),
        job("4", 1, "2026-11-02T09:00:00", "2026-11-02T11:00:00", run_id="tie", state="COMPLETED"),
        job("5", 1, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="tie", state="CANCELLED"),
        job("6", 1, "2026-11-02T08:00:00", "2026-11-02T09:00:00", run_id="tie", state=None),
    ]


def both_ways(tmp_path, monkeypatch, records) -> tuple[dict, dict]:
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], records)
    con = lake.query()
    try:
        summed = job_records(lake, con, cfg.attribution, query().window)
        with monkeypatch.context() as patched:
            patched.setattr(run_inputs, "_summed_records", lambda *args: None)
            looped = job_records(lake, con, cfg.attribution, query().window)
    finally:
        con.close()
    return summed, looped


def test_the_records_summed_in_sql_are_what_the_loop_over_them_gives(tmp_path, monkeypatch):
    summed, looped = both_ways(tmp_path, monkeypatch, jobs())
    assert seen(summed) == seen(looped)
    sweep, late, tie = summed["sweep"], summed["late"], summed["tie"]
    # its peak: 7_1, 7_2 and 8 at 10:00 hold 1 + 2 + 4; at 10:40 8 ends as 9 starts (4 for 4), 7_3 at 10:45: 2 + 1 + 4
    assert (sweep.name, sweep.jobs, sweep.restarts, sweep.gpus, sweep.state, sweep.running, sweep.end) == (
        "sweep", 5, 1, D(7), "RUNNING", True, sweep.end)
    assert (sweep.values["team"], sweep.values["project"], sweep.clusters) == ("nlp", "several", {"p5", "p5-east"})
    # 1·30 min + 2·60 + 1·15 + 4·40 + 4·13h20m (running to the window's end) = 211,500 GPU-s: 58.75 GPU-hours
    assert sweep.gpu_hours == D("58.75")
    # both of late's jobs on the 2nd started after its failure on the 1st: two restarts
    assert (late.jobs, late.restarts, tie.state, tie.restarts) == (2, 2, "CANCELLED", 0)


def test_a_jobs_hours_count_every_microsecond(tmp_path, monkeypatch):
    # 16,949.000007 s as a float times 10^6 truncates to ...006: 1 µs short, on either path before
    summed, looped = both_ways(tmp_path, monkeypatch, jobs())
    exact = gpu_hours_of(D(8) * 3_600_000_000 + D(3) * 16_949_000_007)
    assert summed["late"].gpu_hours == looped["late"].gpu_hours == exact


@pytest.mark.parametrize("name", ["tr\u00e4in", "train\t"])
def test_a_name_sql_would_read_otherwise_leaves_the_runs_to_the_loop(tmp_path, monkeypatch, name):
    # Python lowers and strips `ä` and a tab as DuckDB's lower() and trim() do not: the loop decides
    calls = []
    summed_records = run_inputs._summed_records
    monkeypatch.setattr(run_inputs, "_summed_records", lambda *args: calls.append(summed_records(*args)))
    lake, cfg = setup(tmp_path, [gpu_line("i-a"), gpu_line("i-b")], jobs(name))
    con = lake.query()
    try:
        records = job_records(lake, con, cfg.attribution, query().window)
    finally:
        con.close()
    assert calls == [None] and set(records) == {"sweep", "late", "tie"}
