"""Runs on a shared GPU cluster (issue 16, item 7): spendlake's allocation of instance cost to
jobs against a bare DuckDB interval join computing the same shares, in the same run.

    python bench/runs_bench.py                           # 250 p5 nodes (2,000 GPUs), 200k jobs, ~10M line items
    python bench/runs_bench.py --jobs 2000 --nodes 10    # small: a smoke test

1. Generates, once (cached under --work), November 2026 of the synthetic organisation with a
   Slurm cluster of --nodes p5.48xlarge nodes (connectors.synthetic.slurm): a CUR 2.0 Parquet
   export of about --rows line items in all (default 40,000 a node: 10M at 250 nodes), and
   --jobs job records as a jobs-file Parquet (connectors.synthetic.jobfile: the cluster's
   pretraining, post-training, eval and debug jobs, plus eval sweeps), both written in
   bounded memory; then ingests them into a lake (`spendlake ingest`, `spendlake inventory`).
2. Times the bare DuckDB query over the raw Parquet files, a whole process, median of
   --repeat, peak RSS from /usr/bin/time -v: each BoxUsage hour of a cluster node is shared
   by the jobs that held its GPUs, cost x (the job's GPUs on that node x overlap seconds) /
   (8 GPUs x 3600), scaled to capacity where jobs overbook the hour; what no job held is the
   cluster's idle. Its answer (cost per run, and idle) must add up to the nodes' bill.
3. Times spendlake's allocation the same way: `attribute --by run --where cluster=p5-west`
   with `clusters:` in the config (rollups built without it, so every run allocates the
   month from the raw lines and the jobs in memory), and compares the answers to the cent.
Targets: allocation wall <= 1.5 x the bare join's, peak RSS <= 1 GB, answers equal to the cent.
4. With --spark, the same query on `--engine spark` (local[2]), from the raw lines (the clusters'
   lines allocated on DuckDB in the driver, the rest on Spark) and from the stored rollups; each
   answer must equal DuckDB's exactly. Peak RSS is the largest process's (the JVM or Python).
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
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from connectors.synthetic.billing import expected_rows, write_billing  # noqa: E402
from connectors.synthetic.jobfile import write_jobs_file  # noqa: E402
from connectors.synthetic.org import INSTANCES, build_organisation  # noqa: E402
from connectors.synthetic.slurm import CLUSTER_TAG, NODE_TAG, add_slurm_cluster  # noqa: E402

START, DAYS, SEED, CLUSTER = date(2026, 11, 1), 30, 2026, "p5-west"
ROWS_PER_NODE = 40_000
TARGET_RATIO, TARGET_RSS_MB = 1.5, 1024
CENT = Decimal("0.01")
RUN_DEFAULT = "unallocated"
SPARK = ["--engine", "spark"]
CLUSTERS_CONFIG = "spendlake-clusters.yaml"  # the prepared config with `clusters:`, beside it

# argv: CUR 2.0 Parquet glob, jobs file, cluster, the window's end (running jobs end there)
BARE_JOIN = textwrap.dedent('''
    import json, sys
    import duckdb
    cur, jobs, cluster, until = sys.argv[1:5]
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    rows = con.execute("""
        WITH hours AS (          -- one BoxUsage line: one instance-hour of a cluster node
          SELECT resource_tags['user_slurm_node'] AS node, line_item_usage_start_date AS hour,
                 line_item_unblended_cost AS cost
          FROM read_parquet($cur)
          WHERE resource_tags['user_cluster'] = $cluster AND line_item_line_item_type = 'Usage'
            AND line_item_usage_type LIKE '%BoxUsage:%'),
        job_nodes AS (           -- a job holds gpus / len(nodes) GPUs on each of its nodes
          SELECT run_id, start_time, coalesce(end_time, CAST($until AS TIMESTAMP)) AS end_time,
                 gpus / len(string_split(nodes, ',')) AS node_gpus, unnest(string_split(nodes, ',')) AS node
          FROM read_parquet($jobs) WHERE nodes IS NOT NULL AND gpus > 0 AND start_time IS NOT NULL),
        job_hours AS (
          SELECT *, unnest(generate_series(date_trunc('hour', start_time), end_time - INTERVAL 1 MICROSECOND,
                                           INTERVAL 1 HOUR)) AS hour
          FROM job_nodes WHERE end_time > start_time),
        held AS (
          SELECT h.node, h.hour, h.cost, j.run_id,
                 j.node_gpus * epoch(least(j.end_time, h.hour + INTERVAL 1 HOUR) - greatest(j.start_time, h.hour))
                   AS gpu_seconds
          FROM hours h JOIN job_hours j ON j.node = h.node AND j.hour = h.hour),
        scaled AS (              -- an overbooked hour is shared out, never exceeded
          SELECT *, greatest(sum(gpu_seconds) OVER (PARTITION BY node, hour), 8 * 3600) AS capacity FROM held),
        runs AS (SELECT run_id, sum(cost * gpu_seconds / capacity) AS cost FROM scaled GROUP BY run_id)
        SELECT run_id, cost FROM runs
        UNION ALL SELECT NULL, (SELECT sum(cost) FROM hours) - (SELECT sum(cost) FROM runs)""",
        {"cur": cur, "jobs": jobs, "cluster": cluster, "until": until}).fetchall()
    print(json.dumps({"runs": {run: repr(cost) for run, cost in rows if run is not None},
                      "idle": repr(next(cost for run, cost in rows if run is None))}))
''')


def measure(command: list[str], label: str) -> tuple[float, int, float, str]:
    """(wall s, peak RSS MB, CPU s, stdout) of one whole process; exits when it fails."""
    wrapped = ["/usr/bin/time", "-v", *command] if Path("/usr/bin/time").exists() else command
    began = time.perf_counter()
    done = subprocess.run(wrapped, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-3000:]}")
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", done.stderr))
    peak = int(rss.group(1)) // 1024 if rss else -1
    print(f"  {wall:.1f} s, {cpu:.1f} CPU s, {peak} MB: {label}", flush=True)
    return wall, peak, cpu, done.stdout


def prepare(work: Path, nodes: int, jobs: int, rows: int) -> dict:
    """The export, the jobs file and a lake holding both, generated once per size."""
    folder = work / f"nodes-{nodes}-jobs-{jobs}-rows-{rows}"
    marker = folder / "prepared.json"
    if marker.exists():
        return json.loads(marker.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    base = build_organisation(SEED, START, DAYS)
    base_rows = expected_rows(base)
    add_slurm_cluster(base, name=CLUSTER, nodes=nodes)
    cluster_rows = expected_rows(base) - base_rows
    org = build_organisation(SEED, START, DAYS, max(rows - cluster_rows, base_rows // 100) / base_rows)
    cluster = add_slurm_cluster(org, name=CLUSTER, nodes=nodes)
    began = time.perf_counter()
    bill = write_billing(org, folder / "export")
    jobs_file = write_jobs_file(org, cluster, folder / "jobs" / "jobs.parquet", jobs=jobs)
    generated = time.perf_counter() - began
    print(f"generated {bill.rows:,} line items and {jobs_file.rows:,} jobs ({jobs_file.sweeps:,} sweep tasks on "
          f"{len(jobs_file.sweep_nodes)} nodes) in {generated:.0f} s", flush=True)
    config = folder / "spendlake.yaml"
    config.write_text(json.dumps({
        "lake": str(folder / "lake"),
        "sources": [{"name": "ml-org", "kind": "aws-cur2", "location": str(bill.exports["parquet"])}],
        "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(jobs_file.path), "cluster": CLUSTER}],
    }, indent=1))
    spendlake = [sys.executable, "-m", "service", "--config", str(config)]
    for step in ("ingest", "inventory"):
        wall, rss, cpu, _ = measure(spendlake + [step], f"spendlake {step}")
        print(f"spendlake {step}: {wall:.0f} s, {cpu:.0f} CPU s, {rss} MB", flush=True)
    window_end = datetime(START.year, START.month, START.day) + timedelta(days=DAYS)
    prepared = {"config": str(config), "cur": str(bill.exports["parquet"] / "data" / "*" / "*.parquet"),
                "jobs": str(jobs_file.path), "until": window_end.isoformat(), "line_items": bill.rows,
                "jobs_rows": jobs_file.rows, "generate_seconds": round(generated, 1),
                # what the cluster's nodes bill for their instance-hours: runs + idle must add up to it
                "cluster_box_cost": str(Decimal(INSTANCES[cluster.instance_type][0]) * nodes * DAYS * 24)}
    marker.write_text(json.dumps(prepared, indent=1))
    return prepared


def bare_answer(stdout: str) -> tuple[dict[str, Decimal], Decimal]:
    data = json.loads(stdout)
    return {run: Decimal(cost) for run, cost in data["runs"].items()}, Decimal(data["idle"])


def clusters_config(prepared: dict, name: str, lake: Path | None = None) -> Path:
    """The prepared config with `clusters:` (README "Shared GPU clusters"), written beside it."""
    document = json.loads(Path(prepared["config"]).read_text())
    document["attribution"] = {"clusters": {"node_tag": NODE_TAG, "cluster_tag": CLUSTER_TAG}}
    if lake is not None:
        document["lake"] = str(lake)
    path = Path(prepared["config"]).parent / name
    path.write_text(json.dumps(document, indent=1))
    return path


def attribute_command(prepared: dict, config: Path) -> list[str]:
    """spendlake's allocation of the cluster's month, a whole process: `attribute --by run`."""
    return [sys.executable, "-m", "service", "--config", str(config), "attribute", "--since", START.isoformat(),
            "--until", prepared["until"], "--by", "run", "--where", f"cluster={CLUSTER}", "--format", "json"]


def allocation_answer(stdout: str) -> tuple[dict[str, Decimal], Decimal, Decimal]:
    """(cost per run, idle, the cluster's lines allocation does not split: its nodes' volumes
    and traffic, which keep the run dimension's default)."""
    data = json.loads(stdout)
    runs: dict[str, Decimal] = {}
    for row in data["rows"]:
        runs[row["run"]] = runs.get(row["run"], Decimal(0)) + Decimal(row["cost"])
    return runs, runs.pop("idle", Decimal(0)), runs.pop(RUN_DEFAULT, Decimal(0))


def differences(bare: dict[str, Decimal], ours: dict[str, Decimal]) -> tuple[int, Decimal]:
    """(runs whose costs differ by more than a cent, the largest difference)."""
    names = set(bare) | set(ours)
    gaps = [abs(bare.get(n, Decimal(0)) - ours.get(n, Decimal(0))) for n in names]
    return sum(gap > CENT for gap in gaps), max(gaps, default=Decimal(0))


def month_parser(description: str) -> argparse.ArgumentParser:
    """The options that choose (and cache under --work) the month `prepare` builds; bench/rules_bench.py's too."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--nodes", type=int, default=250, help="p5.48xlarge nodes of the cluster (8 GPUs each)")
    parser.add_argument("--jobs", type=int, default=200_000, help="job records in the jobs file")
    parser.add_argument("--rows", type=int, help=f"line items in all (default {ROWS_PER_NODE:,} a node)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / "out" / "runs-work")
    return parser


def prepared_month(args: argparse.Namespace) -> dict:
    return prepare(args.work, args.nodes, args.jobs, args.rows or ROWS_PER_NODE * args.nodes)


def main() -> None:
    parser = month_parser(__doc__.splitlines()[0])
    parser.add_argument("--prepare-only", action="store_true",
                        help=f"generate and ingest, write {CLUSTERS_CONFIG} beside the lake, print how to query it, "
                             "time nothing")
    parser.add_argument("--spark", action="store_true", help="also time `attribute --engine spark` (step 4)")
    args = parser.parse_args()
    prepared = prepared_month(args)
    # the lake's rollups are the prepared config's: with `clusters:` each run allocates from the raw lines
    clusters = clusters_config(prepared, CLUSTERS_CONFIG)
    in_memory = attribute_command(prepared, clusters)
    if args.prepare_only:  # what a user runs by hand on the work folder
        print(f"prepared: {Path(prepared['config']).parent}; from {REPO}:\n  {' '.join(in_memory)}\n  "
              f"{' '.join(in_memory[:5])} runs --since {START.isoformat()} --until {prepared['until']}")
        return
    bare = [sys.executable, "-c", BARE_JOIN, prepared["cur"], prepared["jobs"], CLUSTER, prepared["until"]]
    runs, ours, spark = [], [], []
    for _ in range(args.repeat):  # alternating, so a change of the machine's load hits both alike
        runs.append(measure(bare, "bare join"))
        ours.append(measure(in_memory, "allocation from the raw lines"))
        if args.spark:
            spark.append(measure(in_memory + SPARK, "allocation from the raw lines on Spark"))
    shares, idle = bare_answer(runs[-1][3])
    billed = Decimal(prepared["cluster_box_cost"])
    if abs(sum(shares.values()) + idle - billed) > CENT:
        sys.exit(f"the bare join's runs + idle = {sum(shares.values()) + idle}, the nodes billed {billed}")
    result = {"when": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"), "command": " ".join(sys.argv),
              "prepared": prepared, "bare": summary("bare DuckDB interval join", runs)}
    print(f"  {len(shares):,} runs, idle {idle:,.2f} of {billed:,.2f} ({idle / billed:.1%})")
    result["allocation"] = summary("spendlake allocation from the raw lines (attribute --by run)", ours)
    answers = [("allocation", ours[-1][3])]
    if args.spark:
        result["spark"] = summary("the same on --engine spark, from the raw lines", spark)
        same_as_duckdb(spark, ours[-1][3], "from the raw lines")
    # what ingest does once: store the rollups with the allocation (in a hard-linked copy of
    # the lake, so the next run of this bench still finds none), then answer from them
    copy = Path(prepared["config"]).parent / "lake-rollup"
    subprocess.run(["rm", "-rf", str(copy)], check=True)
    subprocess.run(["cp", "-al", json.loads(Path(prepared["config"]).read_text())["lake"], str(copy)], check=True)
    try:
        stored = clusters_config(prepared, "spendlake-rollup.yaml", copy)
        build = measure([sys.executable, "-m", "service", "--config", str(stored), "rollup"], "spendlake rollup")
        result["rollup"] = summary("spendlake rollup (stores the month's rollup with the allocation)", [build])
        from_rollups = [measure(attribute_command(prepared, stored), "from the rollups") for _ in range(args.repeat)]
        result["from_rollups"] = summary("attribute --by run from the stored rollups", from_rollups)
        answers.append(("from_rollups", from_rollups[-1][3]))
        if args.spark:
            spark_stored = [measure(attribute_command(prepared, stored) + SPARK, "from the rollups on Spark")
                            for _ in range(args.repeat)]
            result["spark_from_rollups"] = summary("the same on --engine spark, from the stored rollups", spark_stored)
            same_as_duckdb(spark_stored, from_rollups[-1][3], "from the stored rollups")
    finally:
        subprocess.run(["rm", "-rf", str(copy)], check=True)
    ratio = result["allocation"]["wall_s"] / result["bare"]["wall_s"]
    result["ratio"] = ratio
    print(f"allocation / bare join: {ratio:.2f} wall (target <= {TARGET_RATIO}), "
          f"{result['allocation']['cpu_s'] / result['bare']['cpu_s']:.2f} CPU; allocation peak RSS "
          f"{result['allocation']['rss_mb']} MB, rollup build {result['rollup']['rss_mb']} MB (target <= {TARGET_RSS_MB})")
    result["load_average"] = os.getloadavg()
    differ = 0
    for name, stdout in answers:
        runs_ours, idle_ours, unsplit = allocation_answer(stdout)
        count, largest = differences({**shares, "idle": idle}, {**runs_ours, "idle": idle_ours})
        differ += count
        result[name]["answer"] = {"runs": len(runs_ours), "idle": str(idle_ours), "differ": count,
                                  "largest": str(largest), "unsplit": str(unsplit)}
        print(f"{name}: {len(runs_ours):,} runs, idle {idle_ours:,.2f}; {count} run(s) differ from the bare join by "
              f"more than a cent (largest {largest:.6f}); the cluster's lines that are not instance-hours "
              f"(volumes, traffic): {unsplit:,.2f}")
    out = REPO / "bench" / "out" / f"runs-{result['when']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"results: {out.relative_to(REPO)}")
    if differ:
        sys.exit("the answers differ by more than a cent")


def same_as_duckdb(spark: list[tuple[float, int, float, str]], duckdb_stdout: str, what: str) -> None:
    if any(json.loads(run[3]) != json.loads(duckdb_stdout) for run in spark):
        sys.exit(f"--engine spark {what} answers otherwise than DuckDB")


def summary(what: str, runs: list[tuple[float, int, float, str]]) -> dict:
    wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[2] for r in runs)
    rss = max(r[1] for r in runs)
    print(f"{what}: median {wall:.2f} s ({cpu:.1f} CPU s), peak RSS {rss} MB; runs "
          f"{', '.join(f'{r[0]:.2f}' for r in runs)}", flush=True)
    return {"wall_s": wall, "cpu_s": cpu, "rss_mb": rss, "runs": [r[:3] for r in runs]}

if __name__ == "__main__":
    main()
