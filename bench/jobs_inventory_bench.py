"""`spendlake inventory` over one big job file: a sacct --parsable2 file and a jobs-file CSV of
`--jobs` records (default 1M), each read by a whole `spendlake inventory` process against a bare
DuckDB `read_csv` → Parquet of the same file in its own process (the floor: no validation, no
hostlists, no record ids), alternating, median wall of `--repeat`, peak RSS from
`/usr/bin/time -v`. `--time-format seconds|milliseconds|microseconds`: the jobs-file's times as
numbers of that unit since 1970 (its config says so), not ISO text; `--kinds`: which files, of
them `slurm-jobs-pipe`: the sacct file in README's --format order (JobName, Comment last) with a
`|` in every thousandth job name, which sacct does not escape; `slurm-jobs-breaks`: the same order
with a line break in every thousandth comment and a bare CR in every thousandth other one (sacct
prints both as they are).

    nice -n 10 python bench/jobs_inventory_bench.py --repeat 3 --work /tmp/jobsbench [--before /work/main/.venv/bin/spendlake]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

SACCT_HEADER = ("JobID|JobIDRaw|JobName|Cluster|Partition|Account|User|QOS|WCKey|Comment|State|Submit|Start|End|"
                "Elapsed|NodeList|AllocTRES")
README_ORDER = [SACCT_HEADER.split("|").index(name) for name in  # README's --format list: free text last
                "JobID|JobIDRaw|Cluster|Partition|Account|User|QOS|WCKey|State|Submit|Start|End|Elapsed|NodeList|"
                "AllocTRES|JobName|Comment".split("|")]
CSV_HEADER = "job_id,start_time,end_time,gpus,nodes,cluster,state,run_id,user,project,job_type"
STATES = ("COMPLETED", "FAILED", "CANCELLED by 0", "TIMEOUT", "RUNNING")
TARGET_RSS_MB = 1024  # peak RSS of `spendlake inventory` (MB of 2**20 bytes)


UNITS = {"seconds": 1, "milliseconds": 1_000, "microseconds": 1_000_000}


def write_files(work: Path, jobs: int, time_format: str = "iso") -> tuple[Path, Path, Path, Path]:
    numeric = "" if time_format == "iso" else f"-{time_format}"
    sacct, table = work / f"sacct-{jobs}.txt", work / f"jobs-{jobs}{numeric}.csv"
    piped, broken = work / f"sacct-{jobs}-pipe.txt", work / f"sacct-{jobs}-breaks.txt"

    def written(moment: datetime) -> str:  # the jobs-file's time cell
        if time_format == "iso":
            return moment.isoformat() + "Z"
        return str(int((moment - datetime(1970, 1, 1)).total_seconds()) * UNITS[time_format])

    if all(path.exists() for path in (sacct, table, piped, broken)):
        return sacct, table, piped, broken
    base = datetime(2026, 11, 1)
    with sacct.open("w") as s, table.open("w") as t, piped.open("w") as p, broken.open("w", newline="") as b:
        s.write(SACCT_HEADER + "\n")
        t.write(CSV_HEADER + "\n")
        p.write("|".join(SACCT_HEADER.split("|")[i] for i in README_ORDER) + "\n")
        b.write("|".join(SACCT_HEADER.split("|")[i] for i in README_ORDER) + "\n")
        for n in range(jobs):
            start = base + timedelta(seconds=n * 2)
            end = start + timedelta(minutes=30 + n % 600)
            state = STATES[n % len(STATES)]
            running = state == "RUNNING"
            first = 1 + (n * 4) % 248
            nodes = f"p5-[{first:03d}-{first + 1:03d}]"
            end_text = "Unknown" if running else end.isoformat()
            fields = [str(n + 1), str(n + 1), f"train-{n % 977}", "p5", "gpu", f"proj{n % 40}", f"u{n % 300}", "normal",
                      f"run{n // 5}", f"run=run{n // 5} job_type=sft", state, start.isoformat(), start.isoformat(),
                      end_text, "00:30:00", nodes, "billing=16,cpu=192,gres/gpu:h100=16,gres/gpu=16,node=2"]
            s.write("|".join(fields) + "\n")
            comment = fields[9]
            fields[9] = {1: comment + "\nnotes: resumed", 501: comment + "\rnotes"}.get(n % 1000, comment)
            b.write("|".join(fields[i] for i in README_ORDER) + "\n")
            fields[9] = comment
            if n % 1000 == 0:
                fields[2] = f"eval|sweep-{n}"
            p.write("|".join(fields[i] for i in README_ORDER) + "\n")
            t.write(f"{n + 1},{written(start)},{'' if running else written(end)},16,\"{nodes}\",p5,"
                    f"{state},run{n // 5},u{n % 300},proj{n % 40},sft\n")
    return sacct, table, piped, broken


def timed(command: list[str]) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (KB) and CPU seconds (user + system: steadier than the wall on a
    shared machine) of one process, via /usr/bin/time -v."""
    began = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *command], capture_output=True, text=True)
    wall = time.perf_counter() - began
    if done.returncode:
        sys.exit(f"{command} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", done.stderr).group(1)) for kind in ("User", "System"))
    return wall, rss, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/jobs-inventory-bench"))
    parser.add_argument("--before", type=Path, help="another checkout's spendlake (e.g. main's), run alternately too")
    parser.add_argument("--time-format", choices=["iso", *UNITS], default="iso", help="the jobs-file's times")
    parser.add_argument("--kinds", default="slurm-jobs,jobs-file", help="which files, comma-separated")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sacct, table, piped, broken = write_files(args.work, args.jobs, args.time_format)
    spendlake = str(Path(sys.executable).with_name("spendlake"))
    cases = {}
    for case, path, delim in (("slurm-jobs", sacct, "|"), ("jobs-file", table, ","), ("slurm-jobs-pipe", piped, "|"),
                              ("slurm-jobs-breaks", broken, "|")):
        if case not in args.kinds.split(","):
            continue
        kind = case.removesuffix("-pipe").removesuffix("-breaks")
        numeric = {"time_format": args.time_format} if kind == "jobs-file" and args.time_format != "iso" else {}
        config = args.work / f"{case}.yaml"
        config.write_text(json.dumps({"lake": str(args.work / f"lake-{case}"), "inventory": [
            {"name": "big", "kind": kind, "path": str(path), "cluster": "p5", **numeric}]}))
        skip = {"slurm-jobs-pipe": ", ignore_errors=true",  # the lines with a `|` too many left out; CRs too
                "slurm-jobs-breaks": ", ignore_errors=true, strict_mode=false"}.get(case, "")
        bare = ("import duckdb,sys; duckdb.execute(\"COPY (SELECT * FROM read_csv(?, delim=?, header=true, "
                f"all_varchar=true{skip})) TO ? (FORMAT parquet)\", [sys.argv[1], sys.argv[2], sys.argv[3]])")
        cases[case] = {"spendlake": [spendlake, "--config", str(config), "inventory"],
                       "bare": [sys.executable, "-c", bare, str(path), delim, str(args.work / f"bare-{case}.parquet")]}
        if args.before:
            cases[case]["before"] = [str(args.before), "--config", str(config), "inventory"]
    for kind, commands in cases.items():
        figures: dict[str, list[tuple[float, int, float]]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name in commands:
                figures[name].append(timed(commands[name]))
        wall = {name: statistics.median(w for w, _, _ in runs) for name, runs in figures.items()}
        cpu = {name: statistics.median(c for _, _, c in runs) for name, runs in figures.items()}
        rss = {name: max(r for _, r, _ in runs) / 1024 for name, runs in figures.items()}
        times = f", times as {args.time_format}" if kind == "jobs-file" else ""
        print(f"{kind} {args.jobs:,} jobs{times} (medians of {args.repeat}):")
        for name in commands:
            label = {"spendlake": "spendlake inventory", "bare": "bare DuckDB read_csv→Parquet"}.get(name, str(args.before))
            print(f"  {label}: {wall[name]:.1f} s wall, {cpu[name]:.1f} CPU s, peak RSS {rss[name]:.0f} MB "
                  f"(walls {[round(w, 1) for w, _, _ in figures[name]]})")
        print(f"  spendlake / bare: {wall['spendlake'] / wall['bare']:.1f}x wall, {cpu['spendlake'] / cpu['bare']:.1f}x CPU; "
              f"peak RSS {rss['spendlake']:.0f} MB: {'PASS' if rss['spendlake'] <= TARGET_RSS_MB else 'MISS'} "
              f"(<= {TARGET_RSS_MB} MB, RELIABILITY 46's 1 GB as bench/ingest_bench.py counts it)")


if __name__ == "__main__":
    main()
