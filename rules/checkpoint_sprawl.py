"""checkpoint-sprawl: training checkpoints kept too long, too many, on hot storage.

Finds checkpoint objects in the latest `s3_objects` snapshot: a path component matching
`dir_patterns` (a checkpoint directory such as `checkpoint-500/`, `step_1000/`,
`global_step2000/`), a file matching `file_patterns` (`*.ckpt`), or a file matching
`checkpoints_dir_file_patterns` (`*.pt`, `*.safetensors`, `*.distcp`) somewhere under a
`checkpoints_dir` (`checkpoints/`). The run prefix is what comes before the checkpoint;
checkpoints are grouped per run and ordered newest first by last modified, then step.
Three findings:

- `excess` (per run): more than `keep_last` checkpoints, not counting those whose step is a
  multiple of `keep_every_steps` (milestones). Waste = the bytes of the others × the price
  of their storage class per month.
- `hot-storage` (per run): kept checkpoints older than `hot_days` in `hot_storage_classes`.
  Waste = their bytes × (price of their class − price of `cold_storage_class`).
- `no-lifecycle` (per bucket): a bucket holding checkpoints whose lifecycle is `none` in
  `s3_buckets`. No waste of its own (the two above count it), severity warning.

Category `waste`: `impact_usd` and `monthly_waste_usd` are the storage waste per month above.

Ignores: objects that match no pattern, runs whose waste is below `min_monthly_usd`,
buckets absent from `s3_buckets` (lifecycle unknown), and INTELLIGENT_TIERING objects for
`hot-storage` (S3 already moves them). Prices are USD per GiB-month (S3 us-east-1).

Config example (the defaults):

```yaml
rules:
  checkpoint-sprawl:
    enabled: true
    dir_patterns: ["checkpoint-*", "checkpoint_*", "step_*", "step-*", "global_step*", "iter_*"]
    file_patterns: ["*.ckpt"]
    checkpoints_dir: checkpoints
    checkpoints_dir_file_patterns: ["*.pt", "*.safetensors", "*.distcp"]
    keep_last: 5
    keep_every_steps: null
    hot_days: 14
    hot_storage_classes: [STANDARD, REDUCED_REDUNDANCY, EXPRESS_ONEZONE]
    cold_storage_class: GLACIER_IR
    min_monthly_usd: 1
    critical_monthly_usd: 1000
    prices: {default_class: STANDARD}  # per_gib_month: S3 list prices (rules/storage.py StoragePrices)
```
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

from pydantic import Field, model_validator

from rules.base import Finding, Rule, RuleConfig, glob_regex, usd
from rules.context import RuleContext
from rules.storage import StoragePrices, gib, storage_cost


class CheckpointSprawlConfig(RuleConfig):
    dir_patterns: tuple[str, ...] = ("checkpoint-*", "checkpoint_*", "step_*", "step-*", "global_step*", "iter_*")
    file_patterns: tuple[str, ...] = ("*.ckpt",)
    checkpoints_dir: str = Field(default="checkpoints", pattern=r"^[^/*?]+$")
    checkpoints_dir_file_patterns: tuple[str, ...] = ("*.pt", "*.safetensors", "*.distcp")
    keep_last: int = Field(default=5, ge=1, le=1_000_000)
    keep_every_steps: int | None = Field(default=None, ge=1, le=10**12)
    hot_days: int = Field(default=14, ge=1, le=36500)
    hot_storage_classes: tuple[str, ...] = ("STANDARD", "REDUCED_REDUNDANCY", "EXPRESS_ONEZONE")
    cold_storage_class: str = "GLACIER_IR"
    min_monthly_usd: Decimal = Field(default=Decimal("1"), ge=0)
    prices: StoragePrices = StoragePrices()

    @model_validator(mode="after")
    def _cold_has_price(self) -> CheckpointSprawlConfig:
        if self.cold_storage_class not in self.prices.per_gib_month:
            raise ValueError(f"cold_storage_class {self.cold_storage_class!r} has no price in prices.per_gib_month")
        return self


SQL = """
WITH objects AS (
  SELECT bucket, key, size, coalesce(upper(storage_class), $default_class) AS storage_class, last_modified
  FROM {objects} WHERE size > 0
),
matched AS (
  SELECT *, CASE WHEN regexp_matches(key, $dir) THEN regexp_extract(key, $dir, 1)
                 ELSE regexp_extract(key, '^(.*/)?[^/]*$', 1) END AS run,
            CASE WHEN regexp_matches(key, $dir) THEN regexp_extract(key, $dir, 2)
                 ELSE regexp_extract(key, '[^/]*$', 0) END AS unit
  FROM objects
  WHERE regexp_matches(key, $dir) OR regexp_matches(key, $file) OR regexp_matches(key, $ckfile)
),
units AS (
  SELECT bucket, run, unit, max(last_modified) AS last_modified,
         try_cast(nullif(regexp_extract(unit, '(\\d+)\\D*$', 1), '') AS HUGEINT) AS step
  FROM matched GROUP BY bucket, run, unit
),
ranked AS (
  SELECT *, row_number() OVER (PARTITION BY bucket, run ORDER BY last_modified DESC, step DESC NULLS LAST,
                                                          unit DESC) AS recency,
         count(*) OVER (PARTITION BY bucket, run) AS total
  FROM units
),
judged AS (
  SELECT *, recency > $keep_last AND NOT coalesce(step % $every = 0, false) AS excess FROM ranked
)
SELECT m.bucket, m.run, any_value(j.total) AS total,
       CASE WHEN j.excess THEN 'excess'
            WHEN m.last_modified < $hot_before AND list_contains($hot, m.storage_class) THEN 'hot-storage'
            ELSE 'kept' END AS kind,
       m.storage_class, count(DISTINCT m.unit) AS units, sum(m.size) AS bytes,
       list_sort(list_distinct(list(m.unit)))[:5] AS sample
FROM matched m JOIN judged j USING (bucket, run, unit)
GROUP BY ALL
ORDER BY ALL
"""


class CheckpointSprawl(Rule[CheckpointSprawlConfig]):
    name = "checkpoint-sprawl"
    category = "waste"
    inputs = {"s3_objects": ("bucket", "key", "size", "storage_class", "last_modified")}

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        c = self.config
        ckdir = re.escape(c.checkpoints_dir)
        params = {
            "default_class": c.prices.default_class,
            "dir": "^(.*?/)?(" + glob_regex(c.dir_patterns, path_component=True) + ")/",
            "file": "(^|/)" + glob_regex(c.file_patterns, path_component=True) + "$",
            "ckfile": f"(^|/){ckdir}/(.*/)?" + glob_regex(c.checkpoints_dir_file_patterns, path_component=True) + "$",
            "keep_last": c.keep_last, "every": c.keep_every_steps,
            "hot_before": ctx.until - timedelta(days=c.hot_days), "hot": list(c.hot_storage_classes),
        }
        rows = ctx.con.execute(SQL.format(objects=ctx.latest("s3_objects")), params).fetchall()
        runs: dict[tuple[str, str], dict] = defaultdict(lambda: {"total": 0, "bytes": defaultdict(int),
                                                                  "kinds": defaultdict(lambda: defaultdict(int)),
                                                                  "units": defaultdict(int), "sample": {}})
        for bucket, run, total, kind, storage_class, units, size, sample in rows:
            entry = runs[(bucket, run)]
            entry["total"] = total
            entry["kinds"][kind][storage_class] += size
            entry["units"][kind] += units
            entry["sample"].setdefault(kind, sample)
        findings = []
        for (bucket, run), entry in sorted(runs.items()):
            findings += self._run_findings(ctx, bucket, run, entry)
        return findings + self._lifecycle_findings(ctx, runs)

    def _run_findings(self, ctx: RuleContext, bucket: str, run: str, entry: dict) -> list[Finding]:
        c, found = self.config, []
        resource = f"s3://{bucket}/{run}"
        excess = entry["kinds"].get("excess")
        if excess:
            waste = storage_cost(excess, c.prices)
            kept = entry["total"] - entry["units"]["excess"]
            if waste >= c.min_monthly_usd:
                summary = (f"{resource} keeps {entry['total']} checkpoints where the retention policy would keep "
                           f"{kept}; the other {entry['units']['excess']} hold {gib(sum(excess.values()))} costing "
                           f"{usd(waste)} a month.")
                found.append(self.finding(resource_id=resource, key="excess", severity=self.severity(waste),
                                          impact_usd=waste, summary=summary, evidence={
                                              "checkpoints": entry["total"], "kept": kept,
                                              "excess": entry["units"]["excess"], "keep_last": c.keep_last,
                                              "keep_every_steps": c.keep_every_steps,
                                              "excess_bytes_by_class": dict(excess),
                                              "oldest_excess": entry["sample"]["excess"]}))
        hot = entry["kinds"].get("hot-storage")
        if hot:
            cold = c.prices.per_gib_month[c.cold_storage_class]
            waste = storage_cost(hot, c.prices) - storage_cost({c.cold_storage_class: sum(hot.values())}, c.prices)
            if waste >= c.min_monthly_usd:
                classes = ", ".join(sorted(hot))
                summary = (f"{entry['units']['hot-storage']} checkpoint(s) of {resource} older than {c.hot_days} "
                           f"days ({gib(sum(hot.values()))}) sit in {classes}; {c.cold_storage_class} "
                           f"(${cold}/GiB-month) would save {usd(waste)} a month.")
                found.append(self.finding(resource_id=resource, key="hot-storage", severity=self.severity(waste),
                                          impact_usd=waste, summary=summary, evidence={
                                              "checkpoints": entry["units"]["hot-storage"], "hot_days": c.hot_days,
                                              "bytes_by_class": dict(hot), "cold_storage_class": c.cold_storage_class,
                                              "examples": entry["sample"]["hot-storage"]}))
        return found

    def _lifecycle_findings(self, ctx: RuleContext, runs: dict[tuple[str, str], dict]) -> list[Finding]:
        if not runs or not {"bucket", "lifecycle"} <= ctx.columns("s3_buckets"):
            return []
        bare = {b for (b,) in ctx.con.execute(
            f"SELECT DISTINCT bucket FROM {ctx.latest('s3_buckets')} WHERE lower(lifecycle) = 'none'").fetchall()}
        by_bucket: dict[str, list[dict]] = defaultdict(list)
        for (bucket, _run), entry in runs.items():
            if bucket in bare:
                by_bucket[bucket].append(entry)
        found = []
        for bucket, entries in sorted(by_bucket.items()):
            checkpoints = sum(e["total"] for e in entries)
            size = sum(n for e in entries for classes in e["kinds"].values() for n in classes.values())
            summary = (f"Bucket {bucket} holds {checkpoints} checkpoint(s) ({gib(size)}) in {len(entries)} run(s) "
                       "but has no lifecycle rule to expire or move them.")
            found.append(self.finding(resource_id=f"s3://{bucket}", key="no-lifecycle", severity="warning",
                                      impact_usd=0, summary=summary,
                                      evidence={"checkpoints": checkpoints, "bytes": size, "runs": len(entries)}))
        return found
