"""Findings on the service side: run the rules against the lake, attach owners, store the
result, list and acknowledge findings.

The `findings` table (one file, replaced atomically on every run through
`Lake.commit_snapshot`) lives at `<lake>/findings/source=engine/snapshot=current/data.parquet`
and is a view named `findings` on `Lake.query()` connections. Columns:

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

The outcome of the last run of each rule (ok / skipped / error with its message, finding
count, seconds) is kept in the lake's `_state/rules.json`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa

from rules.base import SEVERITIES, UNALLOCATED, Finding, Owner, PlannedWindow, Rule, RuleContext, configure, registered
from rules.engine import EngineResult, run
from service.attribution.api import attribute_resources
from service.findings.budgets import daily_spend_lookup
from service.core.config import Config
from service.core.errors import UsageError
from service.core.lake import Lake, utc_now_iso
from service.core.timewindow import parse_window, utc_now
from service.attribution.lines import attributed_daily_lookup
from service.planning.plans import load_plans

TABLE = "findings"
PARTITION = {"table": TABLE, "source": "engine", "key": "snapshot", "value": "current"}
STATUSES = ("open", "acknowledged", "resolved")
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


def rules_for(config: Config, only: Sequence[str] = ()) -> list[Rule]:
    """The configured rules (validated; errors carry `rules.<name>.<key>` paths)."""
    rules = configure(config.rules)
    unknown = sorted(set(only) - {r.name for r in rules})
    if unknown:
        raise UsageError(f"no rule named {', '.join(unknown)}", where="--rule",
                         hint=f"known rules: {', '.join(registered())}")
    return [r for r in rules if not only or r.name in only]


def bill_ids(resource_id: str) -> list[str]:
    """The ResourceIds a finding's resource may carry in the bill: itself, the bucket of an
    `s3://bucket/prefix/` (S3 bills per bucket), the instance id of an EC2 ARN."""
    if resource_id.startswith("s3://"):
        bucket = resource_id[5:].split("/", 1)[0]
        return [resource_id, bucket, f"arn:aws:s3:::{bucket}"]
    if resource_id.startswith("arn:aws:ec2:") and "/" in resource_id:
        return [resource_id, resource_id.rsplit("/", 1)[1]]
    return [resource_id]


def _log_group_arns(lake: Lake, names: Sequence[str]) -> dict[str, str]:
    """Log group name → the ARN the bill uses for it (log groups are listed by name)."""
    rows = lake.query().execute(
        "SELECT DISTINCT regexp_extract(ResourceId, ':log-group:(.*?)(:\\*)?$', 1) AS name, ResourceId FROM costs "
        "WHERE ResourceId LIKE 'arn:aws:logs:%:log-group:%' AND name IN (SELECT unnest(?))", [list(names)]).fetchall()
    return {name: arn for name, arn in rows}


def owner_lookup(lake: Lake, config: Config) -> Callable[[Sequence[str]], Mapping[str, Owner]]:
    """Owners of resource ids through attribution, from each resource's latest cost line;
    a resource the bill does not name stays unallocated."""

    def owner_of(resource_ids: Sequence[str]) -> dict[str, Owner]:
        candidates = {rid: bill_ids(rid) for rid in resource_ids}
        for name, arn in _log_group_arns(lake, resource_ids).items():
            candidates[name].append(arn)
        wanted = sorted({c for ids in candidates.values() for c in ids})
        found = attribute_resources(lake, config, wanted) if wanted else {}
        owners = {}
        for rid, ids in candidates.items():
            dims = next((found[c] for c in ids if c in found), None)
            if dims:
                owners[rid] = Owner(**{d: dims.get(d) or UNALLOCATED for d in ("team", "project", "experiment")})
        return owners

    return owner_of


def fill_owners(findings: list[Finding], owner_of: Callable[[Sequence[str]], Mapping[str, Owner]]) -> list[Finding]:
    owners = owner_of(sorted({f.resource_id for f in findings})) if findings else {}
    filled = []
    for finding in findings:
        owner = owners.get(finding.resource_id)
        if owner is None:  # not a billed resource (e.g. a budget): keep what the rule said
            owner = Owner(finding.team, finding.project, finding.experiment)
        filled.append(replace(finding, team=owner.team, project=owner.project, experiment=owner.experiment))
    return filled


def plan_windows(lake: Lake) -> tuple[PlannedWindow, ...]:
    """The registered plans as windows with their pessimistic total (naive UTC)."""
    return tuple(PlannedWindow(p.name, p.project, p.experiment, p.start.replace(tzinfo=None),
                               p.end.replace(tzinfo=None), p.total_cost.high) for p in load_plans(lake))


@dataclass(frozen=True)
class RunReport:
    result: EngineResult
    stored: bool


def run_rules(config: Config, *, only: Sequence[str] = (), since: str = "7d", dry_run: bool = False,
              now: datetime | None = None) -> RunReport:
    """Evaluate the rules over the window ending now; store unless `dry_run`."""
    rules = rules_for(config, only)
    lake = Lake(config.lake)
    window = parse_window(since, now=now or utc_now())
    with lake.lock(TABLE):
        con = lake.query()
        owner_of = owner_lookup(lake, config)
        ctx = RuleContext(con=con, window=window, owner_of=owner_of, budgets=config.budgets,
                          daily_spend=daily_spend_lookup(lake, config),
                          attributed_daily=attributed_daily_lookup(lake, config), plans=plan_windows(lake))
        result = run(rules, ctx, load_findings(lake), lambda found: fill_owners(found, owner_of))
        if not dry_run:
            store_findings(lake, result.findings)
            state = lake.read_state("rules")
            outcomes = state.get("rules", {})
            outcomes.update({o.rule: {**asdict(o), "finished_at": utc_now_iso()} for o in result.outcomes})
            lake.write_state("rules", {"rules": outcomes})
    return RunReport(result=result, stored=not dry_run)


def fails(findings: Sequence[Finding], level: str | None) -> bool:
    """True when an open finding is at or above `level` (the exit-1 rule of `--fail-on`)."""
    if not level:
        return False
    floor = SEVERITIES.index(level)
    return any(f.status == "open" and SEVERITIES.index(f.severity) >= floor for f in findings)


# ---- the findings table ------------------------------------------------------------------

def _naive_utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def store_findings(lake: Lake, findings: Sequence[Finding]) -> None:
    rows = {name: [] for name in SCHEMA.names}
    for finding in findings:
        for name in SCHEMA.names:
            value = getattr(finding, name)
            if name == "evidence":
                value = json.dumps(value, sort_keys=True)
            elif isinstance(value, datetime):
                value = _naive_utc(value)
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
    cursor = lake.query().execute(sql, params)
    findings = []
    for row in cursor.fetchall():
        data = dict(zip(SCHEMA.names, row))
        data["evidence"] = json.loads(data["evidence"] or "{}")
        data["monthly_waste_usd"] = Decimal(data["monthly_waste_usd"]).quantize(Decimal("0.01"))
        for name in ("first_seen", "last_seen", "acknowledged_at"):
            data[name] = _aware(data[name])
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
