"""failed-reruns: failed attempts of a run on the shared GPU clusters that had to be run again.

Flags each run (the `run` dimension: a job record's run id) with jobs in the window that ended
in one of `states` and were followed by another job of the same run doing the same work, one
starting at or after that end (a requeue, a resubmission; not another benchmark of an eval
suite or another task of a sweep: the same job name and array task where the record tells,
service/core/job_states.py `work_of`): the GPU time of the failed attempt bought no finished work
and was paid again. A run whose last job failed, with nothing after it, is not flagged by
default: nobody paid for it twice yet, and `spendlake runs --state FAILED` lists it; with
`count_unrelaunched: true` its final failure counts too. Needs `attribution.clusters`: without
shared clusters there are no runs and no findings.

Each attempt's cost is what allocation placed on it in the window (`cost_column`), as
`spendlake runs --run <run> --since <window start> --until <window end>` shows it (the command the
summary names: without the window it reads the run's whole span); the finding's owner is the run's team, project and
experiment as its jobs' cost carries them (`several` where its jobs differ), so it is routed to
the team like the other waste.

Category `waste`: `impact_usd` and `monthly_waste_usd` are the counted attempts' cost in the
window, nothing projected (an attempt that ended costs no more: a finished cost, as a Capacity
Block's in capacity-unused); a finding is critical from `critical_monthly_usd` of it. Evidence:
each counted attempt (job, state, start, end, GPU-hours, cost), the count per state, GPU-hours,
cost, first and last failure (end times, UTC).

Ignores: CANCELLED, PREEMPTED and other states `states` does not name (a person or the scheduler
stopped the job; not a failure of the job), jobs still running, costs in currencies other than
USD, runs whose counted attempts cost less than `min_cost_usd`.

Config example (the defaults):

```yaml
rules:
  failed-reruns:
    enabled: true
    states: [FAILED, NODE_FAIL, OUT_OF_MEMORY, TIMEOUT]
    count_unrelaunched: false
    min_cost_usd: 10
    cost_column: BilledCost
    critical_monthly_usd: 1000
```

`states` are job states as `spendlake runs --state` takes them (any case); one no job record
carries (`FIALED`) is refused naming `rules.failed-reruns.states[i]` and the closest state.
"""

from __future__ import annotations

import shlex
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import datetime, timezone
from heapq import nlargest
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from rules.base import Finding, Rule, RuleConfig, money, usd
from rules.context import JobAttempt, RuleContext, RunCost
from service.core.job_states import STATES
from service.core.suggest import suggestion
from service.core.timewindow import day_start, day_text, iso_utc, minute_text

GPU_HOURS = Decimal("0.01")
COST_OPTION = {"BilledCost": "billed", "EffectiveCost": "effective", "ListCost": "list"}  # `runs --cost`
ANY = object()  # the key of every attempt's start, whatever its work


def _job_state(state: str) -> str:
    """`state` in capitals; a ValueError naming the closest job state for one no job record carries
    (`FIALED` would match nothing, silently)."""
    if not state.strip():
        raise ValueError("a state must not be empty")
    word = state.strip().upper()
    if word not in STATES:
        raise ValueError(f"no job state {state.strip()!r}; {suggestion(word, STATES, 'states')}")
    return word


class FailedRerunsConfig(RuleConfig):
    states: tuple[Annotated[str, AfterValidator(_job_state)], ...] = Field(
        default=("FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT"), min_length=1,
        description="final job states that count as a failed attempt (any case)")
    count_unrelaunched: bool = Field(default=False, description="also count a run's failures nothing followed")
    min_cost_usd: Decimal = Field(default=Decimal(10), ge=0,
                                  description="flag a run whose counted attempts cost at least this in the window")
    cost_column: Literal["BilledCost", "EffectiveCost", "ListCost"] = "BilledCost"

    @field_validator("states")
    @classmethod
    def _once(cls, states: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(states))


def _latest_starts(attempts: tuple[JobAttempt, ...]) -> dict[object, list[tuple[datetime, int]]]:
    """Work (core.job_states.work_of; ANY: every attempt) → its two latest (start, index): the
    latest start of any attempt but a given one, looked up, not scanned (a sweep fails thousands
    of tasks: the bench's 10M-line month compared 12 million pairs)."""
    latest: dict[object, list[tuple[datetime, int]]] = defaultdict(list)
    for at, attempt in enumerate(attempts):
        if attempt.start is not None:
            for work in (attempt.work, ANY):
                latest[work] = nlargest(2, [*latest[work], (attempt.start, at)])
    return latest


def _typed(moment: datetime) -> str:
    """A window bound (naive UTC, as RuleContext gives it) as `--since`/`--until` take it: the day
    at its midnight, else the instant."""
    moment = moment.replace(tzinfo=timezone.utc)
    return day_text(moment.date()) if moment == day_start(moment.date()) else iso_utc(moment)


class FailedReruns(Rule[FailedRerunsConfig]):
    name = "failed-reruns"
    category = "waste"

    @classmethod
    def projected(cls, evidence: dict) -> bool:
        return False  # the failed attempts ended: their cost, once

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        if ctx.run_costs is None:  # no shared clusters: no runs
            return []
        findings = []
        for run in ctx.run_costs(ctx.window, self.config.cost_column):
            failed = self.rerun_failures(run.attempts)
            cost = sum((a.cost for a in failed), Decimal(0))
            if failed and cost > 0 and cost >= self.config.min_cost_usd:
                findings.append(self._finding(ctx, run, failed, cost))
        return findings

    def rerun_failures(self, attempts: tuple[JobAttempt, ...]) -> list[JobAttempt]:
        """The run's USD attempts that ended in a counted state and were followed by another of its
        jobs doing the same work, a re-run (any that ended so, with `count_unrelaunched`)."""
        latest = None if self.config.count_unrelaunched else _latest_starts(attempts)

        def followed(at: int, attempt: JobAttempt) -> bool:
            # the latest other start among the works same_work lets re-run it
            works = (ANY,) if attempt.work is None else (attempt.work, None)
            return any(start >= attempt.end for work in works for start, i in latest.get(work, ()) if i != at)

        return [a for at, a in enumerate(attempts) if a.currency == "USD" and a.end is not None
                and (a.state or "").upper() in self.config.states
                and (latest is None or followed(at, a))]

    def _story_command(self, ctx: RuleContext, run: str) -> str:
        """`spendlake runs --run X` over the rules' window and cost column: without them it reads the
        run's whole span, whose attempts and dollars are not the finding's."""
        cost = COST_OPTION[self.config.cost_column]
        return (f"spendlake runs --run {shlex.quote(run)} --since {_typed(ctx.since)} --until {_typed(ctx.until)}"
                + ("" if cost == "billed" else f" --cost {cost}"))

    def _finding(self, ctx: RuleContext, run: RunCost, failed: list[JobAttempt], cost: Decimal) -> Finding:
        ends = sorted(a.end for a in failed if a.end is not None)
        gpu_hours = sum((a.gpu_hours or Decimal(0) for a in failed), Decimal(0)).quantize(GPU_HOURS)
        states = Counter((a.state or "").upper() for a in failed)
        said = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        summary = (f"run {run.run} of team {run.owner.team}: {len(failed)} attempt(s) that failed ({said}) cost "
                   f"{usd(cost)} for {gpu_hours} GPU-hours, failures {minute_text(ends[0])} to "
                   f"{minute_text(ends[-1])} UTC; see why with `{self._story_command(ctx, run.run)}` before the "
                   "next launch.")
        evidence = {"run": run.run, "window_start": ctx.since, "window_end": ctx.until,
                    "cost_column": self.config.cost_column, "states": dict(sorted(states.items())),
                    "gpu_hours": gpu_hours, "cost_usd": money(cost), "first_failure": ends[0],
                    "last_failure": ends[-1], "jobs": [
                        {"job": a.job, "state": a.state, "start": a.start, "end": a.end,
                         "gpu_hours": a.gpu_hours, "cost_usd": money(a.cost)} for a in failed]}
        finding = self.finding(resource_id=f"run:{run.run}", key="failed", severity=self.severity(cost),
                               impact_usd=cost, summary=summary, evidence=evidence)
        # the run's owner: no bill line names a run, so the service keeps what the rule says
        return replace(finding, team=run.owner.team, project=run.owner.project, experiment=run.owner.experiment)
