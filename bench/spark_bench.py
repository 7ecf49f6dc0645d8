"""Both engines of `spendlake attribute` on lakes of several sizes, timed in the same run (issue 8).

    python bench/spark_bench.py [--rows 1000000,10000000] [--workdir /tmp/spendlake-spark-bench]
                                [--repeat 2] [--s3]

Per size in `--rows`, a lake of one synthetic month (November 2026) of about that many line
items, generated and ingested under `--workdir`/<rows> unless already there (the same month
bench/attribute_bench.py generates). Each timing is a whole `spendlake attribute --since 7d
--until UNTIL --by team,project --format json` process (Spark: JVM start included), median of
`--repeat`:
  - duckdb / spark over the per-period rollups (the normal path);
  - duckdb / spark from the raw lines (a lake view without rollups: DuckDB builds and
    writes them, then queries; Spark rolls up in memory and writes nothing);
  - with `--s3`, spark reading a copy of the lake in S3 (`engine.lake: s3a://...`), uploaded
    with its rollups and without them. That S3 is a moto ThreadedMotoServer in this process
    on 127.0.0.1, read through the hadoop-aws 3.3.1 jars of `bash .ci/s3a-jars`: those figures
    measure S3A + moto (a Python server on loopback), not real S3.
Every answer must equal the DuckDB one before any time counts. One line per size; (N×) is
the time over DuckDB's on the same path.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
UNTIL = "2026-11-29T12:30:00Z"
ATTRIBUTION = {"dimensions": {"team": {"tags": ["team", "owner-team"]}, "project": {"tags": ["project"]}}}
BUCKET = "spendlake-bench"


def attribute(config: Path, engine: str) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "service.cli.main", "--config", str(config), "attribute", "--since", "7d",
           "--until", UNTIL, "--by", "team,project", "--engine", engine, "--format", "json"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return elapsed, json.loads(done.stdout)


def generated_lake(workdir: Path, rows: int) -> tuple[Path, int]:
    """A config over a lake of one synthetic month with about `rows` line items, and its line count."""
    from connectors.synthetic.billing import generate_organisation

    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "spendlake.yaml"
    export = workdir / "export"
    config.write_text(json.dumps({"lake": str(workdir / "lake"), "attribution": ATTRIBUTION, "sources": [
        {"name": "ml-org", "kind": "aws-cur2", "location": str(export / "ml-org-cur2")}]}))
    marker = workdir / f"ingested-{rows}"
    if not marker.exists():
        shutil.rmtree(workdir / "lake", ignore_errors=True)
        start = time.perf_counter()
        result = generate_organisation(export, days=30, start=date(2026, 11, 1), rows=rows, formats=("parquet",))
        print(f"generated {result.rows:,} rows in {time.perf_counter() - start:.0f} s", flush=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "service.cli.main", "--config", str(config), "ingest"], check=True, cwd=REPO)
        print(f"ingested them in {time.perf_counter() - start:.0f} s", flush=True)
        marker.write_text(str(result.rows))
    return config, int(marker.read_text())


def raw_view(config: Path) -> Path:
    """A config over a lake that shares the costs and ledger but has no rollups."""
    data = json.loads(config.read_text())
    lake = Path(data["lake"])
    raw = lake.parent / "lake-raw"
    shutil.rmtree(raw, ignore_errors=True)
    raw.mkdir()
    # Hard links: the lake's DuckDB sandbox does not follow a symlink out of the lake.
    shutil.copytree(lake / "costs", raw / "costs", copy_function=os.link)
    shutil.copytree(lake / "_ledger", raw / "_ledger")
    path = config.with_name("spendlake-raw.yaml")
    path.write_text(json.dumps({**data, "lake": str(raw)}))
    return path


@dataclass
class S3:
    client: object  # boto3 S3 client, admin credentials
    endpoint: str
    options: dict[str, str]  # the S3A jars and the settings they need on pyspark's Hadoop

    def view(self, config: Path, *, rollups: bool) -> Path:
        """A config whose Spark reads a copy of `config`'s lake in S3 (its rollups left out
        unless `rollups`); its local `lake` does not exist."""
        data = json.loads(config.read_text())
        lake = Path(data["lake"])
        prefix = f"{lake.parent.name}/{'lake' if rollups else 'lake-raw'}"
        from tests.spark_support import lake_objects

        start, size = time.perf_counter(), 0
        for key, path in lake_objects(lake, rollups=rollups):
            self.client.upload_file(str(path), BUCKET, f"{prefix}/{key}")
            size += path.stat().st_size
        print(f"uploaded {size / 2**20:,.0f} MiB to s3://{BUCKET}/{prefix} in {time.perf_counter() - start:.0f} s",
              flush=True)
        path = config.with_name(f"spendlake-s3{'' if rollups else '-raw'}.yaml")
        path.write_text(json.dumps({**data, "lake": str(lake.parent / "no-local-lake"), "engine": {
            "kind": "spark", "lake": f"s3a://{BUCKET}/{prefix}", "endpoint_url": self.endpoint,
            "options": self.options}}))
        return path


@contextmanager
def moto_s3():
    """An S3 (moto, on loopback, no IAM) with an empty bucket; S3A reads the admin keys from
    the environment of the `spendlake attribute` processes."""
    import boto3
    from moto.server import ThreadedMotoServer
    from tests.spark_support import S3A_COMPAT_OPTIONS, S3A_JARS

    jars = sorted(S3A_JARS.glob("*.jar"))
    if len(jars) < 2:
        sys.exit(f"--s3: no S3A jars in {S3A_JARS}: run `bash .ci/s3a-jars`")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
        os.environ.pop("AWS_SESSION_TOKEN", None)
        client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield S3(client, f"http://{host}:{port}",
                 {"spark.jars": ",".join(str(j) for j in jars), **S3A_COMPAT_OPTIONS})
    finally:
        server.stop()


def timed(config: Path, engine: str, repeat: int, expected: dict | None, before=None) -> tuple[float, dict]:
    times, answer = [], None
    for _ in range(repeat):
        if before:
            before()
        elapsed, answer = attribute(config, engine)
        if expected is not None and answer != expected:
            sys.exit(f"{engine} on {config} gave another answer than duckdb")
        times.append(elapsed)
    return statistics.median(times), answer


def bench(label: str, config: Path, repeat: int, s3: S3 | None) -> None:
    raw = raw_view(config)
    rollups = Path(json.loads(raw.read_text())["lake"]) / "attribution_rollup"
    duck, expected = timed(config, "duckdb", repeat, None)
    spark, _ = timed(config, "spark", repeat, expected)
    duck_raw, _ = timed(raw, "duckdb", repeat, expected, before=lambda: shutil.rmtree(rollups, ignore_errors=True))
    shutil.rmtree(rollups, ignore_errors=True)
    spark_raw, _ = timed(raw, "spark", repeat, expected)
    if s3:
        spark_s3, _ = timed(s3.view(config, rollups=True), "spark", repeat, expected)
        spark_s3_raw, _ = timed(s3.view(config, rollups=False), "spark", repeat, expected)

    def vs(name: str, seconds: float, duckdb: float) -> str:
        return f"  {name} {seconds:6.2f} s ({seconds / duckdb:3.0f}×)"

    print(f"{label}  rollups: duckdb {duck:5.2f} s" + vs("spark", spark, duck)
          + (vs("spark-s3", spark_s3, duck) if s3 else "")
          + f"   raw lines: duckdb {duck_raw:5.2f} s" + vs("spark", spark_raw, duck_raw)
          + (vs("spark-s3", spark_s3_raw, duck_raw) if s3 else "") + "   (equal answers)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,10000000", help="comma list of lake sizes (line items)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spendlake-spark-bench"))
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--s3", action="store_true", help="also Spark over a copy of each lake in S3 (moto)")
    args = parser.parse_args()
    sizes = [int(rows) for rows in args.rows.split(",")]
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    lakes = [(rows, *generated_lake(args.workdir / str(rows), rows)) for rows in sizes]
    if args.s3:
        print("spark-s3: Spark local[2] through S3A (hadoop-aws 3.3.1) to moto on 127.0.0.1 -- S3A + moto, "
              "not real S3", flush=True)
    with moto_s3() if args.s3 else nullcontext() as s3:
        for rows, config, lines in lakes:
            bench(f"{rows / 1e6:g}M ({lines:,} lines)", config, args.repeat, s3)


if __name__ == "__main__":
    main()
