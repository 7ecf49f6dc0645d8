"""The manifest-less file connectors' deliveries and reads (FOCUS, GCP billing, Azure cost details).

Each export file is a loose delivery (its id is its fingerprint); ingest joins the files of a
billing period into one delivery (service.ingest.periods). A delivery is read as parts, one
per file, except that consecutive Parquet files with the same columns (names, types, and the
Hive folder keys they lack), or CSV files with the same header, are one part over all of them
(`ParquetRun`): DuckDB plans that read once instead of once per file (~55 ms a Parquet file,
~0.1 CPU s a FOCUS CSV part: bench/README.md "Many small files", "Many FOCUS CSV parts") and
reads the files in parallel, where one part per file is read after the other. The part
carries each row's file index (hidden_columns.FILE_INDEX), so staging still learns which
periods each file held, and a bad value names its own file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import ClassVar

import duckdb

from connectors import empty_costs
from connectors.azure_manifest import ExportRun, export_runs, newest_runs, run_delivery
from connectors.base import Delivery, StoredExport
from connectors.csvfile import csv_header, local_csv, quotes_closed, with_a_line
from connectors.exportfile import CSV_SUFFIXES, PARQUET_SUFFIXES, ParquetRun
from connectors.file_facts import hive_partitions, parquet_periods
from connectors.storage import StoredObject, fingerprint, suffix_of
from service.core.config import SourceConfig
from service.core.errors import SourceError, SpendlakeError, duckdb_error
from service.core.file_parts import FilesPart
from service.core.per_value import PerValuePart, PerValueSelect

# The most bytes of CSV (local copies) one part reads: a run's distinct tags and times, which
# the stager converts once each (service.core.per_value), are those of its files together.
CSV_RUN_BYTES = 1 << 30
# The most CSV files one part holding a gzip file reads: gzip quotes are not counted
# (csvfile.quotes_closed), and DuckDB reports a quote left open in a read of one to four files
# (of five or more it drops that file's rows, whatever the others' kind)
UNCHECKED_RUN_FILES = 4


class FolderExport(StoredExport, ABC):
    """Base of the manifest-less file connectors: one loose delivery per export file.

    Subclasses set `kind`, `suffixes` and `what`, and write `select(con, path, uri)`: the
    SQL SELECT (canonical columns) over one file, or over a ParquetRun given as `path` (then
    `uri` is its first file's, and the SELECT ends with the table's `file_column`).
    """

    suffixes: ClassVar[tuple[str, ...]]
    what: ClassVar[str]
    # The file column the canonical BillingPeriodStart is, as is (see footer_periods); None: none is.
    period_column: ClassVar[str | None] = None
    # False: `select` decides something from each file's rows (Azure's cost type), so every file is read alone
    reads_runs: ClassVar[bool] = True
    null_cells: ClassVar[tuple[str, ...]] = ("",)  # how the files write an empty cell

    def __init__(self, config: SourceConfig):
        super().__init__(config)
        self.runs: dict[str, ExportRun] = {}  # Azure export runs by delivery id
        self.local: dict[str, Path] = {}  # URI → the local copy of each file read

    def deliveries(self) -> Iterator[Delivery]:
        return self.folder_deliveries(self.storage.list())

    def folder_deliveries(self, listing: list[StoredObject]) -> Iterator[Delivery]:
        runs = export_runs(self.storage, listing)
        if runs:  # an Azure export with run manifests: they decide, loose files are ignored
            for run in newest_runs(runs):
                self.runs[run.run_id] = run
                self._objects.update((o.uri, o) for o in run.files)
                yield run_delivery(run)
            return
        files = [obj for obj in listing if suffix_of(obj.name) in self.suffixes]
        if not files:
            raise SourceError(f"no {self.what} files ({', '.join(self.suffixes)}) under {self.config.location}",
                              where=f"{self.config.config_path}.location",
                              hint=f"point it at the folder holding the {self.what} files")
        for obj in files:
            self._objects[obj.uri] = obj
            yield Delivery(fingerprint([obj]), None, (obj.uri,), loose=True)

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection,
             scratch: Path) -> list[duckdb.DuckDBPyRelation | PerValuePart | FilesPart]:
        run = self.runs.get(delivery.delivery_id)
        if run and run.problem:
            raise run.problem
        for uri in delivery.files:
            obj = self._objects.get(uri) or StoredObject(uri, PurePosixPath(uri).name, -1, "")
            self.local[uri] = local_csv(self.storage.local_copy(obj, scratch), scratch, uri, self.storage.open_local)
        groups = (same_schema_runs(con, [self.local[uri] for uri in delivery.files], delivery.files)
                  if self.reads_runs else [[uri] for uri in delivery.files])
        parts = []  # in the order of the files: staging reports each file's periods in that order
        for uris in groups:
            parts.append(self._run_part(con, uris) if len(uris) > 1 else self._file_part(con, uris[0]))
        return parts

    def locate(self, error: SpendlakeError, con: duckdb.DuckDBPyConnection) -> SpendlakeError:
        """An empty cost told at its file and line (connectors.empty_costs), and a value the SQL
        refused in a CSV file (a time, an id, JSON tags: read as text, it has no line) with the line
        its record begins on (connectors.csvfile.with_its_line)."""
        return (empty_costs.with_its_line(error, self.local, self.null_cells) or with_a_line(error, self.local)
                or super().locate(error, con))

    def _file_part(self, con: duckdb.DuckDBPyConnection, uri: str) -> duckdb.DuckDBPyRelation:
        select = self.select(con, self.local[uri], uri)
        try:
            return con.sql(select) if isinstance(select, str) else select.part(con)
        except duckdb.Error as exc:
            raise duckdb_error(exc, "cannot read the delivery", where=uri) from None

    def _run_part(self, con: duckdb.DuckDBPyConnection, uris: Sequence[str]) -> FilesPart:
        """The files as one part. Columns the stager converts per distinct value stay text in its
        rows; their SQL names a bad value's file by the FILE_INDEX the Converter gives each value."""
        select = self.select(con, ParquetRun(tuple(self.local[uri] for uri in uris), tuple(uris)), uris[0])
        try:
            return FilesPart(select.part(con) if isinstance(select, PerValueSelect) else con.sql(select), len(uris))
        except duckdb.Error as exc:
            raise duckdb_error(exc, "cannot read the delivery", where=uris[0]) from None

    def footer_periods(self, delivery: Delivery, scratch: Path) -> list[str] | None:
        """A loose Parquet file's billing periods from its footer (parquet_periods), so that
        ingest need not read its rows to learn them; None when the footer does not settle them."""
        uri = delivery.files[0]
        if self.period_column is None or len(delivery.files) != 1 or delivery.delivery_id in self.runs \
                or suffix_of(PurePosixPath(uri).name) not in PARQUET_SUFFIXES:
            return None
        obj = self._objects.get(uri) or StoredObject(uri, PurePosixPath(uri).name, -1, "")
        return parquet_periods(self.storage.local_copy(obj, scratch), self.period_column)

    def export_type(self, uri: str) -> str | None:
        """The cost type an Azure export run's manifest declares for this file, if any."""
        return next((r.cost_type for r in self.runs.values() if any(o.uri == uri for o in r.files)), None)

    @abstractmethod
    def select(self, con: duckdb.DuckDBPyConnection, path: Path | ParquetRun, uri: str) -> str | PerValueSelect:
        """SELECT <canonical columns> FROM <the file, or the run of files>."""


def same_schema_runs(con: duckdb.DuckDBPyConnection, paths: Sequence[Path], uris: Sequence[str]) -> list[list[str]]:
    """The files (URIs, in order) cut into runs of consecutive files whose Hive folders have the
    same keys and that are Parquet files whose footers give the same schema, or CSV files with the
    same header and closed quotes (csvfile.quotes_closed; the local copies), at most CSV_RUN_BYTES
    together, and at most UNCHECKED_RUN_FILES files where one of them is gzip: each run is read as one part. Any other file, or
    every file when a footer or header cannot be read, is a run of its own: opened alone, it
    fails naming itself, as it always did."""
    signatures: list[object] = [None] * len(uris)
    parquet = [i for i, uri in enumerate(uris) if suffix_of(PurePosixPath(uri).name) in PARQUET_SUFFIXES]
    if len(parquet) > 1:
        try:
            rows = con.execute("SELECT * EXCLUDE (file_name), file_name FROM parquet_schema(?)",
                               [[str(paths[i]) for i in parquet]]).fetchall()
        except duckdb.Error:
            rows = []
        schema: dict[str, list[tuple]] = {}
        for row in rows:
            schema.setdefault(row[-1], []).append(row[:-1])
        for i in parquet:
            if str(paths[i]) in schema:
                signatures[i] = (tuple(schema[str(paths[i])]), tuple(key for key, _ in hive_partitions(uris[i])))
    csv = [i for i, uri in enumerate(uris) if suffix_of(PurePosixPath(uri).name) in CSV_SUFFIXES]
    sizes, unchecked = [0] * len(uris), [False] * len(uris)
    for i in csv if len(csv) > 1 else ():
        try:
            closed = quotes_closed(paths[i])
            if closed is not False:  # a quote left open: read alone, DuckDB says so
                sizes[i], unchecked[i] = paths[i].stat().st_size, closed is None
                signatures[i] = ("csv", tuple(csv_header(paths[i], uris[i])),
                                 tuple(key for key, _ in hive_partitions(uris[i])))
        except (SpendlakeError, OSError):
            pass  # read alone, it fails naming itself
    runs: list[list[str]] = []
    run_bytes = run_unchecked = 0
    for i, uri in enumerate(uris):
        if runs and signatures[i] is not None and signatures[i] == signatures[i - 1] \
                and run_bytes + sizes[i] <= CSV_RUN_BYTES \
                and (not run_unchecked + unchecked[i] or len(runs[-1]) < UNCHECKED_RUN_FILES):
            runs[-1].append(uri)
            run_bytes += sizes[i]
            run_unchecked += unchecked[i]
        else:
            runs.append([uri])
            run_bytes, run_unchecked = sizes[i], unchecked[i]
    return runs
