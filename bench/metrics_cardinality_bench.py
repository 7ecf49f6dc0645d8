"""`/metrics` at high cardinality (issue 14, RELIABILITY 61): scrape latency and the service's
peak RSS with 10k, 100k and 1M distinct experiment values, against baselines in the same run.

    nice -n 10 python bench/metrics_cardinality_bench.py [--sizes 10000,100000,1000000]
        [--lines 1000000,2000000,10000000] [--scrapes 40] [--workdir /tmp/spendlake-metrics-bench]
        [--data-end month-start|now] [--service-builds [delivery|config]]

Per size:
1. writes a lake of `lines` cost lines (hourly, 50 teams, 400 projects, `size` distinct
   experiments) through `Lake.commit_costs`, over the 30 days ending at the start of this
   month (`--data-end month-start`, the default: the daily report's month to date then holds
   every line and experiment, whatever the day the bench runs) or at this hour (`now`: early
   in a month the report and the month-to-date window see a day or two of data);
2. the rollup build in its own process (the stored rollups and tops removed first), as
   `spendlake rollup` runs it (the same code ingest runs after a commit): the attribution
   rollups, then the metric tops, each timed with its own peak RSS (VmHWM, reset between the
   two); with `--service-builds` it then writes a changed delivery of the lake's month (the
   same lines with other costs, a FOCUS Parquet export: bench/metrics_bench_lake.py) into the
   source's folder, so the service's first ingest commits it and builds the new state's
   rollups and tops, with the previous state's stored, as after a provider's re-delivery;
   with `--service-builds config` they are removed again instead, as after a config change
   (none of the service's config stored: the build runs while the daily make-up report
   rolls the month up in memory, and scrapes meanwhile show no tops);
3. starts `spendlake serve` on the lake, waits for its start-up jobs (ingest, rules, and the
   daily make-up run: verify and the report), scrapes
   once (warm), then times `--scrapes` scrapes of `/metrics`, each one recomputed (the bench
   touches `_state/sources.json` before it, so the collector's page cache never answers:
   every scrape reads the lake and the stored tops), and reads the service's peak RSS
   (VmHWM, the whole life of the process, all start-up jobs included). A thread samples the
   service's RSS every 50 ms; each job's peak is the largest sample within its run (its end
   and duration from the job metrics). The jobs take turns (service/serve/scheduler.py); were
   two to overlap, their peaks would share samples: the table names overlapping jobs. The
   wait scrapes every 2 s: those that ended while a job ran are timed and counted when they
   showed the previous state's tops, or none (`spendlake_metric_tops_current 0`).
   A start-up job that failed fails the bench (without a delivery ingest finds no export file
   by design). The service runs with `-v`; its log goes to `<workdir>/serve.log`;
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
import shutil
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from metrics_bench_lake import lake_end, write_delivery, write_lake  # noqa: E402  (bench/ is on sys.path)

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


ROLLUP_SCRIPT = textwrap.dedent('''
    import re, sys, time
    from service.attribution import build_tops, materialise
    from service.core.config import load_config
    from service.core.lake import Lake
    def peak():
        with open("/proc/self/status") as status:
            return int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)) * 1024
    def reset_peak():
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    config = load_config(sys.argv[1])
    lake = Lake.of(config)
    with lake.lock("ingest"):
        lake.settle()
        reset_peak()
        started = time.perf_counter()
        materialise(lake, config)
        rollups = time.perf_counter() - started, peak()
        reset_peak()
        started = time.perf_counter()
        build_tops(lake, config)
        tops = time.perf_counter() - started, peak()
    print(*rollups, *tops)
''')


def data_end(anchor: str) -> datetime:
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0, tzinfo=None)
    return now.replace(day=1, hour=0) if anchor == "month-start" else now


def start_serve(config_path: Path) -> tuple[subprocess.Popen, str, list[str]]:
    """The service, its address, and its log as it grows (read on a thread, so a long log
    never blocks it)."""
    proc = subprocess.Popen([sys.executable, "-m", "service", "--config", str(config_path), "-v", "serve"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        match = re.search(r"serving (http://\S+)", line)
        if match:
            log: list[str] = []
            threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
            return proc, match.group(1), log
    raise RuntimeError(f"spendlake serve did not start (exit {proc.wait()})")


def build_rollups(config_path: Path) -> dict:
    """`spendlake rollup`'s two steps in their own process: wall time and peak RSS of each."""
    out = subprocess.run([sys.executable, "-c", ROLLUP_SCRIPT, str(config_path)], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout.split()
    return {"rollups_s": float(out[0]), "rollups_rss_mb": int(out[1]) >> 20,
            "tops_s": float(out[2]), "tops_rss_mb": int(out[3]) >> 20}


class RssSampler(threading.Thread):
    """The resident set of process `pid` every `every` seconds, with the wall clock's time."""

    def __init__(self, pid: int, every: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, int]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        status = Path(f"/proc/{self.pid}/status")
        while not self.stopped.is_set():
            try:
                rss = int(re.search(r"VmRSS:\s+(\d+) kB", status.read_text()).group(1)) * 1024
            except (OSError, AttributeError):  # the process is gone
                return
            self.samples.append((time.time(), rss))
            self.stopped.wait(self.every)

    def peak(self, start: float, end: float) -> int:
        return max((rss for at, rss in self.samples if start <= at <= end), default=0)


NOTHING_TO_INGEST = "no FOCUS files"  # the export folder is empty: the bench writes the lake itself


def job_runs(page: str, log: list[str], delivered: bool) -> dict[str, tuple[float, float]]:
    """Each start-up job's (start, end) on the wall clock, from its last success and duration.
    Without a delivery ingest finds no export file (the bench wrote the lake), a failure that
    still refreshes the rollups and tops; it ends where rules start. Any other failure fails
    the bench."""
    def value(metric: str, job: str) -> float:
        return float(re.search(rf'{metric}{{job="{job}"}} (\S+)', page).group(1))

    if value("spendlake_job_failures_total", "ingest") and (
            delivered or not any(NOTHING_TO_INGEST in line for line in log)):
        raise RuntimeError("the service's ingest failed:\n" + "".join(log[-20:]))
    runs = {}
    for job in ("rules", "verify", "daily"):
        if value("spendlake_job_failures_total", job):
            raise RuntimeError(f"the service's start-up job {job} failed:\n" + "".join(log[-20:]))
        end = value("spendlake_job_last_success_timestamp_seconds", job)
        runs[job] = (end - value("spendlake_job_duration_seconds_sum", job), end)
    rules_started = runs["rules"][0]  # ingest, then rules, on one thread
    runs["ingest"] = (rules_started - value("spendlake_job_duration_seconds_sum", "ingest"), rules_started)
    return runs


def step_peaks(sampler: RssSampler, runs: dict[str, tuple[float, float]],
               scrapes: tuple[float, float]) -> dict[str, dict]:
    """Per job and for the timed scrapes: seconds, peak RSS sampled, and the jobs it overlapped."""
    steps = {**runs, "scrapes": scrapes}
    return {name: {"s": round(end - start, 1), "rss_mb": sampler.peak(start, end) >> 20,
                   "overlaps": [other for other, (s, e) in steps.items() if other != name and s < end and start < e]}
            for name, (start, end) in steps.items()}


def scrape(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=600) as response:
        return response.read().decode()


STARTUP_JOBS = ("ingest", "rules", "daily")  # daily: the make-up run (verify, then the report)


def wait_for_jobs(base: str, timeout: float = 3600) -> list[tuple[float, float, float | None]]:
    """Until the start-up jobs are over (their duration histograms count them): the peak RSS
    read after the scrapes then covers them all. Returns the scrapes made meanwhile, every
    2 s as Prometheus would: (when, seconds, the `spendlake_metric_tops_current` value)."""
    deadline = time.monotonic() + timeout
    during = []
    while time.monotonic() < deadline:
        started = time.perf_counter()
        page = scrape(base)
        current = re.search(r"^spendlake_metric_tops_current (\S+)", page, re.M)
        during.append((time.time(), time.perf_counter() - started, float(current.group(1)) if current else None))
        done = {job for job in STARTUP_JOBS
                if re.search(rf'spendlake_job_duration_seconds_count{{job="{job}"}} [1-9]', page)}
        if done == set(STARTUP_JOBS):
            return during
        time.sleep(2)
    raise RuntimeError("the service's start-up jobs did not finish")


def scrapes_during(during: list[tuple[float, float, float | None]], runs: dict[str, tuple[float, float]]) -> dict:
    """The scrapes that ended while a start-up job ran (the ingest's commit, rollups and
    tops; the report): latency, and how many showed the previous state's tops (or none)."""
    start, end = min(s for s, _ in runs.values()), max(e for _, e in runs.values())
    inside = [(seconds, current) for at, seconds, current in during if start <= at <= end]
    times = [seconds for seconds, _ in inside] or [0.0]
    return {"n": len(inside), "p50_s": statistics.median(times), "p99_s": percentile(times, 0.99),
            "max_s": max(times), "previous_tops": sum(1 for _, current in inside if current == 0)}


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


def forget_derived(lake: Path) -> None:
    """Remove the stored rollups and metric tops, as a config change makes them another config's."""
    for table in ("attribution_rollup", "metric_tops"):
        shutil.rmtree(lake / table, ignore_errors=True)


def bench_size(workdir: Path, size: int, lines: int, scrapes: int, old_path: bool, end: datetime,
               service_builds: str | None) -> dict:
    started = time.perf_counter()
    config_path = write_lake(workdir, size, lines, end)
    written = time.perf_counter() - started
    forget_derived(workdir / "lake")  # the build below computes them all
    started = time.perf_counter()
    build = build_rollups(config_path)
    built = time.perf_counter() - started
    if service_builds == "delivery":  # the service's first ingest commits it, then builds rollups and tops
        write_delivery(workdir, size, lines, lake_end(config_path))
    elif service_builds == "config":  # no rollups or tops of the service's config stored
        forget_derived(workdir / "lake")
    state = workdir / "lake" / "_state" / "sources.json"
    (workdir / "lake" / "_state" / "jobs.json").unlink(missing_ok=True)  # so the daily make-up run is due
    proc, base, log = start_serve(config_path)
    sampler = RssSampler(proc.pid)
    sampler.start()
    try:
        during = wait_for_jobs(base)
        page = scrape(base)  # warm
        runs = job_runs(page, log, delivered=service_builds == "delivery")
        series = sum(1 for line in page.splitlines() if line.startswith("spendlake_experiment_spend_usd{"))
        times = []
        scrapes_started = time.time()
        for _ in range(scrapes):
            os.utime(state)  # a lake change the page cache sees; the stored tops stay current
            started = time.perf_counter()
            scrape(base)
            times.append(time.perf_counter() - started)
        steps = step_peaks(sampler, runs, (scrapes_started, time.time()))
        rss = peak_rss(proc.pid)
    finally:
        sampler.stopped.set()
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:  # a job still running holds the shutdown
            proc.kill()
            proc.wait()
    (workdir / "serve.log").write_text("".join(log), encoding="utf-8")  # -v: each step's start
    bare = bare_tops_query(config_path, scrapes)
    result = {"values": size, "lines": lines, "lake_write_s": round(written, 1), "rollup_and_tops_s": round(built, 1),
              "scrape_p50_s": statistics.median(times), "scrape_p99_s": percentile(times, 0.99),
              "service_peak_rss_mb": rss >> 20, "bare_tops_p50_s": statistics.median(bare),
              "experiment_series": series, "data_end": end.isoformat(), "service_builds": service_builds, "rollup_build": build, "service_steps": steps,
              "scrapes_during_jobs": scrapes_during(during, runs)}
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
    parser.add_argument("--service-builds", nargs="?", const="delivery", choices=("delivery", "config"),
                        help="the service's ingest job builds the rollups and tops: after committing a changed "
                             "delivery of the month (`delivery`, the default), or with none stored for its config "
                             "(`config`: as after a config change or on first start)")
    parser.add_argument("--data-end", choices=("month-start", "now"), default="month-start",
                        help="where the lake's 30 days end (a lake already in --workdir keeps its own)")
    args = parser.parse_args()
    end = data_end(args.data_end)
    results = []
    for size, lines in zip(map(int, args.sizes.split(",")), map(int, args.lines.split(","))):
        result = bench_size(args.workdir / f"v{size}-l{lines}", size, lines, args.scrapes, size <= args.old_path_max,
                            end, args.service_builds)
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
    print("\nPeak RSS per step (rollups and tops: `spendlake rollup`'s steps in their own process; the jobs "
          "and scrapes: the service's RSS sampled every 50 ms during each):\n")
    print("| values | rollups | tops | ingest | rules | verify | daily (report) | scrapes | service VmHWM |")
    print("|---:|" + "---:|" * 8)
    for r in results:
        jobs = r["service_steps"]
        cells = [f"{jobs[j]['rss_mb']} MB, {jobs[j]['s']:.0f} s" + (f" (with {', '.join(jobs[j]['overlaps'])})"
                                                                     if jobs[j]["overlaps"] else "")
                 for j in ("ingest", "rules", "verify", "daily", "scrapes")]
        build = r["rollup_build"]
        print(f"| {r['values']:,} | {build['rollups_rss_mb']} MB, {build['rollups_s']:.0f} s | "
              f"{build['tops_rss_mb']} MB, {build['tops_s']:.0f} s | " + " | ".join(cells)
              + f" | {r['service_peak_rss_mb']} MB |")
    print("\nScrapes every 2 s while the start-up jobs ran (ingest: commit, rollups, metric tops; rules; verify; "
          "the report):\n")
    print("| values | scrapes | p50 | p99 | max | tops_current 0 (previous tops or none) |\n|---:|---:|---:|---:|---:|---:|")
    for r in (r for r in results if r["scrapes_during_jobs"]["n"]):
        d = r["scrapes_during_jobs"]
        print(f"| {r['values']:,} | {d['n']} | {d['p50_s'] * 1000:.0f} ms | {d['p99_s'] * 1000:.0f} ms | "
              f"{d['max_s'] * 1000:.0f} ms | {d['previous_tops']} |")
    last = results[-1]
    ok = last["scrape_p99_s"] <= 1 and last["service_peak_rss_mb"] <= 1024
    print(f"\nat {last['values']:,} values: p99 {last['scrape_p99_s']:.3f} s (target <= 1 s), "
          f"RSS {last['service_peak_rss_mb']} MB (target <= 1024 MB): {'PASS' if ok else 'MISS'}")
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics_cardinality.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
