"""What each `_state/<name>.json` file must hold, checked as it is read (Lake.read_state).

The files are the lake's memory between runs (a source's last success and failure count, the
periods each loose file holds, what the last `verify` found damaged, the scheduler's last
daily run). One edited by hand, cut short by a full disk or restored from another version
must be named as unreadable, with its key, not break a later reader with a traceback
('list' object has no attribute 'get'). Keys beyond these are kept: the shapes only say
what the readers rely on.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr, TypeAdapter, ValidationError

from service.core.validation import plain_errors


def _utc_time(text: str) -> str:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))  # as coverage.parse_utc reads it
    except ValueError:
        raise ValueError("must be a time such as 2026-11-30T00:00:00Z") from None
    return text


UtcText = Annotated[StrictStr, AfterValidator(_utc_time)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class SourceRecord(_Open):  # service/ingest/billing.py, inventory.py, freshness.py; core/claims.py
    failures_total: StrictInt = Field(default=0, ge=0)
    last_success: UtcText | None = None
    last_failure: UtcText | None = None
    last_error: StrictStr | None = None
    data_through: UtcText | None = None
    config: StrictStr | None = None
    config_from_lake: StrictStr | None = None


class FileEntry(_Open):  # service/ingest/periods.py
    uri: StrictStr
    periods: list[StrictStr]
    skipped: StrictStr | None = None


class PartitionProblem(_Open):  # Lake.record_verify
    source: StrictStr
    billing_period: StrictStr
    state: StrictStr
    detail: StrictStr


class FileProblem(_Open):  # derived_records.record_verify
    file: StrictStr


class SnapshotProblem(_Open):  # snapshot_ledger.record_verify
    snapshot: StrictStr


class Verified(_Open):
    problems: list[PartitionProblem] = []


class DerivedVerified(_Open):
    problems: list[FileProblem] = []


class SnapshotVerified(_Open):
    problems: list[SnapshotProblem] = []


class DailyRun(_Open):  # service/serve/scheduler.py
    last_run_date: StrictStr


class Jobs(_Open):
    daily: DailyRun | None = None


class Rules(_Open):  # service/findings/run.py
    rules: dict[str, dict[str, Any]] = {}


class SupersededRollups(_Open):  # service/attribution/rollup.py
    seen: list[StrictStr] = []


SHAPES: dict[str, Any] = {
    "sources": dict[str, SourceRecord], "file_periods": dict[str, dict[str, FileEntry]],
    "verify": Verified, "derived_verify": DerivedVerified, "snapshot_verify": SnapshotVerified,
    "jobs": Jobs, "rules": Rules, "rollups_superseded": SupersededRollups,
}


@functools.cache
def _adapter(name: str) -> TypeAdapter:
    return TypeAdapter(SHAPES.get(name, dict[str, Any]))


def state_problem(name: str, data: Any) -> str | None:
    """What is wrong with `data` as the `name` state ('s3.failures_total: …'); None when it fits."""
    try:
        _adapter(name).validate_python(data)
    except ValidationError as exc:
        (where, message), *rest = plain_errors(exc, data)
        more = f" (and {len(rest)} more)" if rest else ""
        return f"{where}: {message}{more}" if where else f"{message}{more}"
    return None
