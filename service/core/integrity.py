"""Partitions checked against the ledger: a missing, truncated or altered file is an error,
never a smaller total.

Two depths. The quick check (every read) compares the file's size and its Parquet footer's
row count with what the ledger recorded at commit; it costs one `stat` and one footer read
per partition (service/core/parquet_footer.py), and keeps the footer's column names for the
query's view; a file whose modification time is not the one recorded at commit (written
since: bytes flipped in place keep size and footer) is re-hashed as well (DuckDB's reads:
Spark's check size and footer rows). The deep check (`spendlake verify`) also re-hashes the
file (SHA-256), re-sums its rows per currency and reads its tag keys and usage end again
against the entry's. Entries written before the ledger kept sizes and hashes are checked by
existence and row count only, until the next commit records the rest.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

import duckdb

from service.core.errors import DataError
from service.core.lake_file_errors import damaged_lake_file, refuse_links
from service.core.ledger import LedgerEntry
from service.core.parquet_footer import MAGIC, TAIL, Footer, read_footer
from service.core.usage_end import LATEST_END, USAGE_END, through_at, usage_end_text

CHUNK = 1 << 20
SHA256_DIFFERS = "its SHA-256 differs from the one recorded at commit"


@dataclass(frozen=True)
class PartitionCheck:
    """What a cost partition looks like next to its ledger entry."""

    source: str
    period: str
    path: Path
    state: str  # ok | missing | truncated | altered | unlisted
    detail: str = ""
    entry: LedgerEntry | None = None
    columns: tuple[str, ...] = ()  # the file's columns, read by the quick check (empty before)

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def sentence(self) -> str:
        what = f"cost partition source={self.source}/billing_period={self.period}"
        return f"{what} is {self.state}" + (f" ({self.detail})" if self.detail else "")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# Digests the quick checks took, per (path, inode, size, mtime, ctime), in this process: a command
# checks the same files many times (a report: one re-hashed partition 28 times, break46), and a
# file written since its record is then hashed once. The deep check (verify) always reads the bytes.
_DIGESTS: dict[tuple, str] = {}
_DIGESTS_LOCK = threading.Lock()
_DIGESTS_KEPT = 4096
PARTITION_LEVELS = 3  # <root>/costs/source=S/billing_period=P/data.parquet


def known_sha256(path: Path, stat: os.stat_result | None = None) -> str:
    """sha256_file(path), read once per state of the file (`stat`, default taken now)."""
    stat = stat or path.stat()
    key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    with _DIGESTS_LOCK:
        digest = _DIGESTS.get(key)
    if digest is None:
        digest = sha256_file(path)
        with _DIGESTS_LOCK:
            if len(_DIGESTS) >= _DIGESTS_KEPT:
                _DIGESTS.clear()
            _DIGESTS[key] = digest
    return digest


def quick_check(path: Path, entry: LedgerEntry, *, rehash: bool = True) -> PartitionCheck:
    """Size and footer row count against the ledger entry (an ok check carries the columns);
    with `rehash`, a file written since its commit (its modification time is not the entry's)
    is hashed too: bytes flipped in place keep the size and the footer (the deep check hashes
    every file anyway). A copy that keeps times (`cp -a`, rsync -a, tar) is not re-hashed.
    A folder of the partition linked out of the lake is an error naming the link: DuckDB
    cannot read it there, and the file is not damaged (service/core/lake_file_errors.py)."""
    refuse_links(path.parents[PARTITION_LEVELS], path.parent)
    read: dict[str, Footer | None] = {}

    def rows() -> int | None:
        read["footer"] = read_footer(path)
        return getattr(read["footer"], "rows", None)

    try:
        stat: os.stat_result | None = path.stat()
    except FileNotFoundError:
        stat = None
    state, detail = judge(entry, None if stat is None else stat.st_size, rows)
    if (state == "ok" and rehash and entry.sha256 is not None and written_since(stat, entry.mtime_ns)
            and known_sha256(path, stat) != entry.sha256):
        state, detail = "altered", f"{SHA256_DIFFERS}; the file was written after its commit"
    columns = read["footer"].columns if state == "ok" else ()
    return PartitionCheck(entry.source, entry.billing_period, path, state, detail, entry, columns)


def written_since(stat: os.stat_result | None, recorded_mtime_ns: object) -> bool:
    """Whether a file's modification time is not the one recorded when it was written (a cost
    partition's ledger entry, a snapshot's record); False when none was recorded."""
    return stat is not None and isinstance(recorded_mtime_ns, int) and stat.st_mtime_ns != recorded_mtime_ns


def judge(entry: LedgerEntry, size: int | None, rows: Callable[[], int | None]) -> tuple[str, str]:
    """(state, detail) of a partition file of `size` bytes (None: absent) against its ledger
    entry, its footer's `rows()` (None: no readable footer) read once the size matches; the
    DuckDB and the Spark reads judge alike."""
    if size is None:
        return "missing", f"the ledger holds {entry.rows:,} rows"
    if entry.size is not None and size != entry.size:
        return size_differs(size, rows, entry.size, entry.rows, "the ledger")
    count = rows()
    if count is None:
        return "truncated", "no readable Parquet footer"
    if count != entry.rows:
        return "altered", f"{count:,} rows, the ledger says {entry.rows:,}"
    return "ok", ""


def size_differs(size: int, rows: Callable[[], int | None], size_was: int, rows_were: int,
                 by: str) -> tuple[str, str]:
    """(state, detail) of a file of `size` bytes where `by` ("the ledger", "the record") says
    `size_was`: truncated only when shorter without a readable Parquet footer (a file cut short
    loses the footer that ends it); a shorter one that reads is another file written in its
    place, altered like a longer one. One too short to hold a footer is not opened (a FIFO or
    /dev/zero in its place reads 0 bytes, and opening or reading it would not end)."""
    detail = f"{size:,} bytes, {by} says {size_was:,}"
    count = rows() if len(MAGIC) + TAIL <= size < size_was else None
    if size < size_was and count is None:
        return "truncated", f"{detail}, and no readable Parquet footer: cut short"
    return "altered", detail if count is None else (
        f"{detail}, and a readable Parquet file of {count:,} rows where {by} says {rows_were:,}: "
        "changed since it was recorded, not cut short")


def deep_check(con: duckdb.DuckDBPyConnection, path: Path, entry: LedgerEntry) -> PartitionCheck:
    """The quick check, then the content hash and the per-currency sums."""
    quick = quick_check(path, entry, rehash=False)
    if not quick.ok:
        return quick

    def altered(detail: str) -> PartitionCheck:
        return PartitionCheck(entry.source, entry.billing_period, path, "altered", detail, entry)

    if entry.sha256 is not None and sha256_file(path) != entry.sha256:
        return altered(SHA256_DIFFERS)
    try:
        found = {currency: (int(rows), billed, effective) for currency, rows, billed, effective in con.execute(
            "SELECT BillingCurrency, count(*), sum(BilledCost), sum(EffectiveCost) FROM read_parquet(?) GROUP BY 1",
            [str(path)]).fetchall()}
    except duckdb.Error as exc:
        return altered(f"unreadable: {str(exc).splitlines()[0]}")
    expected = {t.currency: (t.rows, t.billed_cost, t.effective_cost) for t in entry.totals}
    if found != expected:
        return altered("its rows or sums per currency differ from the ledger's: " + _difference(expected, found))
    facts = _facts_differ(con, path, entry)
    return altered(facts) if facts else quick


def _facts_differ(con: duckdb.DuckDBPyConnection, path: Path, entry: LedgerEntry) -> str:
    """What the entry records of the file beyond its sums that the file does not bear out: its
    tag keys (attribution reads them instead of the lines' Tags, so a wrong list moves cost
    silently) and its data_through (freshness and the report's default day). An entry from
    before either was recorded is not judged on it."""
    problems = []
    if entry.tag_keys is not None:
        keys = {key for (key,) in con.execute("SELECT DISTINCT unnest(map_keys(Tags)) FROM read_parquet(?) "
                                              "WHERE Tags IS NOT NULL", [str(path)]).fetchall()}
        recorded = set(entry.tag_keys)
        if keys != recorded:
            problems.append("its tag keys differ from the ledger's: " + "; ".join(
                f"{what} {', '.join(map(repr, sorted(names)))}" for what, names in
                (("in the file, not the ledger:", keys - recorded), ("in the ledger, not the file:", recorded - keys))
                if names))
    if entry.data_through_recorded:
        end, latest = con.execute(f"SELECT {USAGE_END}, {LATEST_END} FROM read_parquet(?)", [str(path)]).fetchall()[0]
        through = through_at(end, entry.ingested_at) if end is not None else None
        # a ledger written before the end was bounded (service/core/usage_end.py) keeps the lines' own latest end
        if through != entry.data_through and (latest is None or usage_end_text(latest) != entry.data_through):
            problems.append(f"the ledger's data_through {entry.data_through}, the file's usage ends {through}")
    return "; ".join(problems)


def _difference(expected: dict, found: dict) -> str:
    parts = []
    for currency in sorted(set(expected) | set(found), key=lambda c: c or ""):
        if expected.get(currency) != found.get(currency):
            want, got = expected.get(currency), found.get(currency)
            parts.append(f"{currency}: ledger {_totals(want)}, file {_totals(got)}")
    return "; ".join(parts)


def _totals(value: tuple[int, Decimal | None, Decimal | None] | None) -> str:
    if value is None:
        return "nothing"
    rows, billed, _ = value
    return f"{rows:,} rows billed {format(billed, 'f') if billed is not None else 'NULL'}"


def with_verify_findings(checks: Sequence[PartitionCheck], problems: Sequence[dict],
                         committed: dict[tuple[str, str], LedgerEntry]) -> list[PartitionCheck]:
    """`checks` with what the last `spendlake verify` found (`_state/verify.json`'s problems: a
    hash or sum mismatch the quick check cannot see) of a partition still read by the entry it
    checked (`committed`: (source, period) → entry)."""
    found = {(p["source"], p["billing_period"]): p for p in problems}
    return [replace(c, state=found[c.source, c.period]["state"],
                    detail=found[c.source, c.period]["detail"] + ", found by `spendlake verify`")
            if c.ok and (c.source, c.period) in found and c.entry is committed.get((c.source, c.period)) else c
            for c in checks]


def partition_error(bad: Sequence[PartitionCheck]) -> DataError:
    """One error for every partition that does not match the ledger, naming each file."""
    sources = sorted({c.source for c in bad})
    message = ("; ".join(c.sentence() for c in bad[:5])
               + (f"; and {len(bad) - 5} more" if len(bad) > 5 else ""))
    return DataError(message, where=", ".join(str(c.path) for c in bad[:3]) + (" …" if len(bad) > 3 else ""),
                     hint="run `spendlake ingest" + "".join(f" --source {s}" for s in sources)
                          + "` to restore it from the source; where the source no longer holds the period, restore "
                          "the file from a backup or drop the period: `spendlake forget "
                          + f"{bad[0].source} --period {bad[0].period}`; `spendlake verify` checks every partition")


def damaged_table_error(con: duckdb.DuckDBPyConnection, files: Sequence[str], exc: duckdb.Error) -> Exception:
    """The first of a table's `files` DuckDB cannot open, named, when opening them together
    failed with `exc` (a footer cut short or altered is not always named by DuckDB); else `exc`."""
    for path in files:
        try:
            con.sql("SELECT * FROM read_parquet(?)", params=[[path]])
        except duckdb.Error as each:
            return damaged_lake_file(each, path) or each
    return exc
