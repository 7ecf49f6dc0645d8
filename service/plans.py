"""Registered pretraining plans (`spendlake estimate --register`): what a run should cost, and when.

Plans live in the lake's state (`_state/plans.json`, written atomically under a lock), keyed
by name; registering a name again replaces that plan. The estimate is stored as computed when
registered, so a later change to the GPU table or prices does not move an agreed plan.

Readers: the report (plan vs actual), budgets, and the anomaly rule (spend inside a planned
window, within the planned amount, is expected). The planned spend curve is linear: compute
over the run (start → start + run hours), storage over the run plus the retention period.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from service.core.errors import DataError, UsageError
from service.core.lake import Lake
from service.core.timewindow import iso_utc, parse_instant
from service.estimate import Estimate, Span

STATE_NAME = "plans"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Plan:
    name: str
    project: str
    experiment: str | None
    start: datetime
    run_hours: Span          # low (optimistic) and high (pessimistic) run length incl. overheads
    retention_days: int
    compute_cost: Span       # USD
    storage_cost: Span       # USD
    inputs: dict[str, Any]

    @property
    def total_cost(self) -> Span:
        return Span(self.compute_cost.low + self.storage_cost.low, self.compute_cost.high + self.storage_cost.high)

    @property
    def end(self) -> datetime:
        """End of the planned window: the pessimistic run length."""
        return self.start + _hours(self.run_hours.high)

    def in_window(self, at: datetime) -> bool:
        return self.start <= at < self.end

    def planned_spend(self, at: datetime) -> Span:
        """Cumulative planned spend at `at`, for the optimistic and the pessimistic scenario."""
        retention = timedelta(days=self.retention_days)

        def spend(run: Decimal, compute: Decimal, storage: Decimal) -> Decimal:
            run_end = self.start + _hours(run)
            return compute * _progress(self.start, run_end, at) + storage * _progress(self.start, run_end + retention, at)

        return Span(spend(self.run_hours.low, self.compute_cost.low, self.storage_cost.low),
                    spend(self.run_hours.high, self.compute_cost.high, self.storage_cost.high))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "project": self.project, "experiment": self.experiment,
            "start": iso_utc(self.start), "end": iso_utc(self.end), "retention_days": self.retention_days,
            "run_hours": _span_json(self.run_hours), "compute_cost": _span_json(self.compute_cost),
            "storage_cost": _span_json(self.storage_cost), "total_cost": _span_json(self.total_cost),
            "inputs": self.inputs,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        return cls(name=data["name"], project=data["project"], experiment=data.get("experiment"),
                   start=parse_instant(data["start"]), run_hours=_span(data["run_hours"]),
                   retention_days=int(data["retention_days"]), compute_cost=_span(data["compute_cost"]),
                   storage_cost=_span(data["storage_cost"]), inputs=dict(data.get("inputs") or {}))


def _hours(value: Decimal) -> timedelta:
    return timedelta(seconds=int(value * 3600))


def _progress(start: datetime, end: datetime, at: datetime) -> Decimal:
    if at <= start:
        return Decimal(0)
    if at >= end:
        return Decimal(1)
    return Decimal((at - start).total_seconds()) / Decimal((end - start).total_seconds())


def _span_json(span: Span) -> dict[str, str]:
    return {"low": format(span.low, "f"), "high": format(span.high, "f")}


def _span(data: dict[str, str]) -> Span:
    return Span(Decimal(data["low"]), Decimal(data["high"]))


def plan_from_estimate(result: Estimate, *, name: str, project: str, experiment: str | None, start: str) -> Plan:
    if not NAME_RE.match(name):
        raise UsageError(f"invalid plan name {name!r}", where="--register",
                         hint="use letters, digits, '.', '_' or '-', at most 64 characters")
    if not project.strip():
        raise UsageError("a registered plan needs a project", where="--project")
    return Plan(name=name, project=project.strip(), experiment=(experiment or "").strip() or None,
                start=parse_instant(start, option="--start"),
                run_hours=Span(result.low.run_hours, result.high.run_hours),
                retention_days=result.inputs.retention_days,
                compute_cost=Span(result.low.compute_cost.quantize(Decimal("0.01")),
                                  result.high.compute_cost.quantize(Decimal("0.01"))),
                storage_cost=Span(result.low.storage_cost.quantize(Decimal("0.01")),
                                  result.high.storage_cost.quantize(Decimal("0.01"))),
                inputs=result.to_json()["inputs"])


def register_plan(lake: Lake, plan: Plan) -> bool:
    """Store `plan`; True when it replaced a plan of the same name."""
    with lake.lock(STATE_NAME):
        plans = _read(lake)
        replaced = plan.name in plans
        plans[plan.name] = plan.to_json()
        lake.write_state(STATE_NAME, {"plans": dict(sorted(plans.items()))})
    return replaced


def load_plans(lake: Lake) -> list[Plan]:
    """Every registered plan, by name."""
    try:
        return [Plan.from_json(data) for _, data in sorted(_read(lake).items())]
    except (KeyError, TypeError, ArithmeticError, ValueError) as exc:
        raise DataError(f"a registered plan is unreadable: {exc!r}", where=str(lake.state_file(STATE_NAME)),
                        hint="register the plan again with `spendlake estimate --register`") from None


def _read(lake: Lake) -> dict[str, Any]:
    plans = lake.read_state(STATE_NAME).get("plans", {})
    if not isinstance(plans, dict):
        raise DataError("plans must be a mapping of name to plan", where=str(lake.state_file(STATE_NAME)))
    return dict(plans)
