"""The figures of one run's story (`runs --run X`: its table, its JSON, `/api/v1/runs?run=X`),
computed once where the story is built (service/attribution/run_story.py), per currency of its jobs:

    jobs, figures = story_figures(jobs, rules)

- unfinished: what its attempts that bought no finished work cost (final states in UNFINISHED:
  failed, cancelled, timed out, preempted, requeued, ...) of the run's cost. Not the failed-reruns
  finding's figure: a requeued or preempted attempt may have saved a checkpoint, and a failure
  never run again is no re-run.
- failed_reruns (USD alone: the rule counts USD attempts): the attempts the failed-reruns rule,
  as `rules:` configures it, counts in the story's window, of the run's cost: its `impact_usd`
  over the same window.
- each job's `relaunched`: it ended in one of the rule's `states` and another attempt of the same
  work followed (a requeue, a resubmission). With the rule's `count_unrelaunched: true` the
  figure also counts the failures nothing followed, which are not `relaunched`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import timezone
from decimal import Decimal

from rules.context import JobAttempt
from rules.failed_reruns import FailedReruns
from service.attribution.run_inputs import RATIO_QUANTUM
from service.core.units import share_of

# A job's final states that bought no finished work (Slurm's names; RUNNING and COMPLETED are not).
UNFINISHED = ("FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
              "DEADLINE", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "REVOKED")
RERUN_CURRENCY = "USD"  # the failed-reruns rule counts USD attempts alone


@dataclass(frozen=True)
class Part:
    """Of the run's `cost` in one currency, the `cost` of `jobs` of its attempts."""
    currency: str | None
    cost: Decimal
    jobs: int
    run_cost: Decimal

    def to_json(self, **more) -> dict:
        return {"currency": self.currency, **more, "cost": format(self.cost, "f"), "jobs": self.jobs,
                "run_cost": format(self.run_cost, "f"),
                "share": _text(share_of(self.cost, self.run_cost, RATIO_QUANTUM))}


@dataclass(frozen=True)
class StoryFigures:
    unfinished: tuple[Part, ...] = ()  # per currency of the run's jobs
    failed_reruns: Part | None = None  # USD: the failed-reruns rule's count
    states: tuple[str, ...] = ()  # the rule's counted states

    def to_json(self) -> dict:
        return {"unfinished": [part.to_json() for part in self.unfinished],
                "failed_reruns": None if self.failed_reruns is None else
                self.failed_reruns.to_json(states=list(self.states))}


def story_figures(jobs: list, rules: Mapping) -> tuple[list, StoryFigures]:
    """The story's jobs (run_story.RunJob) each marked `relaunched`, and its figures (module
    docstring); `rules`: the config's `rules:` (the failed-reruns rule's settings)."""
    rule = FailedReruns.configured(rules)
    attempts = tuple(job_attempt(job) for job in jobs)
    counted = {id(attempt) for attempt in rule.rerun_failures(attempts)}
    relaunched = counted if not rule.config.count_unrelaunched else {id(attempt) for attempt in FailedReruns(
        rule.config.model_copy(update={"count_unrelaunched": False})).rerun_failures(attempts)}
    run_cost: dict[str | None, Decimal] = {}
    for job in jobs:
        run_cost[job.currency] = run_cost.get(job.currency, Decimal(0)) + job.cost
    unfinished = [job for job in jobs if (job.state or "").upper() in UNFINISHED]
    failed = [job for job, attempt in zip(jobs, attempts) if id(attempt) in counted]
    figures = StoryFigures(
        tuple(_part(currency, unfinished, total) for currency, total in sorted(run_cost.items(),
                                                                               key=lambda c: c[0] or "~")),
        _part(RERUN_CURRENCY, failed, run_cost[RERUN_CURRENCY]) if RERUN_CURRENCY in run_cost else None,
        rule.config.states)
    return [replace(job, relaunched=id(attempt) in relaunched) for job, attempt in zip(jobs, attempts)], figures


def _part(currency: str | None, jobs: Iterable, run_cost: Decimal) -> Part:
    mine = [job for job in jobs if job.currency == currency]
    return Part(currency, sum((job.cost for job in mine), Decimal(0)), len(mine), run_cost)


def job_attempt(job) -> JobAttempt:
    """A job of `runs --run` (run_story.RunJob) as the failed-reruns rule reads it (also the story's
    failed re-runs)."""

    def naive(moment):
        return moment.astimezone(timezone.utc).replace(tzinfo=None) if moment else None

    return JobAttempt(job.job, job.state, naive(job.start), naive(job.end), job.gpu_hours, job.cost, job.currency,
                      job.work, job.owner)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")
