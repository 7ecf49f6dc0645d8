"""The daily runs whose report was not done, kept to be written again once a later run's is.

A billing source failing for days fails each day's run (serve/daily.py: its report lacks the
bill); each run's retries end when the next fire's date comes, so once the source ingested again
only the latest day's report was written whole, the outage's earlier days left without the bill.
A run that fails is kept in the lake (`_state/jobs.json`, `daily_undone`, with the other daily
state: a restart keeps them) and, after a later run writes its report (its bills are in, so are
theirs), each is written again, oldest first. Only the last MAKE_UP_DAYS days: an older one is
dropped, said with the command that writes it.
"""

from __future__ import annotations

from datetime import date, timedelta

from service.core.lake import Lake

STATE = "jobs"  # the scheduler's state file: `_state/jobs.json`
UNDONE = "daily_undone"
MAKE_UP_DAYS = 7


def note_undone(lake: Lake, run_date: date) -> None:
    """Keep the run of `run_date` as not done (its report is written again after a later run's)."""
    state = lake.read_state(STATE)
    kept = set(state.get(UNDONE, []))
    if run_date.isoformat() not in kept:
        state[UNDONE] = sorted({*kept, run_date.isoformat()})
        lake.write_state(STATE, state)


def undone_before(lake: Lake, run_date: date) -> tuple[list[date], list[date]]:
    """The runs kept as not done before `run_date`, oldest first: those within MAKE_UP_DAYS of it, and
    those older (dropped from the state now)."""
    state = lake.read_state(STATE)
    kept = sorted(date.fromisoformat(text) for text in state.get(UNDONE, []))
    oldest = run_date - timedelta(days=MAKE_UP_DAYS)
    dropped = [day for day in kept if day < oldest]
    _keep(lake, state, [day for day in kept if day >= oldest and day != run_date])
    return [day for day in kept if oldest <= day < run_date], dropped


def mark_done(lake: Lake, run_date: date) -> None:
    """The run of `run_date`'s report is written whole: no longer kept."""
    state = lake.read_state(STATE)
    _keep(lake, state, [date.fromisoformat(text) for text in state.get(UNDONE, []) if text != run_date.isoformat()])


def _keep(lake: Lake, state: dict, days: list[date]) -> None:
    texts = [day.isoformat() for day in days]
    if texts != state.get(UNDONE, []):
        state[UNDONE] = texts
        lake.write_state(STATE, state)
