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
| team, project, experiment | VARCHAR | owners through attribution; `unallocated` when unknown |
| monthly_waste_usd | DECIMAL(38,12) | estimated USD per month, rounded to the cent |
| summary | VARCHAR | one sentence |
| evidence | VARCHAR | JSON object, rule-specific |
| first_seen, last_seen | TIMESTAMP | UTC, the runs that first and last saw it |
| status | VARCHAR | open, acknowledged (seen, acked) or resolved (no longer seen) |
| acknowledged_at | TIMESTAMP | UTC, NULL unless acknowledged |
| ack_reason | VARCHAR | the `--reason` given |
| source, snapshot | VARCHAR | partition columns (`engine`, `current`) |
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import pyarrow as pa

from rules.base import Finding
from service.core.errors import UsageError
from service.core.lake import Lake
from service.core.timewindow import utc_now
from service.core.units import aware_utc, cents, naive_utc

TABLE = "findings"
PARTITION = {"table": TABLE, "source": "engine", "key": "snapshot", "value": "current"}
LIST_COLUMNS = ["id", "rule", "severity", "team", "project", "resource_id", "monthly_waste_usd", "status",
                "summary"]
JSON_KEYS = ["id", "rule", "severity", "resource_id", "team", "project", "experiment", "monthly_waste_usd",
             "summary", "evidence", "first_seen", "last_seen", "status", "acknowledged_at", "ack_reason"]
SCHEMA = pa.schema([
    ("id", pa.string()), ("rule", pa.string()), ("severity", pa.string()), ("resource_id", pa.string()),
    ("team", pa.string()), ("project", pa.string()), ("experiment", pa.string()),
    ("monthly_waste_usd", pa.decimal128(38, 12)), ("summary", pa.string()), ("evidence", pa.string()),
    ("first_seen", pa.timestamp("us")), ("last_seen", pa.timestamp("us")), ("status", pa.string()),
    ("acknowledged_at", pa.timestamp("us")), ("ack_reason", pa.string()),
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
                  status: str | None = None) -> list[Finding]:
    if not lake.has_table(TABLE):
        return []
    where, params = [], []
    for column, value in (("rule", rule), ("team", team), ("status", status)):
        if value:
            where.append(f"{column} = ?")
            params.append(value)
    sql = f"SELECT {', '.join(SCHEMA.names)} FROM {TABLE}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY monthly_waste_usd DESC, rule, id"
    with lake.query() as con:
        rows = con.execute(sql, params).fetchall()
    findings = []
    for row in rows:
        data = dict(zip(SCHEMA.names, row))
        data["evidence"] = json.loads(data["evidence"] or "{}")
        data["monthly_waste_usd"] = cents(data["monthly_waste_usd"])
        data.update({name: aware_utc(data[name]) for name in TIMES})
        findings.append(Finding(**data))
    return findings


def finding_rows(findings: Sequence[Finding]) -> list[dict]:
    """Findings as plain dicts with the documented keys (JSON, CSV and table output)."""
    return [{key: getattr(f, key) for key in JSON_KEYS} for f in findings]


def acknowledge(lake: Lake, finding_id: str, reason: str, *, now: datetime | None = None) -> Finding:
    """Mark a finding acknowledged; it stays so while it is seen, and after it is resolved
    and seen again."""
    if not reason.strip():
        raise UsageError("an acknowledgement needs a reason", where="--reason")
    with lake.lock(TABLE):
        findings = load_findings(lake)
        match = next((f for f in findings if f.id == finding_id), None)
        if match is None:
            raise UsageError(f"no finding with id {finding_id!r}", where="ID",
                             hint="list ids with `spendlake findings --status all --format json`")
        acked = replace(match, acknowledged_at=now or utc_now(), ack_reason=reason.strip(),
                        status="resolved" if match.status == "resolved" else "acknowledged")
        store_findings(lake, [acked if f.id == finding_id else f for f in findings])
    return acked
