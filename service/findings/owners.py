"""Owners of findings: each finding's resource placed on team, project and experiment by the
same attribution `spendlake attribute` uses, from the resource's latest cost line. An instance
of a shared GPU cluster whose own tags name no team belongs to the cluster's owner
(`attribution.clusters.owners`), where the cluster's idle alert goes: its idle-gpu finding
reaches that team, not `unallocated`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rules.base import NO_OWNER, Finding
from rules.context import UNALLOCATED, Owner, OwnerLookup
from service.attribution import attribute_resources
from service.core.config import Config
from service.core.folding import folded
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot

def bill_ids(resource_id: str) -> list[str]:
    """The ResourceIds a finding's resource may carry in the bill: itself, the bucket of an
    `s3://bucket/prefix/` (S3 bills per bucket), the instance id of an EC2 ARN."""
    if resource_id.startswith("s3://"):
        bucket = resource_id[5:].split("/", 1)[0]
        return [resource_id, bucket, f"arn:aws:s3:::{bucket}"]
    if resource_id.startswith("arn:aws:ec2:") and "/" in resource_id:
        return [resource_id, resource_id.rsplit("/", 1)[1]]
    return [resource_id]


def _in_bill(lake: Lake, resource_ids: Sequence[str], snapshot: Snapshot | None = None) -> dict[str, list[str]]:
    """Resource id → the ids of `bill_ids` some cost line carries, and the ARN the bill uses for a
    log group (log groups are listed by name); ids on no line (a finding's own name: `series:...`,
    `unallocated:team`, `budget:...`) are absent, so attribution is not asked about them."""
    candidates = {rid: bill_ids(rid) for rid in resource_ids}
    # the cost lines alone: no inventory table's view (its files' checks), and a damaged one stops no owner
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=("costs",)) as con:
        for name, arn in con.execute(
                "SELECT DISTINCT regexp_extract(ResourceId, ':log-group:(.*?)(:\\*)?$', 1) AS name, ResourceId FROM costs "
                "WHERE ResourceId LIKE 'arn:aws:logs:%:log-group:%' AND name IN (SELECT unnest(?))",
                [list(resource_ids)]).fetchall():
            candidates[name].append(arn)
        wanted = sorted({c for ids in candidates.values() for c in ids})
        sql = "SELECT DISTINCT ResourceId FROM costs WHERE ResourceId IN (SELECT unnest(?))"
        billed = {row[0] for row in con.execute(sql, [wanted]).fetchall()}
    return {rid: [c for c in ids if c in billed] for rid, ids in candidates.items() if billed.intersection(ids)}


OWNED = ("team", "project", "experiment")


def unowned(config: Config) -> Owner:
    """No owner as attribution names it: each dimension's `default` (e.g. no-team), else
    `unallocated`, so every unowned finding carries one name that alert routing sees."""
    dimensions = config.attribution.dimensions
    return Owner(**{d: dimensions[d].default if d in dimensions else UNALLOCATED for d in OWNED})


def owner_lookup(lake: Lake, config: Config, snapshot: Snapshot | None = None) -> OwnerLookup:
    """Owners of resource ids through attribution, from each resource's latest cost line;
    a resource the bill does not name is absent (see fill_owners). `snapshot`: a command's
    (`rules run`'s, taken with HELD_TABLES), else the lake's state at each call."""
    clusters = config.attribution.clusters
    nobody = unowned(config)

    def owner_of(resource_ids: Sequence[str]) -> dict[str, Owner]:
        candidates = _in_bill(lake, resource_ids, snapshot)
        wanted = sorted({c for ids in candidates.values() for c in ids})
        found = attribute_resources(lake, config, wanted, snapshot) if wanted else {}
        owners = {}
        for rid, ids in candidates.items():
            dims = next((found[c] for c in ids if c in found), None)
            if dims:
                owner = Owner(**{d: dims.get(d) or getattr(nobody, d) for d in OWNED})
                cluster_owner = clusters.owner(dims.get("cluster")) if clusters else None
                no_team = folded(owner.team) == folded(nobody.team)
                owners[rid] = replace(owner, team=cluster_owner) if cluster_owner and no_team else owner
        return owners

    return owner_of


def fill_owners(findings: list[Finding], owner_of: OwnerLookup, nobody: Owner = Owner()) -> list[Finding]:
    """Each finding with its resource's owners; a resource the bill does not name (a budget, a
    dimension's unallocated spend) keeps what the rule said, an owner it did not name named as `nobody`."""
    owners = owner_of(sorted({f.resource_id for f in findings})) if findings else {}
    filled = []
    for finding in findings:
        owner = owners.get(finding.resource_id)
        if owner is None:
            owner = Owner(**{d: getattr(nobody, d) if getattr(finding, d) == NO_OWNER else getattr(finding, d)
                             for d in OWNED})
        filled.append(replace(finding, team=owner.team, project=owner.project, experiment=owner.experiment))
    return filled
