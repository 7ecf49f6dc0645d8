"""An empty cost cell where the export's format gives every line an amount: the file fails,
naming the column and, in a CSV file, the line (exit 3; the other sources commit).

Read as nothing billed, an emptied cell (a damaged or hand-edited export) drops its line's
dollars from ingest, status, check and the report alike, and nothing says so. The formats:
FOCUS says BilledCost and EffectiveCost MUST NOT be null; AWS's CUR data dictionary gives
every line a lineItem/UnblendedCost (only BlendedCost is documented blank, on Discount lines);
Google's billing export gives every row its `cost` (before credits); Azure's cost details
give every line its cost (`CostInBillingCurrency`, `Cost`, `PreTaxCost`) and Oracle's cost
report its `cost/myCost`, which their FOCUS exports write as BilledCost. None of the samples
under shared/samples nor the tests' real exports holds an empty one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from connectors.csvfile import line_holding
from connectors.exportfile import Table, sql_string
from service.core.errors import SpendlakeError

EMPTY = "empty, where "  # how each format's problem below begins
FOCUS_EMPTY = EMPTY + "FOCUS requires an amount (a cost MUST NOT be null)"
CUR_EMPTY = EMPTY + "the Cost and Usage Report gives every line an amount"
GCP_EMPTY = EMPTY + "the Cloud Billing export gives every row an amount"
AZURE_EMPTY = EMPTY + "Cost Management's cost details give every line an amount"
OCI_EMPTY = EMPTY + "Oracle's cost report gives every line an amount"
HINT = "re-export the file, or fill in the cost the bill has for that line"
# "<file>: column X: empty, where …: " as the SQL fails (its value, empty, after the last colon)
SAID = re.compile(r"column (.+?): (" + re.escape(EMPTY) + r"[^:]*?):?\s*$")


def required(table: Table, name: str, value: str | None, problem: str) -> str | None:
    """`value` (SQL) of column `name`, failing the read where it is null (an empty cell)."""
    return None if value is None else f"coalesce({value}, {table.fail(table.name(name), problem, sql_string(''))})"


def failed_sql(file: str, column: str, problem: str) -> str:
    """SQL text of the error an empty `column` raises: `<file>: column X: <problem>: ` (file: SQL
    text naming the row's file), what Table.fail raises for an empty value."""
    said = f": column {column}: {problem}: ".replace("'", "''")
    return f"error({file} || '{said}')"


def with_its_line(error: SpendlakeError, files: Mapping[str, Path],
                  nulls: Sequence[str] = ("",)) -> SpendlakeError | None:
    """`error`, an empty cost the SQL refused, told at the file holding it (one file of a run of
    several), and in a CSV file at the line its record begins on; None for another error.
    `files`: the name each file is told by (its URI) → its local copy; `nulls`: how the file
    writes an empty cell."""
    found = SAID.search(error.message)
    if found is None:
        return None
    before = error.message[:found.start()]
    named = next((uri for uri in files if before.endswith(f"{uri}: ")), None)
    uri = named or error.where
    if named:
        before = before[:-len(f"{named}: ")]
    path = files.get(uri or "")
    csv = path is not None and path.name.lower().endswith((".csv", ".csv.gz")) and path.exists()
    line = next((held for null in nulls if (held := line_holding(path, null, found.group(1)))), None) if csv else None
    said = f"column {found.group(1)}: {found.group(2)}"
    return type(error)(before + (f"{line}, {said}" if line else said), where=uri, hint=HINT)
