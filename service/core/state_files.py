"""What each `_state/<name>.json` file must hold, checked as it is read (Lake.read_state),
and what a snapshot's record holds (service/core/snapshot_ledger.py).

The files are the lake's memory between runs (a source's last success and failure count, the
periods each loose file holds, what the last `verify` found damaged, the scheduler's last
daily run). One edited by hand, cut short by a full disk or restored from another version
must be named as unreadable, with its key, not break a later reader with a traceback
('list' object has no attribute 'get'). Keys beyond these are kept: the shapes only say
what the readers rely on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from datetime import date, datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, TypeAdapter, ValidationError

from service.core import json_text
from service.core.errors import DataError
from service.core.validation import plain_errors


def _utc_time(text: str) -> str:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))  # as coverage.parse_utc reads it
    except ValueError:
        raise ValueError("must be a time such as 2026-11-30T00:00:00Z") from None
    return text


UtcText = Annotated[StrictStr, AfterValidator(_utc_time)]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)


class SourceRecord(Open):  # service/ingest/billing.py, inventory.py, freshness.py; core/claims.py
    failures_total: StrictInt = Field(default=0, ge=0)
    last_success: UtcText | None = None
    last_failure: UtcText | None = None
    last_error: StrictStr | None = None
    last_run_failed: StrictBool | None = None  # service/ingest/freshness.py current_error
    data_through: UtcText | None = None
    config: StrictStr | None = None
    config_from_lake: StrictStr | None = None
    copies: dict[StrictStr, StrictStr] = {}  # the last ingest's copies skipped → what it read in their place
    stale_copies: dict[StrictStr, StrictStr] = {}  # … and those of a file changed since → that file
    rewritten: dict[StrictStr, StrictStr] = {}  # copies changed while their original did not (period held) → it
    shared: dict[StrictStr, StrictStr] = {}  # files another source reads too → `<its file> (source <it>)`
    unrecorded_counted: list[StrictStr] = []  # the failure marks failures_total counts (service/core/failure_marks.py)


class FileEntry(Open):  # service/ingest/periods.py
    uri: StrictStr
    periods: list[StrictStr]
    skipped: StrictStr | None = None


class FileDigest(Open):  # service/ingest/copies.py
    version: StrictStr  # "" when the connector knows none: read each time
    size: StrictInt
    sha256: StrictStr | None = None  # the content's (connectors.content); None: only its head read
    head: StrictStr | None = None  # the digest of its first text
    own: list[StrictStr] | None = None  # the Hive keys of its folders it holds as columns
    copy_of: StrictStr | None = None  # the file it was found a copy of
    of_manifest: StrictBool | None = None  # … which a manifest listed


class PartitionRead(Open):
    part: StrictStr
    sha256: StrictStr | None = None
    rows: StrictInt = Field(ge=0)


class InventoryInputs(Open):  # service/ingest/inventory_inputs.py: a source's last read of its files
    digest: StrictStr
    day: StrictStr
    partitions: list[PartitionRead]
    skipped: dict[StrictStr, StrictStr] = {}
    data_through: UtcText | None = None


class PartitionProblem(Open):  # Lake.record_verify
    source: StrictStr
    billing_period: StrictStr
    state: StrictStr
    detail: StrictStr


class FileProblem(Open):  # derived_records.record_verify
    file: StrictStr


class SnapshotProblem(Open):  # snapshot_verify.record_verify
    snapshot: StrictStr


class Verified(Open):
    problems: list[PartitionProblem] = []


class DerivedVerified(Open):
    problems: list[FileProblem] = []


class SnapshotVerified(Open):
    problems: list[SnapshotProblem] = []
    recorded: list[StrictStr] = []  # the snapshots found with a record (snapshot_verify.with_lost_records)


def _iso_date(text: str) -> str:
    try:
        date.fromisoformat(text)  # as the scheduler reads it (daily_due)
    except ValueError:
        raise ValueError("must be a date such as 2026-11-30") from None
    return text


class DailyRun(Open):  # service/serve/scheduler.py
    last_run_date: Annotated[StrictStr, AfterValidator(_iso_date)]


class Jobs(Open):
    daily: DailyRun | None = None
    # the daily runs whose report is written again after a later run's (service/serve/undone_reports.py)
    daily_undone: list[Annotated[StrictStr, AfterValidator(_iso_date)]] = []
    last_success: dict[str, UtcText] = {}  # job -> when it last succeeded: the gauge read back after a restart
    tops_owner: StrictStr | None = None  # whose metric tops the service stored last (service/serve/service.py)
    tops_format: StrictStr | None = None  # their form (TOPS_FORMAT): another version's are not shown (served_before)


class ServingRecord(Open):  # service/core/serving.py
    holder: StrictStr
    config: StrictStr = ""
    sources: list[StrictStr] = []


class Rules(Open):  # service/findings/run.py
    rules: dict[str, dict[str, Any]] = {}
    seen_by: dict[str, StrictStr] = {}  # finding id → the config file whose run last saw it


class SupersededRollups(Open):  # service/attribution/rollup_build.py; `seen` (a list) before 2026-12-05
    since: dict[StrictStr, UtcText] = {}


class Described(Open):  # snapshot_ledger.describe; a record's `previous` may lack what its file lacked
    size: StrictInt | None = Field(default=None, ge=0)
    rows: StrictInt | None = Field(default=None, ge=0)
    sha256: StrictStr | None = None


class SnapshotRecord(Described):  # snapshot_ledger.recording, with a window source's job_windows.window_fields
    written_at: UtcText | None = None
    previous: Described | None = None
    taken_at: UtcText | None = None
    window_start: UtcText | None = None
    fingerprint: StrictStr | None = None
    mtime_ns: StrictInt | None = None  # the file's as written: a read re-hashes a file whose time differs


class DerivedRecord(Described):  # derived_records.describe, with its id
    sums: dict[str, dict[str, StrictStr]] | None = None
    id: StrictStr | None = None
    stat: list[StrictInt] | None = None  # derived_records.vouch: the file's inode, size, mtime and ctime in ns


class StoredFamily(Open):  # service/serve/stored_families.py: a Prometheus family's samples
    name: StrictStr
    documentation: StrictStr
    type: StrictStr
    samples: list[tuple[StrictStr, dict[StrictStr, StrictStr], float]]


class StoredGroup(Open):
    owner: StrictStr
    month: StrictStr | None = None  # the month the families summed (none: stored before months were)
    families: list[StoredFamily]


class KeptPlan(Open):  # service/planning/plan_record.py: what an older spendlake's rewrite of the plans file drops
    project: StrictStr
    experiment: StrictStr | None = None
    start: UtcText
    run: StrictStr | None = None
    registered: UtcText | None = None


class PlansRecord(Open):
    plans: dict[StrictStr, KeptPlan] = {}


SNAPSHOT_RECORD, DERIVED_RECORD = TypeAdapter(SnapshotRecord), TypeAdapter(DerivedRecord)


SHAPES: dict[str, Any] = {
    "sources": dict[str, SourceRecord], "file_periods": dict[str, dict[str, FileEntry]],
    "file_digests": dict[str, dict[str, FileDigest]], "inventory_inputs": dict[str, InventoryInputs],
    "verify": Verified, "derived_verify": DerivedVerified, "snapshot_verify": SnapshotVerified,
    "jobs": Jobs, "rules": Rules, "rollups_superseded": SupersededRollups,
    "metrics_last_good": dict[str, StoredGroup], "serving": ServingRecord, "plans": PlansRecord,
}


@functools.cache
def _adapter(name: str) -> TypeAdapter:
    return TypeAdapter(SHAPES.get(name, dict[str, Any]))


def parse_state(name: str, text: str | bytes, where: str) -> dict:
    """The `name` state read from `where` (Lake.read_state, the Spark lake's); a DataError
    naming the file and the key when it is not JSON or not of its shape."""
    try:
        data = json_text.loads(text)
        problem = state_problem(name, data)
    except ValueError as exc:  # also bytes that are not UTF-8
        problem = str(exc)
    if problem:
        raise DataError(f"state file is unreadable: {problem}", where=where, hint="delete it to start afresh")
    return data


def problems_kept(earlier: dict, found: list[dict], checked: set, key: Callable[[dict], Hashable]) -> list[dict]:
    """A verify's `found` problems with those the `earlier` record holds of what this verify did
    not check: another config's sources on the same lake, which this config neither reads nor
    may clear (its verify erased them, and that config's queries read the damage again)."""
    return [p for p in earlier.get("problems", []) if key(p) not in checked] + found


def parse_record(text: str | bytes, shape: TypeAdapter) -> dict:
    """A snapshot's or derived file's record of `shape` (SNAPSHOT_RECORD, DERIVED_RECORD), read
    locally or by Spark; {} when it is not JSON or not of that shape: unreadable, so the file is
    not vouched for by it (each reader says what that means)."""
    try:
        data = json_text.loads(text)
    except ValueError:
        return {}
    return data if shape_problem(shape, data) is None else {}


def state_problem(name: str, data: Any) -> str | None:
    """What is wrong with `data` as the `name` state ('s3.failures_total: …'); None when it fits."""
    return shape_problem(_adapter(name), data)


def shape_problem(shape: TypeAdapter, data: Any) -> str | None:
    """What is wrong with `data` as `shape` (the first problem, its dotted key first, and how
    many more); None when it fits."""
    try:
        shape.validate_python(data)
    except ValidationError as exc:
        (where, message), *rest = plain_errors(exc, data)
        more = f" (and {len(rest)} more)" if rest else ""
        return f"{where}: {message}{more}" if where else f"{message}{more}"
    return None
