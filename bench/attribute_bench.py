"""Speed of `spendlake attribute` against a bare DuckDB query and a hand-written pandas
attribution (issue 3, item 7). Every contender is a whole process, timed in the same run,
round-robin, median of `--repeat` runs; their answers are compared before any time counts.

    python bench/attribute_bench.py [--rows 10000000] [--workdir /tmp/spendlake-bench] [--repeat 3]

1. generates one month (November 2026) of the synthetic organisation as a CUR 2.0 export,
   Parquet (map-typed resource_tags) and CSV.gz (JSON tags), unless already there;
2. ingests the Parquet export into a lake (`spendlake ingest`, which also materialises the
   attribution rollups);
3. times, for the same window (`--since 7d --until <UNTIL>`, which cuts hourly and daily
   charge periods at both ends) and `--by team,project`:
   - `spendlake attribute --since 7d --until UNTIL --by team,project --format json`
   - the bare DuckDB query over the raw Parquet export computing the same answer
     (tag aliases, default, proration by the part of each charge period in the window);
   - a pandas attribution of the CSV.gz export;
   - and, for information, `--explain` and `--granularity day` (target: under 3 s);
   - with `--baseline DIR` (another checkout, e.g. /work/main), that checkout's
     `--granularity day` too, on its own lake ingested by it: before and after in one run
     (their day totals must agree to the cent).
Targets: spendlake ≤ 0.5 × DuckDB, and ≥ 20 × faster than pandas.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from datetime import date
from decimal import Decimal
from pathlib import Path

UNTIL = "2026-11-29T12:30:00Z"
SINCE_DAYS = 7
CENT = Decimal("0.01")
ATTRIBUTION = {"dimensions": {"team": {"tags": ["team", "owner-team"]}, "project": {"tags": ["project"]}}}

DUCKDB_SCRIPT = textwrap.dedent('''
    import json, sys
    from datetime import datetime, timedelta
    import duckdb
    path, until = sys.argv[1], datetime.fromisoformat(sys.argv[2].replace("Z", ""))
    since = until - timedelta(days=int(sys.argv[3]))
    def tag(*keys):
        return "coalesce(" + ", ".join(f"nullif(trim(resource_tags['{k}']), '')" for k in keys) + ", 'unallocated')"
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    rows = con.execute(f"""
        WITH lines AS (
          SELECT line_item_usage_start_date AS s, line_item_usage_end_date AS e,
                 line_item_currency_code AS currency, CAST(line_item_unblended_cost AS DECIMAL(38,12)) AS cost,
                 lower({tag('user_team', 'user_Team', 'team', 'user_owner_team')}) AS team,
                 lower({tag('user_project', 'user_Project', 'project')}) AS project
          FROM read_parquet(?) WHERE line_item_usage_start_date < ? AND line_item_usage_end_date > ?)
        SELECT team, project, currency,
               sum(CASE WHEN s >= ? AND e <= ? THEN cost ELSE cost * (epoch(least(e, ?)) - epoch(greatest(s, ?)))
                   / (epoch(e) - epoch(s)) END)
        FROM lines GROUP BY ALL""", [path, until, since, since, until, until, since]).fetchall()
    print(json.dumps([[t, p, c, str(v)] for t, p, c, v in rows]))
''')

PANDAS_SCRIPT = textwrap.dedent('''
    import json, sys
    import pandas as pd
    path, until = sys.argv[1], pd.Timestamp(sys.argv[2])
    since = until - pd.Timedelta(days=int(sys.argv[3]))
    df = pd.read_csv(path, usecols=["line_item_usage_start_date", "line_item_usage_end_date",
                                    "line_item_currency_code", "line_item_unblended_cost", "resource_tags"])
    s = pd.to_datetime(df["line_item_usage_start_date"], utc=True)
    e = pd.to_datetime(df["line_item_usage_end_date"], utc=True)
    keep = (s < until) & (e > since)
    df, s, e = df[keep], s[keep], e[keep]
    tags = df["resource_tags"].fillna("{}").map(json.loads)
    def pick(keys):
        def one(t):
            for k in keys:
                v = (t.get(k) or "").strip()
                if v:
                    return v.lower()
            return "unallocated"
        return tags.map(one)
    frac = ((e.clip(upper=until) - s.clip(lower=since)) / (e - s)).fillna(1.0)
    out = pd.DataFrame({"team": pick(["user_team", "user_Team", "team", "user_owner_team"]),
                        "project": pick(["user_project", "user_Project", "project"]),
                        "currency": df["line_item_currency_code"],
                        "cost": df["line_item_unblended_cost"] * frac})
    g = out.groupby(["team", "project", "currency"])["cost"].sum()
    print(json.dumps([[t, p, c, repr(v)] for (t, p, c), v in g.items()]))
''')


def run(cmd: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    return elapsed, done.stdout


def spendlake_answer(output: str) -> dict:
    data = json.loads(output)
    return {(r["team"].lower(), r["project"].lower(), r["currency"]): Decimal(r["cost"]) for r in data["rows"]}


def plain_answer(output: str) -> dict:
    return {(t, p, c): Decimal(v) for t, p, c, v in json.loads(output)}


def same(a: dict, b: dict, tolerance: Decimal) -> Decimal:
    """Largest difference between two answers; exits when keys differ or it exceeds `tolerance`."""
    if set(a) != set(b):
        sys.exit(f"answers differ in rows: {sorted(set(a) ^ set(b))[:10]}")
    worst = max((abs(a[k] - b[k]) for k in a), default=Decimal(0))
    if worst > tolerance:
        sys.exit(f"answers differ by up to {worst}")
    return worst


def prepare(workdir: Path, rows: int) -> tuple[Path, Path, Path]:
    from connectors.synthetic.billing import generate_organisation

    export = workdir / "export"
    marker = workdir / f"generated-{rows}"
    if not marker.exists():
        shutil.rmtree(export, ignore_errors=True)
        t = time.perf_counter()
        result = generate_organisation(export, days=30, start=date(2026, 11, 1), rows=rows,
                                       formats=("parquet", "csv.gz"))
        print(f"generated {result.rows:,} rows in {time.perf_counter() - t:.0f} s", flush=True)
        marker.touch()
    parquet = next((export / "ml-org-cur2" / "data").rglob("*.parquet"))
    csv = next((export / "ml-org-cur2-csv" / "data").rglob("*.csv.gz"))
    config = workdir / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(workdir / "lake"), "attribution": ATTRIBUTION, "sources": [
        {"name": "ml-org", "kind": "aws-cur2", "location": str(export / "ml-org-cur2")}]}))
    return config, parquet, csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/spendlake-bench"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout to time `--granularity day` against")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(repo))
    args.workdir.mkdir(parents=True, exist_ok=True)
    config, parquet, csv = prepare(args.workdir, args.rows)
    spendlake = [sys.executable, "-m", "service", "--config", str(config)]
    t, _ = run(spendlake + ["ingest"], repo)
    print(f"ingest (incl. rollups): {t:.1f} s", flush=True)
    window = ["--since", f"{SINCE_DAYS}d", "--until", UNTIL]
    contenders = {
        "spendlake attribute": spendlake + ["attribute", *window, "--by", "team,project", "--format", "json"],
        "bare duckdb query": [sys.executable, "-c", DUCKDB_SCRIPT, str(parquet), UNTIL, str(SINCE_DAYS)],
        "pandas (csv.gz)": [sys.executable, "-c", PANDAS_SCRIPT, str(csv), UNTIL, str(SINCE_DAYS)],
        "spendlake --explain": spendlake + ["attribute", *window, "--by", "team,project", "--explain",
                                            "--format", "json"],
        "spendlake --granularity day": spendlake + ["attribute", *window, "--by", "team,project",
                                                    "--granularity", "day", "--format", "json"],
    }
    if args.baseline:
        base_config = args.workdir / "baseline.yaml"
        base_config.write_text(config.read_text().replace(str(args.workdir / "lake"), str(args.workdir / "lake-baseline")))
        baseline = [sys.executable, "-m", "service", "--config", str(base_config)]
        run(baseline + ["ingest"], args.baseline)
        contenders["baseline --granularity day"] = (args.baseline, baseline + [
            "attribute", *window, "--by", "team,project", "--granularity", "day", "--format", "json"])
    times: dict[str, list[float]] = {name: [] for name in contenders}
    answers: dict[str, str] = {}
    for _ in range(args.repeat):
        for name, cmd in contenders.items():
            cwd, cmd = cmd if isinstance(cmd, tuple) else (repo, cmd)
            elapsed, answers[name] = run(cmd, cwd)
            times[name].append(elapsed)
    ours = spendlake_answer(answers["spendlake attribute"])
    # The other two prorate in binary floating point: equal to the cent, not to 1e-12.
    print(f"rows in the answer: {len(ours)}; max |difference| vs duckdb "
          f"{same(ours, plain_answer(answers['bare duckdb query']), CENT):.2E}, vs pandas "
          f"{same(ours, plain_answer(answers['pandas (csv.gz)']), CENT):.2E}")
    if args.baseline:
        totals = [{t["currency"]: Decimal(t["cost"]).quantize(CENT) for t in json.loads(answers[name])["totals"]}
                  for name in ("spendlake --granularity day", "baseline --granularity day")]
        if totals[0] != totals[1]:
            sys.exit(f"day totals differ from the baseline's: {totals}")
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:32s} median {value:7.3f} s   runs {', '.join(f'{v:.3f}' for v in times[name])}")
    ratio = median["spendlake attribute"] / median["bare duckdb query"]
    speedup = median["pandas (csv.gz)"] / median["spendlake attribute"]
    print(f"spendlake / duckdb = {ratio:.2f} (target ≤ 0.5); pandas / spendlake = {speedup:.0f}× (target ≥ 20×)")


if __name__ == "__main__":
    main()
