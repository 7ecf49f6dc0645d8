"""Which lake file a failed Spark read tripped on. Bytes altered inside a data page (the file's
size and footer intact, so the checks before the read pass) fail Spark's read, or its
arithmetic on a garbled value, with an error that names no file of the lake. As the DuckDB
path does (lake_damage.unnamed_damage), only then are the files the read opened checked,
in the same order: the snapshots hashed against their records, the cost partitions against
the ledger's SHA-256, then the files without a record (stored rollups, snapshots written
before records) read whole; the first damaged one is named with the command that writes it
again. Through S3A this reads what the query read, once, and only after a failure.
"""

from __future__ import annotations

from service.core.errors import DataError
from service.core.lake_file_errors import damaged_file
from service.core.integrity import SHA256_DIFFERS, PartitionCheck, partition_error
from service.core.snapshot_ledger import snapshot_error


def traced(lake) -> DataError | None:
    """The error naming the damaged file among those `lake` (a SparkLake) gave Spark; None when
    every one is whole (the failure was not the lake's bytes)."""
    try:
        checks = [lake.snapshot_check(url, {}, deep=True) for url in lake.snapshots]
        snapshots = [c for c in checks if not c.ok]
        if snapshots:
            return snapshot_error(snapshots)
        costs = [PartitionCheck(entry.source, entry.billing_period, where, "altered", SHA256_DIFFERS, entry)
                 for where, (url, entry) in lake.costs.items()
                 if entry.sha256 is not None and lake.sha256(url) != entry.sha256]
        if costs:
            return partition_error(costs)
        hashed = {str(c.path) for c in checks if c.state == "ok"}
        for table, files in sorted(lake.read_files.items()):
            for url in sorted(files):
                if table == "costs" or lake.where(url) in hashed:
                    continue
                reason = lake.unreadable(url)
                if reason is not None:
                    source = url.rsplit("/", 3)[-3].split("=", 1)[1]
                    return damaged_file(lake.where(url), table, source, reason)
    except DataError:  # the lake cannot be read at all now: the first error stands
        return None
    return None
