"""A Cloud Billing account's two BigQuery export tables, standard and detailed, side by side.

The detailed (resource-level) table, `gcp_billing_export_resource_v1_<account>`, holds every
field of the standard one, `gcp_billing_export_v1_<account>`, plus `resource` and `price`:
the same costs, split per resource. Extracted (`bq extract`) into one source's location,
both would be read and every cost of the account counted twice, so a delivery holding both
tables' rows of one account and invoice month fails naming them; nothing says which one the
user meant to keep. Two accounts' exports (one standard, one detailed) are a union, and pass.
The check costs one query over the delivery's files only when both tables are among them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

import duckdb

from service.core.errors import DataError, duckdb_error
from service.core.files import files_named

# Fields only the detailed table has (Google's "Structure of Detailed data export")
DETAILED_FIELDS = ("resource.name", "resource.global_name", "price.effective_price")


@dataclass(frozen=True)
class ExportTable:
    """Which table a file (or a run of Parquet files) was extracted from, and the SQL of its
    distinct (file URI, billing_account_id, invoice.month) rows."""

    detailed: bool
    months_sql: str


def check_one_table_per_account(con: duckdb.DuckDBPyConnection, tables: Mapping[str, ExportTable],
                                files: Sequence[str]) -> None:
    """Fail when the files hold rows of one billing account and invoice month from both tables."""
    if len({tables[uri].detailed for uri in files}) < 2:
        return
    held: dict[tuple[str | None, str | None], dict[bool, list[str]]] = {}
    for sql in dict.fromkeys(tables[uri].months_sql for uri in files):
        try:
            rows = con.execute(sql).fetchall()
        except duckdb.Error as exc:
            raise duckdb_error(exc, "cannot read the delivery", where=files_named(files, "")) from None
        for uri, account, month in rows:
            held.setdefault((account, month), {False: [], True: []})[tables[uri].detailed].append(uri)
    for (account, month), by_table in sorted(held.items(), key=lambda item: tuple(map(str, item[0]))):
        standard, detailed = sorted(by_table[False]), sorted(by_table[True])
        if standard and detailed:
            shown = f"{month[:4]}-{month[4:]}" if month and len(month) == 6 else repr(month)
            raise DataError(
                f"the standard and the detailed Cloud Billing export of billing account {account or '(not given)'} "
                f"both hold invoice month {shown}: standard in {_named(standard, detailed)}; "
                f"detailed in {_named(detailed, standard)}",
                where=files_named(standard + detailed, ""),
                hint="the detailed export holds the same costs split per resource, so reading both counts them "
                     "twice: point the source at the folder of one export (the detailed one keeps the resources)")


def _named(files: list[str], others: list[str]) -> str:
    """The files' folder when they share one that holds none of the others (an extract per
    folder), else the files."""
    folders = {str(PurePosixPath(uri).parent) for uri in files}
    if len(folders) == 1 and not folders & {str(PurePosixPath(uri).parent) for uri in others}:
        return f"{folders.pop()}/ ({len(files)} file{'s' if len(files) > 1 else ''})"
    return files_named(files, "")
