"""Azure cost details ingest: this checkout against another (`--baseline`, e.g. an export of main).

    python bench/azure_bench.py --baseline /tmp/main-src                 # 1M lines, 3 runs each
    python bench/azure_bench.py --baseline /tmp/main-src --rows 100000 --repeat 1

The file is the Trey Research EA actual-cost sample (tests/data/samples/azure, 11 lines, 8
distinct Tags texts, no braces) repeated to --rows lines, cached under --work. Each run is
`python -m service --config <cfg> ingest` into a fresh lake as a whole process, run from the
checkout's folder (its `service` and `connectors` packages), baseline and candidate interleaved.
Medians of wall and CPU seconds, the largest peak RSS; a run counts only when its ledger holds
the sample's billed cost x repeats.
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

from ingest_bench import REPO, measure  # noqa: E402

SAMPLE = REPO / "tests" / "data" / "samples" / "azure" / "ea_actual_trey_research_small.csv"


def azure_file(work: Path, rows: int) -> tuple[Path, int, Decimal]:
    """The sample repeated to about `rows` lines: (path, lines, billed cost)."""
    sample = duckdb.sql("SELECT count(*), sum(CAST(Cost AS DECIMAL(38, 12))) FROM read_csv(?, "
                        "all_varchar = true)", params=[str(SAMPLE)]).fetchall()[0]
    copies = max(1, rows // sample[0])
    path = work / f"azure-{copies * sample[0]}.csv"
    if not path.exists():
        duckdb.execute(f"COPY (SELECT s.* FROM read_csv(?, all_varchar = true) s, range({copies})) TO '{path}' "
                       "(HEADER, DELIMITER ',')", [str(SAMPLE)])
    return path, copies * sample[0], sample[1] * copies


def billed(lake: Path) -> Decimal:
    entries = json.loads((lake / "_ledger" / "deliveries.json").read_text())["entries"]
    return sum((Decimal(t["billed_cost"]) for e in entries for t in e["totals"]), Decimal(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout to compare with")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=BENCH / "out" / "azure")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    path, rows, expected = azure_file(args.work, args.rows)
    runs: dict[str, list[tuple[float, int, float]]] = {"baseline": [], "this": []}
    for _ in range(args.repeat):
        for name, checkout in (("baseline", args.baseline.resolve()), ("this", REPO)):
            lake, config = args.work / f"lake-{name}", args.work / f"{name}.yaml"
            shutil.rmtree(lake, ignore_errors=True)
            config.write_text(json.dumps({"lake": str(lake), "sources": [
                {"name": "azure", "kind": "azure-cost", "location": str(path)}]}))
            wall, rss, cpu, error, _ = measure([sys.executable, "-m", "service", "--config", str(config), "ingest"],
                                               cwd=checkout)
            if error or billed(lake) != expected:
                sys.exit(f"{name}: {error or f'billed {billed(lake)}, expected {expected}'}")
            runs[name].append((wall, rss, cpu))
    print(f"{rows:,} lines, {args.repeat} runs each: median wall s, median CPU s, peak RSS MB")
    for name, got in runs.items():
        print(f"{name:>9}: {statistics.median(r[0] for r in got):6.2f} {statistics.median(r[2] for r in got):6.2f} "
              f"{max(r[1] for r in got):5d}  (CPU s {', '.join(f'{r[2]:.2f}' for r in got)})")


if __name__ == "__main__":
    main()
