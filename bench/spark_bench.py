"""Both engines of `spendlake attribute` on one lake, timed in the same run (issue 8).

    python bench/spark_bench.py [--rows 1000000] [--workdir /tmp/spendlake-spark-bench]
                                [--lake-dir /tmp/attr-bench] [--repeat 2]

Per lake (a synthetic month of `--rows` line items, generated and ingested under `--workdir`
unless there; plus, with `--lake-dir`, the lake of bench/attribute_bench.py there, e.g. 10M
rows), each a whole `spendlake attribute --since 7d --until UNTIL --by team,project
--format json` process (Spark: JVM start included), median of `--repeat`:
  - duckdb / spark over the per-period rollups (the normal path);
  - duckdb / spark from the raw lines (a lake view without rollups: DuckDB builds and
    writes them, then queries; Spark rolls up in memory and writes nothing).
Every answer must equal the DuckDB one before any time counts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

UNTIL = "2026-11-29T12:30:00Z"
ATTRIBUTION = {"dimensions": {"team": {"tags": ["team", "owner-team"]}, "project": {"tags": ["project"]}}}


def attribute(config: Path, engine: str) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "service.cli", "--config", str(config), "attribute", "--since", "7d",
           "--until", UNTIL, "--by", "team,project", "--engine", engine, "--format", "json"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return elapsed, json.loads(done.stdout)


def generated_lake(workdir: Path, rows: int) -> Path:
    """A config over a lake of one synthetic month with about `rows` line items."""
    from connectors.synthetic import generate_organisation

    config = workdir / "spendlake.yaml"
    export = workdir / "export"
    config.write_text(json.dumps({"lake": str(workdir / "lake"), "attribution": ATTRIBUTION, "sources": [
        {"name": "ml-org", "kind": "aws-cur2", "location": str(export / "ml-org-cur2")}]}))
    marker = workdir / f"ingested-{rows}"
    if not marker.exists():
        shutil.rmtree(workdir / "lake", ignore_errors=True)
        result = generate_organisation(export, days=30, start=date(2026, 11, 1), rows=rows, formats=("parquet",))
        print(f"generated {result.rows:,} rows", flush=True)
        subprocess.run([sys.executable, "-m", "service.cli", "--config", str(config), "ingest"], check=True,
                       cwd=Path(__file__).resolve().parent.parent)
        marker.touch()
    return config


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


def bench(label: str, config: Path, repeat: int) -> None:
    raw = raw_view(config)
    rollups = Path(json.loads(raw.read_text())["lake"]) / "attribution_rollup"
    duck, expected = timed(config, "duckdb", repeat, None)
    spark, _ = timed(config, "spark", repeat, expected)
    duck_raw, _ = timed(raw, "duckdb", repeat, expected, before=lambda: shutil.rmtree(rollups, ignore_errors=True))
    shutil.rmtree(rollups, ignore_errors=True)
    spark_raw, _ = timed(raw, "spark", repeat, expected)
    print(f"{label:>6}  rollups: duckdb {duck:6.2f} s  spark {spark:6.2f} s   "
          f"raw lines: duckdb {duck_raw:6.2f} s  spark {spark_raw:6.2f} s   (equal answers)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spendlake-spark-bench"))
    parser.add_argument("--lake-dir", type=Path, help="a bench/attribute_bench.py workdir (spendlake.yaml + lake)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    args.workdir.mkdir(parents=True, exist_ok=True)
    bench(f"{args.rows / 1e6:g}M", generated_lake(args.workdir, args.rows), args.repeat)
    if args.lake_dir:
        bench("lake-dir", args.lake_dir / "spendlake.yaml", args.repeat)


if __name__ == "__main__":
    main()
