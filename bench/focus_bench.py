"""FOCUS ingest benchmark: `spendlake ingest` of a FOCUS CSV vs a bare DuckDB copy.

    python bench/focus_bench.py                          # 100k and 1M rows, 3 runs each
    python bench/focus_bench.py --sizes 100000 --repeat 1

The file is Microsoft's 1,000-row FOCUS 1.0 sample (tests/data/samples, 96 columns, JSON tags,
BOM, `2024-06-01T00:00Z` times) repeated to the size asked, cached under --work. Each run
times, as whole processes: `python -m service ingest` into a fresh lake, and
`COPY (SELECT * FROM read_csv(file)) TO 'x.parquet'`. Median wall, CPU seconds and peak RSS
are printed; the ingested BilledCost must equal the sample's reference sum × repeats.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from decimal import Decimal
from pathlib import Path

import duckdb

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from ingest_bench import BARE_COPY, REPO, measure  # noqa: E402

SAMPLE = REPO / "tests" / "data" / "samples" / "focus" / "azure_focus_1.0_trey_research_1000.csv"
SAMPLE_ROWS, SAMPLE_BILLED = 1000, Decimal("193.807689048914")


def focus_file(work: Path, rows: int) -> Path:
    path = work / f"focus-{rows}.csv"
    if not path.exists():
        copies = rows // SAMPLE_ROWS
        duckdb.sql(f"COPY (SELECT s.* FROM read_csv('{SAMPLE}', all_varchar = true) s, range({copies})) "
                   f"TO '{path}' (HEADER, DELIMITER ',')")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=BENCH / "out" / "focus")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"{'rows':>10} {'ingest s':>9} {'bare s':>8} {'ratio':>6} {'ingest CPU s':>13} {'bare CPU s':>11} "
          f"{'ingest MB':>10} {'bare MB':>8}")
    for rows in sorted(int(s) for s in args.sizes.split(",")):
        path = focus_file(args.work, rows)
        lake, config = args.work / "lake", args.work / "focus.yaml"
        config.write_text(json.dumps({"lake": str(lake), "sources": [
            {"name": "focus", "kind": "focus", "location": str(path)}]}))
        ingest, bare = [], []
        for _ in range(args.repeat):
            shutil.rmtree(lake, ignore_errors=True)
            *timing, error = measure([sys.executable, "-m", "service", "--config", str(config), "ingest"])
            if error:
                raise SystemExit(f"ingest failed: {error}")
            ingest.append(timing)
            [entry] = json.loads((lake / "_ledger" / "deliveries.json").read_text())["entries"]
            if Decimal(entry["totals"][0]["billed_cost"]) != SAMPLE_BILLED * (rows // SAMPLE_ROWS):
                raise SystemExit(f"wrong BilledCost in the lake: {entry['totals']}")
            bare.append(measure([sys.executable, "-c", BARE_COPY, str(args.work / "bare.parquet"), str(path)])[:3])
        iw, bw = statistics.median(r[0] for r in ingest), statistics.median(r[0] for r in bare)
        ic, bc = statistics.median(r[2] for r in ingest), statistics.median(r[2] for r in bare)
        print(f"{rows:>10,} {iw:>9.2f} {bw:>8.2f} {iw / bw:>6.2f} {ic:>13.1f} {bc:>11.1f} "
              f"{max(r[1] for r in ingest):>10} {max(r[1] for r in bare):>8}", flush=True)


if __name__ == "__main__":
    main()
