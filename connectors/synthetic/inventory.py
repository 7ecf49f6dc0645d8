"""The synthetic organisation's inventory, written as the local files the inventory connectors read.

    files = write_inventory(org, out_dir)      # org: connectors.synthetic.org.Organisation
    config["inventory"] = files.sources()      # aws-tags, s3-objects, cloudwatch-logs, gpu-metrics,
                                               # and slurm-jobs when the organisation has a cluster

Derived from the same organisation as its bill, so ids match: instance ids in the GPU
metrics are the bill's ResourceIds, buckets and log groups are the billed ones. What it
shows, on purpose:

- tags (`tags/get-resources.json`): every node, bucket and log group with its real owner,
  including the ones whose bill lines carry no tags (attribution fills them in from here);
  one in ten bare nodes stays untagged everywhere (an empty tag list);
- S3 (`s3/listing.parquet`, `s3/lifecycle.json`): checkpoint sprawl (a checkpoint every six
  hours of every pretraining run, all kept, on STANDARD, in a bucket without lifecycle),
  a tokenized corpus copied whole into another team's bucket (same sizes and checksums),
  a crawl backed up inside its own bucket (same multipart ETags only), harness logs in a
  bucket that never expires them;
- log groups (`logs/describe-log-groups.json`): most never expire, terabytes each;
- GPU utilisation (`gpu/dcgm-utilization.parquet`): hourly per GPU; busy runs, except idle
  tails after some runs end their job, idle nights of the nightly eval fleet, and no data
  at all for the long-context eval nodes (unmonitored); a Slurm cluster's GPUs are busy
  while a job holds them and idle otherwise;
- Slurm accounting (`slurm/<cluster>/sacct-<day>.json`, connectors.synthetic.sacct): the
  jobs of each cluster (connectors.synthetic.slurm), whose nodes the tags show with their
  cluster and node name only.
Same organisation → identical files.
"""

from __future__ import annotations

import hashlib
import json
import math
from base64 import b64encode
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from connectors.synthetic.org import ACCOUNTS, ALL_HOURS, INSTANCES, TEAM_ACCOUNT, Organisation
from connectors.synthetic.sacct import write_sacct
from connectors.synthetic.slurm import CLUSTER_TAG, NODE_TAG, cluster_jobs, node_hour_gpu_seconds

GIB = 1024**3
PART = 64 * 1024**2  # multipart upload part size of the training jobs' uploader
CHECKPOINT_EVERY_HOURS = 6
CHECKPOINT_FILES = {  # project → (file name, bytes) of one checkpoint
    "llama-70b": [(f"model-{i:05d}-of-00004.safetensors", 35 * GIB) for i in range(1, 5)]
    + [("optim_states.distcp", 420 * GIB)],
    "moe-8x22b": [(f"model-{i:05d}-of-00008.safetensors", 35 * GIB) for i in range(1, 9)]
    + [("optim_states.distcp", 840 * GIB)],
}
IDLE_GPU_PCT = 0.8


@dataclass(frozen=True)
class InventoryFiles:
    tags: Path
    s3_listing: Path
    lifecycle: Path
    log_groups: Path
    gpu: Path
    slurm: Path | None = None  # sacct files, one folder per cluster; None: no cluster

    def sources(self, prefix: str = "ml-org") -> list[dict]:
        """`inventory:` config entries that read these files."""
        return [
            {"name": f"{prefix}-tags", "kind": "aws-tags", "path": str(self.tags)},
            {"name": f"{prefix}-s3", "kind": "s3-objects", "path": str(self.s3_listing),
             "lifecycle_path": str(self.lifecycle)},
            {"name": f"{prefix}-logs", "kind": "cloudwatch-logs", "path": str(self.log_groups)},
            {"name": f"{prefix}-gpu", "kind": "gpu-metrics", "path": str(self.gpu)},
        ] + ([{"name": f"{prefix}-slurm", "kind": "slurm-jobs", "path": str(self.slurm)}] if self.slurm else [])


def _hex(*parts: object, length: int = 32) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:length]


def _etag(size: int, *identity: object) -> str:
    """An S3-shaped ETag: MD5-like hex, with `-N` when the uploader used N parts."""
    parts = math.ceil(size / PART)
    return _hex("etag", *identity) + (f"-{parts}" if parts > 1 else "")


def write_inventory(org: Organisation, out_dir: str | Path, *, running_comments: bool = False) -> InventoryFiles:
    """`running_comments`: the Slurm jobs' comments while they run too (connectors.synthetic.sacct)."""
    out = Path(out_dir)
    for sub in ("tags", "s3", "logs", "gpu"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    files = InventoryFiles(out / "tags" / "get-resources.json", out / "s3" / "listing.parquet",
                           out / "s3" / "lifecycle.json", out / "logs" / "describe-log-groups.json",
                           out / "gpu" / "dcgm-utilization.parquet", out / "slurm" if org.clusters else None)
    for cluster in org.clusters:
        write_sacct(org, cluster, out / "slurm" / cluster.name, running_comments=running_comments)
    start = datetime(org.start.year, org.start.month, org.start.day)
    _write_json(files.tags, {"ResourceTagMappingList": _tag_mappings(org)})
    pq.write_table(_s3_objects(org, start), files.s3_listing)
    _write_json(files.lifecycle, _lifecycles(org))
    _write_json(files.log_groups, {"logGroups": _log_groups(org, start)})
    pq.write_table(_gpu_utilization(org, start), files.gpu)
    return files


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# ---- tags -------------------------------------------------------------------------------------

def _owner_tags(team: str, project: str | None = None, experiment: str | None = None) -> list[dict]:
    tags = [{"Key": "Team", "Value": team}]
    tags += [{"Key": "Project", "Value": project}] if project else []
    tags += [{"Key": "Experiment", "Value": experiment}] if experiment else []
    return tags


def _tag_mappings(org: Organisation) -> list[dict]:
    mappings: dict[str, list[dict]] = {}
    region_of: dict[str, str] = {}
    tagged: set[str] = set()
    for stream in org.streams:
        region_of.setdefault(stream.resource_id, stream.region)
        if stream.tags:
            tagged.add(stream.resource_id)
    bare = 0
    for exp in org.experiments:
        account = ACCOUNTS[TEAM_ACCOUNT[exp.team]][0]
        for instance in exp.instances:
            region = region_of[instance]
            billed_untagged = instance not in tagged
            bare += billed_untagged
            keep_bare = billed_untagged and bare % 10 == 0
            mappings[f"arn:aws:ec2:{region}:{account}:instance/{instance}"] = (
                [] if keep_bare else _owner_tags(exp.team, exp.project, exp.name))
    for bucket, (team, project, _) in org.buckets.items():
        mappings[f"arn:aws:s3:::{bucket}"] = _owner_tags(team, project or None)
    for group, team in org.log_groups.items():
        region = "us-west-2" if team == "inference" else "us-east-1"
        account = ACCOUNTS[TEAM_ACCOUNT[team]][0]
        mappings[f"arn:aws:logs:{region}:{account}:log-group:{group}"] = _owner_tags(team)
    for cluster in org.clusters:  # the fleet's nodes: the cluster and the node name, no owner
        for node, instance in cluster.nodes.items():
            mappings[f"arn:aws:ec2:{cluster.region}:{ACCOUNTS[cluster.account][0]}:instance/{instance}"] = [
                {"Key": CLUSTER_TAG, "Value": cluster.name}, {"Key": NODE_TAG, "Value": node}]
    return [{"ResourceARN": arn, "Tags": tags} for arn, tags in sorted(mappings.items())]


# ---- S3 ---------------------------------------------------------------------------------------

def _s3_objects(org: Organisation, start: datetime) -> pa.Table:
    rows: list[tuple] = []
    end = start + timedelta(days=org.days)

    def add(bucket: str, key: str, size: int, modified: datetime, *, cls: str = "STANDARD",
            etag: str | None = None, checksum: str | None = None) -> None:
        algorithm = "SHA256" if checksum else None
        value = b64encode(hashlib.sha256(checksum.encode()).digest()).decode() if checksum else None
        rows.append((bucket, key, size, etag or _etag(size, bucket, key), algorithm, value, cls, modified))

    for exp in org.experiments:  # every checkpoint of every pretraining run, kept on STANDARD
        shards = CHECKPOINT_FILES.get(exp.project)
        if not shards or f"ckpt-{exp.project}" not in org.buckets:
            continue
        for n, slot in enumerate(range(exp.start + CHECKPOINT_EVERY_HOURS, exp.end, CHECKPOINT_EVERY_HOURS), 1):
            written = start + timedelta(hours=slot)
            # where a lifecycle rule moves checkpoints after 30 days, the old ones have moved
            moved = exp.project == "moe-8x22b" and end - written >= timedelta(days=30)
            for name, size in shards:
                add(f"ckpt-{exp.project}", f"runs/{exp.name}/checkpoints/step_{n * 500:07d}/{name}", size, written,
                    cls="GLACIER_IR" if moved else "STANDARD")
    if "datasets-tokenized" in org.buckets and "datasets-tokenized-copy" in org.buckets:
        for i in range(2000):  # the corpus, and another team's full copy of it a week later
            size = 4 * GIB - (i % 97) * 4096
            original = f"corpus-v5/shard-{i:05d}.bin"
            etag = _etag(size, "corpus-v5", i)
            add("datasets-tokenized", f"tokenized/{original}", size, start + timedelta(hours=i % 48),
                etag=etag, checksum=original)
            add("datasets-tokenized-copy", f"pretrain-inputs/{original}", size, start + timedelta(days=7),
                etag=etag, checksum=original)
    if "datasets-raw" in org.buckets:
        for i in range(600):  # a crawl and its in-bucket backup: same multipart ETags, no checksums
            size = GIB + i * 7919
            etag = _etag(size, "crawl", i)
            add("datasets-raw", f"crawl/2026-09/part-{i:05d}.warc.gz", size, start, etag=etag)
            add("datasets-raw", f"crawl-backup/2026-09/part-{i:05d}.warc.gz", size, start + timedelta(days=2),
                etag=etag)
    if "eval-results" in org.buckets:
        hour = start
        while hour < end:  # hourly harness logs, never expired
            add("eval-results", f"logs/harness/{hour:%Y-%m-%d}/run-{hour:%H}.log.gz", 180 * 1024**2, hour)
            hour += timedelta(hours=1)
    bucket, key, size, etag, algorithm, value, cls, modified = (list(c) for c in zip(*rows))
    return pa.table({"bucket": bucket, "key": key, "size": pa.array(size, pa.int64()), "etag": etag,
                     "checksum_algorithm": algorithm, "checksum_value": value, "storage_class": cls,
                     "last_modified": pa.array(modified, pa.timestamp("us"))})


def _lifecycles(org: Organisation) -> dict:
    rules = {
        "ckpt-moe-8x22b": [{"ID": "checkpoints-to-glacier-ir", "Status": "Enabled",
                            "Filter": {"Prefix": "runs/"},
                            "Transitions": [{"Days": 30, "StorageClass": "GLACIER_IR"}]}],
        "posttrain-runs": [{"ID": "expire-tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
                            "Expiration": {"Days": 7}}],
        "datasets-archive": [{"ID": "deep-archive", "Status": "Enabled", "Filter": {},
                              "Transitions": [{"Days": 180, "StorageClass": "DEEP_ARCHIVE"}]}],
    }
    return {bucket: ({"Rules": rules[bucket]} if bucket in rules else None) for bucket in sorted(org.buckets)}


# ---- log groups -------------------------------------------------------------------------------

def _log_groups(org: Organisation, start: datetime) -> list[dict]:
    rng = np.random.default_rng([org.seed, 23])
    groups = []
    for n, (group, team) in enumerate(sorted(org.log_groups.items())):
        region = "us-west-2" if team == "inference" else "us-east-1"
        arn = f"arn:aws:logs:{region}:{ACCOUNTS[TEAM_ACCOUNT[team]][0]}:log-group:{group}"
        created = start - timedelta(days=int(rng.integers(30, 400)))
        item = {"logGroupName": group, "arn": f"{arn}:*", "logGroupArn": arn, "metricFilterCount": 0,
                "creationTime": int(created.replace(tzinfo=timezone.utc).timestamp() * 1000),
                "storedBytes": int(rng.integers(200, 3000)) * 10**9}
        if n % 4 == 3:  # a few teams set a retention; the rest keep everything forever
            item["retentionInDays"] = 30
        groups.append(item)
    return groups


# ---- GPU utilisation --------------------------------------------------------------------------

def _gpu_utilization(org: Organisation, start: datetime) -> pa.Table:
    """Hourly utilisation per GPU of every GPU node the bill charges for, except the
    long-context eval nodes (no exporter: unmonitored)."""
    rng = np.random.default_rng([org.seed, 31])
    nodes: dict[str, tuple[str, int, int, int, str]] = {}  # instance → (type, start, end, hours mask, project)
    for exp in org.experiments:
        for instance in exp.instances:
            nodes[instance] = (exp.instance_type, exp.start, exp.end, ALL_HOURS, exp.project)
    clustered = {instance for cluster in org.clusters for instance in cluster.nodes.values()}
    for stream in org.streams:  # serving fleets outside any experiment
        if stream.resource_id.startswith("i-") and stream.instance_type and stream.resource_id not in nodes.keys() | clustered:
            nodes[stream.resource_id] = (stream.instance_type, stream.start, stream.end, stream.hours, "serving")
    columns: dict[str, list] = {"resource_id": [], "gpu": [], "hour": [], "util_pct": [], "metric": []}
    idle_tail_runs = 0
    for exp in org.experiments:
        idle_tail_runs += 1
        if exp.project == "long-context-eval" or INSTANCES[exp.instance_type][2] == 0:
            continue
        tail = 10 if idle_tail_runs % 3 == 0 else 0  # the job ended, the nodes kept running
        for instance in exp.instances:
            _node_rows(columns, rng, instance, nodes.pop(instance), start, tail)
    for instance, node in sorted(nodes.items()):
        if INSTANCES[node[0]][2] and node[4] != "long-context-eval":
            _node_rows(columns, rng, instance, node, start, 0)
    for cluster in org.clusters:
        _cluster_rows(columns, rng, org, cluster, start)
    return pa.table({"resource_id": columns["resource_id"], "gpu": pa.array(columns["gpu"], pa.int32()),
                     "hour": pa.array(columns["hour"], pa.timestamp("us")),
                     "util_pct": pa.array(columns["util_pct"], pa.float64()), "metric": columns["metric"]})


def _node_rows(columns: dict[str, list], rng, instance: str, node: tuple, start: datetime, idle_tail: int) -> None:
    instance_type, first, last, mask, project = node
    gpus = INSTANCES[instance_type][2]
    slots = np.array([s for s in range(first, last) if mask >> (s % 24) & 1], dtype=np.int64)
    if not len(slots):
        return
    g5 = instance_type.startswith("g5")
    metric = "DCGM_FI_DEV_GPU_UTIL" if g5 else "DCGM_FI_PROF_SM_ACTIVE"
    busy, spread = (85.0, 8.0) if g5 else (45.0, 8.0)
    util = np.clip(rng.normal(busy, spread, size=(len(slots), gpus)), 15.0, 100.0)
    idle = slots >= last - idle_tail
    if project == "harness-nightly":  # the nightly eval runs 20:00-02:00 UTC; the fleet idles the rest
        idle |= ((slots % 24) >= 2) & ((slots % 24) < 20)
    util[idle] = rng.uniform(0.0, 2 * IDLE_GPU_PCT, size=(int(idle.sum()), gpus))
    hours = [start + timedelta(hours=int(s)) for s in slots]
    for gpu in range(gpus):
        columns["resource_id"] += [instance] * len(slots)
        columns["gpu"] += [gpu] * len(slots)
        columns["hour"] += hours
        columns["util_pct"] += np.round(util[:, gpu], 2).tolist()
        columns["metric"] += [metric] * len(slots)


def _cluster_rows(columns: dict[str, list], rng, org: Organisation, cluster, start: datetime) -> None:
    """A cluster's GPUs: as many busy in an hour as its jobs held on average, the rest idle."""
    names = list(cluster.nodes)
    held = node_hour_gpu_seconds(cluster_jobs(org, cluster), names, org.hours) / 3600
    gpus = INSTANCES[cluster.instance_type][2]
    hours = [start + timedelta(hours=h) for h in range(org.hours)]
    for row, node in enumerate(names):
        busy = np.arange(gpus)[None, :] < np.rint(held[row])[:, None]  # (hours, gpus)
        util = np.where(busy, np.clip(rng.normal(45.0, 8.0, busy.shape), 15.0, 100.0),
                        rng.uniform(0.0, 2 * IDLE_GPU_PCT, busy.shape))
        for gpu in range(gpus):
            columns["resource_id"] += [cluster.nodes[node]] * org.hours
            columns["gpu"] += [gpu] * org.hours
            columns["hour"] += hours
            columns["util_pct"] += np.round(util[:, gpu], 2).tolist()
            columns["metric"] += ["DCGM_FI_PROF_SM_ACTIVE"] * org.hours
