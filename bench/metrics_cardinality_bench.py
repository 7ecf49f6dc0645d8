"""`/metrics` at high cardinality (issue 14, RELIABILITY 61): scrape latency and the service's
peak RSS with 10k, 100k and 1M distinct experiment values, against baselines in the same run.

    nice -n 10 python bench/metrics_cardinality_bench.py [--sizes 10000,100000,1000000]
        [--lines 1000000,2000000,10000000] [--scrapes 40] [--workdir /tmp/spendlake-metrics-bench]

Per size:
1. writes a lake of `lines` cost lines (hourly, the 30 days ending at this hour, 50 teams,
   400 projects, `size` distinct experiments) through `Lake.commit_costs`;
2. `spendlake rollup` stores the attribution rollups and the metric tops (timed: this is
   what ingest adds after a commit);
3. starts `spendlake serve` on the lake, waits for its start-up jobs (ingest, rules, and the
   daily make-up run: verify and the report), scrapes
   once (warm), then times `--scrapes` scrapes of `/metrics`, each one recomputed (the bench
   touches `_state/sources.json` before it, so the collector's page cache never answers:
   every scrape reads the lake and the stored tops), and reads the service's peak RSS
   (VmHWM, the whole life of the process, all start-up jobs included);
4. baselines, same lake, same run: the bare DuckDB query of the stored tops file (the floor
   a scrape cannot beat), and, up to `--old-path-max` values, the old scrape path (one full
   attribution by team, project and experiment per window, folded in Python) in its own
   process, with its wall time and peak RSS.
Targets at 1M values: scrape p99 <= 1 s, service RSS <= 1 GB. Figures go to bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import textwrap
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

OLD_PATH_SCRIPT = textwrap.dedent('''
    import resource, sys, time
    from collections import defaultdict
    from datetime import datetime, timezone
    from decimal import Decimal
    from service.attribution import attribute
    from service.attribution.metric_top import metrics_anchor, windows
    from service.attribution.spend_tops import DIMENSIONS
    from service.core.config import load_config
    from service.core.lake import Lake
    from service.core.units import fold_top
    config = load_config(sys.argv[1])
    lake = Lake.of(config)
    started = time.perf_counter()
    series = 0
    for name, window in windows(metrics_anchor(lake, datetime.now(timezone.utc))).items():
        result = attribute(lake, config, window, by=DIMENSIONS)
        pairs, per_experiment = defaultdict(Decimal), defaultdict(Decimal)
        for row in result.rows:
            if row.currency == "USD":
                pairs[(row.values["team"], row.values["project"])] += row.cost
                per_experiment[(row.values["experiment"],)] += row.cost
        series += len(fold_top(pairs, config.service.top_n)) + len(fold_top(per_experiment, config.service.top_n))
    print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, series)
''')


def write_lake(workdir: Path, size: int, lines: int) -> Path:
    """The config of a lake holding `lines` hourly cost lines over `size` experiments."""
    from service.core.config import load_config
    from service.core.lake import Lake
    from service.core.schema import cost_select_list

    export = workdir / "export"
    export.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "spendlake.yaml"
    config_path.write_text(yaml.safe_dump({
        "lake": str(workdir / "lake"),
        "sources": [{"name": "cur", "kind": "focus", "location": str(export)}],
        "service": {"listen": "127.0.0.1:0"},
    }), encoding="utf-8")
    config = load_config(str(config_path))
    lake = Lake.of(config)
    if lake.ledger():
        return config_path
    end = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    hours = 30 * 24
    start = end - timedelta(hours=hours)
    select = cost_select_list({
        "BillingPeriodStart": "date_trunc('month', s)", "ChargePeriodStart": "s",
        "ChargePeriodEnd": "s + INTERVAL 1 HOUR", "BillingCurrency": "'USD'",
        "BilledCost": "c", "EffectiveCost": "c", "ServiceName": "'Amazon Elastic Compute Cloud'",
        "Tags": "MAP {'team': 'team-' || (i % 50), 'project': 'p-' || (i % 400), "
                "'experiment': 'exp-' || (i % $size)}",
    })
    con = lake.connect()
    try:
        relation = con.sql(
            f"SELECT {select} FROM (SELECT i, $start + to_hours(CAST((i * 7919) % $hours AS BIGINT)) AS s, "
            "CAST(((i * 2654435761) % 100000) / 100 AS DECIMAL(38, 12)) AS c FROM range($lines) AS t(i))",
            params={"start": start, "hours": hours, "size": size, "lines": lines})
        lake.commit_costs(con, relation, source="cur", delivery_id=f"bench-{size}-{lines}", periods=None)
    finally:
        con.close()
    return config_path


def spendlake(config_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "service", "--config", str(config_path), *args], cwd=REPO,
                          capture_output=True, text=True, check=True)


def start_serve(config_path: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "service", "--config", str(config_path), "serve"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        match = re.search(r"serving (http://\S+)", line)
        if match:
            return proc, match.group(1)
    raise RuntimeError(f"spendlake serve did not start (exit {proc.wait()})")


def scrape(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=600) as response:
        return response.read().decode()


STARTUP_JOBS = ("ingest", "rules", "daily")  # daily: the make-up run (verify, then the report)


def wait_for_jobs(base: str, timeout: float = 3600) -> None:
    """Until the start-up jobs are over (their duration histograms count them): the peak RSS
    read after the scrapes then covers them all."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = scrape(base)
        done = {job for job in STARTUP_JOBS
                if re.search(rf'spendlake_job_duration_seconds_count{{job="{job}"}} [1-9]', page)}
        if done == set(STARTUP_JOBS):
            return
        time.sleep(2)
    raise RuntimeError("the service's start-up jobs did not finish")


def peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024


def percentile(values: list[float], q: float) -> float:
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, round(q * (len(ranked) - 1))))]


def bare_tops_query(config_path: Path, repeat: int) -> list[float]:
    """The floor: DuckDB reading the stored tops file of this lake state, this hour."""
    import duckdb

    from service.attribution.tops import tops_file
    from service.core.config import load_config
    from service.core.lake import Lake

    config = load_config(str(config_path))
    lake = Lake.of(config)
    file = tops_file(lake, config, lake.snapshot())
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        con = duckdb.connect()
        con.execute("SELECT * FROM read_parquet(?)", [str(file)]).fetchall()
        con.close()
        times.append(time.perf_counter() - started)
    return times


def bench_size(workdir: Path, size: int, lines: int, scrapes: int, old_path: bool) -> dict:
    started = time.perf_counter()
    config_path = write_lake(workdir, size, lines)
    written = time.perf_counter() - started
    started = time.perf_counter()
    spendlake(config_path, "rollup")
    built = time.perf_counter() - started
    state = workdir / "lake" / "_state" / "sources.json"
    (workdir / "lake" / "_state" / "jobs.json").unlink(missing_ok=True)  # so the daily make-up run is due
    proc, base = start_serve(config_path)
    try:
        wait_for_jobs(base)
        page = scrape(base)  # warm
        series = sum(1 for line in page.splitlines() if line.startswith("spendlake_experiment_spend_usd{"))
        times = []
        for _ in range(scrapes):
            os.utime(state)  # a lake change the page cache sees; the stored tops stay current
            started = time.perf_counter()
            scrape(base)
            times.append(time.perf_counter() - started)
        rss = peak_rss(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:  # a job still running holds the shutdown
            proc.kill()
            proc.wait()
    bare = bare_tops_query(config_path, scrapes)
    result = {"values": size, "lines": lines, "lake_write_s": round(written, 1), "rollup_and_tops_s": round(built, 1),
              "scrape_p50_s": statistics.median(times), "scrape_p99_s": percentile(times, 0.99),
              "service_peak_rss_mb": rss >> 20, "bare_tops_p50_s": statistics.median(bare),
              "experiment_series": series}
    result["scrape_over_bare"] = result["scrape_p50_s"] / result["bare_tops_p50_s"]
    if old_path:
        out = subprocess.run([sys.executable, "-c", OLD_PATH_SCRIPT, str(config_path)], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout.split()
        result["old_path_s"], result["old_path_rss_mb"] = float(out[0]), int(out[1]) >> 20
        result["old_over_scrape"] = result["old_path_s"] / result["scrape_p50_s"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--lines", default="1000000,2000000,10000000")
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--old-path-max", type=int, default=100000,
                        help="run the old scrape path up to this many values (at 1M it needs GBs)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spendlake-metrics-bench"))
    args = parser.parse_args()
    results = []
    for size, lines in zip(map(int, args.sizes.split(",")), map(int, args.lines.split(","))):
        result = bench_size(args.workdir / f"v{size}-l{lines}", size, lines, args.scrapes, size <= args.old_path_max)
        results.append(result)
        print(json.dumps(result), flush=True)
    print(f"\n| values | lines | rollup+tops | scrape p50 | scrape p99 | service peak RSS | bare tops p50 | "
          "scrape/bare | old path | old path RSS | old/scrape |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        old = (f"{r['old_path_s']:.1f} s | {r['old_path_rss_mb']} MB | {r['old_over_scrape']:.0f}"
               if "old_path_s" in r else "not run | | ")
        print(f"| {r['values']:,} | {r['lines']:,} | {r['rollup_and_tops_s']:.0f} s | {r['scrape_p50_s'] * 1000:.0f} ms "
              f"| {r['scrape_p99_s'] * 1000:.0f} ms | {r['service_peak_rss_mb']} MB | "
              f"{r['bare_tops_p50_s'] * 1000:.1f} ms | {r['scrape_over_bare']:.0f} | {old} |")
    last = results[-1]
    ok = last["scrape_p99_s"] <= 1 and last["service_peak_rss_mb"] <= 1024
    print(f"\nat {last['values']:,} values: p99 {last['scrape_p99_s']:.3f} s (target <= 1 s), "
          f"RSS {last['service_peak_rss_mb']} MB (target <= 1024 MB): {'PASS' if ok else 'MISS'}")
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics_cardinality.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
