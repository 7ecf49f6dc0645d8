"""Freshness per configured source, billing and inventory alike: how far its data reaches
(`data_through`, service/core/coverage.py), when it last ingested, and whether that is
within its `freshness_hours`.

A source is `stale` when its data_through is more than `freshness_hours` behind the moment
asked about, even when every ingest succeeds and reports "unchanged" (an export that stopped
changing), or when its last successful ingest is that old. `spendlake status`, the report,
`/readyz`, `/api/v1/status` and the metrics behind the `SpendlakeSourceStale` alert all read
this.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from service.core import failure_marks
from service.core.claims import own_record, refused_record
from service.core.config import Config
from service.core.coverage import STATE_KEY, billing_data_through, inventory_data_through, parse_utc
from service.core.errors import SpendlakeError, os_error
from service.core.files import NotSynced
from service.core.lake import Lake
from service.core.logs import redact
from service.core.timewindow import iso_utc

STATES = ("ok", "stale", "failing", "no data", "not ingested")
RECORD_MISSED = "only the source's success or failure is not recorded"


def record_run(record: dict, error: Exception | None) -> None:
    """A source's run in its record of the `sources` state: a failure counted with its error,
    else its success. A time the record holds from after this run (written by a clock that ran
    ahead) becomes a second before it, when that run was at the latest: left ahead, it would hide
    every later failure and keep the source fresh until the calendar caught up."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    for key in ("last_success", "last_failure", STATE_KEY):
        if record.get(key) and parse_utc(record[key]) > now:
            record[key] = iso_utc(now - timedelta(seconds=1))
    if error is not None:
        record["failures_total"] = int(record.get("failures_total", 0)) + 1
        record["last_failure"] = iso_utc(now)
        record["last_error"] = redact(str(error))  # a SpendlakeError is already; a library's error not
    else:
        record["last_success"] = iso_utc(now)
    record["last_run_failed"] = error is not None  # the times, to the second, tie when both runs share one


def record_sources(lake: Lake, state: dict, source: str, committed: bool) -> None:
    """Write the `sources` state after `source`'s run (its record, `record_run`'s) and its commits
    (`committed`: it committed any), counting the failures runs before could not record (their
    marks, removed once written): an error then says whether anything is already in the lake, never
    "nothing was changed" below the lines that say "committed" nor "what was committed above" below
    none, and a failure of this run not written is still counted (`_keep`)."""
    counted = _count_marks(lake, state, source)
    try:
        lake.write_state("sources", state)
    except NotSynced as exc:  # in place, this run and the marks counted: a mark would count it twice
        done = "what was committed above is in the lake" if committed else "this run committed nothing"
        raise os_error(exc, done=f"{done}; the source's state is written, its folder not synced (a crash may "
                                 "lose this run's record; the marks it counts stay until one is synced)") from None
    except OSError as exc:
        done = "what was committed above is in the lake" if committed else "this run committed nothing"
        kept = _keep(lake, source, state[source]) if state[source].get("last_run_failed") else RECORD_MISSED
        raise os_error(exc, done=f"{done}; {kept}") from None
    failure_marks.remove(counted)
    failure_marks.ready(lake.root)


def record_refused(lake: Lake, refused: dict[str, SpendlakeError]) -> SpendlakeError | None:
    """Each source this config's run refused (service/core/claims.py `refused`), recorded as a failed
    run for this config file inside the record of the config that holds the name (`refused_record`):
    that config's own runs, freshness and errors stay as they are, and `status`, the API and the
    metrics of this config show its source failing (`sources_state`). The error when the state could
    not be written (no mark: it would count the failure in the other config's runs)."""
    if not refused:
        return None
    state = lake.read_state("sources")
    for source, error in refused.items():
        if source in state:  # the other config's record, which its claim was read from
            record_run(refused_record(lake, state[source]), error)
    try:
        lake.write_state("sources", state)
    except NotSynced:
        pass  # in place; a crash may lose it, as any record's
    except OSError as exc:
        return os_error(exc, done="the refused source's failure is not recorded (its FAILED line says it)")
    return None


def _keep(lake: Lake, source: str, record: dict) -> str:
    """A failure the state could not record, marked in the lake (service/core/failure_marks.py:
    a full disk still takes the mark) for every later reader, this process's or another's, or,
    where not even that can be written (a read-only disk), kept in this process; what is done."""
    try:
        mark = failure_marks.leave(lake.root, source, record["last_failure"], record["last_error"])
    except OSError:
        kept = _UNRECORDED.setdefault((str(lake.root), source), {"failures_total": 0})
        kept.update(failures_total=kept["failures_total"] + 1, last_failure=record["last_failure"],
                    last_error=record["last_error"])
        return RECORD_MISSED
    return f"the source's failure is counted from {mark} (`status`, the service) until its state can be written"


# Failures the `sources` state could not record and not even a mark (a read-only disk), per
# (lake root, source), since this process started: how many, and the last one's time and error.
# The state file is the failure counter and says whether a source is failing, so without these the
# service would show every source as it was (spendlake_source_failures_total standing still,
# `/readyz` ready) exactly while every run fails.
_UNRECORDED: dict[tuple[str, str], dict] = {}
COUNTED_KEY = "unrecorded_counted"  # in a source's record: the marks its failures_total counts
NO_ERROR = "an ingest failed and its error could not be written to the lake either (its disk was full)"


def _count_marks(lake: Lake, state: dict, recording: str) -> list[failure_marks.Mark]:
    """Count in `state`'s records the marks they do not count yet, and name in each record the
    marks it counts, so a reader between the write and the marks' removal (or a mark that could not
    be removed) counts each once. A mark is its source's last run but for the one `recording`
    (every state written since would have counted it). The marks to remove once `state` is written."""
    found = failure_marks.marks(lake.root)
    for source in {mark.source for mark in found} | {s for s, r in state.items() if r.get(COUNTED_KEY)}:
        marks = [mark for mark in found if mark.source == source]
        state[source] = _marked(state.get(source) or {"failures_total": 0}, marks, last_run=source != recording)
        state[source][COUNTED_KEY] = [mark.path.name for mark in marks]
        if not marks:
            del state[source][COUNTED_KEY]
    return found


def _marked(record: dict, marks: list[failure_marks.Mark], *, last_run: bool) -> dict:
    """`record` counting the `marks` (of its source) it does not count yet; `last_run`: the newest
    of them is the source's last run (else its time and error only where it knows no failure)."""
    new = [mark for mark in marks if mark.path.name not in (record.get(COUNTED_KEY) or ())]
    if not new:
        return record
    marked = {**record, "failures_total": int(record.get("failures_total", 0)) + len(new)}
    if last_run or not record.get("last_failure"):
        marked.update(last_failure=new[-1].failed_at, last_error=new[-1].error or NO_ERROR)
    if last_run:
        marked["last_run_failed"] = True
    return marked


def _counted(record: dict, kept: dict) -> dict:
    """`record` counting the failures `kept` in this process; the later failure's time and error."""
    later = not record.get("last_failure") or parse_utc(kept["last_failure"]) > parse_utc(record["last_failure"])
    counted = {**record, "failures_total": int(record.get("failures_total", 0)) + kept["failures_total"],
               **({k: kept[k] for k in ("last_failure", "last_error")} if later else {})}
    if later:  # which came last, this failure or the recorded success, is told by their times
        counted.pop("last_run_failed", None)
    return counted


def unrecorded_key(lake: Lake) -> tuple:
    """What changes with the failures the state does not count (the metrics page's key)."""
    return failure_marks.names(lake.root), repr({k: v for k, v in _UNRECORDED.items() if k[0] == str(lake.root)})


def sources_state(lake: Lake) -> dict[str, dict]:
    """The `sources` state as this config sees it, with the failures it could not record: marked (by
    any process: a mark is its source's last run) and kept in this process; a source another config
    holds that this one's runs were refused, with those runs (service/core/claims.py `own_record`)."""
    marks = failure_marks.marks(lake.root)  # before the state: a mark then removed is in the state read
    state = lake.read_state("sources")
    for source in dict.fromkeys(mark.source for mark in marks):
        state[source] = _marked(state.get(source) or {}, [m for m in marks if m.source == source], last_run=True)
    for (root, source), kept in list(_UNRECORDED.items()):
        if root == str(lake.root):
            state[source] = _counted(state.get(source, {}), kept)
    return {source: own_record(lake, record) for source, record in state.items()}


@dataclass(frozen=True)
class SourceFreshness:
    source: str
    kind: str
    data_through: datetime | None
    freshness_hours: int
    last_success: str | None
    failures_total: int
    last_error: str | None  # the error of the last run, when it failed after the last success
    state: str  # one of STATES
    hours_behind: int | None  # whole hours from data_through to the moment asked about
    success_age: timedelta | None = None  # from the last successful ingest to the moment asked about

    @property
    def data_stale(self) -> bool:
        return self.hours_behind is not None and self.hours_behind > self.freshness_hours

    @property
    def success_stale(self) -> bool:
        return self.success_age is not None and self.success_age > timedelta(hours=self.freshness_hours)

    def problem(self) -> str | None:
        """Why `/readyz` holds back for this source (None: ready): never ingested, data older
        than its limit, or no successful ingest within it."""
        limit = f"its freshness limit of {self.freshness_hours}h"
        if self.last_success is None:
            return f"source {self.source} has not been ingested yet"
        if self.data_stale:
            return (f"source {self.source} has data through {iso_utc(self.data_through)}, "
                    f"{self.hours_behind}h behind, older than {limit}")
        if self.success_stale:
            return f"source {self.source} last ingested at {self.last_success}, older than {limit}"
        return None

    def to_json(self) -> dict:
        return {"source": self.source, "kind": self.kind, "state": self.state,
                "data_through": iso_utc(self.data_through) if self.data_through else None,
                "hours_behind": self.hours_behind, "freshness_hours": self.freshness_hours,
                "last_success": self.last_success, "failures_total": self.failures_total,
                "last_error": self.last_error, "fresh": self.state == "ok"}


def freshness_limits(config: Config) -> dict[str, int]:
    """Hours each configured source (billing and inventory) may lag."""
    return {source.name: source.freshness_hours for source in (*config.sources, *config.inventory)}


def source_freshness(config: Config, lake: Lake, now: datetime) -> list[SourceFreshness]:
    """Every configured source as of `now` (the clock, or a report's end), by name."""
    kinds = {source.name: source.kind for source in (*config.sources, *config.inventory)}  # type: ignore[attr-defined]
    billing = billing_data_through(lake)
    through = {s.name: billing.get(s.name) for s in config.sources}
    through |= inventory_data_through(lake, [s.name for s in config.inventory])
    state = sources_state(lake)
    rows = []
    for name, hours in sorted(freshness_limits(config).items()):
        record = state.get(name, {})
        data = through.get(name)
        behind = None if data is None else max(int((now - data).total_seconds()) // 3600, 0)
        success = record.get("last_success")
        error = current_error(record)
        age = now - parse_utc(success) if success else None
        if error:
            verdict = "failing"
        elif data is None:
            verdict = "no data" if success else "not ingested"
        elif behind > hours or (age is not None and age > timedelta(hours=hours)):
            verdict = "stale"
        else:
            verdict = "ok"
        rows.append(SourceFreshness(name, kinds[name], data, hours, success, int(record.get("failures_total", 0)),
                                    error, verdict, behind, age))
    return rows


def current_error(record: dict) -> str | None:
    """The last error of a source's record, when its last run failed after its last success
    (as `last_run_failed` says: a record written before it, by the times), redacted again: a
    record an older version wrote may hold what it did not redact (a `Basic` credential)."""
    if record.get("last_run_failed") is not None:
        error = record.get("last_error") if record["last_run_failed"] else None
    else:
        failed, succeeded = record.get("last_failure"), record.get("last_success")
        error = record.get("last_error") if failed and (not succeeded or parse_utc(failed) > parse_utc(succeeded)) \
            else None
    return error and redact(error)
