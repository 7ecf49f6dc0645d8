"""What a month of shared-cluster jobs holds in Python (serve42: the daily report's clusters
section took `spendlake serve` to 1,213 MB at 10M lines, 200k jobs): a window's sums and the
job records are read in batches, equal texts kept once; `runs` allocates the idle shares before
the jobs' parts come into Python and lets the parts go once summed; the report's section lets
the month's jobs go before the runs allocate the month again. Figures: bench/README."""

from __future__ import annotations

import gc
import weakref
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal

from service.attribution import compute, run_inputs, run_rows
from service.attribution.clusters import usage_dims
from service.attribution.compute import RollupSession, attributed_sums
from service.attribution.job_how import job_how
from service.attribution.needs import Needs
from service.core.config import parse_config
from service.core.timewindow import parse_window
from service.report.sections import clusters as section_module
from service.report.sections.clusters import clusters_section
from tests.test_runs import lake_with_runs, query, whole_config

NOVEMBER_2 = parse_window("2026-11-02", "2026-11-03")


class Recorded:
    """A connection whose results say how they were read (DuckDB's own cannot be patched)."""

    def __init__(self, con, reads: list[str]):
        self.con, self.reads = con, reads

    def execute(self, *args):
        return RecordedResult(self.con.execute(*args), self.reads)

    def __getattr__(self, name):
        return getattr(self.con, name)


class RecordedResult:
    def __init__(self, result, reads: list[str]):
        self.result, self.reads = result, reads

    def fetchall(self):
        self.reads.append("fetchall")
        return self.result.fetchall()

    def fetchmany(self, size):
        self.reads.append(f"fetchmany {size}")
        return self.result.fetchmany(size)


def test_a_windows_sums_are_read_in_batches_keeping_one_object_per_repeated_text(tmp_path, monkeypatch):
    lake, cfg = lake_with_runs(tmp_path)
    session = RollupSession(lake, cfg.attribution, needs=Needs(usage_dims(cfg.attribution), ("billed",)))
    dims = usage_dims(cfg.attribution)
    expected = attributed_sums(session.con, cfg.attribution, dims, "billed", "total", NOVEMBER_2, True, True)
    monkeypatch.setattr(compute, "BATCH", 2)
    reads: list[str] = []
    sums = attributed_sums(Recorded(session.con, reads), cfg.attribution, dims, "billed", "total", NOVEMBER_2, True,
                           True)
    session.con.close()
    assert sums == expected and len(sums) > 2
    assert "fetchall" not in reads and reads.count("fetchmany 2") > 2
    texts = [text for (_, currency, partition, values, hows) in sums for text in (currency, *partition, *values, *hows)
             if text]
    assert len({id(text) for text in texts}) == len(set(texts))  # "USD", "p5", "nlp", "job:1"...: one object each


def test_the_job_records_of_a_window_are_read_in_batches(tmp_path, monkeypatch):
    lake, cfg = lake_with_runs(tmp_path)
    con = lake.query()
    expected = run_inputs.job_records(lake, con, cfg.attribution, NOVEMBER_2)
    monkeypatch.setattr(run_inputs, "_summed_records", lambda *args: None)  # the loop, where SQL does not sum them
    monkeypatch.setattr(run_inputs, "BATCH", 1)
    reads: list[str] = []
    records = run_inputs.job_records(lake, Recorded(con, reads), cfg.attribution, NOVEMBER_2)
    con.close()
    assert seen(records) == seen(expected) and set(records) == {"r1", "r2", "r3"}
    assert reads.count("fetchmany 1") == 5  # 4 records, then the empty batch (the label keys: one fetchall)


def seen(records: dict) -> dict:
    return {run: (s.name, s.jobs, s.restarts, s.gpus, s.gpu_hours, s.held, s.state, s.start, s.end, s.running, s.values,
                  s.clusters) for run, s in records.items()}


def jobs_alive(parts: list) -> int:
    gc.collect()
    return sum(ref() is not None for ref in parts)


def test_runs_allocates_the_idle_shares_first_and_lets_the_jobs_parts_go_before_reading_the_job_records(
        tmp_path, monkeypatch):
    lake, cfg = lake_with_runs(tmp_path)
    steps, parts, alive_at_records = [], [], []  # alive: a count per read
    usage_in, idle_shares, job_records = run_rows.usage_in, run_rows.idle_shares, run_rows.job_records

    def usage(*args):
        steps.append("jobs' parts")
        found = usage_in(*args)
        parts.extend(weakref.ref(job) for job in found.jobs)
        return found

    def idle(*args):
        steps.append("idle shares")
        return idle_shares(*args)

    def records(*args):
        steps.append("job records")
        alive_at_records.append(jobs_alive(parts))
        return job_records(*args)

    monkeypatch.setattr(run_rows, "usage_in", usage)
    monkeypatch.setattr(run_rows, "run_sums", lambda *args: None)  # where one statement cannot sum the runs
    monkeypatch.setattr(run_rows, "idle_shares", idle)
    monkeypatch.setattr(run_rows, "job_records", records)
    result = run_rows.runs(lake, cfg, query())
    assert {r.run: (r.cost, r.idle_share) for r in result.rows} == {
        "r1": (Decimal(80), Decimal(0)), "r2": (Decimal(20), Decimal("0.75")), "r3": (Decimal(0), None)}
    assert steps == ["idle shares", "jobs' parts", "job records"]
    assert len(parts) == 3 and alive_at_records == [0]  # three jobs' parts, summed and let go


def test_the_reports_clusters_section_lets_the_months_jobs_go_before_the_runs_allocate_it(tmp_path, monkeypatch):
    lake, _ = lake_with_runs(tmp_path)
    config = parse_config(whole_config(tmp_path, lake))
    parts, alive_at_runs = [], []
    cluster_usage, runs = section_module.cluster_usage, section_module.runs

    def usage(*args, **kwargs):
        found = cluster_usage(*args, **kwargs)
        parts.extend(weakref.ref(job) for job in found.jobs)
        return found

    def top(*args, **kwargs):
        alive_at_runs.append(jobs_alive(parts))
        return runs(*args, **kwargs)

    monkeypatch.setattr(section_module, "cluster_usage", usage)
    monkeypatch.setattr(section_module, "runs", top)
    [section] = clusters_section(config, lake, date(2026, 11, 2), 10)
    tables = {table.key: table for table in section.tables}
    assert [(r["run"], r["cost"]) for r in tables["top_runs"].rows] == [("r1", Decimal(80)), ("r2", Decimal(20)),
                                                                         ("r3", Decimal(0))]
    assert [(r["state"], r["jobs"], r["cost"]) for r in tables["unfinished_jobs"].rows] == [
        ("FAILED", 1, Decimal(40)), ("CANCELLED", 1, Decimal(20))]
    assert len(parts) == 3 and alive_at_runs == [0]


def test_the_job_records_held_for_a_window_are_its_own_and_the_earlier_failures_not_the_years_history(tmp_path):
    """`runs --since` a day after a year of job history: every record since the first snapshot was held
    (materialized) to find the failures a run in the window may restart; the window's records and the
    failures before it are held, the year's completed jobs not, and the records read are the same."""
    from service.attribution.sql import held_records_cte
    from service.attribution.statement import Params
    from tests.test_clusters_allocation import gpu_line, job, setup
    history = [job(f"h{month}-{n}", 8, f"2025-{month:02d}-{n + 1:02d}T10:00:00", f"2025-{month:02d}-{n + 1:02d}T11:00:00",
                   run_id=f"old{month}-{n}") for month in range(1, 13) for n in range(5)]
    lake, _ = setup(tmp_path, [gpu_line("i-a", start="2026-01-02T10:00:00")], [
        *history,
        job("f1", 8, "2026-01-01T20:00:00", "2026-01-01T23:00:00", run_id="r1", state="FAILED"),
        job("f9", 8, "2025-12-20T20:00:00", "2025-12-20T23:00:00", run_id="r9", state="NODE_FAIL"),
        job("w1", 8, "2026-01-02T10:00:00", "2026-01-02T11:00:00", run_id="r1")])
    params, con = Params(), lake.query()
    cte = held_records_cte(params, datetime(2026, 1, 2), datetime(2026, 1, 3), failed_before=True)
    held = con.execute(f"WITH {cte} SELECT count(*) FROM j_held", params.values).fetchone()[0]
    read = con.execute(f"WITH {cte} SELECT job_id FROM j_records ORDER BY job_id", params.values).fetchall()
    con.close()
    assert read == [("f1",), ("w1",)]
    assert held == 3  # w1, and the failures before the window (f1, f9): not the 60 completed jobs of 2025


def test_one_runs_answer_reads_its_own_jobs_parts_and_records_and_sums_the_rest_in_sql(tmp_path, monkeypatch):
    # runs --run r1 read every job's parts into Python (a month of 200k jobs: 8.3 CPU s, 615 MB at 10M,
    # more than every run's answer); now the other runs' parts come summed by placement, their records not at all
    lake, cfg = lake_with_runs(tmp_path)
    windows = (query(run="R1"), query(run="R1", since="2026-11-02T10:15"))  # the second cuts the 10:00 hour
    every = [run_rows.runs(lake, cfg, replace(window, run=None)) for window in windows]
    jobs_read, records_read = set(), []
    window_parts, job_records = compute.window_parts, run_rows.job_records

    def parts(*args):
        for row in window_parts(*args):
            jobs_read.update(job_how(how)[0] for how in row[5] if how and how.startswith("job:"))  # its job
            yield row

    def records(*args):
        records_read.append(job_records(*args))
        return records_read[-1]

    monkeypatch.setattr(compute, "window_parts", parts)
    monkeypatch.setattr(run_rows, "job_records", records)
    for window, all_runs, cost in zip(windows, every, (Decimal(80), Decimal(60))):
        one = run_rows.runs(lake, cfg, window)
        assert one.rows == tuple(r for r in all_runs.rows if r.run == "r1") and one.rows[0].cost == cost
        assert one.clusters == all_runs.clusters and sum(j.cost for j in one.story.jobs) == cost
        assert set(records_read[0]) == {"r1"}
        # a window that cuts an hour prorates each job's parts, rounded: every job's are read, as before
        assert jobs_read == ({"job:1", "job:2"} if window is windows[0] else {"job:1", "job:2", "job:3"})
        jobs_read.clear(), records_read.clear()
