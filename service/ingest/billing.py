"""Ingest: for each configured source, commit every delivery the lake does not hold yet.

The unit is (source, billing period). A failing delivery fails alone: the other periods
still commit, the previous version of the failed one stays, and the result says so.
Every delivery is staged first and the run's deliveries are put in place as one change
(service.core.commit.publish_costs): a reader sees the lake before the run or after it,
never some new periods beside others still old.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import duckdb

from connectors.base import CostConnector, Delivery, OtherDataset, cost_connector
from connectors.file_versions import local_version
from connectors.storage import CHANGED_HINT
from service.core import bill_overlap
from service.core.claims import claim, refused
from service.core.commit import StagedCosts, discard_costs, publish_costs, stage_costs
from service.core.config import Config, SourceConfig
from service.core.errors import (DataError, LakeBusyError, SourceError, SpendlakeError, duckdb_error, os_error,
                                 out_of_memory)
from service.core.files import files_named
from service.core.lake import Lake
from service.core.ledger import LedgerEntry, totals_text
from service.core.registry import CONNECTORS
from service.core.snapshot import damaged_partitions
from service.core.stopping import raise_if_stopped
from service.ingest import periods, removed, row_copies, shared
from service.ingest.delivered import delivered
from service.ingest.freshness import record_refused, record_run, record_sources
from service.ingest.rollups import refresh_rollups
from service.ingest.unrestorable import unrestorable

log = logging.getLogger(__name__)


@dataclass
class DeliveryOutcome:
    source: str
    delivery: Delivery
    # committed | unchanged | waiting | skipped | empty | failed (staged: until the run publishes; copies: its
    # files held another's rows, remembered, the plan to be made again: row_copies)
    status: str
    entries: list[LedgerEntry] = field(default_factory=list)
    staged: StagedCosts | None = None
    on_commit: Callable[[], None] | None = None  # once published: what the plan remembers of it
    error: SpendlakeError | None = None
    note: str = ""  # why a file was skipped
    copy_of: str | None = None  # skipped as a copy: the file or manifest read in its place
    stale: bool = False  # a copy of what copy_of held before it changed
    copy_told: bool = False  # the source's last run skipped it as this copy too, or failed for it (`status` tells it)
    warnings: list[str] = field(default_factory=list)  # e.g. line items the delivery repeats
    replaces: dict[str, LedgerEntry] = field(default_factory=dict)  # period → the lake's entry it replaces

    def lines(self) -> list[str]:
        label = ", ".join(self.delivery.periods or ()) or "(periods from data)"
        if self.status == "skipped":
            return [f"{self.source} {self.delivery.files[0]}: skipped, {self.note}"]
        if self.status == "empty" or (self.status == "committed" and not self.entries):
            return [f"{self.source} {files_named(self.delivery.files, '')}: 0 rows"]
        if self.status == "committed":
            return [
                f"{self.source} {e.billing_period}: committed {e.rows} rows "
                + totals_text(e.totals)
                + (" (final)" if e.final else " (estimated)") + self._again(e)
                for e in self.entries
            ]
        if self.status == "failed":
            return [f"{self.source} {label}: FAILED: {self.error}"]
        if self.status == "waiting":
            return [f"{self.source} {label}: skipped, {self.delivery.waiting}"]
        return [f"{self.source} {label}: unchanged (delivery {self.delivery.delivery_id[:16]} already ingested)"]


    def _again(self, entry: LedgerEntry) -> str:
        """Said of a period read again whose files, rows and sums are those the lake held: after an
        upgrade that names (delivery ids) or reads the files otherwise, a damaged partition, files touched."""
        old = self.replaces.get(entry.billing_period)
        if old is None or (sorted(old.files), old.rows, old.totals) != (sorted(entry.files), entry.rows, entry.totals):
            return ""
        return ("; re-stored, its sums as before: the files, rows and sums the lake held, read again (after an "
                "upgrade that names or reads them otherwise, a damaged partition, the files copied or touched)")


@dataclass
class IngestResult:
    outcomes: list[DeliveryOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the rollup build's (a damaged state file read as none)

    @property
    def failed(self) -> list[DeliveryOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


Progress = Callable[[str, int, int], None]


def ingest(config: Config, *, only: Sequence[str] = (), progress: Progress | None = None,
           strict: bool = False, published: Callable[[IngestResult], None] | None = None,
           rollups: bool = True, accept_removed: bool = False) -> IngestResult:
    """Ingest the configured sources (or those named in `only`) into the lake. `strict`:
    a delivery that repeats a line item fails instead of committing with a warning.
    `published(result)`: called once the run's deliveries are in place, before the rollups
    are built (a long step), so what was committed can be told even if the run dies in it.
    `rollups=False`: the caller refreshes them (serve's job: once after the bills and the inventory).
    `accept_removed`: a final period read again only because files of it are gone commits (removed.py)."""
    sources = [config.source(name) for name in only] if only else list(config.sources)
    lake = Lake.of(config)
    result = IngestResult()
    with lake.lock("ingest"):
        claimed = refused(lake, sources)  # another config's bill under the same name is not replaced (core/claims.py)
        lake.clean_staging()
        lake.settle()  # a commit that died between placing its files and recording them
        lake.restamp()  # a partition copied without its times is hashed once here, not at every read
        try:
            damaged = damaged_partitions(lake)  # those no delivery of the run reads again fail their period
            for source in sources:
                outcomes = (_ingest_source(lake, source, progress, strict, accept_removed)
                            if source.name not in claimed else [_failed(source, claimed[source.name])])
                result.outcomes += outcomes + [
                    DeliveryOutcome(source.name, Delivery("", (period,), (source.location,)), "failed", error=error)
                    for period, error in unrestorable(damaged, source.name, [
                        (o.delivery, o.status, [e.billing_period for e in o.entries]) for o in outcomes])]
                raise_if_stopped()  # a source failed by the stop (DuckDB's "interrupted") is no failure
            _publish(lake, result.outcomes)
            raise_if_stopped()
            _mark_told_copies(lake, result.outcomes)
            result.warnings += shared.told(lake, [source.name for source in sources], {s.name for s in config.sources})
            result.warnings += bill_overlap.told(lake, [source.name for source in sources])
            if published:
                published(result)
            unrecorded = []  # each source's record tried (a full disk: each failure counted), the first said
            for source in (source for source in sources if source.name not in claimed):
                error = _record(lake, source, [o for o in result.outcomes if o.source == source.name])
                if error:
                    unrecorded.append(error)
            # a claimed name's record stays the other config's (its claim, freshness, errors): its failure here
            # is recorded there for this config alone (freshness.record_refused), beside its FAILED line, exit 3
            if error := record_refused(lake, claimed):
                unrecorded.append(error)
            if unrecorded:
                raise unrecorded[0]
            if rollups:
                result.warnings += refresh_rollups(lake, config)  # also after a config change, when nothing was new
        except BaseException:  # stopped (SIGTERM) or failed: the deliveries staged and not published go now
            lake.clean_staging()
            raise
    return result


def _publish(lake: Lake, outcomes: Sequence[DeliveryOutcome]) -> None:
    """Put every staged delivery in place at once; if that fails, they all failed."""
    staged = [o for o in outcomes if o.status == "staged"]
    if not staged:
        return
    try:
        publish_costs(lake, [o.staged for o in staged])
    except SpendlakeError as error:  # said by each outcome's FAILED line (serve: the job's ERROR), not here too
        for outcome in staged:
            outcome.status, outcome.error, outcome.entries = "failed", error, []
        return
    for outcome in staged:
        outcome.status = "committed"
        if outcome.on_commit:
            outcome.on_commit()


def _mark_told_copies(lake: Lake, outcomes: Sequence[DeliveryOutcome]) -> None:
    """Mark the copies the source's last run skipped too, as the same kind of copy (its `copies`
    or `stale_copies` record), and the periods it failed too for the same copy rewritten (its
    `rewritten` record), so the service says each once, when found, not every hour."""
    if not any(o.copy_of or _rewritten(o) for o in outcomes):
        return
    try:
        state = lake.read_state("sources")
    except SpendlakeError:  # unreadable: each copy is told again, as when first found
        return
    for outcome in outcomes:
        record = state.get(outcome.source) or {}
        if outcome.copy_of:
            told = record.get("stale_copies" if outcome.stale else "copies") or {}
            outcome.copy_told = told.get(outcome.delivery.files[0]) == outcome.copy_of
        elif rewritten := _rewritten(outcome):
            outcome.copy_told = (record.get("rewritten") or {}).get(rewritten.copy) == rewritten.original


def _rewritten(outcome: DeliveryOutcome) -> periods.CopyRewritten | None:
    """The copy rewritten beside its unchanged original that failed this outcome's period, if so."""
    return outcome.error if outcome.status == "failed" and isinstance(outcome.error, periods.CopyRewritten) else None


def _record(lake: Lake, source: SourceConfig, outcomes: Sequence[DeliveryOutcome]) -> SpendlakeError | None:
    """The source's success or failure in the `sources` state (service/ingest/freshness.py);
    the error when it could not be written."""
    state = lake.read_state("sources")
    record = state.setdefault(source.name, {"failures_total": 0})
    claim(lake, record, source)  # another config on this lake leaves the source alone (service/core/claims.py)
    failed = any(o.status == "failed" for o in outcomes)
    record_run(record, next(o.error for o in outcomes if o.error) if failed else None)
    for key, stale in (("copies", False), ("stale_copies", True)):  # the last run's copies: `status` tells them
        copies = {o.delivery.files[0]: o.copy_of for o in outcomes if o.copy_of and o.stale == stale}
        if copies or record.pop(key, None):
            record[key] = copies
    rewritten = {error.copy: error.original for error in map(_rewritten, outcomes) if error}  # … and periods held
    if rewritten or record.pop("rewritten", None):
        record["rewritten"] = rewritten
    try:
        record_sources(lake, state, source.name, any(o.status == "committed" and o.entries for o in outcomes))
    except SpendlakeError as exc:
        return exc
    return None


def _ingest_source(lake: Lake, source: SourceConfig, progress: Progress | None,
                   strict: bool = False, accept_removed: bool = False) -> list[DeliveryOutcome]:
    outcomes: list[DeliveryOutcome] = []
    connector: CostConnector | None = None
    try:
        connector = cost_connector(CONNECTORS.get(source.kind), source)
        deliveries = list(connector.deliveries())
        if not deliveries:  # every built-in says what it expected; this covers any other
            raise SourceError(f"nothing a source of kind {source.kind} reads under {source.location}",
                              where=f"{source.config_path}.location", hint="check the location and the kind")
        con = lake.writer(connector.local_paths())
        try:
            plan = periods.plan(lake, con, connector, source.name, deliveries, accept_removed=accept_removed)
            planned = _ingest_plan(lake, con, connector, source, plan, progress, strict)
            for _ in range(2):  # the new files in one pass failed: each is read for its periods first; or copies
                if planned is not None:  # of another's rows were found (remembered: the plan skips them now)
                    break
                plan = periods.plan(lake, con, connector, source.name, deliveries, together=False,
                                    accept_removed=accept_removed)
                planned = _ingest_plan(lake, con, connector, source, plan, progress, strict)
            outcomes += planned or []
        finally:
            con.close()
        if outcomes and all(o.status == "skipped" for o in outcomes):
            raise SourceError(f"nothing a source of kind {source.kind} reads under {source.location}: "
                              f"{len(outcomes)} file(s) skipped", where=f"{source.config_path}.location",
                              hint="check the location and the kind")
    except LakeBusyError:
        raise
    except (SpendlakeError, OSError, duckdb.Error, MemoryError) as exc:  # this source's failure: the others still run
        outcomes.append(_failed(source, _as_error(exc, source.location)))
    if connector is not None:  # also when nothing else was found: the line says why that file was not read
        outcomes[:0] = [_skipped(source, other) for other in connector.passed_over()]
    return outcomes


def _failed(source: SourceConfig, error: SpendlakeError) -> DeliveryOutcome:
    """The source failed as a whole: its outcome's FAILED line says it (serve: the job's failure)."""
    return DeliveryOutcome(source.name, Delivery("", None, (source.location,)), "failed", error=error)


def _ingest_plan(lake: Lake, con, connector: CostConnector, source: SourceConfig, plan: periods.Plan,
                 progress: Progress | None, strict: bool) -> list[DeliveryOutcome] | None:
    """The plan's outcomes; None when its new files, read in one pass, failed (the plan is to
    be made again with a survey, so a bad file fails alone), or files holding another's rows were found."""
    outcomes = [_skipped(source, other) for other in plan.skipped]
    copies = False
    outcomes += [DeliveryOutcome(source.name, d, "failed", error=e) for d, e in plan.failed]
    for number, delivery in enumerate(plan.deliveries, 1):
        if progress:
            progress(source.name, number, len(plan.deliveries))
        outcome = _ingest_delivery(lake, con, connector, source, delivery, plan, strict)
        while delivery is plan.together and outcome.status == "skipped" and (
                rest := plan.without(others := _other_datasets(lake, con, connector, plan, outcome))):
            outcomes += [_skipped(source, other) for other in others]  # found before any row is read
            delivery, outcome = rest, _ingest_delivery(lake, con, connector, source, rest, plan, strict)
        if delivery is plan.together and outcome.status in ("failed", "skipped") and len(plan.members) > 1:
            log.info("%s: reading its %d new files in one pass failed (%s); surveying each for its periods "
                     "first", source.name, len(plan.members), outcome.error or outcome.note)
            discard_costs([o.staged for o in outcomes if o.staged])  # the second try stages them again
            return None
        copies = copies or outcome.status == "copies"
        outcomes.append(outcome)
    if copies:  # each delivery read, so every copy is remembered at once: the plan made again reads none
        discard_costs([o.staged for o in outcomes if o.staged])
        return None
    # after the deliveries: committing the new files in one pass finds those with no rows
    outcomes += [DeliveryOutcome(source.name, Delivery("", None, (uri,)), "empty") for uri in plan.empty]
    return outcomes


def _other_datasets(lake: Lake, con, connector: CostConnector, plan: periods.Plan,
                    found: DeliveryOutcome) -> list[OtherDataset]:
    """The file the one pass found to hold another dataset, and the others among the files
    after it (the pass opens them in order: those before it passed), each opened alone, no
    row read: the rest is then read again once, not once per such file (a FOCUS 1.3 folder
    may hold an Invoice Detail file beside each month's costs)."""
    uri = found.delivery.files[0]
    others = [OtherDataset(uri, found.note)]
    with lake.scratch() as scratch:
        for member in (m for m in plan.members if m.files[0] > uri):
            try:
                connector.read(member, con, scratch)
            except OtherDataset as other:
                others.append(other)
            except (SpendlakeError, OSError, duckdb.Error):
                pass  # the pass opens it again and fails, and the run surveys each file
    return others


def _skipped(source: SourceConfig, other: OtherDataset) -> DeliveryOutcome:
    return DeliveryOutcome(source.name, Delivery("", None, (other.uri,)), "skipped", note=other.dataset,
                           copy_of=other.copy_of, stale=other.stale)


def _ingest_delivery(lake, con, connector: CostConnector, source: SourceConfig, delivery: Delivery,
                     plan: periods.Plan, strict: bool = False) -> DeliveryOutcome:
    if delivery.waiting:
        return DeliveryOutcome(source.name, delivery, "waiting")
    if lake.has_delivery(source.name, delivery.delivery_id, delivery.periods, connector.reader_version):
        if plan.moved.intersection(delivery.files):  # the same files, moved with the location
            lake.moved_files(source.name, delivery.delivery_id, delivery.files)
        return DeliveryOutcome(source.name, delivery, "unchanged")
    warnings: list[str] = []
    versions = _local_versions(connector, delivery)
    try:
        with lake.scratch() as scratch:
            relation = connector.read(delivery, con, scratch)
            try:
                staged = plan.regroup(delivery, stage_costs(
                    lake, con, relation, source=source.name, delivery_id=delivery.delivery_id,
                    periods=delivery.periods, files=delivery.files, strict=strict, warn=warnings.append,
                    final_when=connector.final_when, reader_version=connector.reader_version,
                    prints=row_copies.printed(connector, delivery, plan.versions)))
            except DataError as error:  # a connector may say where in its files (e.g. a CSV line)
                raise connector.locate(error, con) from None
            gone = plan.removed.get(delivery.delivery_id, {})
            staged = replace(staged, entries=[delivered(entry, connector, gone) for entry in staged.entries])
        changed = _changed_while_read(versions)
        if changed:
            discard_costs([staged])
            raise changed
    except OtherDataset as other:
        return _skipped(source, other)
    except (SpendlakeError, OSError, duckdb.Error, MemoryError) as exc:
        raise_if_stopped()  # at once: not the other deliveries, nor a survey of the files
        # a file rewritten under the read fails it in any way: say that, not what it broke
        error = _changed_while_read(versions) or _as_error(exc, files_named(delivery.files, source.location))
        return DeliveryOutcome(source.name, delivery, "failed", error=error)
    if copies := row_copies.of_staged(lake, con, connector, source.name, delivery, staged):
        discard_costs([staged])
        periods.remember_row_copies(lake, source.name, row_copies.records(connector, copies))
        return DeliveryOutcome(source.name, delivery, "copies")
    warnings += [plan.older[uri] for uri in delivery.files if uri in plan.older]
    replaces = {e.billing_period: old for e in staged.entries
                if (old := lake.ledger_entry(source.name, e.billing_period))}
    warnings += removed.shrinks(gone, staged.entries, replaces)
    return DeliveryOutcome(source.name, delivery, "staged", entries=staged.entries, warnings=warnings, staged=staged,
                           on_commit=lambda: plan.committed(lake, source.name, delivery), replaces=replaces)


def _local_versions(connector: CostConnector, delivery: Delivery) -> dict[str, str | None]:
    """The version of each local file of a delivery its id was made from (as listed), or, if
    the connector does not say, as the read starts. S3 downloads are checked by their size."""
    return {uri: connector.listed_version(uri) or local_version(uri) for uri in delivery.files
            if "://" not in uri and os.path.isabs(uri)}


def _changed_while_read(versions: dict[str, str | None]) -> SourceError | None:
    """A file replaced, rewritten or removed since it was listed (an export job still writing
    it, a copy over it): what was staged may mix its old and new rows, so the delivery fails
    and commits nothing; the next ingest lists the file again and reads it whole."""
    for uri, version in versions.items():
        now = local_version(uri)
        if now != version:
            return SourceError(f"{uri} {'changed' if now else 'was removed'} while it was read", where=uri,
                               hint=CHANGED_HINT)
    return None


def _as_error(exc: Exception, where: str) -> SpendlakeError:
    """A failure of one source or delivery as our one-line error (a read-only lake, a full
    disk, a DuckDB error no connector caught), so it is counted like any other."""
    if isinstance(exc, SpendlakeError):
        return exc
    if isinstance(exc, OSError):
        return os_error(exc, where)
    if isinstance(exc, MemoryError):  # Python's own allocations (a header, a manifest) under a memory limit
        return out_of_memory(exc, where, "free memory or raise the process's limit (ulimit -v), or have the "
                                         "source deliver smaller files")
    return duckdb_error(exc, "could not read the delivery", where=where)
