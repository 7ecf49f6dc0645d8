"""`spendlake rules run` at scale (session 38): the unallocated-spend and spend-anomaly rules on the
shared-cluster month of bench/runs_bench.py, each against a bare DuckDB form of the same sums over
the raw CUR 2.0 Parquet, in the same invocation.

    python bench/rules_bench.py --work /tmp/DIR               # 250 p5 nodes, 200k jobs, ~10M line items
    python bench/rules_bench.py --nodes 25 --jobs 20000       # 1M line items: a quick look

1. Builds or reuses runs_bench.py's work folder (`--work`: the export, the jobs file, the lake).
2. Per rule, alternating, whole processes, median of --repeat, wall + CPU + peak RSS (/usr/bin/time -v):
   - the bare form: the window's counted spend (USD, lines of at most a day, no credits, refunds, tax
     or commitment fees) by day, service and owner key (the `team`/`project` tag, `user_Team`
     before `user_team` as attribution reads them) read straight from the Parquet;
   - `rules run --rule R --since 2026-11-01 --dry-run --format json` with the plain config (owners from
     the tags only, so the same sums: checked to the cent);
   - the same with `clusters:` (spendlake-clusters.yaml: the cluster's instance lines allocated to
     jobs, what the brief measured; only the sums allocation does not move are checked).
3. Checks: unallocated-spend's `total_usd` (both configs) and `unallocated_usd` (plain) per dimension;
   spend-anomaly's daily `actual_usd` of every finding (plain) against the bare series.
Targets: each rule's peak RSS <= 1 GB and a few seconds at 10M.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.runs_bench import (CLUSTERS_CONFIG, START, clusters_config, measure, month_parser,  # noqa: E402
                              prepared_month, summary)

RULES = ("unallocated-spend", "spend-anomaly")
DIMENSIONS = ("team", "project")
TARGET_RSS_MB = 1024

# argv: CUR 2.0 Parquet glob, the window's end. Per dimension, day, service and owner value: the
# counted spend (the rules' `exclude_*` defaults as this export spells them).
BARE = textwrap.dedent('''
    import json, sys
    import duckdb
    cur, since, until = sys.argv[1:4]
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    owner = "lower(coalesce(nullif(trim(resource_tags['user_{0}']), ''), nullif(trim(resource_tags['user_{1}']), '')))"
    rows = con.execute(f"""
        SELECT CAST(line_item_usage_start_date AS DATE) AS day,
               coalesce(nullif(product['product_name'], ''), line_item_product_code) AS service,
               {owner.format('Team', 'team')} AS team, {owner.format('Project', 'project')} AS project,
               sum(line_item_unblended_cost) AS cost
        FROM read_parquet($cur)
        WHERE line_item_usage_start_date >= CAST($since AS TIMESTAMP)
          AND line_item_usage_start_date < CAST($until AS TIMESTAMP)
          AND line_item_usage_end_date <= line_item_usage_start_date + INTERVAL 1 DAY
          AND line_item_currency_code = 'USD'
          AND line_item_line_item_type NOT IN ('Credit', 'Refund', 'Tax', 'SavingsPlanUpfrontFee', 'RIFee',
                                               'SavingsPlanNegation', 'SavingsPlanRecurringFee', 'Fee')
        GROUP BY ALL""", {"cur": cur, "since": since, "until": until}).fetchall()
    print(json.dumps([[str(day), service, team, project, str(cost)] for day, service, team, project, cost in rows]))
''')


def rule_command(config: Path, rule: str) -> list[str]:
    return [sys.executable, "-m", "service", "--config", str(config), "rules", "run", "--rule", rule,
            "--since", START.isoformat(), "--dry-run", "--format", "json"]


def bare_sums(stdout: str) -> list[tuple[str, str, str | None, str | None, Decimal]]:
    return [(day, service, team, project, Decimal(cost)) for day, service, team, project, cost in json.loads(stdout)]


def check_unallocated(findings: list[dict], bare: list, plain: bool) -> list[str]:
    """Each finding's total (and, with owners from the tags only, its unallocated spend) against the bare sums."""
    wrong = []
    for finding in findings:
        evidence = finding["evidence"]
        column = 2 + DIMENSIONS.index(evidence["dimension"])
        total = sum(row[4] for row in bare)
        lost = sum(row[4] for row in bare if row[column] in (None, "unallocated"))
        figures = [("total_usd", total)] + ([("unallocated_usd", lost)] if plain else [])
        wrong += [f"{evidence['dimension']} {name}: rule {evidence[name]}, bare {value:.2f}"
                  for name, value in figures if abs(Decimal(evidence[name]) - value) > Decimal("0.005")]
    return wrong


def check_anomalies(findings: list[dict], bare: list) -> list[str]:
    """Each finding's daily actual spend against the bare series of its (team, service)."""
    series: dict[tuple, Decimal] = {}
    for day, service, team, _project, cost in bare:
        key = (team or "unallocated", service or "", day)
        series[key] = series.get(key, Decimal(0)) + cost
    wrong = []
    for finding in findings:
        evidence = finding["evidence"]
        for daily in evidence["daily"]:
            bare_actual = series.get((evidence["value"], evidence["service"], daily["day"]), Decimal(0))
            if abs(Decimal(daily["actual_usd"]) - bare_actual) > Decimal("0.005"):
                wrong.append(f"{evidence['value']} / {evidence['service']} {daily['day']}: "
                             f"rule {daily['actual_usd']}, bare {bare_actual:.2f}")
    return wrong


def main() -> None:
    parser = month_parser(__doc__.splitlines()[0])
    parser.add_argument("--rules", default=",".join(RULES), help="comma-separated, of " + ", ".join(RULES))
    args = parser.parse_args()
    prepared = prepared_month(args)
    configs = {"plain": Path(prepared["config"]), "clusters": clusters_config(prepared, CLUSTERS_CONFIG)}
    bare = [sys.executable, "-c", BARE, prepared["cur"], START.isoformat(), prepared["until"]]
    result = {"when": datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"), "command": " ".join(sys.argv),
              "prepared": prepared, "rules": {}}
    wrong: list[str] = []
    for rule in args.rules.split(","):
        runs: dict[str, list] = {"bare": [], "plain": [], "clusters": []}
        for _ in range(args.repeat):  # alternating, so a change of the machine's load hits each alike
            runs["bare"].append(measure(bare, f"bare DuckDB sums ({rule})"))
            for name, config in configs.items():
                runs[name].append(measure(rule_command(config, rule), f"rules run --rule {rule}, {name} config"))
        sums = bare_sums(runs["bare"][-1][3])
        figures = {name: summary(f"{rule}: {name}", measured) for name, measured in runs.items()}
        for name in configs:
            findings = json.loads(runs[name][-1][3])
            figures[name]["findings"] = len(findings)
            if rule == "unallocated-spend":
                wrong += check_unallocated(findings, sums, plain=name == "plain")
            elif name == "plain":
                wrong += check_anomalies(findings, sums)
            verdict = "PASS" if figures[name]["rss_mb"] <= TARGET_RSS_MB else "MISS"
            print(f"{rule}, {name} config: {len(findings)} finding(s); peak RSS {figures[name]['rss_mb']} MB "
                  f"{verdict} (target <= {TARGET_RSS_MB}); {figures[name]['wall_s'] / figures['bare']['wall_s']:.1f}x "
                  "the bare sums' wall", flush=True)
        result["rules"][rule] = figures
    result["load_average"] = os.getloadavg()
    result["differ"] = wrong
    out = REPO / "bench" / "out" / f"rules-{result['when']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"results: {out.relative_to(REPO)}")
    if wrong:
        sys.exit("the rules' figures differ from the bare sums:\n  " + "\n  ".join(wrong[:20]))
    print("every checked figure equals the bare sums' to the cent")


if __name__ == "__main__":
    main()
