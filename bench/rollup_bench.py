"""Rollup-phase benchmark: the attribution rollups and metric tops an ingest builds after its
commit (service/ingest/rollups.py), rebuilt on a kept lake, this tree against a baseline tree.

Each run is a fresh process that removes the lake's stored rollups and tops, imports the
writer modules an ingest has loaded by then (pyarrow with them), then times `materialise` and
`build_tops` under the lake lock (wall and CPU seconds of the process, DuckDB's
threads included). Runs alternate baseline / this tree, so load on a shared machine hits both;
medians of `--repeat`. Each pair of runs must store the same files (names, Parquet schemas,
rows), or the bench stops. `--baseline` is a source tree of the code to compare with, e.g.
`mkdir /tmp/base && git archive main | tar -x -C /tmp/base`. The lake is one an ingest made, e.g.
`bench/ingest_bench.py`'s exports ingested with `python -m service --config C ingest`.

    nice -n 10 python bench/rollup_bench.py --config C --baseline /tmp/base --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
# argv: the config; prints "rollup_wall rollup_cpu tops_wall tops_cpu", then the stored files as JSON
PHASE = """
import json, shutil, sys, time
import service.core.commit  # an ingest has its writer modules (and so pyarrow) loaded before the phase
from service.attribution import build_tops, materialise
from service.core.config import load_config
from service.core.lake import Lake
config = load_config(sys.argv[1])
lake = Lake.of(config)
for table in ("attribution_rollup", "metric_tops"):
    shutil.rmtree(config.lake / table, ignore_errors=True)
with lake.lock("ingest"):
    lake.settle()
    w0, c0 = time.perf_counter(), time.process_time()
    materialise(lake, config)
    w1, c1 = time.perf_counter(), time.process_time()
    build_tops(lake, config)
    w2, c2 = time.perf_counter(), time.process_time()
print(w1 - w0, c1 - c0, w2 - w1, c2 - c1)
con = lake.connect()
stored = {}
for table in ("attribution_rollup", "metric_tops"):
    for file in sorted((config.lake / table).rglob("*.parquet")):
        schema = con.execute("SELECT name, type, logical_type, repetition_type FROM parquet_schema(?)",
                             [str(file)]).fetchall()
        [(rows,)] = con.execute("SELECT md5(string_agg(r, chr(10) ORDER BY r)) FROM (SELECT CAST(t AS VARCHAR) AS r "
                                "FROM read_parquet(?, hive_partitioning = false) AS t)", [str(file)]).fetchall()
        stored[str(file.relative_to(config.lake))] = [str(schema), rows]
print(json.dumps(stored))
"""


def run(tree: Path, config: str) -> tuple[list[float], dict[str, list[str]]]:
    """The phase's times in `tree`, and what it stored: file → [its Parquet schema, digest of its rows]."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", PHASE, config], env=env, cwd=tree, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"the phase failed in {tree}:\n{done.stderr}")
    times, stored = done.stdout.splitlines()[-2:]
    return [float(value) for value in times.split()], json.loads(stored)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="spendlake config of a lake an ingest made")
    parser.add_argument("--baseline", required=True, type=Path, help="source tree of the code to compare with")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[list[float]]] = {"baseline": [], "this tree": []}
    for attempt in range(args.repeat):
        stored = {}
        for name, tree in (("baseline", args.baseline.resolve()), ("this tree", HERE)):
            times, stored[name] = run(tree, args.config)
            runs[name].append(times)
            rw, rc, tw, tc = times
            print(f"  run {attempt + 1} {name:<9}: rollups {rw:.2f}s ({rc:.2f} CPU s), tops {tw:.2f}s ({tc:.2f} CPU s), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
        if stored["this tree"] != stored["baseline"]:
            sys.exit(f"the stored rollups or tops differ from the baseline's: {stored}")
    print(f"stored rollups and tops identical to the baseline's ({len(stored['baseline'])} files: names, "
          "Parquet schemas, rows)")
    print(f"\n{'':<10} {'rollups s':>10} {'CPU s':>7} {'tops s':>7} {'CPU s':>7} {'phase s':>8} {'CPU s':>7}")
    medians = {}
    for name, found in runs.items():
        rw, rc, tw, tc = (statistics.median(run[i] for run in found) for i in range(4))
        medians[name] = (rw + tw, rc + tc)
        print(f"{name:<10} {rw:>10.2f} {rc:>7.2f} {tw:>7.2f} {tc:>7.2f} {rw + tw:>8.2f} {rc + tc:>7.2f}")
    (bw, bc), (nw, nc) = medians["baseline"], medians["this tree"]
    print(f"\nthis tree / baseline: wall {nw / bw:.2f}, CPU {nc / bc:.2f}")


if __name__ == "__main__":
    main()
