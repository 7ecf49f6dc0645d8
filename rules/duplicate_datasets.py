"""duplicate-datasets: the same files stored more than once, across buckets or prefixes.

Two objects in the latest `s3_objects` snapshot are copies when they have the same size
and either the same checksum (algorithm and value), or the same ETag: a single-part ETag
(strong evidence), or a multipart ETag with the same part count (weaker evidence: the
same content uploaded with other part sizes looks different, and the finding says so).
Matches chain: a copy matched by checksum to one object and by ETag to another joins both;
each copy's evidence is the strongest match it has itself.
In each set of copies the oldest (then by bucket and key) is the original, the others are
redundant. Redundant files are rolled up to dataset prefixes: for a copy and its original
the longest common path suffix is dropped, leaving the two prefixes (`team-a/datasets/`
mirrors `shared/`); one finding per (copy prefix, original prefix). Waste = bytes of the
redundant copies × the price of their storage class per month.

Category `waste`: `impact_usd` and `monthly_waste_usd` are that storage cost per month.

Ignores: objects smaller than `min_object_bytes` (markers, small configs), findings whose
redundant bytes are below `min_duplicate_bytes`, objects with neither checksum nor ETag.
Severity: info when the only evidence is multipart ETags; otherwise warning, or critical
from `critical_monthly_usd`. Runs in DuckDB SQL: a million objects take a few seconds
(bench/duplicates_bench.py).

Config example (the defaults):

```yaml
rules:
  duplicate-datasets:
    enabled: true
    min_object_bytes: 1024
    min_duplicate_bytes: 1073741824
    max_examples: 3
    critical_monthly_usd: 1000
    prices: {default_class: STANDARD}  # per_gib_month: S3 list prices (rules/storage.py StoragePrices)
```
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import Field

from rules.base import Finding, Rule, RuleConfig, usd
from rules.context import RuleContext
from rules.storage import StoragePrices, gib, storage_cost

EVIDENCE = {"checksum": "same size and checksum", "etag": "same size and ETag",
            "multipart-etag": "same size and multipart ETag with the same part count, weaker evidence"}

SQL = """
WITH objects AS (  -- content keys: (size, checksum algorithm, value) and (size, ETag, parts)
  SELECT bucket, key, size, last_modified, coalesce(upper(storage_class), $default_class) AS storage_class,
         coalesce(multipart, etag LIKE '%-%') AS multipart, nullif(etag, '') AS etag,
         CASE WHEN coalesce(multipart, etag LIKE '%-%') THEN coalesce(part_count, -1) ELSE 0 END AS parts,
         checksum_algorithm AS algorithm, nullif(checksum_value, '') AS checksum
  FROM {objects}
  WHERE size >= $min_object_bytes
),
shared_ck AS (SELECT size, algorithm, checksum, true AS by_ck FROM objects WHERE checksum IS NOT NULL
              GROUP BY ALL HAVING count(*) > 1),
shared_ek AS (SELECT size, etag, parts, true AS by_ek FROM objects WHERE etag IS NOT NULL
              GROUP BY ALL HAVING count(*) > 1),
candidates AS (  -- only objects sharing a key with another can be copies
  SELECT o.*, coalesce(c.by_ck, false) AS by_ck, coalesce(e.by_ek, false) AS by_ek,
         row_number() OVER () AS oid
  FROM objects o
  LEFT JOIN shared_ck c ON c.size = o.size AND c.algorithm IS NOT DISTINCT FROM o.algorithm AND c.checksum = o.checksum
  LEFT JOIN shared_ek e ON e.size = o.size AND e.etag = o.etag AND e.parts = o.parts
  WHERE c.by_ck OR e.by_ek
),
unique_objects AS (  -- one bucket listed by two sources counts once
  SELECT * FROM candidates QUALIFY row_number() OVER (PARTITION BY bucket, key ORDER BY last_modified DESC) = 1
),
linked AS (
  SELECT *, CASE WHEN by_ck THEN min(oid) OVER (PARTITION BY size, algorithm, checksum) ELSE oid END AS l1
  FROM unique_objects
),
linked2 AS (
  SELECT *, CASE WHEN by_ek THEN min(l1) OVER (PARTITION BY size, etag, parts) ELSE l1 END AS l2 FROM linked
),
grouped AS (  -- a third pass closes chains checksum → ETag → checksum
  SELECT *, CASE WHEN by_ck THEN min(l2) OVER (PARTITION BY size, algorithm, checksum) ELSE l2 END AS grp
  FROM linked2
),
judged AS (
  SELECT *, count(*) OVER (PARTITION BY grp) AS copies,
         CASE WHEN by_ck THEN 'checksum' WHEN by_ek AND NOT multipart THEN 'etag'
              ELSE 'multipart-etag' END AS evidence,  -- what links this copy to another
         arg_min(bucket, (last_modified, bucket, key)) OVER (PARTITION BY grp) AS orig_bucket,
         arg_min(key, (last_modified, bucket, key)) OVER (PARTITION BY grp) AS orig_key
  FROM grouped
),
redundant AS (
  SELECT *, list_reverse(string_split(key, '/')) AS ra, list_reverse(string_split(orig_key, '/')) AS rb
  FROM judged WHERE copies > 1 AND NOT (bucket = orig_bucket AND key = orig_key)
),
suffixed AS (  -- n: components of the longest common path suffix (at least the file name)
  SELECT *, greatest(1, coalesce(list_position(list_transform(range(1, least(len(ra), len(rb)) + 1),
                                                              lambda i: ra[i] = rb[i]), false) - 1,
                                 least(len(ra), len(rb)))) AS n
  FROM redundant
)
SELECT bucket, array_to_string(list_reverse(ra[n + 1:]), '/') AS prefix,
       orig_bucket, array_to_string(list_reverse(rb[n + 1:]), '/') AS orig_prefix,
       evidence, storage_class, count(*) AS files, sum(size) AS bytes,
       list({{'copy': key, 'original': orig_key}} ORDER BY size DESC, key)[:$max_examples] AS examples
FROM suffixed
GROUP BY ALL
ORDER BY ALL
"""


class DuplicateDatasetsConfig(RuleConfig):
    min_object_bytes: int = Field(default=1024, ge=1, le=10**15)
    min_duplicate_bytes: int = Field(default=1024**3, ge=0, le=10**15)
    max_examples: int = Field(default=3, ge=0, le=50)
    prices: StoragePrices = StoragePrices()


def _prefix(bucket: str, prefix: str) -> str:
    return f"s3://{bucket}/{prefix}/" if prefix else f"s3://{bucket}/"


class DuplicateDatasets(Rule[DuplicateDatasetsConfig]):
    name = "duplicate-datasets"
    category = "waste"
    inputs = {"s3_objects": ("bucket", "key", "size", "etag", "multipart", "part_count", "checksum_algorithm",
                             "checksum_value", "storage_class", "last_modified")}

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        c = self.config
        rows = ctx.con.execute(SQL.format(objects=ctx.latest("s3_objects")), {
            "default_class": c.prices.default_class, "min_object_bytes": c.min_object_bytes,
            "max_examples": c.max_examples}).fetchall()
        pairs: dict[tuple[str, str], dict] = defaultdict(lambda: {"files": 0, "bytes": defaultdict(int),
                                                                   "evidence": defaultdict(int), "examples": []})
        for bucket, prefix, orig_bucket, orig_prefix, evidence, storage_class, files, size, examples in rows:
            entry = pairs[(_prefix(bucket, prefix), _prefix(orig_bucket, orig_prefix))]
            entry["files"] += files
            entry["bytes"][storage_class] += size
            entry["evidence"][evidence] += files
            entry["examples"] += examples
        findings = []
        for (copy, original), entry in sorted(pairs.items()):
            size = sum(entry["bytes"].values())
            if size < c.min_duplicate_bytes:
                continue
            waste = storage_cost(entry["bytes"], c.prices)
            strongest = next(e for e in EVIDENCE if e in entry["evidence"])
            severity = "info" if strongest == "multipart-etag" else self.severity(waste)
            summary = (f"{copy} holds {entry['files']:,} file(s) ({gib(size)}) identical to those under {original} "
                       f"({EVIDENCE[strongest]}), costing {usd(waste)} a month.")
            examples = sorted(entry["examples"], key=lambda e: e["copy"])[:c.max_examples]
            findings.append(self.finding(resource_id=copy, key=f"copy-of:{original}", severity=severity,
                                         impact_usd=waste, summary=summary, evidence={
                                             "original_prefix": original, "files": entry["files"], "bytes": size,
                                             "bytes_by_class": dict(entry["bytes"]),
                                             "files_by_evidence": dict(entry["evidence"]), "examples": examples}))
        return findings
