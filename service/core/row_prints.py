"""Each file's staged rows fingerprinted as a multiset (service.ingest.row_copies): the same rows in
other bytes (a CSV saved again with every field quoted, a Parquet conversion of it) give the same
print, in any order.

Two prints. The cheap one, taken as a delivery of several loose files is staged: its rows' count
and the sums and sums of magnitudes of BilledCost and EffectiveCost (Arrow, about 0.005 CPU s per 1M
lines). The exact one, taken only of files whose cheap prints are near (service.ingest.row_copies),
each staged again alone: the count, XOR and sum modulo 2^64 of DuckDB's `hash` of the columns that
make the bill (BILLED) as staged (the lake's values, the absent ones null) of each row (before the
levels below 0.6 CPU s per 1M lines, an eighth more than staging them: one row_copies._exact of
bench/ingest_bench.py's 1M-line, 31-column FOCUS CSV against the same staging without a print, medians
5.17 and 4.57 CPU s of 3 alternating runs; too much for every delivery); the most significant digits a
cost of the file carries; and the XOR and sum of the same hash with each cost rounded to d significant
digits, for each d of LEVELS. A spreadsheet or pandas (`float_format='%.12g'`) saves costs to fewer
digits: such a save holds the original's rows when their prints agree at the level of its digits.
Computed on the writer thread, batch by batch as they are written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from service.core.hidden_columns import FILE_INDEX
from service.core.schema import MONEY

BATCH = "row_prints_batch"
MASK = (1 << 64) - 1
SUMMED = ("BilledCost", "EffectiveCost")
COSTS = ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost")
# The significant digits a re-save may have cut costs to (`%.8g` … `%.15g`, as a float prints them).
LEVELS = range(8, 16)
# What a row bills: its costs (exact decimals), currency, periods, what and whose it is. Not every
# column: a re-save by pandas (or a spreadsheet) rewrites a float quantity's 17th digit
# (`25.200000000000004` → `…003`), `N/A` and `None` as empty and whole numbers of a column with empty
# cells as `…440.0`: it was no copy, summed twice (break53b B1). Two files of the same periods, row
# count and cost sums whose rows bill the same things to the same accounts are one bill; a row billing
# another value, resource or account (the same file under two SubAccountId=… folders) is no copy.
BILLED = ("BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd", "BilledCost",
          "EffectiveCost", "ListCost", "ContractedCost", "BillingCurrency", "ChargeCategory", "ChargeDescription",
          "ProviderName", "RegionId", "ResourceId")
# Account ids pandas read as numbers come back without their leading zeros, or with `.0`: compared without.
ACCOUNTS = ("BillingAccountId", "SubAccountId")


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class RowPrints:
    """{file's index in the delivery: its print}, as `add`ed: cheap, or `exact` (see the docstring)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, exact: bool = False, also: Collection[str] = ()):
        """`also`: columns the exact print hashes besides BILLED (any case): those Hive folder keys of the
        files compared name, whose value a file lacking the column takes from its folder."""
        self.con = con.cursor() if exact else None
        self.also = {name.lower() for name in also}
        # exact: count, digits, then XOR and sum of the exact hashes and of each level's; cheap: count and SUMMED's
        # sums, then their magnitudes' sums
        self.prints: dict[int, list] = defaultdict(
            lambda: [0, 0] * (len(LEVELS) + 2) if exact else [0, *[Decimal(0)] * 2 * len(SUMMED)])

    def add(self, rows: pa.RecordBatch, files: pa.Array | None, first: int) -> None:
        """The batch's rows, of file `first` or (`files`: each row's file in its part) of `first` + that."""
        if not rows.num_rows:
            return
        for index, count, *values in (self._hashed if self.con else self._summed)(rows, files):
            print_ = self.prints[first + index]
            print_[0] += count
            if self.con:  # its digits, then an XOR and a sum of each level's hashes
                print_[1] = max(print_[1], values[0] or 0)
                for at in range(2, len(print_), 2):
                    print_[at], print_[at + 1] = print_[at] ^ values[at - 1], (print_[at + 1] + int(values[at])) & MASK
            else:
                print_[1:] = (was + (value or 0) for was, value in zip(print_[1:], values))

    def _summed(self, rows: pa.RecordBatch, files: pa.Array | None) -> list[tuple]:
        columns = {**{name: rows.column(name) for name in SUMMED},
                   **{f"{name}_abs": pc.abs(rows.column(name)) for name in SUMMED}}
        if files is None:
            return [(0, rows.num_rows, *(pc.sum(column).as_py() for column in columns.values()))]
        sums = pa.table({"file": files, **columns}).group_by("file").aggregate(
            [("file", "count"), *((name, "sum") for name in columns)]).to_pydict()
        return list(zip(sums["file"], sums["file_count"], *(sums[f"{name}_sum"] for name in columns)))

    def _hashed(self, rows: pa.RecordBatch, files: pa.Array | None) -> list[tuple]:
        names = rows.schema.names
        costs = [_ident(name) for name in BILLED if name in COSTS and name in names]
        # what a row bills but its costs, hashed once; then with its costs exact and at each level
        identity = "hash({})".format(", ".join([*(
            _ident(name) for name in BILLED if name in names and name not in COSTS), *(
            rf"regexp_replace({_ident(name)}, '^0+|\.0$', '', 'g')" for name in ACCOUNTS if name in names), *(
            _ident(name) for name in names if name.lower() in self.also and name not in (*BILLED, *ACCOUNTS))]))
        hashes = [f"hash(i, {', '.join(costs)})", *(
            "hash(i, {})".format(", ".join(f"printf('%.{level}g', {cost}::DOUBLE)::{MONEY}" for cost in costs))
            for level in LEVELS)]
        # a cost's significant digits: its staged text without the point, sign and outer zeros
        digits = "greatest({})".format(", ".join(
            f"length(trim(replace(abs({cost})::VARCHAR, '.', ''), '0'))" for cost in costs) or "0")
        file = "0" if files is None else _ident(FILE_INDEX)
        self.con.register(BATCH, rows if files is None else rows.append_column(FILE_INDEX, files))
        try:
            return self.con.execute(
                f"SELECT {file}, count(*), max(d), " + ", ".join(
                    f"bit_xor(h{n}), sum(h{n}::HUGEINT) % {MASK + 1}" for n in range(len(hashes)))
                + f" FROM (SELECT {file}, {digits} AS d, " + ", ".join(f"{h} AS h{n}" for n, h in enumerate(hashes))
                + f" FROM (SELECT *, {identity} AS i FROM {BATCH})) GROUP BY ALL").fetchall()
        finally:
            self.con.unregister(BATCH)

    def of(self, files: int) -> tuple[tuple, ...]:
        return tuple(tuple(self.prints[index]) if index in self.prints else (0,) for index in range(files))

    def close(self) -> None:
        if self.con:
            self.con.close()
