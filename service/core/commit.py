"""Writing a partition: stage under the lake's staging area, fsync, `os.replace` into place.

The only code that writes table files; `Lake.commit_costs`, ingest (`stage_costs` for each
delivery, then one `publish_costs` for the run) and `Lake.commit_snapshot` call it. A crash at any point leaves the previous file readable and nothing stray inside a
table (staging is outside every table directory). A cost commit announces its ledger
entries (pending) before it moves its files, so readers always find the entry that
describes the file they see (service/core/snapshot.py).

Every sum spendlake takes over a period's money fits the lake's DECIMAL(38,12): a period
whose Σ|value| of a money column (per currency) would not fit is refused at commit, naming
the period and the column, so no later query can overflow (any group's sum is at most that).
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Protocol

import duckdb

from service.core import derived_records
from service.core.duckdb_results import query_memory
from service.core.errors import DataError, duckdb_error, os_error
from service.core.files import DATA_FILE, check_partition_value, files_named, fsync_path, install
from service.core.integrity import sha256_file
from service.core.invoice_issuers import third_party_billed
from service.core.ledger import AccountTotals, CurrencyTotals, FinalWhen, LedgerEntry
from service.core.schema import COST_COLUMNS, MONEY
from service.core.snapshot_ledger import RECORD_FIELDS, forget_problems, read_record, recording
from service.core.snapshot_pins import keep, sweep
from service.core.staging import stage_parts, write_empty
from service.core.units import MONEY_DIGITS, utc_now_iso
from service.core.usage_end import (FUTURE_LINES, LATEST_END, USAGE_BEGINS, USAGE_END, USAGE_LINE, bound_at,
                                    through_at, usage_end_text)


class CommitTarget(Protocol):
    """What a commit needs of the lake (service/core/lake.py's Lake), so this module depends
    on these few operations and the lake on this module, not each on the other."""
    root: Path
    staging: Path

    def partition_file(self, table: str, partitions: Sequence[tuple[str, str]]) -> Path: ...
    def announce(self, new_entries: Sequence[LedgerEntry]) -> None: ...
    def settle(self) -> None: ...
    def record(self, new_entries: Sequence[LedgerEntry]) -> None: ...


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedCosts:
    """One delivery written under the lake's staging area, not yet in place (`publish_costs`)."""
    stage: Path
    entries: list[LedgerEntry]
    files: dict[str, Path]  # billing period → its staged partition file
    part_periods: tuple[frozenset[str], ...] = ()  # the periods each part held (staging.Staged)
    prints: tuple[tuple, ...] = ()  # each part's rows' cheap print, if asked (staging.Staged)


def commit_costs(lake: CommitTarget, con: duckdb.DuckDBPyConnection,
                 relation: duckdb.DuckDBPyRelation | Sequence[duckdb.DuckDBPyRelation], **delivery) -> list[LedgerEntry]:
    """Stage one delivery (`stage_costs`) and put it in place at once (`publish_costs`)."""
    staged = stage_costs(lake, con, relation, **delivery)
    publish_costs(lake, [staged])
    return staged.entries


def stage_costs(
    lake: CommitTarget,
    con: duckdb.DuckDBPyConnection,
    relation: duckdb.DuckDBPyRelation | Sequence[duckdb.DuckDBPyRelation],
    *,
    source: str,
    delivery_id: str,
    periods: Sequence[str] | None,
    files: Sequence[str] = (),
    strict: bool = False,
    warn: Callable[[str], None] = log.warning,
    final_when: FinalWhen = "any",
    reader_version: int = 0,
    prints: bool = False,
) -> StagedCosts:
    """Write one delivery (canonical cost columns) as the new content of its periods, staged.

    `periods`: the billing periods the delivery declares (from its manifest); rows in
    any other period are a data error. None: every period found in the data.
    `relation` may be the delivery's parts (one relation per file): they are written one
    after another, so memory does not grow with their number (service.core.staging).
    Line items the delivery repeats (hidden_columns.LINE_ITEM_KEY) are passed to `warn`, or with
    `strict` fail the delivery. `final_when`: see FinalWhen; `reader_version`: the
    connector's (recorded); `prints`: each file's rows' cheap print (service.core.row_prints).
    Nothing of the lake changes until `publish_costs`.
    """
    check_partition_value("source", source)
    stage = lake.staging / f"costs-{uuid.uuid4().hex}"
    try:
        stage.mkdir(parents=True)
        parts = [relation] if isinstance(relation, duckdb.DuckDBPyRelation) else list(relation)
        if not parts:
            raise DataError("the delivery has no data files", where=files_named(files, source))
        result = stage_parts(con, parts, stage, "cheap" if prints else "")
        staged = result.files
        if result.repeats is not None:
            if strict:
                raise DataError(str(result.repeats), where=files_named(files, source),
                                hint="re-export the period, or ingest without --strict to keep the rows as they are")
            warn(f"{files_named(files, source)}: {result.repeats}; the rows are kept and summed "
                 "(`spendlake ingest --strict` fails such a delivery)")
        if periods is not None:
            extra = set(staged) - set(periods)
            if extra:
                raise DataError(f"rows of billing period(s) {sorted(extra)} in a delivery for {sorted(periods)}",
                                where=files_named(files, source), hint="check the export's BillingPeriodStart")
            for period in set(periods) - set(staged):
                empty = stage / f"billing_period={period}" / DATA_FILE
                empty.parent.mkdir(parents=True)
                write_empty(con, empty)
                staged[period] = empty
        entries = [ledger_entry(con, staged[p], source, p, delivery_id, files,
                                {(currency, column): value for (period, currency, column), value
                                 in result.rounding.items() if period == p}, result.tag_keys.get(p, ()),
                                final_when, reader_version, warn)
                   for p in sorted(staged)]
        if said := third_party_billed(con, list(staged.values()), files_named(files, source)):
            warn(said)
        return StagedCosts(stage, entries, dict(staged), result.part_periods, result.prints)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)
        if isinstance(exc, DataError) and exc.where is None:  # a bad value the stager found (currency, period)
            exc.where = files_named(files, source)
        if isinstance(exc, duckdb.Error):
            raise duckdb_error(exc, "could not read the delivery", where=files_named(files, source)) from None
        if isinstance(exc, OSError):
            raise os_error(exc, str(lake.root)) from None
        raise


def publish_costs(lake: CommitTarget, staged: Sequence[StagedCosts]) -> None:
    """Put staged deliveries in place as one change (one announcement, one record): a reader
    sees all of them or none, so an ingest of several periods never shows some new periods
    beside others still old. A later delivery of the same period replaces an earlier one."""
    latest: dict[tuple[str, str], tuple[LedgerEntry, Path]] = {}
    for delivery in staged:
        for entry in delivery.entries:
            latest.pop(entry.key, None)
            latest[entry.key] = (entry, delivery.files[entry.billing_period])
    try:
        for _, path in latest.values():  # before the announcement: readers wait while files are being placed
            fsync_path(path)
        entries = [entry for entry, _ in latest.values()]
        lake.announce(entries)
        try:
            for entry, path in latest.values():
                install(path, lake.partition_file("costs", [("source", entry.source),
                                                            ("billing_period", entry.billing_period)]))
        except OSError:
            lake.settle()  # what was placed is recorded, the rest keeps its previous entry
            raise
        lake.record(entries)
    except OSError as exc:
        raise os_error(exc, str(lake.root)) from None
    finally:
        discard_costs(staged)


def discard_costs(staged: Sequence[StagedCosts]) -> None:
    """Remove staged deliveries that will not be published (placed ones are gone already)."""
    for delivery in staged:
        shutil.rmtree(delivery.stage, ignore_errors=True)


MONEY_COLUMNS = tuple(name for name, kind in COST_COLUMNS if kind == MONEY)


# One read of a staged file gives its ledger entry's figures per currency, and checks that
# Σ|value| of every money column fits (a sum that does not raises OutOfRangeException).
# Four reads did this, and a fifth the tag keys (the stager's now): 1.5 CPU s for a 10M-line
# file, 0.7 with this one and the stager's 0.1 (bench/README.md). Its second grouping set gives
# the day sums (ledger.DaySums: `whole` 0) in the same read, ~0.2 CPU s more at 10M lines.
# A correction (ChargeClass Correction: a refund of usage, FOCUS's and OCI's) is no usage of its day:
# counted there, a refund of an estimate's last days read as late usage (report/sections/restated.py).
DAY = (f"CASE WHEN {USAGE_LINE} AND ChargeClass IS DISTINCT FROM 'Correction' "
       "AND ChargePeriodEnd <= CAST(ChargePeriodStart AS DATE) + INTERVAL 1 DAY "
       "THEN CAST(ChargePeriodStart AS DATE) END")  # a date, not text: strftime cost 0.8 CPU s at 10M lines
# The second set is per billing account too (provider, BillingAccountId: ledger.AccountTotals), and the day
# sums and each account's are added up from its groups (the accounts a bill holds are few): a third grouping
# set, which sums every aggregate once more, took the read from 0.34 to 0.69 CPU s at 2M lines, this 0.36.
# And per sub-account (SubAccountId: the member accounts, subscriptions an account's lines carry, which
# service.core.bill_overlap compares), the groups a day's lines make per account.
ENTRY_FIGURES = (f"SELECT BillingCurrency, {DAY} AS day, GROUPING(day) AS whole, count(*), sum(BilledCost), "
                 "sum(EffectiveCost), bool_or(coalesce(trim(InvoiceId), '') <> ''), "
                 f"bool_and(coalesce(trim(InvoiceId), '') <> ''), {USAGE_END}, {USAGE_BEGINS}, "
                 f"{FUTURE_LINES}, {LATEST_END}, "
                 + ", ".join(f"sum(abs({column}))" for column in MONEY_COLUMNS)
                 + ", ProviderName, BillingAccountId, SubAccountId FROM read_parquet(?) GROUP BY GROUPING SETS "
                   "((BillingCurrency), (BillingCurrency, day, ProviderName, BillingAccountId, SubAccountId)) "
                   "ORDER BY whole DESC, BillingCurrency NULLS LAST, day, ProviderName NULLS LAST, BillingAccountId NULLS LAST")


def _plus(sums: list, billed: Decimal | None, effective: Decimal | None) -> None:
    """Adds a group's (billed, effective) to `sums` in place; a cost no group holds stays None."""
    with localcontext() as context:
        context.prec = MONEY_DIGITS  # every partial sum fits the lake's DECIMAL(38,12): Σ|value| did
        for i, value in enumerate((billed, effective)):
            if value is not None:
                sums[i] = value if sums[i] is None else sums[i] + value


def ledger_entry(con: duckdb.DuckDBPyConnection, path: Path, source: str, period: str, delivery_id: str,
                 files: Sequence[str], rounding: Mapping[tuple[str | None, str], Decimal] | None = None,
                 tag_keys: Sequence[str] = (), final_when: FinalWhen = "any", reader_version: int = 0,
                 warn: Callable[[str], None] | None = None) -> LedgerEntry:
    """The entry of a staged partition, or a DataError when a money sum of it would not fit
    the lake's type. `rounding`: (currency, cost column) → what the lake's 12 decimals rounded
    away from the delivery's values (staging.Staged.rounding); `tag_keys`: the distinct keys of
    its Tags maps, sorted, as the stager saw them (staging.Staged.tag_keys); `final_when`: which
    lines of each currency must carry an invoice id for the period to be final (FinalWhen); `warn`
    is told of usage lines ending over a day after the commit or their billing period (their end
    bounded: service/core/usage_end.py)."""
    ingested_at = utc_now_iso()
    try:
        found = con.execute(ENTRY_FIGURES, [bound_at(ingested_at), str(path)]).fetchall()
    except duckdb.OutOfRangeException:
        raise sum_overflow(con, path, period, files_named(files, source)) from None
    rounding = rounding or {}
    rows = [row[:1] + row[3:] for row in found if row[2]]  # per currency (the first grouping set)
    days: dict[str | None, dict[str, list]] = {cur: {} for cur, *_ in rows}
    accounts: dict[tuple, list] = {}
    subs: dict[tuple, set[str]] = {}
    for cur, day, whole, _, billed, effective, *_, provider, account, sub in found:
        if not whole:
            _plus(accounts.setdefault((provider, account, cur), [None, None]), billed, effective)
            subs.setdefault((provider, account, cur), set()).update([sub] if sub is not None else [])
            if day is not None:
                _plus(days[cur].setdefault(day.isoformat(), [None, None]), billed, effective)
    totals = tuple(CurrencyTotals(cur, int(n), billed, effective,
                                  tuple(sorted((column, value) for (currency, column), value in rounding.items()
                                               if currency == cur)))
                   for cur, n, billed, effective, *_ in rows)
    final = bool(rows) and final_when != "never" and all(row[4 if final_when == "any" else 5] for row in rows)
    usage_ends = [row[6] for row in rows if row[6] is not None]
    usage_begins = [row[7] for row in rows if row[7] is not None]
    ahead, latest = sum(row[8] for row in rows), max((row[9] for row in rows if row[9] is not None), default=None)
    if ahead and warn:
        warn(f"{files_named(files, source)}: {ahead} usage line(s) of billing period {period} end over a day "
             f"after their billing period or after now (the latest {usage_end_text(latest)}); the data's end is "
             f"taken as {through_at(max(usage_ends), ingested_at)}, the lines kept as they are: check the export's "
             "ChargePeriodEnd")
    stat = path.stat()  # a rename into place keeps both
    return LedgerEntry(source=source, billing_period=period, delivery_id=delivery_id,
                       rows=sum(t.rows for t in totals), totals=totals, final=final,
                       ingested_at=ingested_at, files=tuple(files), size=stat.st_size, mtime_ns=stat.st_mtime_ns,
                       sha256=sha256_file(path),
                       data_through=through_at(max(usage_ends), ingested_at) if usage_ends else None,
                       tag_keys=tuple(tag_keys), reader_version=reader_version,
                       days=tuple((cur, tuple((day, *sums) for day, sums in by_day.items())) for cur, by_day in days.items()),
                       data_from=usage_end_text(min(usage_begins)) if usage_begins else None,
                       accounts=tuple(AccountTotals(*key, *sums, tuple(sorted(subs[key]))) for key, sums in sorted(
                           accounts.items(), key=lambda item: tuple(k or "" for k in item[0]))))


def with_day_sums(con: duckdb.DuckDBPyConnection, entry: LedgerEntry, path: Path) -> LedgerEntry:
    """`entry`, written before the ledger kept day sums (or summed them as an earlier DAYS_VERSION did),
    with those of its partition file at `path` (and its data_from) when that file still holds its
    totals: the delivery replacing it is then compared with it day by day, summed alike
    (report/sections/restated.py), a restatement of the days both hold told rather than read as the
    month growing. Else `entry` as it is."""
    try:
        found = ledger_entry(con, path, entry.source, entry.billing_period, entry.delivery_id, entry.files)
    except (duckdb.Error, DataError, OSError) as exc:
        log.info("%s %s: its day sums could not be read: %s", entry.source, entry.billing_period, exc)
        return entry
    if {(t.currency, t.rows, t.billed_cost, t.effective_cost) for t in found.totals} != {
            (t.currency, t.rows, t.billed_cost, t.effective_cost) for t in entry.totals}:
        return entry
    return replace(entry, days=found.days, data_from=found.data_from, days_version=found.days_version)


def sum_overflow(con: duckdb.DuckDBPyConnection, path: Path, period: str, where: str) -> DataError:
    """The error naming the period, column and currency whose Σ|value| overflows MONEY."""
    currencies = [row[0] for row in con.execute("SELECT DISTINCT BillingCurrency FROM read_parquet(?) ORDER BY 1",
                                                [str(path)]).fetchall()]
    for column in MONEY_COLUMNS:
        for currency in currencies:
            if not _fits(con, f"SELECT sum(abs({column})) FROM read_parquet(?) "
                              "WHERE BillingCurrency IS NOT DISTINCT FROM ?", [str(path), currency]):
                return DataError(
                    f"billing period {period}: the sum of {column} in {currency} does not fit the lake's {MONEY} "
                    "(at most 26 digits before the decimal point); nothing of this delivery was committed",
                    where=where, hint=f"check the export's {column} values: costs this large are almost "
                                      "surely a unit or parsing error")
    return DataError(f"billing period {period}: a money sum does not fit the lake's {MONEY}", where=where)


def _fits(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> bool:
    try:
        con.execute(sql, params).fetchall()
    except duckdb.OutOfRangeException:
        return False
    return True


def unchanged(lake: CommitTarget, staged: Path, target: Path, facts: dict | None) -> bool:
    """Whether the staged snapshot is the one in place (`in_place`: a snapshot's rows are sorted,
    so the same inventory gives the same file). Storing it again would change nothing but its
    record's time, and an hourly inventory of unchanged files rewrote every partition (746,322 GPU
    rows)."""
    return in_place(lake, target, sha256_file(staged), facts)


def in_place(lake: CommitTarget, target: Path, digest: str, facts: dict | None) -> bool:
    """Whether the snapshot `target` holds the bytes of SHA-256 `digest` and records `facts`, its
    record matching the file. What the last verify found of it is dropped, as a write does: its
    bytes are its record's."""
    record = read_record(lake.root, target)
    kept = {key: value for key, value in (record or {}).items() if key not in (*RECORD_FIELDS, "mtime_ns",
                                                                               "written_at", "previous")}
    # a record stamped ahead of this clock (a clock that ran ahead wrote it) is written again, stamped now
    if not record or kept != (facts or {}) or not target.is_file() or str(record.get("written_at")) > utc_now_iso():
        return False
    if record.get("sha256") != digest or sha256_file(target) != digest:
        return False
    forget_problems(lake, {str(target.parent.relative_to(lake.root))})
    return True


def commit_snapshot(lake: CommitTarget, con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, *,
                    table: str, source: str, key: str, value: str, version: str | None = None,
                    facts: dict | None = None) -> Path:
    """Replace one inventory snapshot partition (e.g. resource_tags by snapshot_date), its
    record holding `facts` too (a window job source's times: service/core/job_windows.py).
    Derived tables (attribution rollups, metric tops) pass `version`: the file is
    `<version>.parquet`, invisible to the table views and recorded (derived_records); the
    partition's other versions stay (readers may hold them) until the caller drops them
    with `derived_records.drop_versions`."""
    target = lake.partition_file(table, [("source", source), (key, value)])
    if version is not None:
        target = target.with_name(f"{check_partition_value('version', version)}.parquet")
    staged = lake.staging / f"{table}-{uuid.uuid4().hex}.parquet"
    try:
        lake.staging.mkdir(parents=True, exist_ok=True)
        relation.write_parquet(str(staged), compression="zstd")  # the path is passed, never pasted into SQL
        peak, spilled = query_memory(con)
        log.debug("staged %s %s=%s: DuckDB peak memory %d MB, spilled %d MB", table, key, value, peak >> 20,
                  spilled >> 20, extra={"peak_bytes": peak, "spilled_bytes": spilled})
        if version is None and unchanged(lake, staged, target, facts):
            return target
        # recorded, as every read checks it: a snapshot (or one of the lake's own tables), or a derived file
        if version is None:
            record = recording(lake, staged, target, facts)
        else:
            record = derived_records.recording(lake, con, staged, target)
        with record as written:
            if version is None:  # readers holding the file it replaces read it on (snapshot_pins)
                keep(staged, target, written["sha256"])
            install(staged, target)
        if version is None:
            sweep(target.parent.parent)
        return target
    except duckdb.Error as exc:
        raise duckdb_error(exc, f"could not write {table}", where=str(staged)) from None
    except OSError as exc:
        raise os_error(exc, str(lake.root)) from None
    finally:
        try:
            staged.unlink(missing_ok=True)
        except OSError as exc:  # a read-only lake: the error above says what happened, the next run cleans staging
            log.debug("could not remove %s: %s", staged, exc)
