"""Inventory: for each configured inventory source, read what exists and commit it.

Each source's tables are committed with `Lake.commit_snapshot` into the partition
`source=<name>/snapshot_date=<UTC date of the run>` (re-running the same day replaces that
day's snapshot, a jobs one keeping the jobs only the earlier held; a later-dated snapshot of
the source, taken by a clock that ran ahead, is replaced instead, job history aside:
`_snapshot_day`), or for gpu_utilization
`source=<name>/day=<UTC day>` per day of data.
A failing source fails alone; its previous snapshots stay. Runs under the same lake lock
as billing ingest, and records success and failure in the same per-source state.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

from connectors.inventory_base import InventoryConnector, SnapshotPart
from service.attribution import newly_ended, newly_unasked
from service.core.claims import claim, refused
from service.core.config import Config, InventorySource
from service.core.coverage import STATE_KEY, parse_utc
from service.core.errors import LakeBusyError, SpendlakeError, duckdb_error, out_of_memory
from service.core.job_windows import kept_earlier, window_fields, window_stamp
from service.core.lake import DATA_FILE, Lake
from service.core.registry import CONNECTORS
from service.core.schema import INVENTORY_PARTITION, INVENTORY_TABLES
from service.core.snapshot_ledger import SET_ASIDE, check_snapshot, read_record, sound
from service.core.snapshot_set_aside import set_aside_damaged
from service.core.stopping import raise_if_stopped
from service.core.timewindow import day_text, iso_utc
from service.core.units import aware_utc
from service.ingest import inventory_inputs
from service.ingest.freshness import record_refused, record_run, record_sources
from service.ingest.jobs_ahead import hold_ended, jobs_ahead, set_aside_ahead, with_ended, written_after
from service.ingest.rollups import refresh_rollups
from service.ingest.unlabelled_pods import say_unlabelled_pods

log = logging.getLogger(__name__)

# A jobs-file record id before 2026-12-03: `<cluster>/<job_id>#<n>`, n an attempt's rank among
# the files read that day (now `<cluster>/<job_id>@<start>`, stable whatever files are read).
OLD_JOBS_FILE_ID = r"#[0-9]+$"
OLD_JOBS_FILE_IDS_UNTIL = "2026-12-03"  # the last snapshot date that can hold them: later ones are not read


@dataclass
class InventoryOutcome:
    source: str
    kind: str
    rows: dict[str, int] = field(default_factory=dict)  # "table key=value" → rows committed
    error: SpendlakeError | None = None
    data_through: datetime | None = None  # how far what was committed reaches (service.core.coverage)
    unlabelled_pods: int | None = None  # k8s-pods: the GPU pods committed when none carries a label, else 0
    skipped: dict[str, str] = field(default_factory=dict)  # a file or folder the snapshot did not read → why
    unchanged: dict[str, int] = field(default_factory=dict)  # as `rows`: the same as stored before, not stored again

    @property
    def failed(self) -> bool:
        return self.error is not None

    def lines(self) -> list[str]:
        """What it did not read, what it stored (also before a failure: those snapshots are in the
        lake), then its failure."""
        skipped = [f"{self.source} {path}: skipped, {why}" for path, why in sorted(self.skipped.items())]
        failed = [f"{self.source} ({self.kind}): FAILED: {self.error}"] if self.error else []
        if not self.rows and not self.unchanged:
            return skipped + (failed or [f"{self.source} ({self.kind}): nothing to store"])
        lines = []
        for parts, said in ((self.rows, "rows stored"), (self.unchanged, "rows unchanged, not stored again")):
            tables: dict[str, list[tuple[str, int]]] = {}
            for part, n in parts.items():
                table, partition = part.split(" ", 1)
                tables.setdefault(table, []).append((partition, n))
            for table, found in tables.items():
                where = found[0][0] if len(found) == 1 else f"{len(found)} partitions {found[0][0]} .. {found[-1][0]}"
                lines.append(f"{self.source} ({self.kind}) {table} {where}: {sum(n for _, n in found):,} {said}")
        return skipped + lines + failed


def run_inventory(config: Config, *, only: Sequence[str] = (), now: datetime | None = None,
                  warn: Callable[[str], None] | None = None, rollups: bool = True) -> list[InventoryOutcome]:
    """Snapshot the configured inventory sources (or those named in `only`) into the lake. `warn`
    is given the rollup build's warnings (a damaged state file read as none; the CLI prints them
    as `warning:`); None: they are logged. `rollups=False`: the caller refreshes them (serve's
    job: once after the bills and the inventory)."""
    sources = [config.inventory_source(name) for name in only] if only else list(config.inventory)
    now = aware_utc(now) if now else datetime.now(timezone.utc)  # a naive `now` is UTC, as the lake's times
    lake = Lake.of(config)
    with lake.lock("ingest"):
        claimed = refused(lake, sources)  # another config's snapshots under the same name stay (core/claims.py)
        lake.clean_staging()
        outcomes = [InventoryOutcome(source.name, source.kind, error=claimed[source.name])  # type: ignore[attr-defined]
                    if source.name in claimed else _snapshot_source(lake, source, now) for source in sources]
        if error := record_refused(lake, claimed):  # its failures, for this config alone (said above: FAILED)
            warn(str(error)) if warn else log.warning("%s", error)
        if rollups and any(part.startswith(("resource_tags ", "jobs ")) for o in outcomes for part in o.rows):
            for warning in refresh_rollups(lake, config):  # attribution reads the latest tags, and jobs with `clusters:`
                warn(warning) if warn else log.warning("%s", warning)
        return outcomes


def _snapshot_source(lake: Lake, source: InventorySource, now: datetime) -> InventoryOutcome:
    kind = source.kind  # type: ignore[attr-defined]
    outcome = InventoryOutcome(source.name, kind)
    try:
        connector = CONNECTORS.get(kind)(source)
        outcome.skipped = getattr(connector, "passed_over", {})  # filled as the snapshot reads, told if it fails
        day = _snapshot_day(lake, source.name, now)
        ahead = jobs_ahead(lake, source.name, now, _wall())
        con = lake.writer(connector.local_paths())
        found = inventory_inputs.inputs(connector, source)
        last = found.last_read(lake, day, connector.feeds.partition_key == "snapshot_date") if found else None
        try:
            # a window source's ended jobs only the snapshots a clock ahead wrote hold, kept in this one (jobs_ahead.py)
            held = hold_ended(con, ahead) if _window(source, "jobs", now) else None
            if last:  # the files its last read read, whose partitions are in place: not read again
                log.debug("inventory source %s: its files are those its last snapshot read: not read again", source.name)
                outcome.unchanged, outcome.skipped, outcome.data_through = last.counts, last.skipped, last.data_through
                files = last.files
            else:
                with inventory_inputs.warnings_said() as said:
                    files = _read_and_commit(lake, con, connector, source, outcome, day, now, held)
                if found and not said:  # a warning is said again by the next run, which reads
                    found.remember(lake, day, files, outcome.rows | outcome.unchanged, outcome.skipped,
                                   outcome.data_through)
            set_aside_ahead(lake, source.name, ahead, now)  # once read: a failed read loses nothing of them
            written = set(files.values())
            _set_aside_damaged(lake, source.name, written)
            if kind == "jobs-file" and any(part.startswith("jobs ") for part in [*outcome.rows, *outcome.unchanged]):
                _warn_old_record_ids(lake, con, source.name)
            if any(part.startswith("jobs ") for part in outcome.rows):
                _warn_ended(lake, con, source.name, day, windowed=_window(source, "jobs", now) is not None)
            if kind == "k8s-pods" and written:
                [(pods, labelled)] = con.execute("SELECT count(*), count(labels) FROM read_parquet(?)",
                                                 [[str(path) for path in written]]).fetchall()
                outcome.unlabelled_pods = 0 if labelled else pods
            if connector.feeds.partition_key == "snapshot_date":  # an empty snapshot is data too
                outcome.data_through = now
        finally:
            con.close()
    except LakeBusyError:
        raise
    except SpendlakeError as exc:  # the outcome's FAILED line says it (serve: its job's failure)
        outcome.error = exc
    except (MemoryError, duckdb.OutOfMemoryException) as exc:  # this source's failure: the others still run
        outcome.error = out_of_memory(exc, source.config_path, "free memory or raise the limit, or have the source "
                                                               "read in smaller files")
    raise_if_stopped()  # a source failed by the stop (DuckDB's "interrupted") is no failure; no other runs
    try:
        _record(lake, source, outcome)
    except SpendlakeError as exc:  # a full disk: its own failure, else this one, beside what it stored
        outcome.error = outcome.error or exc
    return outcome


def _read_and_commit(lake: Lake, con: duckdb.DuckDBPyConnection, connector: InventoryConnector,
                     source: InventorySource, outcome: InventoryOutcome, day: str, now: datetime,
                     held: str | None = None) -> dict[str, Path]:
    """Read the source and commit each of its partitions (`outcome`'s rows, or unchanged); each
    part → its file. `held`: hold_ended's table, whose records a jobs snapshot keeps."""
    written: dict[str, Path] = {}
    with lake.scratch() as scratch:
        for (table, value), relation in _combined(connector.snapshot(con, scratch, now), day).items():
            key = INVENTORY_PARTITION[table]
            facts = _window(source, table, now)
            if table == "jobs":
                relation, facts = _with_earlier(lake, con, relation, source.name, value, facts, now)
                relation = with_ended(con, relation, source.name, held)
            relation = relation.order(", ".join(_sort_key(table)))
            before = read_record(lake.root, lake.partition_file(table, [("source", source.name), (key, value)]))
            try:
                path = lake.commit_snapshot(con, relation, table=table, source=source.name,
                                            key=key, value=value, facts=facts)
                reaches = _data_through(con, table, path, now)
            except duckdb.Error as exc:
                raise duckdb_error(exc, f"could not write {table}", where=source.config_path,
                                   hint="check the source's data against the table's columns") from None
            # the same bytes as the snapshot in place are not stored again (commit.unchanged); its rows are
            # those its record holds, from the file's footer
            record = read_record(lake.root, path)
            stored = outcome.rows if record != before else outcome.unchanged
            stored[f"{table} {key}={value}"] = int(record["rows"])
            if reaches and (outcome.data_through is None or reaches > outcome.data_through):
                outcome.data_through = reaches
            written[f"{table} {key}={value}"] = path
    return written


def _snapshot_day(lake: Lake, source: str, now: datetime) -> str:
    """The date this run files the source's snapshots under: its UTC date, or the date of the
    source's newest snapshot when that is later (taken by a clock that ran ahead). Readers take
    a source's newest snapshot as its state, so the one read last must be it, not hide behind
    a stale one until the calendar reaches that date. Said as a warning by the run that replaces
    what the clock ahead wrote; the runs after it, filing there until the calendar gets there,
    log it."""
    today = now.strftime("%Y-%m-%d")
    # Job records are history, not a state: each day's snapshot stays (replacing one would drop
    # the jobs only it held); a later-dated one only ends the earlier ones' running records.
    files = [folder / DATA_FILE for table, key in INVENTORY_PARTITION.items() if key == "snapshot_date"
             and table != "jobs"
             for folder in lake.table_dir(table).glob(f"source={source}/snapshot_date=*")
             if re.fullmatch(r"snapshot_date=\d{4}-\d{2}-\d{2}", folder.name) and (folder / DATA_FILE).is_file()]
    newest = max((file.parent.name.split("=", 1)[1] for file in files), default=today)
    if newest <= today:
        return today
    wall = _wall()
    ahead = any(written_after(lake, file, wall) is not False for file in files if file.parent.name.endswith(newest))
    (log.warning if ahead else log.info)(
        "inventory source %s: its newest snapshot is dated %s, after this run's date %s (UTC; the clock that took it "
        "ran ahead): this run's snapshot replaces it, so the source's state is the one read last",
        source, newest, today)
    return newest


def _wall() -> datetime:
    """The wall clock, which stamps the records' written_at: what a run's stamps are judged by."""
    return datetime.now(timezone.utc)


def _set_aside_damaged(lake: Lake, source: str, written: set[Path]) -> None:
    """The source's snapshots that no longer match their record and that this run did not
    write again (an earlier day's): set aside, so reads go on with the whole ones."""
    for check in set_aside_damaged(lake, source, written):
        log.warning("inventory source %s: %s; it cannot be taken again (the source holds today's state), so it was "
                    "moved under %s", source, check.sentence(), lake.root / SET_ASIDE / check.key)


def _warn_old_record_ids(lake: Lake, con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Readers keep each job record's newest snapshot by its id (every snapshot is history), so a
    job in a snapshot written with the old jobs-file ids and in a new one counts twice: say so,
    with the way out (a lake written before the ids changed)."""
    files = [str(f) for f in sorted(lake.table_dir("jobs").glob(f"source={source}/snapshot_date=*/{DATA_FILE}"))
             if f.parent.name.split("=", 1)[1] <= OLD_JOBS_FILE_IDS_UNTIL]
    if not files:
        return
    [(old,)] = con.execute("SELECT count(*) FROM read_parquet(?) WHERE regexp_matches(record_id, ?)",
                           [files, OLD_JOBS_FILE_ID]).fetchall()
    if old:
        log.warning("inventory source %s: %d job record(s) in its earlier snapshots carry the record ids of an older "
                    "spendlake (<cluster>/<job_id>#<n>): jobs listed in those and in newer snapshots count twice; "
                    "rename the source in the config (the old name's snapshots then count nowhere; `spendlake forget "
                    "%s --yes` removes them) and run `spendlake inventory` to take the jobs again from the files "
                    "(jobs whose files are gone are then gone too)", source, old, source)


def _window(source: InventorySource, table: str, now: datetime) -> dict[str, str] | None:
    """The times a window job source's snapshot records (slurm-jobs reading slurmrestd, k8s-pods:
    the jobs active in the last lookback_hours), and the fingerprint of what it asked
    (service/core/job_windows.py); None for others."""
    window = table == "jobs" and (source.kind == "k8s-pods" or  # type: ignore[attr-defined]
                                  (source.kind == "slurm-jobs" and source.url))  # type: ignore[attr-defined]
    return (window_fields(now, source.lookback_hours, source.question())  # type: ignore[attr-defined]
            if window else None)


def _with_earlier(lake: Lake, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, source: str,
                  day: str, facts: dict[str, str] | None,
                  now: datetime) -> tuple[duckdb.DuckDBPyRelation, dict[str, str] | None]:
    """A job snapshot (`facts`: its window, None for files read) and the jobs only the day's
    earlier one held (job_windows.kept_earlier): a rolling `sacct -S now-1h` read hourly, a window
    shorter than the time since, or an export moved out once read lose none; that one whole by its
    record and the last verify, else replaced as before (a damaged one repaired). The running ones
    it ends are said here: the ended-jobs warning looks at earlier days' snapshots."""
    earlier = lake.partition_file("jobs", [("source", source), ("snapshot_date", day)])
    if not earlier.is_file():
        return relation, facts
    [check] = sound(lake, [check_snapshot(lake, earlier)])
    if not check.ok:
        return relation, facts
    kept = kept_earlier(con, relation, str(earlier), check.record, facts, now)  # the record it was judged by
    if kept.held:  # the outcome's rows count them: say where those beyond the read came from
        log.info("inventory source %s: kept %d job record(s) only the day's earlier snapshot held", source, kept.held)
    if kept.ended:
        log.warning("inventory source %s: %d job record(s) running when the day's earlier snapshot was taken are not in "
                    "this one, which replaces it (first: %s, last seen %s UTC): kept, each taken to have ended when "
                    "last seen, its GPUs idle since (the job ended in between, or the source no longer lists it; a "
                    "newer snapshot holding it again runs it on)", source, kept.ended, kept.first, kept.seen)
    return kept.relation, kept.facts


def _warn_ended(lake: Lake, con: duckdb.DuckDBPyConnection, source: str, day: str, *, windowed: bool) -> None:
    """Job records this snapshot ends (running when an earlier one was taken, absent from it,
    asking the same or otherwise: its source's settings changed): said once, by the run that
    ends them. A snapshot of files (not `windowed`) ends only a window's: looked for when the
    source had one. Read on the run's own connection through the job views alone: a query
    connection would check every cost partition and inventory table first."""
    if not windowed and not any(window_stamp(read_record(lake.root, folder / DATA_FILE)) for folder in
                                lake.table_dir("jobs").glob(f"source={source}/snapshot_date=*")
                                if folder.name < f"snapshot_date={day}"):
        return
    try:
        lake.table_views(con, ("jobs",))
        ended, first, seen = newly_ended(con, source, day)
        unasked, first_unasked, seen_unasked = newly_unasked(con, source, day)
    except SpendlakeError as exc:  # another source's damaged snapshot: the reads name it; this one is stored
        log.warning("inventory source %s: could not count the job records its snapshot ends: %s", source, exc)
        return
    if ended:
        log.warning("inventory source %s: %d job record(s) running when an earlier snapshot was taken are not in this "
                    "one (first: %s, last seen %s UTC): each is taken to have ended when last seen, its GPUs idle since "
                    "(a newer snapshot holding it again runs it on%s)", source, ended, first, seen,
                    "" if windowed else f"; sacct files holding it give its end: sacct -S {day_text(seen)}")
    if unasked:
        log.warning("inventory source %s: %d job record(s) running when an earlier snapshot was taken are not in this "
                    "one, which asked otherwise (the source's settings that choose the jobs changed; first: %s, last "
                    "seen %s UTC): no read asks about them any more, so each is taken to have ended when last seen, "
                    "its GPUs idle since; restore those settings if they were changed by mistake",
                    source, unasked, first_unasked, seen_unasked)


def _sort_key(table: str) -> tuple[str, ...]:
    """The columns a snapshot is sorted on, so the same inventory gives byte-identical files:
    job records on their id alone (unique in a snapshot; sorting a million of them on every
    column took half a GB), the other tables on every column."""
    if table == "jobs":
        return ("record_id",)
    return tuple(name for name, _ in INVENTORY_TABLES[table])


def _data_through(con: duckdb.DuckDBPyConnection, table: str, path: Path, now: datetime) -> datetime | None:
    """A snapshot holds data through the time it was taken; a time series (GPU utilisation,
    hourly) through the end of its latest hour, read from the partition's file as committed (one
    day's hours), not from the part's relation: a filter over the whole read, scanned again for
    each of its days."""
    if INVENTORY_PARTITION[table] == "snapshot_date":
        return now
    latest = con.execute("SELECT max(hour) FROM read_parquet(?)", [str(path)]).fetchall()[0][0]
    return None if latest is None else latest.replace(tzinfo=timezone.utc) + timedelta(hours=1)


def _combined(parts: list[SnapshotPart], day: str) -> dict[tuple[str, str], duckdb.DuckDBPyRelation]:
    """One relation per (table, partition): several files of a source make one snapshot."""
    combined: dict[tuple[str, str], duckdb.DuckDBPyRelation] = {}
    for part in parts:
        target = (part.table, part.partition or day)
        combined[target] = combined[target].union(part.relation) if target in combined else part.relation
    return combined


def _record(lake: Lake, source: InventorySource, outcome: InventoryOutcome) -> None:
    state = lake.read_state("sources")
    record = state.setdefault(outcome.source, {"failures_total": 0})
    claim(lake, record, source)  # another config on this lake leaves the source alone (service/core/claims.py)
    record_run(record, outcome.error)
    if outcome.data_through is not None:
        known = record.get(STATE_KEY)
        if not known or parse_utc(known) < outcome.data_through:
            record[STATE_KEY] = iso_utc(outcome.data_through)
    if outcome.unlabelled_pods is not None:
        say_unlabelled_pods(outcome.source, outcome.unlabelled_pods, record)
    record_sources(lake, state, outcome.source, bool(outcome.rows))
