"""Ingest benchmark: `spendlake ingest` vs a bare DuckDB copy of the same files, per layout.

    python bench/ingest_bench.py                                  # every layout, 1M and 10M, 3 runs
    python bench/ingest_bench.py --sizes 100000 --repeat 1        # a quick look
    python bench/ingest_bench.py --sizes 100000 --repeat 1 --layouts legacy-csv.gz,cur2-parquet

Layouts (one synthetic month of the organisation of connectors.synthetic.billing, about
`--sizes` line items, generated once and cached under --work):

    legacy-csv.gz   aws-cur   legacy CUR, 20 CSV.gz parts of one assembly, with its manifests
    cur2-csv.gz     aws-cur2  CUR 2.0 Data Exports, one CSV.gz with its manifest
    cur2-parquet    aws-cur2  CUR 2.0 Data Exports, one Parquet file with its manifest
    focus-csv       focus     FOCUS 1.0, one plain CSV in a folder (periods read from the data)
    focus-csv-parts focus     FOCUS 1.0, 20 plain CSV parts in a folder (a first ingest: the parts
                              are read once, their periods learnt as they are staged)
    focus-parquet   focus     FOCUS 1.0 as typed Parquet (costs DECIMAL(38,12), times TIMESTAMPTZ,
                              Tags a map), 20 parts in a folder
    focus-parquet-hive focus  the same, Hive-partitioned by SubAccountId (`SubAccountId=…/`, the
                              column only in the folder names), 20 parts per account folder

For each size, run and layout, interleaved, each timed as a whole process:

- ingest: `python -m service --config <cfg> ingest` into a fresh lake: read, convert, stage,
  commit, and build the attribution rollups, as `spendlake ingest` always does;
- bare:   `python -c`: `COPY (SELECT * FROM read_csv([<the same files>])) TO '<out>.parquet'
  (FORMAT parquet)` (read_parquet for Parquet): DuckDB's defaults (snappy, sniffed types,
  insertion order kept), the literal bare copy, comparable with every earlier session's figures.
  `--bare lake`: the file the lake writes, as fast as DuckDB writes it: the lake's compression
  (zstd), row group size (131,072) and unordered write (its writer connection's
  `preserve_insertion_order = false`), and on a FOCUS CSV its types where the sniffer reads
  others: exact decimals for money and quantities (the sniffer reads DOUBLE), text for ids (the
  sniffer reads numeric ones as BIGINT). The Tags stay JSON text (the lake's map has no bare
  form) and other layouts' columns are sniffed. Both forms cost about the same (bench/README.md).

The ingest runs with `-v`: its log's "building the attribution rollups" line splits its wall
time into staging and commit (what the bare copy compares with) and the rollup build, which
has no counterpart in the bare copy; both are reported (`ingest s` includes the rollups).

Wall and CPU seconds are medians, peak RSS the largest of the runs, from `/usr/bin/time -v`
(or `getrusage(RUSAGE_CHILDREN)` in a wrapper process where that is missing). A run only
counts when the lake's ledger holds the generator's rows and totals. Targets at the largest
size, per layout: it ingests; wall <= 1.2 x bare; peak RSS <= 1 GB; RSS at the largest size
<= 1.5 x RSS at the smallest. Results: a table on stdout and JSON in bench/out/.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from connectors.synthetic.billing import generate_organisation  # noqa: E402
from service.core.schema import COST_TYPES, MONEY, QUANTITY  # noqa: E402
from service.core.staging import ROW_GROUP_ROWS  # noqa: E402

MONTH_START, MONTH_DAYS, SEED = date(2026, 10, 1), 31, 2026
# argv: the output file, "lake" or "defaults", read_csv's types as JSON, then the input files
BARE_COPY = """import duckdb, json, sys
out, form, types, files = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4:]
listed = ', '.join("'" + f.replace("'", "''") + "'" for f in files)
typed = ', types = {' + ', '.join(f"'{name}': '{kind}'" for name, kind in types.items()) + '}' if types else ''
reader = f'read_parquet([{listed}])' if files[0].endswith('.parquet') else f'read_csv([{listed}]{typed})'
con = duckdb.connect()
if form == 'lake':  # as the lake's writer connection
    con.execute('SET preserve_insertion_order = false')
    con.execute('SET enable_progress_bar = false')
options = ', COMPRESSION zstd, ROW_GROUP_SIZE %d' % ROW_GROUP_ROWS if form == 'lake' else ''
con.execute(f"COPY (SELECT * FROM {reader}) TO '{out}' (FORMAT parquet{options})")
""".replace("ROW_GROUP_ROWS", str(ROW_GROUP_ROWS))
RSS_WRAPPER = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print('Maximum resident set size (kbytes):', u.ru_maxrss, file=sys.stderr); "
               "print('User time (seconds):', u.ru_utime, file=sys.stderr); "
               "print('System time (seconds):', u.ru_stime, file=sys.stderr); sys.exit(code)")
TARGET_WALL, TARGET_RSS_MB, TARGET_GROWTH = 1.2, 1024, 1.5


@dataclass(frozen=True)
class Layout:
    name: str
    fmt: str  # connectors.synthetic.billing format
    kind: str  # source kind
    parts: int
    pattern: str  # glob of the data files under the export
    parquet: str = ""  # "" as generated; "flat" or "hive": the generated FOCUS CSVs as typed Parquet


LAYOUTS = {layout.name: layout for layout in (
    Layout("legacy-csv.gz", "legacy-csv.gz", "aws-cur", 20, "*/*/*.csv.gz"),
    Layout("cur2-csv.gz", "csv.gz", "aws-cur2", 1, "data/*/*.csv.gz"),
    Layout("cur2-parquet", "parquet", "aws-cur2", 1, "data/*/*.parquet"),
    Layout("focus-csv", "focus-csv", "focus", 1, "*/*.csv"),
    Layout("focus-csv-parts", "focus-csv", "focus", 20, "*/*.csv"),
    Layout("focus-parquet", "focus-csv", "focus", 20, "*/*.parquet", parquet="flat"),
    Layout("focus-parquet-hive", "focus-csv", "focus", 20, "*/*/*.parquet", parquet="hive"),
)}
# FOCUS CSV → typed Parquet, as a FOCUS Parquet export holds it
FOCUS_TYPED = ("SELECT * REPLACE (CAST(BilledCost AS DECIMAL(38,12)) AS BilledCost, "
               "CAST(EffectiveCost AS DECIMAL(38,12)) AS EffectiveCost, CAST(ListCost AS DECIMAL(38,12)) AS ListCost, "
               "CAST(ConsumedQuantity AS DECIMAL(38,16)) AS ConsumedQuantity, "
               + ", ".join(f"CAST({c} AS TIMESTAMPTZ) AS {c}" for c in (
                   "BillingPeriodStart", "BillingPeriodEnd", "ChargePeriodStart", "ChargePeriodEnd"))
               + ", CAST(json(nullif(Tags, '')) AS MAP(VARCHAR, VARCHAR)) AS Tags) "
               "FROM read_csv(?, all_varchar = true)")


def to_parquet(root: Path, hive: bool) -> None:
    """Each generated FOCUS CSV becomes typed Parquet beside it (Hive: one file per
    SubAccountId=… folder, the column only in the folder name); the CSVs go."""
    import duckdb

    con = duckdb.connect()
    for csv_file in sorted(root.glob("*/*.csv")):
        target = csv_file.with_suffix(".parquet")
        relation = con.sql(FOCUS_TYPED, params=[str(csv_file)])
        if hive:  # DuckDB writes the partition column into the folder names only
            relation.create_view("part")
            folder, pattern = str(csv_file.parent).replace("'", "''"), f"{csv_file.stem}_{{i}}"
            con.execute(f"COPY part TO '{folder}' (FORMAT parquet, PARTITION_BY (SubAccountId), "
                        f"FILENAME_PATTERN '{pattern}', OVERWRITE_OR_IGNORE true)")
        else:
            relation.write_parquet(str(target))
        csv_file.unlink()


def export(work: Path, layout: Layout, rows: int) -> dict:
    """The layout's export of `rows` line items, generated once and cached with its totals."""
    folder = work / f"rows-{rows}" / layout.name
    marker = folder / "expected.json"
    if marker.exists():
        return json.loads(marker.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    print(f"  generating {layout.name}, {rows:,} rows ...", flush=True)
    began = time.perf_counter()
    result = generate_organisation(folder, days=MONTH_DAYS, start=MONTH_START, seed=SEED, rows=rows,
                                   formats=(layout.fmt,), parts=layout.parts)
    root = result.exports[layout.fmt]
    if layout.parquet:
        to_parquet(root, hive=layout.parquet == "hive")
    expected = {"export": str(root), "files": sorted(str(f) for f in root.glob(layout.pattern)),
                "periods": {p.billing_period: [p.rows, str(p.billed_cost), str(p.effective_cost)]
                            for p in result.periods},
                "rows": result.rows, "generate_seconds": round(time.perf_counter() - began, 1)}
    expected["bytes"] = sum(Path(f).stat().st_size for f in expected["files"])
    if len(expected["files"]) < layout.parts * len(result.periods):
        raise SystemExit(f"{layout.name}: expected at least {layout.parts} data files per period, found {expected['files']}")
    marker.write_text(json.dumps(expected, indent=1))
    return expected


# The log's UTC stamp (service/core/logs.py) of the rollup phase's first line, to the millisecond.
ROLLUP_START = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z INFO service\.ingest\.rollups: building", re.M)


def measure(command: list[str], cwd: Path = REPO) -> tuple[float, int, float, str | None, float | None]:
    """(wall seconds, peak RSS in MB, CPU seconds, error or None, wall seconds until the
    rollup build began or None) of one whole process and its children. CPU time is reported
    too: on a shared machine it is steadier than wall time."""
    wrapped = (["/usr/bin/time", "-v", *command] if Path("/usr/bin/time").exists()
               else [sys.executable, "-c", RSS_WRAPPER, *command])
    began, began_at = time.perf_counter(), time.time()
    done = subprocess.run(wrapped, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - began
    rollups = ROLLUP_START.search(done.stderr)
    before_rollups = (datetime.strptime(rollups.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
                      .timestamp() - began_at if rollups else None)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", done.stderr))
    error = None
    if done.returncode != 0:
        error = (done.stdout + done.stderr).strip().split("\tCommand being timed")[0][-1500:]
    return wall, int(rss.group(1)) // 1024 if rss else -1, cpu, error, before_rollups


def check_lake(lake: Path, expected: dict) -> str | None:
    """The benchmark only counts if the ingest was right: rows and sums as generated."""
    entries = json.loads((lake / "_ledger" / "deliveries.json").read_text())["entries"]
    got = {}
    for entry in entries:
        [totals] = entry["totals"]
        got[entry["billing_period"]] = [entry["rows"], Decimal(totals["billed_cost"]),
                                        Decimal(totals["effective_cost"])]
    want = {p: [n, Decimal(b), Decimal(e)] for p, (n, b, e) in expected["periods"].items()}
    return None if got == want else f"the lake does not hold what was generated: {got} != {want}"


def lake_types(layout: Layout, files: list[str]) -> dict[str, str]:
    """read_csv's types for the bare copy of a FOCUS CSV: the lake's where the sniffer reads
    another (money and quantities exact, not DOUBLE; ids text, not BIGINT); none for other
    layouts (their columns are not the lake's names)."""
    if layout.kind != "focus" or layout.parquet:
        return {}
    with open(files[0], newline="", encoding="utf-8-sig") as first:
        header = next(csv.reader(first))
    return {name: COST_TYPES[name] for name in header if COST_TYPES.get(name) in (MONEY, QUANTITY, "VARCHAR")}


def run_once(work: Path, layout: Layout, rows: int, expected: dict, baseline: Path | None = None,
             bare: str = "defaults") -> dict:
    lake = work / f"lake-{layout.name}-{rows}"
    config = work / f"bench-{layout.name}-{rows}.yaml"
    config.write_text(json.dumps({"lake": str(lake), "sources": [
        {"name": "bench", "kind": layout.kind, "location": expected["export"]}]}))
    run = {}
    for name, tree in [("ingest", REPO), *([("baseline", baseline)] if baseline else [])]:
        shutil.rmtree(lake, ignore_errors=True)
        # `python -m service` from `tree`: its checkout's code (the current directory comes first on sys.path)
        wall, rss, cpu, error, staged = measure([sys.executable, "-m", "service", "--config", str(config), "-v",
                                                 "ingest"], cwd=tree)
        run[name], run[f"{name}_error"] = [wall, rss, cpu], error or check_lake(lake, expected)
        run[f"{name}_before_rollups_s"] = staged
    shutil.rmtree(lake, ignore_errors=True)
    out = work / f"bare-{layout.name}-{rows}.parquet"
    out.unlink(missing_ok=True)
    types = lake_types(layout, expected["files"]) if bare == "lake" else {}
    bw, br, bc, bare_error, _ = measure([sys.executable, "-c", BARE_COPY, str(out), bare, json.dumps(types),
                                         *expected["files"]])
    out.unlink(missing_ok=True)
    if bare_error:
        raise SystemExit(f"the bare copy failed: {bare_error}")
    if run.get("baseline_error"):
        raise SystemExit(f"the baseline's ingest failed: {run['baseline_error']}")
    return {**run, "bare": [bw, br, bc], "error": run.pop("ingest_error"),
            "before_rollups_s": run.pop("ingest_before_rollups_s")}


def summarise(layout: Layout, expected: dict, runs: list[dict]) -> dict:
    good = [r for r in runs if not r["error"]]
    summary = {"layout": layout.name, "rows": expected["rows"], "files": len(expected["files"]),
               "bytes": expected["bytes"], "runs": runs, "ok": len(good) == len(runs)}
    for name in ("ingest", "bare", *(["baseline"] if "baseline" in runs[0] else [])):
        values = [r[name] for r in (good if name == "ingest" else runs)] or [[float("nan"), -1, float("nan")]]
        summary[f"{name}_wall_s"] = statistics.median(v[0] for v in values)
        summary[f"{name}_rss_mb"] = max(v[1] for v in values)
        summary[f"{name}_cpu_s"] = statistics.median(v[2] for v in values)
    summary["wall_ratio"] = summary["ingest_wall_s"] / summary["bare_wall_s"]
    before = [r["before_rollups_s"] for r in good if r["before_rollups_s"] is not None]
    summary["before_rollups_wall_s"] = statistics.median(before) if before else float("nan")
    summary["before_rollups_ratio"] = summary["before_rollups_wall_s"] / summary["bare_wall_s"]
    summary["cpu_ratio"] = summary["ingest_cpu_s"] / summary["bare_cpu_s"]
    if "baseline_wall_s" in summary:
        summary["baseline_wall_ratio"] = summary["baseline_wall_s"] / summary["bare_wall_s"]
        summary["baseline_cpu_ratio"] = summary["baseline_cpu_s"] / summary["bare_cpu_s"]
        wait = [r["baseline_before_rollups_s"] for r in runs if r["baseline_before_rollups_s"] is not None]
        summary["baseline_before_rollups_ratio"] = (statistics.median(wait) if wait else float("nan")) / summary["bare_wall_s"]
    return summary


def print_table(results: list[dict]) -> None:
    print(f"\n{'layout':<14} {'rows':>12} {'files':>5} {'MB':>6} {'ingest s':>9} {'bare s':>8} {'ratio':>6} {'w/o rollups':>11} {'ratio':>6} "
          f"{'ingest CPU':>11} {'bare CPU':>9} {'CPU ratio':>9} {'ingest MB':>10} {'bare MB':>8}")
    for r in results:
        status = "" if r["ok"] else "  FAILED: " + next(x["error"] for x in r["runs"] if x["error"]).splitlines()[-1]
        print(f"{r['layout']:<14} {r['rows']:>12,} {r['files']:>5} {r['bytes'] / 2**20:>6.0f} {r['ingest_wall_s']:>9.2f} "
              f"{r['bare_wall_s']:>8.2f} {r['wall_ratio']:>6.2f} {r['before_rollups_wall_s']:>11.2f} "
              f"{r['before_rollups_ratio']:>6.2f} {r['ingest_cpu_s']:>11.1f} {r['bare_cpu_s']:>9.1f} "
              f"{r['cpu_ratio']:>9.2f} {r['ingest_rss_mb']:>10} {r['bare_rss_mb']:>8}{status}")
        if "baseline_wall_s" in r:
            print(f"{'  baseline':<14} {'':>12} {'':>5} {'':>6} {r['baseline_wall_s']:>9.2f} {'':>8} "
                  f"{r['baseline_wall_ratio']:>6.2f} {'':>11} {r['baseline_before_rollups_ratio']:>6.2f} "
                  f"{r['baseline_cpu_s']:>11.1f} {'':>9} {r['baseline_cpu_ratio']:>9.2f} {r['baseline_rss_mb']:>10}")


def checks(results: list[dict], layouts: list[Layout]) -> dict[str, bool]:
    found: dict[str, bool] = {}
    for layout in layouts:
        mine = sorted((r for r in results if r["layout"] == layout.name), key=lambda r: r["rows"])
        largest, smallest = mine[-1], mine[0]
        at = f"{layout.name} at {largest['rows']:,} rows"
        found[f"{at}: ingests, with the generated totals"] = largest["ok"]
        found[f"{at}: wall {largest['wall_ratio']:.2f} x bare <= {TARGET_WALL}"] = largest["wall_ratio"] <= TARGET_WALL
        found[f"{at}: wall before the rollup build {largest['before_rollups_ratio']:.2f} x bare <= {TARGET_WALL}"] = (
            largest["before_rollups_ratio"] <= TARGET_WALL)
        found[f"{at}: peak RSS {largest['ingest_rss_mb']} MB <= {TARGET_RSS_MB} MB"] = (
            largest["ok"] and largest["ingest_rss_mb"] <= TARGET_RSS_MB)
        if len(mine) > 1 and largest["ok"] and smallest["ok"]:
            growth = largest["ingest_rss_mb"] / smallest["ingest_rss_mb"]
            found[f"{at}: RSS {growth:.2f} x RSS at {smallest['rows']:,} <= {TARGET_GROWTH}"] = growth <= TARGET_GROWTH
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated row counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help=f"comma-separated, of {', '.join(LAYOUTS)}")
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "work",
                        help="generated exports (cached) and scratch lakes")
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. a worktree of main): its ingest is "
                        "timed too, interleaved with this one's, for a before/after under the same load")
    parser.add_argument("--bare", choices=("defaults", "lake"), default="defaults",
                        help="the bare copy with DuckDB's defaults (snappy, sniffed types: the literal bare COPY, "
                        "default, comparable with earlier sessions) or writing the lake's file (compression, row "
                        "groups, unordered, a FOCUS CSV's exact types)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    unknown = set(args.layouts.split(",")) - set(LAYOUTS)
    if unknown:
        parser.error(f"unknown layouts {sorted(unknown)}; choose among {', '.join(LAYOUTS)}")
    layouts = [LAYOUTS[name] for name in args.layouts.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for rows in sizes:
        print(f"{rows:,} rows", flush=True)
        exports = {layout.name: export(args.work, layout, rows) for layout in layouts}
        runs: dict[str, list[dict]] = {layout.name: [] for layout in layouts}
        for attempt in range(args.repeat):
            for layout in layouts:
                run = run_once(args.work, layout, rows, exports[layout.name], args.baseline, args.bare)
                runs[layout.name].append(run)
                (iw, ir, ic), (bw, br, bc) = run["ingest"], run["bare"]
                staged = f", {run['before_rollups_s']:.2f}s before the rollups" if run["before_rollups_s"] else ""
                print(f"  {layout.name:<14} run {attempt + 1}: ingest {iw:.2f}s ({ic:.1f} CPU s{staged}) {ir} MB, "
                      f"bare {bw:.2f}s ({bc:.1f} CPU s) {br} MB" + (f"  FAILED: {run['error']}" if run["error"] else "")
                      + (f", baseline {run['baseline'][0]:.2f}s ({run['baseline'][2]:.1f} CPU s) {run['baseline'][1]} MB"
                         if "baseline" in run else ""), flush=True)
        results.extend(summarise(layout, exports[layout.name], runs[layout.name]) for layout in layouts)

    print_table(results)
    found = checks(results, layouts)
    print()
    for name, ok in found.items():
        print(f"{'PASS' if ok else 'MISS'}  {name}")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = REPO / "bench" / "out" / f"ingest-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout
    load = os.getloadavg()
    out.write_text(json.dumps({"when": stamp, "commit": commit.strip(), "command": " ".join(sys.argv),
                               "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "load_average": load},
                               "bare": args.bare, "results": results, "checks": found}, indent=1))
    print(f"\nresults: {out.relative_to(REPO)} (load average now {load[0]:.1f})")


if __name__ == "__main__":
    main()
