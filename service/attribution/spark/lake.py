"""The lake as Spark reads it: listed and read through Spark's own Hadoop FileSystem, so a
local path, `s3a://bucket/prefix` (hadoop-aws on Spark's classpath) and `hdfs://...` are
one code path, seen with the endpoint and credentials Spark's executors use.

Read-only: nothing here writes. It finds what service/attribution/spark/session.py needs — the
cost partitions (each judged against the ledger), the delivery ledger, the inventory snapshots
Spark reads (each against its record), their digests and the rollup files already written, all
as the DuckDB read judges them but for the re-hash of a file written since its record (the
DuckDB read compares local modification times; `verify` hashes every file) — and turns a Java failure into an error that names the lake, or
the damaged file it read (service/attribution/spark/damage.py), and says what to do.
"""

from __future__ import annotations

import logging
import re
import stat
from pathlib import Path

from service.attribution.jobs import basis_of
from service.attribution.rollup_versions import ROLLUP_TABLE, Partition
from service.attribution.spark.damage import traced
from service.core import derived_records
from service.core.errors import ConfigError, DataError, SourceError
from service.core.files import check_partition_value
from service.core.integrity import PartitionCheck, judge, partition_error, with_verify_findings
from service.core.lake import DATA_FILE, LEDGER_FILE
from service.core.job_windows import snapshot_rows, window_stamp
from service.core.ledger import LedgerEntry
from service.core.ledger_file import parse_ledger
from service.core.parquet_footer import MAGIC, TAIL, footer_length, parse_footer
from service.core.snapshot_ledger import OWN_TABLES, RECORDS, SnapshotCheck, check_file, recorded_digest, sound_files
from service.core.state_files import DERIVED_RECORD, SNAPSHOT_RECORD, parse_record, parse_state

log = logging.getLogger(__name__)

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
IAM_HINT = "the lake needs s3:ListBucket on its bucket and s3:GetObject on its objects (deploy/iam/spendlake-spark-lake.json)"


def lake_url(location: str) -> str:
    """A URL Hadoop understands: local paths become absolute `file:` URLs."""
    return location if SCHEME.match(location) else Path(location).resolve().as_uri()


class SparkLake:
    """The lake at `location` (`engine.lake`, else the config's `lake`), through `spark`."""

    def __init__(self, spark, location: str):
        self.location = location
        self.spark = spark
        self._jvm = spark._jvm
        self._path = self._jvm.org.apache.hadoop.fs.Path
        root = self._path(lake_url(location))
        self._fs = self._java(lambda: root.getFileSystem(spark._jsc.hadoopConfiguration()))
        self.root = self._fs.makeQualified(root)
        self._sizes: dict[str, int] = {}  # URL → size of the snapshot files `table_files` listed
        self._rows: dict[tuple[str, int], int | None] = {}  # (URL, size) → its footer's row count
        self.costs: dict[str, tuple[str, LedgerEntry]] = {}  # a partition as errors name it → (URL, its entry)
        self.snapshots: list[str] = []  # the URLs of the snapshots `table_files` found sound
        self.read_files: dict[str, set[str]] = {}  # table → the URLs `read` gave Spark
        self._records: dict[str, dict | None] = {}  # URL → the record its check in `table_files` judged it by

    # ---- where things are ---------------------------------------------------------------

    def table_url(self, table: str) -> str:
        return self._path(self.root, table).toString()

    def cost_partitions(self, counts=lambda source: True) -> list[Partition]:
        """The cost partitions of the sources that `counts`, each judged against the ledger as
        the DuckDB read judges it (size, footer rows through a tail read, what the last `verify`
        found; not the re-hash of a file written since its commit): a mismatch is the same DataError, naming the files and the fix."""
        ledger = {key: entry for key, entry in self.ledger().items() if counts(key[0])}
        listed, unlisted = {}, []
        for url, relative, size in self._glob(f"costs/source=*/billing_period=*/{DATA_FILE}", sizes=True):
            source, period = (part.split("=", 1)[1] for part in relative.split("/")[1:3])
            key = (self._value("source", source, url), self._value("billing_period", period, url))
            if key in ledger:
                listed[key] = (url, size)
            elif counts(key[0]):
                unlisted.append(PartitionCheck(*key, self.where(url), "unlisted",
                                               "a file the delivery ledger does not know"))
        checks = []
        for key, entry in sorted(ledger.items()):
            absent = self._path(self.root, f"costs/source={key[0]}/billing_period={key[1]}/{DATA_FILE}").toString()
            url, size = listed.get(key, (absent, None))
            state, detail = judge(entry, size, lambda: self._footer_rows(self._path(url), size))
            checks.append(PartitionCheck(*key, self.where(url), state, detail, entry))
            self.costs[self.where(url)] = (url, entry)
        checks = with_verify_findings(checks, self.read_state("verify").get("problems", []), ledger) + unlisted
        bad = [c for c in checks if not c.ok]
        if bad:
            raise partition_error(bad)
        return [Partition(c.source, c.period, self.costs[str(c.path)][0]) for c in checks]

    def ledger(self) -> dict[tuple[str, str], LedgerEntry]:
        path = self._path(self.root, LEDGER_FILE)
        text = self._bytes(path)
        if text is None:
            return {}
        return {(e.source, e.billing_period): e for e in parse_ledger(text.decode("utf-8"), path.toString())}

    def inventory_latest(self, tag_files: list[str]) -> dict[str, str]:
        """As rollup_versions.inventory_latest, for the `resource_tags` files (`table_files`)."""
        latest = {url.rsplit("/", 3)[-3]: url for url in sorted(tag_files)}  # sorted: a source's last snapshot
        return {name: self.snapshot_digest(url) for name, url in latest.items()}

    def jobs_basis(self, job_files: list[str]) -> dict[str, str]:
        """As jobs.jobs_basis, for the job snapshot files (`table_files("jobs")` of the
        configured sources)."""
        stamps: dict[str, list[tuple[str, str, str]]] = {}
        for url in sorted(job_files):  # by source, then snapshot date
            source, snapshot = url.rsplit("/", 3)[-3:-1]
            stamps.setdefault(source, []).append((snapshot, self.snapshot_digest(url),
                                                  window_stamp(self._snapshot_record(url))))
        return basis_of(stamps)

    def job_snapshots(self, job_files: list[str]) -> list[tuple]:
        """As the `job_snapshots` view's rows (job_windows.snapshot_rows), for the job snapshot files."""
        return snapshot_rows((url, self._snapshot_record(url)) for url in job_files)

    def _snapshot_record(self, url: str) -> dict | None:
        """The record of the snapshot at `url`: the one its check read (`table_files`; a remote
        read on S3 each), else read now."""
        return self._records[url] if url in self._records else self._record(self._record_path(url))

    def _record_path(self, url: str):
        table, source, partition = url.rsplit("/", 4)[-4:-1]
        return self._path(self.root, f"{RECORDS}/{table}/{source}/{partition}.json")

    def table_files(self, table: str, counts=lambda source: True) -> list[str]:
        """As snapshot_ledger.table_files: the snapshots on the lake and those a record says
        should be there, of the sources that `counts`, each checked against its record (size,
        footer rows through a tail read, what the last `verify` found); URLs."""
        listed = {url: size for url, _, size in self._glob(f"{table}/source=*/*=*/{DATA_FILE}", sizes=True)}
        self._sizes.update(listed)
        recorded = {self._path(self.table_url(table), f"{relative.split('/')[-2]}/"
                               f"{relative.split('/')[-1].removesuffix('.json')}/{DATA_FILE}").toString()
                    for _, relative in self._glob(f"{RECORDS}/{table}/source=*/*=*.json")}
        urls = {self.where(url): url for url in sorted(listed.keys() | recorded)
                if table in OWN_TABLES or counts(url.rsplit("/", 3)[-3].split("=", 1)[1])}
        checks = [self.snapshot_check(url, listed) for url in urls.values()]
        self._records.update({urls[str(check.path)]: check.record for check in checks})
        files = [urls[where] for where in sound_files(self, checks)]
        self.snapshots += files
        return files

    def snapshot_check(self, url: str, listed: dict[str, int], *, deep: bool = False) -> SnapshotCheck:
        """The snapshot at `url` judged against its record (`listed`: sizes the listing saw),
        with `deep`, hashed too."""
        path, seen, record = self._path(url), {}, self._record_path(url)

        def size() -> int | None:  # the listing's first, looked up again when a commit passed by
            seen["size"] = listed.pop(url) if url in listed else self._size(path)
            return seen["size"]

        return check_file(self.where(url), lambda: self._record(record), size,
                          lambda: self._footer_rows(path, seen["size"]), (lambda: self.sha256(url)) if deep else None)

    def where(self, url: str) -> str:
        """A file as an error names it: a local one by its path (as the DuckDB read names it)."""
        return url.removeprefix("file:") if url.startswith("file:/") else url

    def read_state(self, name: str) -> dict:
        """`_state/<name>.json` (what the last `verify` found), as Lake.read_state reads it."""
        path = self._path(self.root, f"_state/{name}.json")
        text = self._bytes(path)
        return {} if text is None else parse_state(name, text, self.where(path.toString()))

    def snapshot_digest(self, url: str) -> str:
        """As snapshot_ledger.snapshot_digest: the SHA-256 its record holds when the file's size
        and footer rows match it, else the file hashed where it lies (no copy)."""
        path = self._path(url)
        size = self._sizes.get(url)
        if size is None:
            size = self._java(lambda: self._fs.getFileStatus(path).getLen())
        record = self._snapshot_record(url)
        return recorded_digest(record, size, lambda: self._footer_rows(path, size)) or self.sha256(url)

    def sha256(self, url: str) -> str:
        """The SHA-256 (hex) of the file at `url`, hashed where it lies (no copy)."""
        return self._with_stream(self._path(url), self._jvm.org.apache.commons.codec.digest.DigestUtils.sha256Hex)

    def rollup_files(self) -> dict[tuple[str, str, str], str]:
        """(source, billing period, version) → URL of every rollup file the lake holds."""
        found = {}
        for url, relative, size in self._glob(f"{ROLLUP_TABLE}/source=*/billing_period=*/*.parquet", sizes=True):
            self._sizes[url] = size
            _, source, period, name = relative.split("/")
            found[(source.split("=", 1)[1], period.split("=", 1)[1], name.removesuffix(".parquet"))] = url
        return found

    def whole(self, rollup_url: str, found: dict[str, dict]) -> bool:
        """As rollup.stored_whole: True when a stored rollup (`rollup_files`) matches its record
        (size, footer rows, and `found`: derived_records.problems, what the last verify found); one
        that does not, or has none, is rolled up from the raw lines instead, said with -v."""
        key = derived_records.file_key(rollup_url)
        path, size = self._path(rollup_url), self._sizes[rollup_url]
        record = self._record(self._path(self.root, f"{derived_records.DERIVED_RECORDS}/"
                                                    f"{key.removesuffix('.parquet')}.json"), DERIVED_RECORD)
        state, detail = derived_records.judge(record or None, size, lambda: self._footer_rows(path, size),
                                              found.get(key))
        if state == "ok":
            return True
        log.info("Spark: the stored rollup %s is %s (%s): its period is rolled up from the raw lines; %s",
                 rollup_url, "unrecorded" if state == "unrecorded" else "damaged", detail, derived_records.REPAIR)
        return False

    # ---- reading ----------------------------------------------------------------------------

    def read(self, table: str, files: list[str], *, merge_schema: bool = False):
        """The Parquet `files` of `table` as a DataFrame; Spark reads their footers here, so an
        unreadable file fails now, by name. `merge_schema`: files may hold different columns."""
        self.read_files.setdefault(table, set()).update(files)
        reader = self.spark.read.option("basePath", self.table_url(table))
        if merge_schema:
            reader = reader.option("mergeSchema", "true")
        return self.reading(table, lambda: reader.parquet(*files))

    def reading(self, what: str, call):
        """`call()`, with a failure of Spark reading the lake turned into a spendlake error; one
        that names no file (bytes altered in a data page) traced to the damaged file it read."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        try:
            return call()
        except Py4JJavaError as error:
            found = self.error(error.java_exception)
        except PySparkException as error:
            found = DataError(f"Spark cannot read {what}: {str(error).splitlines()[0][:400]}", where=self.location,
                              hint="check that the lake was copied whole, then run again")
        damaged = traced(self) if type(found) is DataError else None  # not an access or classpath error
        raise damaged or found from None

    def unreadable(self, url: str) -> str | None:
        """Why Spark cannot read the Parquet file at `url` whole (every row, every column), or None."""
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        try:
            # the "noop" sink decodes every row and column and writes nothing
            self.spark.read.parquet(url).write.format("noop").mode("overwrite").save()
        except Py4JJavaError as error:
            cause = error.java_exception
            while cause.getCause() is not None:  # the innermost cause says what was wrong with the bytes
                cause = cause.getCause()
            return f"{cause.getClass().getSimpleName()}: {str(cause.getMessage() or '').strip()}".splitlines()[0][:400]
        except PySparkException as error:
            return str(error).strip().splitlines()[0][:400]
        return None

    # ---- Hadoop FileSystem ----------------------------------------------------------------

    def _glob(self, pattern: str, *, sizes: bool = False) -> list[tuple]:
        """(URL, path relative to the root[, size]) of the files matching `pattern`, sorted."""
        statuses = self._java(lambda: self._fs.globStatus(self._path(self.root, pattern))) or []
        prefix = self.root.toString().rstrip("/") + "/"
        found = []
        for status in statuses:
            url = status.getPath().toString()
            if status.isFile() and url.startswith(prefix):
                found.append((url, url[len(prefix):], status.getLen()) if sizes else (url, url[len(prefix):]))
        return sorted(found)

    def _record(self, path, shape=SNAPSHOT_RECORD) -> dict | None:
        """A snapshot's record (`_ledger/snapshots/...json`), or of `shape`; {} when unreadable,
        None when absent."""
        text = self._bytes(path)
        return None if text is None else parse_record(text, shape)

    def _bytes(self, path) -> bytes | None:
        """The whole file at `path` (a Hadoop Path), None when there is none."""
        if not self._java(lambda: self._fs.exists(path)):
            return None
        return bytes(self._with_stream(path, self._jvm.org.apache.commons.io.IOUtils.toByteArray))

    def _size(self, path) -> int | None:
        return self._java(lambda: self._fs.getFileStatus(path).getLen() if self._fs.exists(path) else None)

    def _footer_rows(self, path, size: int) -> int | None:
        """The row count in the Parquet footer of the file at `path` (`size` bytes), its tail read
        (once: the check and the digest both ask)."""
        if (path.toString(), size) in self._rows:
            return self._rows[(path.toString(), size)]
        to_bytes = self._jvm.org.apache.commons.io.IOUtils.toByteArray

        def read(stream):
            if size < len(MAGIC) + TAIL:
                return None
            stream.seek(size - TAIL)
            length = footer_length(bytes(to_bytes(stream, TAIL)), size)
            if length is None:
                return None
            stream.seek(size - TAIL - length)
            footer = parse_footer(bytes(to_bytes(stream, length)))
            return None if footer is None else footer.rows

        self._rows[(path.toString(), size)] = self._with_stream(path, read)
        return self._rows[(path.toString(), size)]

    def _with_stream(self, path, read):
        """`read(stream)` on the opened file at `path` (a Hadoop Path). Hadoop lists a FIFO or a
        device (a link to /dev/zero) in a local lake as a file: opening a FIFO never returns, and
        reading /dev/zero never ends, so neither is opened."""
        where = self.where(path.toString())
        if where.startswith("/") and not _regular(Path(where)):
            raise DataError("not a regular file but a FIFO or a device: reading it would never end", where=where,
                            hint="only spendlake writes the lake: delete it, then `spendlake verify` names what "
                                 "writes it again")
        stream = self._java(lambda: self._fs.open(path))
        try:
            return self._java(lambda: read(stream))
        finally:
            stream.close()

    def _value(self, key: str, value: str, url: str) -> str:
        try:
            return check_partition_value(key, value)
        except DataError as error:
            raise DataError(error.message, where=url, hint="only spendlake writes the lake; remove this file") from None

    def _java(self, call):
        from py4j.protocol import Py4JJavaError

        try:
            return call()
        except Py4JJavaError as error:
            raise self.error(error.java_exception) from None

    def error(self, java_exception) -> Exception:
        """The spendlake error for a Java exception raised while reading the lake."""
        names, cause = [], java_exception
        while cause is not None:
            names.append(cause.getClass().getName() + ": " + str(cause.getMessage() or ""))
            cause = cause.getCause()
        text = " | ".join(names)
        first = names[0].split("\n", 1)[0][:400]
        if "UnsupportedFileSystemException" in text or "S3AFileSystem not found" in text:
            version = self._jvm.org.apache.hadoop.util.VersionInfo.getVersion()
            return ConfigError(
                f"Spark cannot read {self.location!r}: {first}", where="engine.lake",
                hint=f"put the filesystem's connector on Spark's classpath; for s3a:// that is hadoop-aws {version} "
                     f"and its AWS SDK bundle (engine.options spark.jars, or spark.jars.packages "
                     f"org.apache.hadoop:hadoop-aws:{version}), or use a path every Spark node sees")
        if "AccessDeniedException" in text:
            return SourceError(f"access denied: {first}", where=self.location, hint=IAM_HINT)
        return DataError(f"Spark cannot read the lake: {first}", where=self.location,
                         hint="check engine.lake, engine.endpoint_url and that the lake was copied whole")


def _regular(path: Path) -> bool:
    """True unless `path` is there and is no regular file (a missing one is Hadoop's to name)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return True
