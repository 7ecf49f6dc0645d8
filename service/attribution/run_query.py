"""What `spendlake runs` and `/api/v1/runs` are asked, checked (service/attribution/run_rows.py answers it).

    RunsQuery.parse(since=..., until=..., by=..., state=..., top=..., cost=..., run=...) -> RunsQuery

A UsageError names the parameter as the caller spells it (`naming`: `--since` or `since`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from service.attribution.query import Naming, cli_option, listed_once, top_rows
from service.attribution.sql import MEASURES
from service.core.errors import UsageError
from service.core.job_states import STATE_SYNONYMS, STATES
from service.core.output import quoted
from service.core.suggest import suggestion
from service.core.timewindow import Window, data_anchored, fixed_end, parse_window, utc_now

RUN_GROUPS = ("team", "project", "experiment", "job_type", "cluster", "user", "state")
RUNS_SINCE = "7d"  # the window's start when `runs --since` or the API's `since` is not given (nor `run`)


@dataclass(frozen=True)
class RunsQuery:
    window: Window | None  # None: `run`'s own span (`runs` finds it: `run_window`)
    by: tuple[str, ...] = ()
    states: tuple[str, ...] = ()  # upper case; a run is kept when its last job's state is one of them
    top: int | None = None
    cost: str = "billed"
    run: str | None = None  # one run's rows and story
    # without `until`: the window at another data end (`window_at`); None when `until` fixed it
    anchored: Callable[..., Window] | None = field(default=None, compare=False, repr=False)
    naming: Naming = field(default=cli_option, compare=False, repr=False)  # how errors found later name parameters
    as_of: bool = False  # `until` given: a run's state and end as they stood at the window's end (job_records)

    @classmethod
    def parse(cls, *, since: str | None, until: str | None = None, by: str | None = None,
              state: str | None = None, top: str | int | None = None, cost: str | None = None,
              run: str | None = None, now: datetime | None = None, end: datetime | None = None,
              naming: Naming = cli_option) -> RunsQuery:
        """What the user typed, checked; a UsageError names the parameter as `naming` spells it.
        Without `until` the window ends at `end`, the data's end (service.core.coverage.data_end), and
        with no data (a lake without a bill) at the whole hour after `now`, as a run's own span ends
        (`run_window`), not at the wall clock's microsecond; without `since`, `run`'s window is its
        own span (`run_window`), else the last RUNS_SINCE."""
        if not since and not (run or "").strip():
            since = RUNS_SINCE
        if not since and until:
            raise UsageError("the window needs a start", where=naming("since"),
                             hint=f"give {naming('since')} too, or neither for the run's own span")
        groups = listed_once((by or "").split(","), naming("by"))
        for name in groups:
            if name not in RUN_GROUPS:
                raise UsageError(f"runs cannot be grouped by {quoted(name)}", where=naming("by"),
                                 hint=f"use some of {', '.join(RUN_GROUPS)}")
        states = tuple(dict.fromkeys(_job_state(s, naming("state")) for s in (state or "").split(",") if s.strip()))
        top_n = top_rows(top, naming("top"))
        if (cost or "billed") not in MEASURES:
            raise UsageError(f"unknown cost {quoted(cost)}", where=naming("cost"), hint=f"use one of {', '.join(MEASURES)}")
        if run is not None and not run.strip():
            raise UsageError("the run id is empty", where=naming("run"), hint="name a run, e.g. its run_id")
        if not since:  # one run: its own span, found in the lake by `runs`
            return cls(None, groups, states, top_n, cost or "billed", run.strip(), naming=naming)
        now = now or utc_now()
        end = end or (None if fixed_end(until) else hour_after(now))
        return cls(parse_window(since, until, now=now, end=end, naming=naming), groups, states, top_n,
                   cost or "billed", run.strip() if run else None, data_anchored(since, until, now=now, naming=naming),
                   naming, bool(until))


def hour_after(moment: datetime) -> datetime:
    """The whole hour at or after `moment` (12:00 for 11:23:29.528071)."""
    hour = moment.replace(minute=0, second=0, microsecond=0)
    return hour if hour == moment else hour + timedelta(hours=1)


def _job_state(text: str, where: str) -> str:
    """A Slurm job state as the job sources store it (`failed`, `Canceled` read too); another
    word is a UsageError, never a filter that silently keeps nothing."""
    word = text.strip().upper()
    word = STATE_SYNONYMS.get(word, word)
    if word not in STATES:
        raise UsageError(f"no job state {word!r}", where=where, hint=suggestion(word, STATES, "states"))
    return word
