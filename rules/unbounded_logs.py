"""unbounded-logs: logs that are kept forever.

Flags CloudWatch log groups with no retention (`retention_days` NULL in the latest
`log_groups` snapshot) holding at least `min_stored_gib`, when they hold
`size_threshold_gib` or more, or grew by more than `min_weekly_growth_pct` since the
snapshot a week (or more) earlier. Also flags S3 log prefixes — a path component matching
`s3_log_dirs`, or files matching `s3_log_files` — holding at least `min_stored_gib` in
buckets whose lifecycle in `s3_buckets` has no expiration.

Waste = what storing the data older than `suggested_retention_days` (one of the values
CloudWatch allows) costs a month. For a log group that is its stored bytes minus what
the suggested retention would keep, estimated from the weekly growth (bytes per day ×
retention), or, with a single snapshot, assuming steady ingest since creation. For S3 it
is the bytes of log objects older than the retention × the price of their class.

Category `waste`: `impact_usd` and `monthly_waste_usd` are that cost per month.

Ignores: groups with any retention, groups below `min_stored_gib`, buckets missing from
`s3_buckets` (lifecycle unknown), and expiration rules' prefix filters (a bucket with any
expiration rule counts as expiring). Severity: info when nothing is old enough to drop
yet, else warning, or critical from `critical_monthly_usd`.

Config example (the defaults):

```yaml
rules:
  unbounded-logs:
    enabled: true
    min_stored_gib: 1
    size_threshold_gib: 100
    min_weekly_growth_pct: 0
    suggested_retention_days: 30
    cloudwatch_price_per_gib_month: 0.03
    s3_log_dirs: ["logs", "log", "AWSLogs", "access-logs", "*-logs", "*_logs"]
    s3_log_files: ["*.log", "*.log.gz"]
    critical_monthly_usd: 1000
    prices: {default_class: STANDARD}  # per_gib_month: S3 list prices (rules/storage.py StoragePrices)
```
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

from pydantic import Field, field_validator

from rules.base import Finding, Rule, RuleConfig, glob_regex, usd
from rules.context import RuleContext
from rules.storage import GIB, StoragePrices, gib, storage_cost

# PutRetentionPolicy accepts exactly these.
CLOUDWATCH_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                             2557, 2922, 3288, 3653)

LOG_GROUPS_SQL = """
WITH snaps AS (
  SELECT source, region, name, retention_days, stored_bytes, created_at, CAST(snapshot_date AS DATE) AS day
  FROM log_groups
),
latest AS (SELECT * FROM snaps QUALIFY day = max(day) OVER (PARTITION BY source)),
earlier AS (
  SELECT l.source, l.region, l.name, arg_max(p.stored_bytes, p.day) AS prior_bytes, max(p.day) AS prior_day
  FROM latest l JOIN snaps p ON p.source = l.source AND p.region = l.region AND p.name = l.name
                             AND p.day <= l.day - INTERVAL 7 DAY
  GROUP BY ALL
)
SELECT l.region, l.name, l.stored_bytes, l.created_at, l.day, e.prior_bytes, e.prior_day
FROM latest l LEFT JOIN earlier e USING (source, region, name)
WHERE l.retention_days IS NULL AND l.stored_bytes >= ?
ORDER BY l.region, l.name
"""

S3_SQL = """
WITH logs AS (
  SELECT bucket, size, coalesce(upper(storage_class), $default_class) AS storage_class, last_modified,
         CASE WHEN regexp_matches(key, $dirs) THEN regexp_extract(key, $dirs, 0)
              ELSE regexp_extract(key, '^(.*/)?', 0) END AS prefix
  FROM {objects}
  WHERE (regexp_matches(key, $dirs) OR regexp_matches(key, $files))
    AND bucket IN (SELECT bucket FROM {buckets} WHERE lower(lifecycle) <> 'expiration')
)
SELECT bucket, prefix, storage_class, count(*) AS objects, sum(size) AS bytes,
       coalesce(sum(size) FILTER (WHERE last_modified < $older_than), 0) AS old_bytes
FROM logs GROUP BY ALL ORDER BY ALL
"""


class UnboundedLogsConfig(RuleConfig):
    min_stored_gib: Decimal = Field(default=Decimal("1"), ge=0)
    size_threshold_gib: Decimal = Field(default=Decimal("100"), ge=0)
    min_weekly_growth_pct: Decimal = Field(default=Decimal("0"), ge=0)
    suggested_retention_days: int = Field(default=30, ge=1, le=max(CLOUDWATCH_RETENTION_DAYS))
    cloudwatch_price_per_gib_month: Decimal = Field(default=Decimal("0.03"), ge=0)
    s3_log_dirs: tuple[str, ...] = ("logs", "log", "AWSLogs", "access-logs", "*-logs", "*_logs")
    s3_log_files: tuple[str, ...] = ("*.log", "*.log.gz")
    prices: StoragePrices = StoragePrices()

    @field_validator("suggested_retention_days")
    @classmethod
    def _allowed(cls, days: int) -> int:
        if days not in CLOUDWATCH_RETENTION_DAYS:
            raise ValueError(f"CloudWatch allows only {', '.join(map(str, CLOUDWATCH_RETENTION_DAYS))} days")
        return days


class UnboundedLogs(Rule[UnboundedLogsConfig]):
    name = "unbounded-logs"
    category = "waste"
    inputs = {"log_groups": ("region", "name", "retention_days", "stored_bytes", "created_at", "snapshot_date")}

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        c = self.config
        rows = ctx.con.execute(LOG_GROUPS_SQL, [int(c.min_stored_gib * GIB)]).fetchall()
        findings = [f for row in rows if (f := self._log_group(*row))]
        return findings + self._s3_prefixes(ctx)

    def _log_group(self, region, name, stored, created_at, day, prior_bytes, prior_day) -> Finding | None:
        c, keep = self.config, self.config.suggested_retention_days
        per_day = None
        if prior_bytes is not None and stored > prior_bytes:
            per_day = Decimal(stored - prior_bytes) / (day - prior_day).days
        growing = prior_bytes is not None and stored > prior_bytes * (1 + c.min_weekly_growth_pct / 100)
        if stored < c.size_threshold_gib * GIB and not growing:
            return None
        age_days = max(1, (day - created_at.date()).days) if created_at else None
        if per_day is not None:
            beyond = max(Decimal(0), stored - per_day * keep)
        elif age_days:
            beyond = Decimal(stored) * max(Decimal(0), 1 - Decimal(keep) / age_days)
        else:
            beyond = Decimal(0)
        waste = beyond / GIB * c.cloudwatch_price_per_gib_month
        growth = f", growing {gib(per_day * 7)} a week" if per_day else ""
        summary = (f"Log group {name} ({region}) never expires and holds {gib(stored)}{growth}; a {keep}-day "
                   f"retention would drop about {gib(beyond)}, saving {usd(waste)} a month.")
        severity = self.severity(waste) if beyond > 0 else "info"
        return self.finding(resource_id=name, key=f"log-group:{region}", severity=severity, impact_usd=waste,
                            summary=summary, evidence={
                                "region": region, "stored_bytes": stored, "snapshot_date": day,
                                "created_at": created_at, "prior_bytes": prior_bytes, "prior_snapshot_date": prior_day,
                                "bytes_per_day": None if per_day is None else int(per_day),
                                "suggested_retention_days": keep, "bytes_beyond_retention": int(beyond)})

    def _s3_prefixes(self, ctx: RuleContext) -> list[Finding]:
        c = self.config
        if not ctx.columns("s3_objects") or not {"bucket", "lifecycle"} <= ctx.columns("s3_buckets"):
            return []
        sql = S3_SQL.format(objects=ctx.latest("s3_objects"), buckets=ctx.latest("s3_buckets"))
        rows = ctx.con.execute(sql, {
            "default_class": c.prices.default_class,
            "dirs": "^(.*?/)?" + glob_regex(c.s3_log_dirs, path_component=True) + "/",
            "files": "(^|/)" + glob_regex(c.s3_log_files, path_component=True) + "$",
            "older_than": ctx.until - timedelta(days=c.suggested_retention_days)}).fetchall()
        prefixes: dict[tuple[str, str], dict] = defaultdict(lambda: {"objects": 0, "bytes": 0, "old": defaultdict(int)})
        for bucket, prefix, storage_class, objects, size, old in rows:
            entry = prefixes[(bucket, prefix)]
            entry["objects"] += objects
            entry["bytes"] += size
            entry["old"][storage_class] += old
        findings = []
        for (bucket, prefix), entry in sorted(prefixes.items()):
            if entry["bytes"] < c.min_stored_gib * GIB:
                continue
            old = sum(entry["old"].values())
            waste = storage_cost(entry["old"], c.prices)
            resource = f"s3://{bucket}/{prefix}"
            summary = (f"{resource} holds {entry['objects']:,} log object(s) ({gib(entry['bytes'])}) in a bucket "
                       f"without an expiration rule; expiring them after {c.suggested_retention_days} days would "
                       f"drop {gib(old)}, saving {usd(waste)} a month.")
            findings.append(self.finding(resource_id=resource, key="s3-logs",
                                         severity=self.severity(waste) if old else "info", impact_usd=waste,
                                         summary=summary, evidence={
                                             "objects": entry["objects"], "bytes": entry["bytes"],
                                             "bytes_beyond_retention": old,
                                             "suggested_retention_days": c.suggested_retention_days}))
        return findings
