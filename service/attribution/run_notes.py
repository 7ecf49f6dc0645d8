"""Why one run's story is short (service/attribution/run_story.py): the notes `runs --run X`
prints on stderr and its JSON keeps: no job in the window (and when its jobs ran), jobs whose
hours lie outside the bill's data or months, jobs on no billed instance."""

from __future__ import annotations

from datetime import datetime
import duckdb

from service.attribution.compute import RollupSession
from service.attribution.run_inputs import run_span
from service.core.coverage import billing_periods, data_begins, months_touched, periods_text
from service.core.lake import Lake
from service.core.timewindow import Window, minute_text

def story_notes(lake: Lake, session: RollupSession | None, con: duckdb.DuckDBPyConnection, run: str, window: Window,
           jobs: list) -> tuple[str, ...]:
    """Why the story is short: no job in the window, jobs (run_story.RunJob) without a billed instance."""
    span = window.shown()
    if not jobs:  # the run is named (_check_named)
        first, last, _ = run_span(lake, con, run)
        when = f"; its jobs ran {minute_text(first)} → {minute_text(last or first)} UTC" if first else ""
        return (f"run {run.strip()!r} has no job that held GPUs in the window {span}{when}",)
    if any(j.currency for j in jobs) or session is None:
        return ()
    through = max((m for m in session.data_through().values() if m is not None), default=None)
    if through is not None and all(j.start and j.start >= through for j in jobs):
        return (f"run {run.strip()!r} has jobs in the window but no cost yet: they started after the bill's end "
                f"(data through {minute_text(through)} UTC)",)
    periods = billing_periods(lake)
    if not any(months_touched(max(j.start or window.since, window.since), min(j.end or window.until, window.until))
               & set(periods) for j in jobs):  # e.g. before the first bill: no node or pool is to blame
        return (f"run {run.strip()!r} has jobs in the window {span} but no bill covers their months: the lake "
                f"holds the billing periods {periods_text(periods)}",)
    outside = _outside_the_data(jobs, window, data_begins(lake, session.snapshot), through)
    if outside:
        return (f"run {run.strip()!r} has jobs in the window {span} but {outside}",)
    return (f"run {run.strip()!r} has jobs in the window {span} but no billed cost: none of its jobs' instances or "
            "nodes is a billed instance of a cluster (check the record's nodes or instance ids against "
            "`clusters.node_tag`, or give its cluster a pool with `clusters.cluster_tag`)",)


def _outside_the_data(jobs: list, window: Window, begins: datetime | None,
                      through: datetime | None) -> str | None:
    """Why jobs in a billed month have no cost when none of their hours in the window lies in the
    bill's data (`begins` to `through`): a window past its end, a job before its first hour."""
    if begins is None or through is None:
        return None
    spans = [(max(j.start or window.since, window.since), min(j.end or window.until, window.until)) for j in jobs]
    if any(start < through and end > begins for start, end in spans):
        return None
    if all(start >= through for start, _ in spans):
        return f"no cost yet: their hours in it are after the bill's end (data through {minute_text(through)} UTC)"
    if all(end <= begins for _, end in spans):
        return f"no billed cost: their hours in it are before the bill's data begins ({minute_text(begins)} UTC)"
    return (f"no billed cost: their hours in it are before the bill's data begins or after its end (data "
            f"{minute_text(begins)} → {minute_text(through)} UTC)")
