"""The protocol every billing connector follows.

A connector lists deliveries cheaply (manifests, fingerprints) and, for one delivery,
returns a DuckDB relation with exactly the canonical cost columns (service.core.schema).
It never writes into the lake: `service.core.lake.Lake.commit_costs` does. It is found by
its `kind` through the registry (service.core.registry, entry-point group
`spendlake.connectors`) and declares its config model and what it feeds (`COSTS`).

Files that come without a manifest are yielded as *loose* deliveries, one per file; ingest
joins every loose file holding rows of one billing period into that period's delivery,
wherever the file sits (service.ingest.periods). A location with nothing the connector can
read is a SourceError naming the location and what was expected, never an empty success.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

import duckdb

from connectors import content
from connectors.storage import Storage, StoredObject
from connectors.unread_files import unread_files
from service.core.config import SourceConfig
from service.core.errors import SpendlakeError, told_by_known_names
from service.core.ledger import FinalWhen
from service.core.registry import Connector, Disposition, Feeds

# Every billing connector feeds `costs`, and each delivery replaces the periods it holds.
COSTS = Feeds(("costs",), "billing_period", Disposition.PERIOD)


@dataclass(frozen=True)
class Delivery:
    """One snapshot of one or more billing periods, as the provider delivered it.

    `periods` comes from a manifest; None means the periods are known only once the data
    is read (a bare export file). `waiting` set means "not ready, skip without committing"
    (e.g. data parts present but the manifest not yet written). `loose`: one file with no
    manifest (its id a fingerprint of that file), to be grouped with the other loose files
    of its billing periods before it is committed.
    """

    delivery_id: str
    periods: tuple[str, ...] | None
    files: tuple[str, ...]
    waiting: str | None = None
    loose: bool = False


class OtherDataset(Exception):
    """Raised by `read` for a file that holds another dataset of the same export (e.g. a FOCUS
    Contract Commitment file beside the cost rows): ingest skips it with one line. A signal,
    not an error: it never reaches the command line. `copy_of`: the file or manifest read in
    its place, when it is a copy of it (`status` says so); `stale`: a copy of what that file held
    before it changed."""

    def __init__(self, uri: str, dataset: str, copy_of: str | None = None, stale: bool = False):
        super().__init__(f"{uri}: {dataset}")
        self.uri, self.dataset, self.copy_of, self.stale = uri, dataset, copy_of, stale


class CostConnector(Connector, Protocol):
    """What ingest and the report ask of a billing connector: `deliveries` and `read`, and the
    optional hooks whose defaults below are what a connector without them gets (`cost_class`)."""

    # `read` gives one relation per file, in the delivery's order, or one over consecutive files
    # whose rows say their file (service.core.file_parts.FilesPart): a source's new loose files
    # are then committed in one pass, staging telling which file held which periods
    # (service.ingest.periods). False (the default): each new file is first read for its periods.
    parts_are_files: ClassVar[bool] = False
    # Which lines of a period's currency must carry an invoice id for it to be final
    # (service.core.ledger.FinalWhen); "any" (the default) is how AWS marks a finalized bill.
    final_when: ClassVar[FinalWhen] = "any"
    # True when its BilledCost is before the credits on its lines (x_credits) that the provider's
    # invoice nets (Google's `cost`): the report says so beside the spend and the Bills.
    billed_before_credits: ClassVar[bool] = False
    # Raised when a fix changes what the connector reads from the same files: a period the lake
    # holds from an older reading is read again by the next ingest, though its files are unchanged.
    reader_version: ClassVar[int] = 0
    # True when one delivery holds every file of the source, each read as a part (oci-cost: each report
    # is an increment of one bill): ingest prints each file's rows to find one holding another's in
    # other bytes (service.ingest.row_copies) and reads the delivery again `delivery_without` it.
    files_one_delivery: ClassVar[bool] = False

    def __init__(self, config: SourceConfig) -> None: ...

    def deliveries(self) -> Iterator[Delivery]: ...

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection,
             scratch: Path) -> duckdb.DuckDBPyRelation | list[duckdb.DuckDBPyRelation]:
        """The delivery's rows as canonical cost columns: one relation, or one per file (the
        lake writes them one after another, so memory does not grow with their number).
        `scratch` is a private directory inside the lake's staging area for downloads; it
        is removed afterwards."""
        ...

    def footer_periods(self, delivery: Delivery, scratch: Path) -> list[str] | None:
        """A loose delivery's billing periods, if the connector can tell them without reading
        its rows (e.g. a Parquet footer's statistics); None (the default): ingest reads them."""
        return None

    def passed_over(self) -> list[OtherDataset]:
        """Entries of the location named like data files that `deliveries` did not give (a
        dangling symbolic link, a directory with no files), each with why and what to do:
        ingest tells each as skipped. The default: none."""
        return []

    def listed_version(self, uri: str) -> str | None:
        """The version (StoredObject.version) a file of a delivery had when `deliveries` listed
        it, which its delivery id was made from; None (the default): unknown, ingest takes a
        local file's version when it starts reading the delivery."""
        return None

    def locate(self, error: SpendlakeError, con: duckdb.DuckDBPyConnection) -> SpendlakeError:
        """A DataError from staging a delivery this connector read, made more precise (e.g. the
        CSV line of a bad value); called while the delivery's files are still local. The
        default: the error as it is."""
        return error

    def delivery_without(self, delivery: Delivery, files: Collection[str]) -> Delivery:
        """The delivery less `files` (copies of another's rows), its id made anew; asked only of a
        connector whose `files_one_delivery` is True."""
        raise NotImplementedError

    def listed_size(self, uri: str) -> int | None:
        """The size in bytes a loose file had when `deliveries` listed it; None (the default):
        unknown, and ingest looks for no copies among the connector's files (service.ingest.copies)."""
        return None

    def listed_modified(self, uri: str) -> float | None:
        """When a listed file was written (StoredObject.modified): of files of the same bytes the
        earliest is taken for the original; None (the default): unknown, the first by path."""
        return None

    def content_digest(self, uri: str, scratch: Path) -> str:
        """The SHA-256 of a listed file's content (connectors.content: decompressed, no byte order
        mark, CRLF as LF; an S3 object downloaded into `scratch`)."""
        raise NotImplementedError

    def content_head(self, uri: str) -> tuple[str, list[str]]:
        """A listed file's connectors.content.head: its first bytes' digest and CSV header."""
        raise NotImplementedError

    def hive_reaches(self, key: str) -> bool:
        """Whether a Hive folder's `key=value` becomes a column the rows are read from, where the file
        lacks that column: the same content under other values of it is other rows. True (the
        default) unless the connector knows the columns it reads."""
        return True


def cost_class(cls: type) -> type[CostConnector]:
    """A billing connector class with CostConnector's defaults: a class that follows it without
    deriving from it (an installed package's) is given them, so every hook reads plainly."""
    if CostConnector in cls.__mro__:
        return cls
    return type(cls.__name__, (cls, CostConnector), {"__module__": cls.__module__, "__qualname__": cls.__qualname__})


def cost_connector(cls: type, config: SourceConfig) -> CostConnector:
    """An instance of a billing connector class, with CostConnector's defaults (`cost_class`)."""
    return cost_class(cls)(config)


class StoredExport(CostConnector):
    """What the built-in billing connectors share: they feed `costs` (COSTS), read the common
    source settings (a connector with settings of its own sets `config_model`), and list and
    fetch their export's files through Storage (a local path or S3), keeping what they listed
    by URI."""

    kind: ClassVar[str]
    config_model: ClassVar[type[SourceConfig]] = SourceConfig
    feeds: ClassVar[Feeds] = COSTS
    parts_are_files: ClassVar[bool] = True  # (CostConnector) one relation per file
    # The file types the kind reads; other files its listing gives are told as skipped.
    suffixes: ClassVar[tuple[str, ...]] = (".csv", ".csv.gz", ".parquet")

    def __init__(self, config: SourceConfig):
        self.config = config
        self.storage = Storage(config)
        self._objects: dict[str, StoredObject] = {}
        self.copies: dict[str, str] = {}  # a passed-over copy → what is read in its place
        self.stale_copies: set[str] = set()  # … a copy of what that held before it changed

    def local_paths(self) -> list[Path]:
        return self.storage.local_paths()

    def passed_over(self) -> list[OtherDataset]:
        unread = unread_files(self.storage.listed.values(), self.suffixes, self.kind)
        return [OtherDataset(path, why, self.copies.get(path), path in self.stale_copies)
                for path, why in sorted(self.storage.passed_over.items())] + [
            OtherDataset(path, why) for path, why in unread]

    def locate(self, error: SpendlakeError, con: duckdb.DuckDBPyConnection) -> SpendlakeError:
        """A DuckDB error staging an S3 object names its download in the lake's scratch: told
        by its s3:// URI, and as the one file at fault rather than every file of the delivery."""
        return told_by_known_names(error, self.storage.downloads)

    def listed_version(self, uri: str) -> str | None:
        listed = self._objects.get(uri)
        return listed.version if listed is not None and listed.version else None

    def listed_size(self, uri: str) -> int | None:
        listed = self._objects.get(uri)
        return listed.size if listed is not None and listed.size >= 0 else None

    def listed_modified(self, uri: str) -> float | None:
        listed = self._objects.get(uri)
        return listed.modified if listed is not None and listed.modified else None

    def content_digest(self, uri: str, scratch: Path) -> str:
        return content.digest(self.storage.local_copy(self._objects[uri], scratch), uri)

    def content_head(self, uri: str) -> tuple[str, list[str]]:
        return content.head(self.storage.read_head(self._objects[uri], content.RAW_HEAD), uri)
