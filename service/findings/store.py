"""The findings store: the `findings` table, read, written and acknowledged.

The table (one file, replaced atomically on every run through `Lake.commit_snapshot`) lives
at `<lake>/findings/source=engine/snapshot=current/data.parquet` and is a view named
`findings` on `Lake.query()` connections. Columns:

| column | type | meaning |
|---|---|---|
| id | VARCHAR | stable: hash of rule, resource and the rule's key |
| rule | VARCHAR | kebab-case rule name (`spendlake rules list`) |
| severity | VARCHAR | info, warning or critical |
| resource_id | VARCHAR | instance id/ARN, `s3://bucket/prefix/`, log group ARN or name |
| category | VARCHAR | waste, overspend or ownership: the rule's category (rules/base.py) |
| team, project, experiment | VARCHAR | owners through attribution; `unallocated` when unknown |
| impact_usd | DECIMAL(38,12) | USD at stake, as the rule's docstring defines it, rounded to the cent |
| monthly_waste_usd | DECIMAL(38,12) | waste findings only (NULL for the others): USD per month that buys nothing |
| summary | VARCHAR | one sentence |
| evidence | VARCHAR | JSON object, rule-specific |
| first_seen, last_seen | TIMESTAMP | UTC, the runs that first and last saw it |
| status | VARCHAR | open, acknowledged (seen, acked) or resolved (no longer seen) |
| acknowledged_at | TIMESTAMP | UTC, NULL unless acknowledged |
| ack_reason | VARCHAR | the `--reason` given |
| source, snapshot | VARCHAR | partition columns (`engine`, `current`) |

Findings are listed by category (waste, overspend, ownership), then largest impact first.
A table written before `category` and `impact_usd` existed still loads: the category comes
from the rule, the impact from the old `monthly_waste_usd` (`Rule.stored_impact`), which
only waste findings keep.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from rules.base import CATEGORIES, Finding, registered
from service.core import json_text
from service.core.errors import UsageError
from service.core.folding import folded_forms
from service.core.lake import Lake
from service.core.timewindow import utc_now
from service.core.units import aware_utc, cents, naive_utc

TABLE = "findings"
PARTITION = {"table": TABLE, "source": "engine", "key": "snapshot", "value": "current"}
LIST_COLUMNS = ["id", "rule", "category", "severity", "team", "project", "resource_id", "impact_usd",
                "monthly_waste_usd", "status", "summary"]
JSON_KEYS = ["id", "rule", "category", "severity", "resource_id", "team", "project", "experiment", "impact_usd",
             "monthly_waste_usd", "summary", "evidence", "first_seen", "last_seen", "status", "acknowledged_at",
             "ack_reason"]
SCHEMA = pa.schema([
    ("id", pa.string()), ("rule", pa.string()), ("category", pa.string()), ("severity", pa.string()),
    ("resource_id", pa.string()), ("team", pa.string()), ("project", pa.string()), ("experiment", pa.string()),
    ("impact_usd", pa.decimal128(38, 12)), ("monthly_waste_usd", pa.decimal128(38, 12)), ("summary", pa.string()),
    ("evidence", pa.string()), ("first_seen", pa.timestamp("us")), ("last_seen", pa.timestamp("us")),
    ("status", pa.string()), ("acknowledged_at", pa.timestamp("us")), ("ack_reason", pa.string()),
])
TIMES = ("first_seen", "last_seen", "acknowledged_at")


def store_findings(lake: Lake, findings: Sequence[Finding]) -> None:
    rows = {name: [] for name in SCHEMA.names}
    for finding in findings:
        for name in SCHEMA.names:
            value = getattr(finding, name)
            if name == "evidence":
                value = json.dumps(value, sort_keys=True)
            elif isinstance(value, datetime):
                value = naive_utc(value)
            rows[name].append(value)
    table = pa.table(rows, schema=SCHEMA)
    con = lake.connect()
    lake.commit_snapshot(con, con.from_arrow(table), **PARTITION)


def load_findings(lake: Lake, *, rule: str | None = None, team: str | None = None,
                  status: str | None = None, category: str | None = None, checked: bool = True) -> list[Finding]:
    """Stored findings, by category (CATEGORIES' order), then largest impact first. `checked`
    False reads the findings table alone (the metrics' scrape, so the stored findings stay
    shown while a cost partition is damaged); every other reader checks the lake's cost
    partitions first and refuses on damage, as every query does."""
    if not lake.has_table(TABLE):
        return []
    where, params = [], []
    # a team in any case or spacing, as `attribute --where team=...` matches it
    for column, values in (("rule", [rule]), ("lower(trim(team))", team and folded_forms(team)), ("status", [status])):
        if values and values[0]:  # a team as its lines wrote it, composed or decomposed
            where.append(f"{column} IN ({', '.join('?' for _ in values)})")
            params.extend(values)
    # the cost partitions checked, as every query does; no other table is read
    with lake.query(tables=("costs", TABLE)) if checked else lake.connect() as con:
        if not checked:
            lake.table_views(con, (TABLE,))
        present = {name for (name,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [TABLE]).fetchall()}
        columns = [name for name in SCHEMA.names if name in present]
        sql = f"SELECT {', '.join(columns)} FROM {TABLE}" + (" WHERE " + " AND ".join(where) if where else "")
        rows = con.execute(sql, params).fetchall()
    path = lake.partition_file(TABLE, [("source", PARTITION["source"]), (PARTITION["key"], PARTITION["value"])])
    findings = [_finding(dict(zip(columns, row)), path) for row in rows]
    if category:
        findings = [f for f in findings if f.category == category]
    return sorted(findings, key=lambda f: (CATEGORIES.index(f.category), -f.impact_usd, f.rule, f.id))


def _finding(data: dict, path: Path) -> Finding:
    data["evidence"] = json_text.lake_loads(data["evidence"], path, f"finding {data['id']}'s evidence")
    data.update({name: aware_utc(data[name]) for name in TIMES})
    monthly = data.get("monthly_waste_usd")
    if data.get("category") is None:  # stored before findings had categories
        rule = registered().get(data["rule"])
        data["category"] = rule.category if rule else "waste"  # every rule was a waste rule then
        data["impact_usd"] = rule.stored_impact(monthly, data["evidence"]) if rule else monthly
    data["impact_usd"] = cents(data["impact_usd"])
    data["monthly_waste_usd"] = cents(monthly if monthly is not None else data["impact_usd"]) \
        if data["category"] == "waste" else None
    return Finding(**data)


def known_values(lake: Lake, column: str) -> list[str]:
    """The distinct values of a findings column (`team`, `project`, ...) the lake holds."""
    if column not in SCHEMA.names or not lake.has_table(TABLE):
        return []
    with lake.query(tables=("costs", TABLE)) as con:
        return [value for (value,) in con.execute(
            f"SELECT DISTINCT {column} FROM {TABLE} WHERE {column} IS NOT NULL ORDER BY 1").fetchall()]


def finding_rows(findings: Sequence[Finding]) -> list[dict]:
    """Findings as plain dicts with the documented keys (JSON, CSV and table output)."""
    return [{key: getattr(f, key) for key in JSON_KEYS} for f in findings]


def acknowledge(lake: Lake, finding_id: str, reason: str, *, now: datetime | None = None) -> Finding:
    """Mark a finding acknowledged; it stays so while it is seen. Resolving ends it (rules/engine.py);
    acknowledging a resolved finding covers its next return."""
    if not reason.strip():
        raise UsageError("an acknowledgement needs a reason", where="--reason")
    with lake.lock(TABLE):
        findings = load_findings(lake)
        # an id is hex: one copied from a report or typed in capitals is the same finding
        match = next((f for f in findings if f.id.lower() == finding_id.strip().lower()), None)
        if match is None:
            raise UsageError(f"no finding with id {finding_id!r}", where="ID",
                             hint="list ids with `spendlake findings --status all --format json`")
        acked = replace(match, acknowledged_at=now or utc_now(), ack_reason=reason.strip(),
                        status="resolved" if match.status == "resolved" else "acknowledged")
        store_findings(lake, [acked if f.id == match.id else f for f in findings])
    return acked
