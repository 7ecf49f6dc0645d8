"""Ingest benchmark: `spendlake ingest` of one CUR 2.0 CSV.gz month vs a bare DuckDB copy.

    python bench/ingest_bench.py                       # 1M and 10M rows, 3 runs each
    python bench/ingest_bench.py --sizes 100000 --repeat 1   # a quick look

For each size the synthetic organisation (connectors.synthetic.billing) writes one month of CUR 2.0
as CSV.gz (cached under --work, regenerated only when missing). Then, in one run and
interleaved, each of these is timed as a whole process, `--repeat` times:

- ingest: `python -m service --config <cfg> ingest` into a fresh lake (a second ingest of
  the same delivery would be a no-op);
- bare:   `python -c` with DuckDB: `COPY (SELECT * FROM read_csv('<file>')) TO '<out>.parquet'`.

Wall time is the median; peak RSS is that of the process and its children, from
`/usr/bin/time -v` (or `getrusage(RUSAGE_CHILDREN)` in a wrapper process where that is
missing). The ingested totals are checked against the generator's expected totals.
Targets at the largest size: ingest wall ≤ 1.2 × bare, peak RSS ≤ 1 GB, and RSS at the
largest size ≤ 1.5 × RSS at the smallest. Results: a table on stdout and JSON in bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from connectors.synthetic.billing import generate_organisation  # noqa: E402

MONTH_START, MONTH_DAYS = date(2026, 10, 1), 31
BARE_COPY = ("import duckdb, sys; duckdb.sql(\"COPY (SELECT * FROM read_csv('\" + sys.argv[1] + \"')) "
             "TO '\" + sys.argv[2] + \"' (FORMAT parquet)\")")
RSS_WRAPPER = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print('Maximum resident set size (kbytes):', u.ru_maxrss, file=sys.stderr); "
               "print('User time (seconds):', u.ru_utime, file=sys.stderr); "
               "print('System time (seconds):', u.ru_stime, file=sys.stderr); sys.exit(code)")
TARGET_WALL, TARGET_RSS_MB, TARGET_GROWTH = 1.2, 1024, 1.5


def delivery(work: Path, rows: int) -> tuple[Path, dict]:
    """The CSV.gz export of `rows` line items, generated once and cached with its totals."""
    folder = work / f"rows-{rows}"
    marker = folder / "expected.json"
    if marker.exists():
        expected = json.loads(marker.read_text())
        return Path(expected["export"]), expected
    if folder.exists():
        shutil.rmtree(folder)
    began = time.perf_counter()
    result = generate_organisation(folder, days=MONTH_DAYS, start=MONTH_START, seed=2026, rows=rows,
                                   formats=("csv.gz",))
    [period] = result.periods
    expected = {"export": str(result.exports["csv.gz"]), "rows": period.rows,
                "billed_cost": str(period.billed_cost), "effective_cost": str(period.effective_cost),
                "bytes": sum(f.stat().st_size for f in result.files), "generate_seconds": time.perf_counter() - began}
    marker.write_text(json.dumps(expected, indent=1))
    return Path(expected["export"]), expected


def measure(command: list[str]) -> tuple[float, int, float]:
    """(wall seconds, peak RSS in MB, CPU seconds) of one whole process and its children.
    CPU time is reported too: on a shared machine it is steadier than wall time."""
    wrapped = (["/usr/bin/time", "-v", *command] if Path("/usr/bin/time").exists()
               else [sys.executable, "-c", RSS_WRAPPER, *command])
    began = time.perf_counter()
    done = subprocess.run(wrapped, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout}\n{done.stderr[-3000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", done.stderr))
    return wall, int(rss.group(1)) // 1024 if rss else -1, cpu


def run_size(work: Path, rows: int, repeat: int) -> dict:
    export, expected = delivery(work, rows)
    data_file = next(export.glob("data/BILLING_PERIOD=*/*.csv.gz"))
    runs: dict[str, list[tuple[float, int, float]]] = {"ingest": [], "bare": []}
    for attempt in range(repeat):
        lake = work / f"lake-{rows}"
        shutil.rmtree(lake, ignore_errors=True)
        config = work / f"bench-{rows}.yaml"
        config.write_text(json.dumps({"lake": str(lake), "sources": [
            {"name": "bench", "kind": "aws-cur2", "location": str(export)}]}))
        runs["ingest"].append(measure([sys.executable, "-m", "service", "--config", str(config), "ingest"]))
        check_lake(lake, expected)
        out = work / f"bare-{rows}.parquet"
        out.unlink(missing_ok=True)
        runs["bare"].append(measure([sys.executable, "-c", BARE_COPY, str(data_file), str(out)]))
        (iw, ir, ic), (bw, br, bc) = runs["ingest"][-1], runs["bare"][-1]
        print(f"  {rows:>10,} rows, run {attempt + 1}: ingest {iw:.2f}s ({ic:.1f} CPU s) {ir} MB, "
              f"bare {bw:.2f}s ({bc:.1f} CPU s) {br} MB", flush=True)
    summary = {"rows": expected["rows"], "csv_gz_bytes": expected["bytes"], "runs": runs}
    for name, values in runs.items():
        summary[f"{name}_wall_s"] = statistics.median(w for w, _, _ in values)
        summary[f"{name}_rss_mb"] = max(r for _, r, _ in values)
        summary[f"{name}_cpu_s"] = statistics.median(c for _, _, c in values)
    summary["wall_ratio"] = summary["ingest_wall_s"] / summary["bare_wall_s"]
    return summary


def check_lake(lake: Path, expected: dict) -> None:
    """The benchmark only counts if the ingest was right: rows and sums as generated."""
    ledger = json.loads((lake / "_ledger" / "deliveries.json").read_text())
    [entry] = ledger["entries"]
    [totals] = entry["totals"]
    got = (entry["rows"], Decimal(totals["billed_cost"]), Decimal(totals["effective_cost"]))
    want = (expected["rows"], Decimal(expected["billed_cost"]), Decimal(expected["effective_cost"]))
    if got != want:
        raise SystemExit(f"the lake does not hold what was generated: {got} != {want}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated row counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "work",
                        help="generated exports (cached) and scratch lakes")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for rows in sizes:
        print(f"{rows:,} rows: generating (cached after the first time) ...", flush=True)
        results.append(run_size(args.work, rows, args.repeat))

    print(f"\n{'rows':>12} {'csv.gz MB':>10} {'ingest s':>9} {'bare s':>8} {'ratio':>6} {'ingest CPU s':>13} "
          f"{'bare CPU s':>11} {'ingest MB':>10} {'bare MB':>8}")
    for r in results:
        print(f"{r['rows']:>12,} {r['csv_gz_bytes'] / 2**20:>10.0f} {r['ingest_wall_s']:>9.2f} {r['bare_wall_s']:>8.2f} "
              f"{r['wall_ratio']:>6.2f} {r['ingest_cpu_s']:>13.1f} {r['bare_cpu_s']:>11.1f} {r['ingest_rss_mb']:>10} "
              f"{r['bare_rss_mb']:>8}")
    largest, smallest = results[-1], results[0]
    growth = largest["ingest_rss_mb"] / smallest["ingest_rss_mb"] if len(results) > 1 else None
    checks = {
        f"ingest wall <= {TARGET_WALL} x bare at {largest['rows']:,} rows": largest["wall_ratio"] <= TARGET_WALL,
        f"ingest peak RSS <= {TARGET_RSS_MB} MB at {largest['rows']:,} rows": largest["ingest_rss_mb"] <= TARGET_RSS_MB,
    }
    if growth is not None:
        checks[f"RSS at {largest['rows']:,} <= {TARGET_GROWTH} x RSS at {smallest['rows']:,} "
               f"(is {growth:.2f}x)"] = growth <= TARGET_GROWTH
    print()
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'MISS'}  {name}")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "bench" / "out" / f"ingest-{stamp}.json"
    out.write_text(json.dumps({"when": stamp, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                               "command": " ".join(sys.argv), "results": results, "checks": checks}, indent=1))
    print(f"\nresults: {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
