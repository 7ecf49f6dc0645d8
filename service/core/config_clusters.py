"""The `attribution.clusters` section: how job records meet billed GPU instances (shared
clusters), the GPUs each instance type has, and the dimensions jobs bring.

How it is applied: service/attribution/allocation.py. Present (even empty, `clusters: {}`),
it turns allocation on and adds the job dimensions; absent, attribution is what it was.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal

from pydantic import Field, field_validator

from service.core.config_base import Strict
from service.core.folding import composed, folded

# The dimensions jobs bring, and the tag keys a cost line may set them with (as any dimension's
# `tags:`); `cluster` takes `cluster_tag` when one is set.
JOB_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "run": ("run", "run_id"),
    "job_type": ("job_type",),
    "job_state": ("job_state",),
    "cluster": ("cluster",),
    "user": ("user",),
    # the run an evaluation job serves (a Slurm comment's `parent_run=...`, a pod label, a jobs
    # file's `parent_run` column): `spendlake runs` shows its eval jobs' cost as that run's eval_cost
    "parent_run": ("parent_run",),
}
# What idle capacity shows in these dimensions (the others keep the instance line's values).
IDLE = "idle"
IDLE_DIMENSIONS = ("run", "job_type", "job_state")

# Virtual-tag rule match keys that read a job's own fields → their column in the allocated
# lines (NULL on cost lines and idle parts). `job_name` is a regular expression.
JOB_MATCH_FIELDS = {
    "job_name": "j_name",
    "partition": "j_partition",
    "qos": "j_qos",
    "namespace": "j_namespace",
}

# GPUs (or Trainium/Inferentia/Gaudi accelerators) per instance, by instance type, from the
# providers' instance type pages. `gpus_per_instance` in the config overrides or adds types.
GPU_INSTANCE_TYPES: dict[str, int] = {
    "p5.48xlarge": 8, "p5.4xlarge": 1, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8, "p6-b300.48xlarge": 8, "p6e-gb200.36xlarge": 4,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8,
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8,
    "p2.xlarge": 1, "p2.8xlarge": 8, "p2.16xlarge": 16,
    **{f"{family}.{size}": 1 for family in ("g5", "g6", "g6e") for size in
       ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    **{f"{family}.{size}": gpus for family in ("g5", "g6", "g6e") for size, gpus in
       (("12xlarge", 4), ("24xlarge", 4), ("48xlarge", 8))},
    **{f"g4dn.{size}": 1 for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g4dn.12xlarge": 4, "g4dn.metal": 8,
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16, "trn2.48xlarge": 16,
    "inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12,
    "dl1.24xlarge": 8,
    "a3-highgpu-8g": 8, "a3-megagpu-8g": 8, "a3-ultragpu-8g": 8,
    "a2-highgpu-1g": 1, "a2-highgpu-2g": 2, "a2-highgpu-4g": 4, "a2-highgpu-8g": 8, "a2-megagpu-16g": 16,
    "a2-ultragpu-1g": 1, "a2-ultragpu-2g": 2, "a2-ultragpu-4g": 4, "a2-ultragpu-8g": 8, "a4-highgpu-8g": 8,
    **{f"g2-standard-{cpus}": 1 for cpus in (4, 8, 12, 16, 32)}, "g2-standard-24": 2, "g2-standard-48": 4,
    "g2-standard-96": 8,
    "standard_nd96isr_h100_v5": 8, "standard_nd96isr_h200_v5": 8, "standard_nd96asr_v4": 8,
    "standard_nd96amsr_a100_v4": 8, "standard_nd96isr_mi300x_v5": 8,
    "standard_nc40ads_h100_v5": 1, "standard_nc80adis_h100_v5": 2, "standard_ncc40ads_h100_v5": 1,
    "standard_nc24ads_a100_v4": 1, "standard_nc48ads_a100_v4": 2, "standard_nc96ads_a100_v4": 4,
}
# Sources of the later types (session 54 checked what it could reach): Azure's from Microsoft, its
# azure-docs page nd-mi300x-v5-series (8 MI300X) and the VM size list of microsoft/aspire's
# AksNodeVmSizes.cs (NC H100 v5 1/2, NCC H100 v5 1, NC A100 v4 1/2/4 GPUs); Google's page
# "Accelerator-optimized machine family" says each A2/A3/A4/G2 type has a fixed GPU count, which
# the A2/A3/A4 names end in (`-8g`); the G2 sizes' L4 counts (1/2/4/8) and p6-b300.48xlarge's 8
# B300 were found only in third-party listings, with AWS's P6 family naming the type. Not the NC A10
# v4 sizes: an A10 size may hold part of a GPU; their instances are warned of instead
# (service/attribution/instance_checks.py).


def gpu_table_digest() -> str:
    """What a config with `clusters:` folds into its fingerprint (AttributionConfig.fingerprint):
    the stored rollups were sized by the built-in table, so a change to it makes them stale."""
    return hashlib.sha256(json.dumps(GPU_INSTANCE_TYPES, sort_keys=True).encode()).hexdigest()


def job_dimension_tags(cluster_tag: str | None) -> dict[str, tuple[str, ...]]:
    """The job dimensions' default tag keys (`cluster` reads `cluster_tag` first)."""
    tags = dict(JOB_DIMENSIONS)
    if cluster_tag and cluster_tag.strip():
        tags["cluster"] = tuple(dict.fromkeys((cluster_tag.strip(), "cluster")))
    return tags


class ClustersConfig(Strict):
    """How job records (inventory kinds slurm-jobs, k8s-pods, jobs-file) meet the billed
    instances of a shared GPU cluster: by the job's `instance_ids`; else its `nodes` through
    the instance tag `node_tag`; else the pool of instances whose `cluster_tag` names the
    job's cluster."""

    cluster_tag: str | None = Field(default=None, min_length=1, max_length=128,
                                    description="instance tag naming its cluster (the pool of jobs without nodes)")
    node_tag: str | None = Field(default=None, min_length=1, max_length=128,
                                 description="instance tag holding the scheduler's name of the node")
    gpus_per_instance: dict[str, Decimal] = Field(
        default_factory=dict, max_length=1000,
        description="GPUs per instance type, over the built-in table (0 takes a type out)")
    eks_split: bool = Field(default=True, description="move EKS split cost allocation data onto pods")
    owners: dict[str, str] = Field(
        default_factory=dict, max_length=1000,
        description="team owning each cluster (by cluster name): its idle ratio carries `team`, its idle alert goes there")

    @field_validator("gpus_per_instance")
    @classmethod
    def _counts(cls, table: dict[str, Decimal]) -> dict[str, Decimal]:
        for name, gpus in table.items():
            if not name.strip():
                raise ValueError("an instance type must not be empty")
            if gpus < 0 or gpus > 1024:
                raise ValueError(f"{name}: GPUs per instance must be from 0 to 1024, not {gpus}")
        return table

    @field_validator("owners")
    @classmethod
    def _owners(cls, owners: dict[str, str]) -> dict[str, str]:
        for cluster, team in owners.items():
            if not cluster.strip() or not team.strip():
                raise ValueError(f"{cluster!r}: {team!r}: a cluster and its team must not be empty")
            if len(cluster) > 128 or len(team) > 128:
                raise ValueError(f"{cluster[:40]!r}: a cluster or team name is at most 128 characters")
        seen: dict[str, str] = {}
        for cluster in owners:  # matched as tag values are (case and spaces folded): one name, one owner
            if (same := seen.setdefault(folded(cluster), cluster)) != cluster:
                raise ValueError(f"{same!r} and {cluster!r} are one cluster (names match in any case); keep one")
        return {cluster: composed(team) for cluster, team in owners.items()}  # the team as bills spell it

    def owner(self, cluster: str | None) -> str | None:
        """The team `owners` names for a cluster, matched as tag values are (`GPU-West` owns
        `gpu-west`); None for a cluster it does not name."""
        wanted = folded(cluster or "")
        return next((team for name, team in self.owners.items() if folded(name) == wanted), None)

    def gpu_table(self) -> dict[str, Decimal]:
        """Instance type (lower case) → GPUs, the built-in table with the config's overrides;
        types with 0 GPUs left out."""
        table = {name: Decimal(gpus) for name, gpus in GPU_INSTANCE_TYPES.items()}
        table.update({name.strip().lower(): gpus for name, gpus in self.gpus_per_instance.items()})
        return {name: gpus for name, gpus in table.items() if gpus > 0}

