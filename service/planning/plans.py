"""Registered pretraining plans (`spendlake estimate --register`): what a run should cost, and when.

Plans are a lake table, `plans` (one file, replaced atomically under a lock on every
registration or removal, through `Lake.commit_snapshot`), so every reader sees them as a view on
`Lake.query()` connections, including rules, which may import only service.core:

    SELECT name, project, experiment, start, "end", total_cost_low, total_cost_high FROM plans

| column | type | meaning |
|---|---|---|
| name | VARCHAR | unique, in any case; registering a name again replaces that plan, `spendlake plans remove` removes it |
| project, experiment | VARCHAR | what the spend is attributed to, spelt as the lake's cost lines carried it when registered (experiment may be NULL: the whole project) |
| run | VARCHAR | the run the plan follows (`--run`: its jobs' cost, attribute's `run` dimension), NULL: every run of the scope; a file written before it has no such column, read as NULL (or as kept beside it: plan_record.py, a file an older version rewrote) |
| start, end | TIMESTAMP | UTC; the planned window, `end` after the pessimistic run length |
| retention_days | INTEGER | storage kept after the run |
| run_hours_low/high, compute_cost_low/high, storage_cost_low/high, total_cost_low/high | DECIMAL(38,12) | optimistic / pessimistic; USD |
| inputs | VARCHAR | JSON of the estimate's inputs |
| registered | TIMESTAMP | UTC; when it was registered: of two plans of one scope and one start, the later registered counts the spend (service/report/plan_windows.py); NULL in a file written before it |

The estimate is stored as computed when registered, so a later change to the GPU table or
prices does not move an agreed plan. Readers: plan vs actual (the report, `spendlake plans`,
`/api/v1/plans`) and the anomaly rule (spend inside a planned window, within the planned
amount, is expected); budgets do not read them. The planned spend curve is linear: compute
over the run (start → start + run hours), storage over the run plus the retention period.
Every read checks each row against what registering writes (`StoredPlan`): a hand-edited
file is a DataError naming it and the value, not a traceback.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, TypeVar

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from service.core import json_text
from service.core.errors import DataError, UsageError
from service.core.lake_file_errors import damaged_file
from service.core.folding import composed
from service.core.lake import Lake
from service.core.snapshot_ledger import SET_ASIDE
from service.core.snapshot_set_aside import set_aside_table
from service.core.suggest import suggestion
from service.core.timewindow import MAX_INSTANT, iso_utc, parse_day, utc_now
from service.core.validation import plain_errors
from service.planning import plan_record
from service.planning.estimate import Estimate, Span

log = logging.getLogger(__name__)

TABLE = "plans"
SOURCE = "estimate"
MONEY = pa.decimal128(38, 12)
SCHEMA = pa.schema([
    ("name", pa.string()), ("project", pa.string()), ("experiment", pa.string()), ("start", pa.timestamp("us")),
    ("end", pa.timestamp("us")), ("retention_days", pa.int32()),
    *((f"{name}_{side}", MONEY) for name in ("run_hours", "compute_cost", "storage_cost", "total_cost")
      for side in ("low", "high")),
    ("inputs", pa.string()), ("run", pa.string()), ("registered", pa.timestamp("us")),
])
OPTIONAL = ("run", "registered")  # columns a file written before them lacks: read as NULL
CENT = Decimal("0.01")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
Amount = Annotated[Decimal, Field(ge=0)]
Result = TypeVar("Result")  # what a change of the plans file answers (_rewrite)


class StoredPlan(BaseModel):
    """A row of the plans file as `register_plan` writes it. An unrecorded file (written before
    records, or its record unreadable) is read unchecked, and a hand edit can hold anything."""

    model_config = ConfigDict(strict=True)  # a start must be a time, an amount a decimal: no coercion
    name: Annotated[str, Field(pattern=NAME_RE.pattern)]
    project: Annotated[str, Field(pattern=r"\S")]
    experiment: str | None
    run: Annotated[str, Field(pattern=r"\S")] | None
    start: datetime
    retention_days: Annotated[int, Field(ge=0)]
    run_hours_low: Amount
    run_hours_high: Amount
    compute_cost_low: Amount
    compute_cost_high: Amount
    storage_cost_low: Amount
    storage_cost_high: Amount
    inputs: str | None
    registered: datetime | None


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
    run: str | None = None   # the run it follows (`--run`): its scope is the run's cost of its project (and experiment)
    registered: datetime | None = None  # when register_plan stored it (UTC); None: before plans recorded it

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
        """Cumulative planned spend at `at`, for the optimistic and the pessimistic scenario: over
        the run's exact hours (not whole seconds: mid-run both spend the GPUs' price an hour, and a
        run end cut to its second set the low scenario's spend cents above the high's)."""
        elapsed = Decimal((at - self.start).total_seconds()) / 3600
        retention = Decimal(self.retention_days * 24)

        def spend(run: Decimal, compute: Decimal, storage: Decimal) -> Decimal:
            return compute * _progress(elapsed, run) + storage * _progress(elapsed, run + retention)

        return Span(spend(self.run_hours.low, self.compute_cost.low, self.storage_cost.low),
                    spend(self.run_hours.high, self.compute_cost.high, self.storage_cost.high))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "project": self.project, "experiment": self.experiment, "run": self.run,
            "start": iso_utc(self.start), "end": iso_utc(self.end), "retention_days": self.retention_days,
            # in cents, each figure rounded once as the estimate rounds its own (the total is not the sum of the parts'
            # cents: it is the estimate's total)
            "run_hours": _span_json(self.run_hours), "compute_cost": _span_json(self.compute_cost, CENT),
            "storage_cost": _span_json(self.storage_cost, CENT), "total_cost": _span_json(self.total_cost, CENT),
            "inputs": self.inputs,
        }



def _hours(value: Decimal) -> timedelta:
    return timedelta(seconds=int(value * 3600))


def _progress(elapsed: Decimal, hours: Decimal) -> Decimal:
    """The share of a span of `hours` from the start `elapsed` hours in (0 to 1)."""
    if elapsed <= 0:
        return Decimal(0)
    if elapsed >= hours:
        return Decimal(1)
    return elapsed / hours


def _span_json(span: Span, quantum: Decimal | None = None) -> dict[str, str]:
    return {side: format(value.quantize(quantum) if quantum else value, "f")
            for side, value in (("low", span.low), ("high", span.high))}


def plan_from_estimate(result: Estimate, *, name: str, project: str, experiment: str | None, start: str,
                       run: str | None = None) -> Plan:
    if not NAME_RE.match(name):
        raise UsageError(f"invalid plan name {name!r}", where="--register",
                         hint="use letters, digits, '.', '_' or '-', at most 64 characters")
    if not project.strip():
        raise UsageError("a registered plan needs a project", where="--project")
    # README's `--start YYYY-MM-DD`: a day, its midnight UTC (a time, or `7d` back from now, was taken as it came)
    day = parse_day(start, option="--start", example="2026-12-01")
    # composed (NFC), as bills write a value (the CLI spells it as the lake's lines do: cli/estimate.py)
    plan = Plan(name=name, project=composed(project.strip()), experiment=composed((experiment or "").strip()) or None,
                run=composed((run or "").strip()) or None,
                start=datetime.combine(day, time(), timezone.utc),
                run_hours=Span(_money(result.low.run_hours), _money(result.high.run_hours)),  # as stored
                retention_days=result.inputs.retention_days,
                # as stored, not in cents: the parts' cents added gave a total a cent off the estimate's
                compute_cost=Span(_money(result.low.compute_cost), _money(result.high.compute_cost)),
                storage_cost=Span(_money(result.low.storage_cost), _money(result.high.storage_cost)),
                inputs=result.to_json()["inputs"])
    try:  # its planned window, storage kept after it included, must be a time Python holds
        if plan.end + timedelta(days=plan.retention_days) <= MAX_INSTANT:
            return plan
    except OverflowError:
        pass
    raise UsageError(f"a plan starting {day} ends past {MAX_INSTANT.date()}", where="--start",
                     hint="start it on an earlier day")


def register_plan(lake: Lake, plan: Plan) -> bool:
    """Store `plan`; True when it replaced a plan of the same name. A name that differs from a
    registered one only in case is refused: two plans a reader tells apart by case alone."""

    def add(records: list[dict[str, Any]], path: Path) -> tuple[list[Plan], bool]:
        plans = {p.name: p for p in _checked(records, path)}
        if twin := next((name for name in plans if name != plan.name and name.lower() == plan.name.lower()), None):
            raise UsageError(f"plan {plan.name!r} differs from the registered plan {twin!r} only in case",
                             where="--register", hint=f"register it as {twin} to replace that plan, or choose "
                             "another name")
        replaced = plan.name in plans
        # the same plan registered again keeps its time: a re-run (the demo's) writes the same file
        same = replaced and replace(plans[plan.name], registered=None) == replace(plan, registered=None)
        plans[plan.name] = plans[plan.name] if same else replace(plan, registered=utc_now())
        return list(plans.values()), replaced

    return _rewrite(lake, add)


def remove_plan(lake: Lake, name: str) -> Plan | None:
    """Remove the plan `name` (every row of that name; its row need not pass the checks, so a
    hand-edited row can be removed); the plan removed, None when its row was not readable.
    A name not registered is a UsageError (check_registered)."""

    def drop(records: list[dict[str, Any]], path: Path) -> tuple[list[Plan], Plan | None]:
        _registered(name, records)  # again under the lock: another process may have removed it
        gone = [record for record in records if record["name"] == name]
        kept = _checked([record for record in records if record["name"] != name], path)
        try:
            removed = _checked(gone, path)
        except DataError:
            removed = []
        return kept, removed[0] if len(removed) == 1 else None

    return _rewrite(lake, drop)


def check_registered(lake: Lake, name: str) -> None:
    """A UsageError (exit 2, as `forget` and `rules run --rule` treat an unknown name) naming `name` and the
    registered plans, or saying there are none, unless a plan of that name is registered."""
    _registered(name, _records(lake)[0])


def _registered(name: str, records: list[dict[str, Any]]) -> None:
    known = [record["name"] for record in records if isinstance(record["name"], str)]
    if name not in known:
        raise UsageError(f"no plan {name!r} is registered", where="NAME", hint=suggestion(name, known, "plans")
                        if known else "the lake holds no plans: `spendlake estimate ... --register NAME` adds one")


def _rewrite(lake: Lake, change: Callable[[list[dict[str, Any]], Path], tuple[list[Plan], Result]]) -> Result:
    """Under the plans' lock: the file set aside when it does not match its record (with a
    warning), its rows handed to `change`, the plans it returns written as one new file."""
    with lake.lock(TABLE):
        for check in set_aside_table(lake, TABLE):  # written again below
            log.warning("%s; moved under %s: register the plans it held again", check.sentence(),
                        lake.root / SET_ASIDE / check.key)
        plans, result = change(*_records(lake))
        rows = [_row(p) for p in sorted(plans, key=lambda p: p.name)]
        con = lake.connect()
        try:
            lake.commit_snapshot(con, con.from_arrow(pa.Table.from_pylist(rows, schema=SCHEMA)), table=TABLE,
                                 source=SOURCE, key="snapshot", value="current")
        finally:
            con.close()
        plan_record.keep(lake, rows)  # what an older version's rewrite would drop
    return result


def load_plans(lake: Lake) -> list[Plan]:
    """Every registered plan, by name; a file that is not as `register_plan` writes it (a column
    missing or of another type, a value out of range, a name twice) is a DataError naming it."""
    return _checked(*_records(lake))


def _records(lake: Lake) -> tuple[list[dict[str, Any]], Path]:
    """The plans file's rows by name, unchecked but for their columns, and the file."""
    path = lake.partition_file(TABLE, [("source", SOURCE), ("snapshot", "current")])
    if not lake.has_table(TABLE):
        return [], path
    with lake.query(tables=("costs", TABLE)) as con:  # a damaged findings file stops no plan
        present = {row[0] for row in con.execute(f"DESCRIBE {TABLE}").fetchall()}
        if missing := [name for name in SCHEMA.names if name not in present and name not in OPTIONAL]:
            raise _damaged(path, f"it lacks the column(s) {', '.join(missing)}")
        columns = ", ".join(f'"{name}"' if name in present else f'NULL AS "{name}"' for name in SCHEMA.names)
        cursor = con.execute(f"SELECT {columns} FROM {TABLE} ORDER BY name")
        records = [dict(zip(SCHEMA.names, row)) for row in cursor.fetchall()]
    if "run" not in present:  # written before plans on runs, or rewritten since by a version from before them
        records = plan_record.restored(lake, records, str(path))
    return records, path


def _checked(records: list[dict[str, Any]], path: Path) -> list[Plan]:
    plans = [_plan(record, path) for record in records]
    if twice := sorted(name for name, count in Counter(plan.name for plan in plans).items() if count > 1):
        raise _bad_row(path, twice[0], f"plan {twice[0]} is in it more than once")
    return plans


def _row(plan: Plan) -> dict[str, Any]:
    row: dict[str, Any] = {"name": plan.name, "project": plan.project, "experiment": plan.experiment, "run": plan.run,
                           "start": plan.start.replace(tzinfo=None), "end": plan.end.replace(tzinfo=None),
                           "registered": plan.registered and plan.registered.replace(tzinfo=None),
                           "retention_days": plan.retention_days, "inputs": json.dumps(plan.inputs, sort_keys=True)}
    for name, span in (("run_hours", plan.run_hours), ("compute_cost", plan.compute_cost),
                       ("storage_cost", plan.storage_cost), ("total_cost", plan.total_cost)):
        row[f"{name}_low"], row[f"{name}_high"] = _money(span.low), _money(span.high)
    return row


def _damaged(path: Path, reason: str, hint: str | None = None) -> DataError:
    return damaged_file(str(path), TABLE, SOURCE, reason, hint)


def _bad_row(path: Path, name: Any, reason: str) -> DataError:
    """The plans file holds a row registering never writes: the fix is that plan removed and
    registered again, the others kept (a row without a name cannot be removed: the file goes)."""
    if not isinstance(name, str) or not name:
        return _damaged(path, reason)
    return _damaged(path, reason, f"remove that plan with `spendlake plans remove {shlex.quote(name)}` and register it "
                    "again (`spendlake estimate --register NAME ...`); the other plans are kept")


def _plan(row: dict[str, Any], path: Path) -> Plan:
    try:
        StoredPlan.model_validate(row)
    except ValidationError as exc:
        (where, problem), *_ = plain_errors(exc, row)
        raise _bad_row(path, row["name"], f"plan {row['name']!r}: {where}: {problem}") from None

    def span(name: str) -> Span:
        return Span(row[f"{name}_low"], row[f"{name}_high"])

    return Plan(name=row["name"], project=row["project"], experiment=row["experiment"], run=row["run"],
                start=row["start"].replace(tzinfo=timezone.utc), run_hours=span("run_hours"),
                retention_days=row["retention_days"], compute_cost=span("compute_cost"),
                storage_cost=span("storage_cost"),
                registered=row["registered"] and row["registered"].replace(tzinfo=timezone.utc),
                inputs=json_text.lake_loads(row["inputs"], path, f"plan {row['name']}'s inputs"))


def _money(value: Decimal) -> Decimal:
    return value.quantize(Decimal("1e-12"))  # DECIMAL(38,12)
