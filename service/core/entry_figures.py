"""A staged period file's ledger figures, taken from the batches the stager writes to it
(service/core/staging.py) instead of reading the file again after staging: per currency the
rows, Σ BilledCost, Σ EffectiveCost, whether any / every line has an invoice id, the end of the
latest and the start of the first usage charge period, and the usage sums per UTC day (a line
within one day: commit.DAY) — what commit.py's ENTRY_FIGURES reads, to the same values.

ENTRY_FIGURES also proves that Σ|value| of every money column fits the lake's DECIMAL(38,12)
(DuckDB raises when it would not). Here a bound stands for it: rows × the largest |value| of
any money column, that |value| bounded from the high 64 bits of its 128-bit integer (a pass
over a strided view: 0.02 CPU s per 1M lines, pyarrow's min_max of the decimals 0.05). Under 10^26 no
sum can overflow, nor Arrow's per-batch sums wrap; otherwise `rows()` gives None and the commit
reads the file as before, so DuckDB raises and names the column as it always did.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Context, Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from service.core.schema import COST_COLUMNS, MONEY

MONEY_COLUMNS = tuple(name for name, kind in COST_COLUMNS if kind == MONEY)
FITS = 10 ** 38  # |a DECIMAL(38,12)'s unscaled integer| < 10^38
WIDE = Context(prec=120)  # Decimal sums of 12-decimal values are exact here (the default context rounds to 28 digits)
# What DuckDB's trim() removes (Unicode category Zs, found by trimming every code point): an
# invoice id of these only is no id, as ENTRY_FIGURES's coalesce(trim(InvoiceId), '') <> '' says
BLANKS = ("\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
          "\u202f\u205f\u3000")


class _Currency:
    """The running figures of one currency's lines."""

    def __init__(self) -> None:
        self.rows = 0
        self.billed: Decimal | None = None
        self.effective: Decimal | None = None
        self.any_invoice = False
        self.every_invoice = True
        self.usage_end: datetime | None = None
        self.usage_begin: datetime | None = None
        self.days: dict[date, list[Decimal | None]] = {}  # UTC day → [Σ BilledCost, Σ EffectiveCost]

    def add(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows
        self.billed = _plus(self.billed, batch.column("BilledCost"))
        self.effective = _plus(self.effective, batch.column("EffectiveCost"))
        invoice = batch.column("InvoiceId")
        if invoice.null_count == len(invoice):
            self.every_invoice = False
        else:  # each distinct id trimmed once (a bill has few): the trim of every line cost 0.1 CPU s per 1M
            given = pc.fill_null(pc.greater(pc.utf8_length(pc.utf8_trim(pc.unique(invoice), BLANKS)), 0), False)
            self.any_invoice = self.any_invoice or pc.any(given).as_py()
            self.every_invoice = self.every_invoice and pc.all(given).as_py()
        category = batch.column("ChargeCategory")
        batch = batch.select(["ChargePeriodStart", "ChargePeriodEnd", "BilledCost", "EffectiveCost"])
        if category.null_count != len(category):  # a line no category names is usage (usage_end.USAGE_LINE)
            batch = batch.filter(pc.fill_null(pc.equal(category, "Usage"), True))  # 4 columns, not the ~60
        ends, starts = batch.column("ChargePeriodEnd"), batch.column("ChargePeriodStart")
        end, begin = pc.max(ends).as_py(), pc.min(starts).as_py()
        if end is not None and (self.usage_end is None or end > self.usage_end):
            self.usage_end = end
        if begin is not None and (self.usage_begin is None or begin < self.usage_begin):
            self.usage_begin = begin
        day = pc.floor_temporal(starts, unit="day")
        within = pc.fill_null(pc.less_equal(ends, pc.add(day, pa.scalar(timedelta(days=1), pa.duration("us")))), False)
        sums = pa.table({"day": pc.cast(day, pa.date32()), "billed": batch.column("BilledCost"),
                         "effective": batch.column("EffectiveCost")}).filter(within)
        for row in sums.group_by("day").aggregate([("billed", "sum"), ("effective", "sum")]).to_pylist():
            held = self.days.setdefault(row["day"], [None, None])
            held[0], held[1] = _add(held[0], row["billed_sum"]), _add(held[1], row["effective_sum"])

    def row(self, currency: str | None) -> tuple:
        """As ENTRY_FIGURES's row of the currency (without its Σ|value| columns)."""
        return (currency, None, 1, self.rows, self.billed, self.effective, self.any_invoice,
                self.every_invoice, self.usage_end, self.usage_begin)

    def day_rows(self, currency: str | None) -> list[tuple]:
        """As ENTRY_FIGURES's rows of the currency's days (what ledger_entry reads of them)."""
        return [(currency, day, 0, None, *self.days[day]) for day in sorted(self.days)]


def _plus(total: Decimal | None, column: pa.Array) -> Decimal | None:
    if column.null_count == len(column):
        return total
    return _add(total, pc.sum(column).as_py())


def _add(total: Decimal | None, value: Decimal | None) -> Decimal | None:
    """Σ as SQL's sum: NULL while no value was given."""
    return value if total is None else total if value is None else WIDE.add(total, value)


class EntryFigures:
    """Figures of one staged file, batch by batch (`add`), read by `rows`."""

    def __init__(self) -> None:
        self.currencies: dict[str | None, _Currency] = {}
        self.count = 0
        self.largest = 0  # a bound on any money column's |unscaled value|
        self.unsure = False  # Arrow refused a sum (an overflow): the file is read by DuckDB

    def add(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        self.count += batch.num_rows
        for name in MONEY_COLUMNS:
            column = batch.column(name)
            if column.null_count != len(column):
                self.largest = max(self.largest, _bound(column))
        currency = batch.column("BillingCurrency")
        found = pc.unique(currency).to_pylist()
        for code in found:
            rows = batch if len(found) == 1 else batch.filter(
                pc.is_null(currency) if code is None else pc.fill_null(pc.equal(currency, code), False))
            try:
                self.currencies.setdefault(code, _Currency()).add(rows)
            except pa.ArrowException:
                self.unsure = True

    def rows(self) -> list[tuple] | None:
        """ENTRY_FIGURES's rows without the Σ|value| columns, or None when a money sum might
        not fit (the file is then read by DuckDB)."""
        if self.unsure or self.largest * self.count >= FITS:
            return None
        codes = sorted(self.currencies, key=lambda code: (code is None, code or ""))
        return ([self.currencies[code].row(code) for code in codes]
                + [day for code in codes for day in self.currencies[code].day_rows(code)])


def _bound(column: pa.Array) -> int:
    """More than any |unscaled value| of a decimal128 column: a value whose high word (the upper
    64 bits of its little-endian two's complement) is h lies in [h·2^64, (h+1)·2^64). The nulls
    are zeroed first: DuckDB's Arrow export leaves any bytes under them (2^111 under a 1M-line
    FOCUS CSV's null ListUnitPrice), which would send every file to be read again."""
    if not pa.types.is_decimal128(column.type):
        return FITS
    if column.null_count:
        column = pc.fill_null(column, pa.scalar(0, column.type))
    words = np.frombuffer(column.buffers()[1], dtype=np.int64, count=2 * len(column), offset=16 * column.offset)[1::2]
    return max(-int(words.min()), int(words.max()) + 1) << 64
