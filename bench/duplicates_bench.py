"""Benchmark: duplicate-datasets over a synthetic listing of N objects (default 1,000,000).

    python bench/duplicates_bench.py [--objects 1000000] [--copies 0.2] [--repeat 3]

Builds a tmp lake with one `s3_objects` snapshot: datasets of files under several team
prefixes, a share of them copied to other buckets/prefixes (some with checksums, some only
with single-part or multipart ETags), then times `DuplicateDatasets.evaluate` (the SQL and
the roll-up; building the lake is not timed). Target: ≤ 10 s for 1M objects. CPU time is
printed beside wall time because a loaded machine stretches the latter; `os.getloadavg()`
is printed too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rules.context import RuleContext  # noqa: E402
from rules.duplicate_datasets import DuplicateDatasets  # noqa: E402
from service.core.lake import Lake  # noqa: E402
from service.core.schema import inventory_select_list  # noqa: E402
from service.core.timewindow import Window  # noqa: E402

NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)


def build(lake: Lake, objects: int, copies: float) -> None:
    """Originals: `objects × (1 − copies)` files in datasets of 1,000 files; copies: the rest,
    each duplicating an original under another team's prefix."""
    con = lake.connect()
    originals = int(objects * (1 - copies))
    con.execute(f"""
        CREATE TEMP TABLE originals AS
        SELECT i, 'corpus-' || (i % 4) AS bucket,
               'team-' || (i // 100000) || '/datasets/ds' || (i // 1000) || '/shard-' || lpad(CAST(i % 1000 AS VARCHAR), 5, '0') || '.jsonl' AS key,
               CAST(1048576 + (hash(i) % 268435456) AS BIGINT) AS size,
               md5(CAST(i AS VARCHAR)) AS etag,
               i % 3 = 0 AS has_checksum, i % 5 = 0 AS multipart
        FROM range({originals}) t(i)""")
    relation = con.sql(f"""
        WITH copies AS (
          SELECT o.*, 'mirror-' || (c % 3) AS copy_bucket, c
          FROM range({objects - originals}) t(c) JOIN originals o ON o.i = (c * 7919) % {originals}
        ), rows AS (
          SELECT bucket, key, size, etag, multipart, has_checksum, TIMESTAMP '2026-01-01' AS last_modified FROM originals
          UNION ALL
          SELECT copy_bucket, 'copies-' || (c % 7) || '/' || key, size, etag, multipart, has_checksum,
                 TIMESTAMP '2026-06-01' FROM copies
        )
        SELECT {inventory_select_list("s3_objects", {
            "bucket": "bucket", "key": "key", "size": "size",
            "etag": "CASE WHEN multipart THEN etag || '-8' ELSE etag END", "multipart": "multipart",
            "part_count": "CASE WHEN multipart THEN 8 END",
            "checksum_algorithm": "CASE WHEN has_checksum THEN 'CRC64NVME' END",
            "checksum_value": "CASE WHEN has_checksum THEN to_base64(CAST(md5(etag) AS BLOB)) END",
            "storage_class": "'STANDARD'", "last_modified": "last_modified"})}
        FROM rows""")
    lake.commit_snapshot(con, relation, table="s3_objects", source="bench", key="snapshot_date", value="2026-11-20")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1_000_000)
    parser.add_argument("--copies", type=float, default=0.2, help="share of objects that are copies")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(Path(tmp) / "lake")
        started = time.monotonic()
        build(lake, args.objects, args.copies)
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"built {args.objects:,} objects in {time.monotonic() - started:.1f} s")
        rule = DuplicateDatasets()
        for run in range(args.repeat):
            ctx = RuleContext(con=lake.query(), window=Window(NOW - timedelta(days=7), NOW))
            started, cpu = time.monotonic(), time.process_time()
            findings = rule.evaluate(ctx)
            seconds, cpu = time.monotonic() - started, time.process_time() - cpu
            waste = sum(f.monthly_waste_usd for f in findings)
            files = sum(f.evidence["files"] for f in findings)
            print(f"run {run + 1}: {seconds:.2f} s wall, {cpu:.2f} s CPU (all threads), {len(findings)} findings, {files:,} redundant files, "
                  f"${waste:,.2f}/month")


if __name__ == "__main__":
    main()
