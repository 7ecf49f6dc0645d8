"""focus-datasets: the FOCUS 1.3/1.4 datasets beside Cost and Usage → tables of their own.

A FOCUS 1.3 export adds a Contract Commitment dataset; 1.4 adds Billing Period and Invoice
Detail too, each its own files in the export's folder (the FinOps Foundation's
focus-data-toolkit writes `*_contract_commitment.*`, `*_billing_period.*`,
`*_invoice_detail.*`). The `focus` billing kind reads the cost rows of that folder and skips
these; this inventory kind, pointed at the same folder, reads them: each file is known by a
column only its dataset has (connectors.focus.OTHER_DATASETS), whatever its name, as CSV,
CSV.gz or Parquet, Hive-partitioned or not. Money stays exact, times become naive UTC.

Every run is a snapshot (`snapshot_date`) of what the folder holds, one partition per table
(a dataset the folder lacks is an empty snapshot: the export stopped writing it). Costs link
to the rows by InvoiceId (`invoice_details`), by the ContractCommitmentId of each element of
ContractApplied (`contract_commitments`) and by BillingPeriodStart (`billing_periods`).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb
from pydantic import Field

from connectors.csvfile import local_csv
from connectors.exportfile import decimal, open_table, text, timestamp
from connectors.focus import OTHER_DATASETS
from connectors.focus_bundles import newest_local
from connectors.inventory_base import FileOrApiConnector, SnapshotPart, local_files
from connectors.source_folder import Folder
from service.core.config import InventorySource
from service.core.errors import SourceError
from service.core.registry import Feeds
from service.core.schema import INVENTORY_TABLES, MONEY, QUANTITY, inventory_select_list

# FOCUS dataset name → its table in the lake
TABLES = {"Contract Commitment": "contract_commitments", "Billing Period": "billing_periods",
          "Invoice Detail": "invoice_details"}


class FocusDatasetsSource(InventorySource):
    """A FOCUS 1.3/1.4 export folder's Contract Commitment, Billing Period and Invoice Detail files."""

    path: str = Field(min_length=1, description="the export's local file or folder (the focus source's location)")


class FocusDatasetsConnector(FileOrApiConnector[FocusDatasetsSource]):
    kind = "focus-datasets"
    feeds = Feeds.snapshot(*TABLES.values())

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        where = f"{self.config_path}.path"
        files = newest_local(Path(self.config.path).expanduser().resolve(), local_files(self.config.path, where),
                             self.passed_over)
        folder = Folder.of(self.config.path, where)
        parts = [part for path in files if (part := self._read(con, path, folder, scratch))]
        if not parts:
            raise SourceError("no FOCUS Contract Commitment, Billing Period or Invoice Detail files found",
                              where=str(Path(self.config.path).expanduser()),
                              hint=f"check {where}: FOCUS 1.3 exports write Contract Commitment, 1.4 the others")
        empty = [SnapshotPart(table, con.sql(f"SELECT {inventory_select_list(table, {})} LIMIT 0"))
                 for table in TABLES.values() if table not in {p.table for p in parts}]
        return parts + empty

    def _read(self, con: duckdb.DuckDBPyConnection, path: Path, folder: Folder,
              scratch: Path) -> SnapshotPart | None:
        """The file's rows as its dataset's table, or None for any other file (cost rows, a manifest).
        A UTF-16 CSV is read from its UTF-8 copy in `scratch`, as the cost files are."""
        if path.suffix.lower() == ".json":
            return None
        file = open_table(con, local_csv(path, scratch, str(path), folder.open), str(path), money=[n for t in TABLES.values() for n, k in INVENTORY_TABLES[t]
                                                       if k == MONEY])
        if file.name("ChargePeriodStart") is not None:
            return None
        dataset = next((name for column, name in OTHER_DATASETS if file.name(column)), None)
        if dataset is None:
            return None
        table = TABLES[dataset]
        expressions = {}
        for name, kind in INVENTORY_TABLES[table]:
            if kind in (MONEY, QUANTITY):
                sql = decimal(file, kind, name)
            elif kind == "TIMESTAMP":
                sql = timestamp(file, name)
            else:
                sql = text(file, name)
            if sql is not None:
                expressions[name] = sql
        return SnapshotPart(table, con.sql(f"SELECT {inventory_select_list(table, expressions)} FROM {file.source}"))
