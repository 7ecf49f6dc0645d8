"""Files of a source holding another file's rows in other bytes, read once (break52).

service.ingest.copies finds copies by their content's bytes before any row is read; a CSV saved
again with every field quoted, or converted to Parquet beside the original, is other bytes and
was summed twice, exit 0. So a delivery of several loose files of a source is staged with each
file's rows' cheap print (service.core.row_prints: count and cost sums); files of the same periods
and count, their sums near (within the rounding of a save cutting costs to fewer digits), are each
staged again alone for their exact print (the rows as a multiset: count, XOR and sum of a hash of
what each staged row bills, row_prints.BILLED, and of the columns the files' Hive folder keys name,
also with costs rounded to each of row_prints.LEVELS), and a file of the same periods and exact
print as another of the delivery (or the same at d digits, one of the two carrying no more) is a
copy of it. The original is the file a ledger entry holds, else the
first by connectors.file_copies.written_first (the earliest written, …), as copies' is. The copy's
record in `_state/file_digests.json` (ROWS_OF) makes the run plan again without it, so every
line, `status`'s copies record included, is a byte copy's: "skipped, the same content as …".
The files of a connector delivering them all as one (oci-cost: files_one_delivery) are printed
so too, a copy remembered taken out of that delivery (service.ingest.periods).

Later runs skip the copy unread while it and its original keep the version and size they had
when it was found; its original changed since (corrected or re-exported), the copy is a stale
copy, still skipped (copies.STALE); the copy changed, or its original gone, the record is
dropped and the copy read again (found a copy again if its rows still are).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from decimal import Decimal

import duckdb

from connectors.base import CostConnector, Delivery, OtherDataset
from connectors.file_copies import SAME, written_first
from connectors.file_facts import hive_partitions
from service.core.commit import StagedCosts
from service.core.errors import SpendlakeError
from service.core.lake import Lake
from service.core.row_prints import LEVELS
from service.core.staging import stage_parts
from service.ingest.copies import STALE

ROWS_OF = "rows_of"  # a record's key: the original whose rows the file holds


def printed(connector: CostConnector, delivery: Delivery, loose: Collection[str]) -> bool:
    """Whether each file's rows are fingerprinted: several `loose` files, or the files of a connector
    delivering them all as one (files_one_delivery), each read as a part."""
    return connector.parts_are_files and len(delivery.files) > 1 and (
        connector.files_one_delivery or set(delivery.files) <= set(loose))


def of_staged(lake: Lake, con: duckdb.DuckDBPyConnection, connector: CostConnector, source: str,
              delivery: Delivery, staged: StagedCosts) -> dict[str, str]:
    """The delivery's files holding another's periods and rows → that file (`found`): of those
    whose cheap prints are alike, by their exact prints."""
    if not staged.prints:
        return {}
    held = {uri for entry in lake.ledger() if entry.source == source for uri in entry.files}
    first = original_first(connector, held)
    files = near(delivery.files, staged.part_periods, staged.prints)
    if not files:
        return {}
    return found(files, *_exact(lake, con, connector, files), first)


def _exact(lake: Lake, con: duckdb.DuckDBPyConnection, connector: CostConnector,
           files: Sequence[str]) -> tuple[list[frozenset[str]], list[tuple]]:
    """Each file's periods and exact print, staged alone in the lake's scratch; a file that cannot be
    read so (or not as one part) gets a print of its own, so it is no copy. The columns the files'
    Hive folder keys name are printed too: the same file under ServiceName=A/ and =B/ (a column it
    lacks, so each row takes its folder's value) is two services' lines, not a copy."""
    hive = {key for uri in files for key, _ in hive_partitions(uri) if connector.hive_reaches(key)}
    periods, prints = [], []
    with lake.scratch() as scratch:
        for number, uri in enumerate(files):
            stage = scratch / f"rows-{number}"  # where the line item keys of an AWS file are written too
            try:
                stage.mkdir()
                parts = connector.read(Delivery(f"rows:{uri}", None, (uri,), loose=True), con, scratch)
                staged = stage_parts(con, parts if isinstance(parts, list) else [parts], stage, "exact", hive)
            except (SpendlakeError, OtherDataset, OSError, duckdb.Error):
                staged = None
            alone = staged is not None and len(staged.prints) == 1
            periods.append(staged.part_periods[0] if alone else frozenset())
            prints.append(staged.prints[0] if alone else (uri,))
    return periods, prints


def near(files: Sequence[str], part_periods: Sequence[frozenset[str]], prints: Sequence[tuple]) -> list[str]:
    """The files (in the order of the parts) of the periods and row count of another whose cost sums
    are those of the other within what rounding each cost to LEVELS' fewest digits moves them; []
    when the rows were not printed file by file."""
    if len(prints) != len(files) or len(part_periods) != len(files):
        return []
    by_count: dict[tuple, list[tuple]] = defaultdict(list)
    for uri, periods, (count, *sums) in zip(files, part_periods, prints):
        if count:  # a file of no rows holds nothing twice
            by_count[(periods, count)].append((uri, sums))
    # a cost cut to d digits moves by at most half its d-th digit, and each staged at 12 decimals by half the 12th
    within = Decimal(5) / 10 ** min(LEVELS)
    return sorted({uri for (_, count), group in by_count.items() for uri, sums in group for other, others in group
                   if other != uri and all(abs(sums[n] - others[n]) <= within * max(sums[n + 2], others[n + 2])
                                           + Decimal(count) / 10 ** 12 for n in (0, 1))})


def found(files: Sequence[str], part_periods: Sequence[frozenset[str]], prints: Sequence[tuple],
          first: Callable[[str], tuple]) -> dict[str, str]:
    """Each of `files` holding the periods and rows of another → that other, the first of them by
    `first`. Rows are the same when their exact prints are, or their prints with costs rounded to d
    digits when one of the two carries no more (a re-save cut to d digits: row_prints)."""
    alike: dict[tuple, list[tuple[str, bool]]] = defaultdict(list)
    for uri, periods, rows in zip(files, part_periods, prints):
        if len(rows) > 1 and rows[0]:  # a file unread or of no rows holds nothing twice
            count, digits, *hashes = rows
            for at, level in enumerate([0, *LEVELS]):
                alike[(periods, count, level, *hashes[2 * at:2 * at + 2])].append((uri, digits <= level or not level))
    one: dict[str, str] = {uri: uri for uri in files}  # each file → another of its rows (union-find)

    def root(uri: str) -> str:
        while one[uri] != uri:
            uri = one[uri]
        return uri

    for group in alike.values():
        if any(coarse for _, coarse in group):  # rounding to the level changes none of one file's costs
            for uri, _ in group[1:]:
                one[root(uri)] = root(group[0][0])
    same: dict[str, list[str]] = defaultdict(list)
    for uri in files:
        same[root(uri)].append(uri)
    copies = {}
    for group in same.values():
        original, *others = sorted(group, key=first)
        copies.update((uri, original) for uri in others)
    return copies


def original_first(connector: CostConnector, held: set[str]) -> Callable[[str], tuple]:
    """The order in which the original of files of the same rows comes first (see the docstring)."""
    return lambda uri: (uri not in held, *written_first(uri, connector.listed_modified(uri)))


def _stamp(connector: CostConnector, uri: str) -> dict:
    return {"version": connector.listed_version(uri) or "", "size": connector.listed_size(uri)}


def records(connector: CostConnector, copies: dict[str, str]) -> dict[str, dict]:
    """Each copy's record: its stamp, its original and the original's stamp."""
    return {uri: {**_stamp(connector, uri), ROWS_OF: original, "original": _stamp(connector, original)}
            for uri, original in copies.items()}


def skipped(connector: CostConnector, loose: Sequence[Delivery],
            known: dict[str, dict]) -> tuple[list[Delivery], list[OtherDataset], dict[str, dict]]:
    """The loose files to read, the copies found before skipped (each its line), and their records kept."""
    read, told, kept = [], [], {}
    for file in loose:
        uri = file.files[0]
        was = known.get(uri) or {}
        original = was.get(ROWS_OF)
        # a file of no version (a connector that knows none) is told by its size: read again, it would be found
        # a copy again each time, the plan made again without end
        if not original or _stamp(connector, uri) != {k: was[k] for k in ("version", "size")} \
                or connector.listed_size(original) is None:
            read.append(file)
            continue
        kept[uri] = was
        if _stamp(connector, original) == was["original"]:
            told.append(OtherDataset(uri, SAME.format(same="content", original=original), original))
        else:
            told.append(OtherDataset(uri, STALE.format(original=original), original, stale=True))
    return read, told, kept
