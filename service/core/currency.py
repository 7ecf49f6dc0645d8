"""Currency codes as the lake keeps them: three capital ASCII letters, ISO 4217's form.

Exports write the code as they please ('usd', ' USD '): each delivery's codes are trimmed and
upper-cased where it is staged, whatever its connector, so one currency never shows as two in
sums, budgets and reports (which never add currencies together). A value that is still not a
code ('US$', 'dollars') fails the delivery: its rows could only be summed apart from the rest.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from service.core.errors import DataError

if TYPE_CHECKING:  # Arrow is loaded by the stager; the lake reads CODE for its ledger, and queries load no Arrow
    import pyarrow as pa

COLUMN = "BillingCurrency"
CODE = re.compile(r"[A-Z]{3}")


def currency_code(value: str) -> str:
    """`value` trimmed and upper-cased; a DataError naming it when that is not a code."""
    code = value.strip().upper()
    if not CODE.fullmatch(code):
        raise DataError(f"{COLUMN} {value!r} is not a three-letter currency code",
                        hint="fix the export's currency column (e.g. USD), then run ingest again")
    return code


def with_currency_codes(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its BillingCurrency values as codes (nulls stay null). Only the distinct
    values reach Python; a batch already in codes is returned as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index = batch.schema.get_field_index(COLUMN)
    if index < 0:
        return batch
    column = batch.column(index)
    found = [value for value in pc.unique(column).to_pylist() if value is not None]
    codes = {value: currency_code(value) for value in found}
    if all(value == code for value, code in codes.items()):
        return batch
    values = pa.array(list(codes), column.type)
    fixed = pc.take(pa.array(list(codes.values()), column.type), pc.index_in(column, value_set=values))
    return batch.set_column(index, batch.schema.field(index), fixed)
