"""The synthetic ML organisation: who runs what, where, at which price.

`build_organisation` turns (seed, start, days, scale) into an `Organisation`: accounts,
teams → projects → experiments, and a list of billing `Stream`s. A stream is one
resource × usage type that bills one line per hour (or per day) over its active window:
a p5.48xlarge node of `llama-70b-run-0412`, the gp3 volume beside it, a checkpoint
bucket's storage, a log group's ingestion. `connectors.synthetic.billing` expands streams into
CUR 2.0 rows. Later features (inventory listings, GPU utilisation, budgets, an injected
anomaly, a planned run, a Slurm cluster: connectors.synthetic.slurm) read the same
`Organisation` — its instances, buckets, log groups and clusters — or append streams to it
before it is written.

Prices are public us-east-1 / us-west-2 on-demand list prices (USD); money is kept as
integers of 1e-10 USD (`UNITS`) so every sum is exact.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal

import numpy as np

UNITS = 10**10  # money is an integer number of 1e-10 USD; written as DECIMAL(38,10)
ALL_HOURS = (1 << 24) - 1


def units(amount: str) -> int:
    return int(Decimal(amount) * UNITS)


PAYER = ("210987654321", "ml-org-payer")
ACCOUNTS = {
    "payer": PAYER,
    "training": ("314159265358", "research-training"),
    "eval": ("271828182845", "research-eval"),
    "data": ("161803398874", "data-platform"),
    "inference": ("141421356237", "inference-prod"),
}
REGIONS = {"us-east-1": ("USE1-", "US East (N. Virginia)"), "us-west-2": ("USW2-", "US West (Oregon)")}

# instance type → (hourly on-demand price, instance family, GPUs)
INSTANCES = {
    "p5.48xlarge": ("98.32", "p5", 8),
    "p4d.24xlarge": ("32.7726", "p4d", 8),
    "g5.12xlarge": ("5.672", "g5", 4),
    "c7i.16xlarge": ("2.856", "c7i", 0),
}
# S3 storage class → (usage type suffix, $ per GB-month)
S3_CLASSES = {
    "STANDARD": ("TimedStorage-ByteHrs", "0.023"),
    "STANDARD_IA": ("TimedStorage-SIA-ByteHrs", "0.0125"),
    "GLACIER": ("TimedStorage-GlacierByteHrs", "0.0036"),
}
EBS_GP3 = "0.08"  # $ per GB-month
SAVINGS_PLAN_DISCOUNT = Decimal("0.72")  # Compute Savings Plan rate / on-demand rate, 1yr no upfront
SAVINGS_PLAN_USE = Decimal("0.95")  # the fleet uses 95% of the hourly commitment
# the team that buys the organisation's commitments (its Savings Plan is tagged with it), running no fleet
PLATFORM_TEAM = "platform"

# team → project → (instance type, nodes per run, run days, gap days, region)
TEAMS: dict[str, dict[str, tuple[str, int, int, int, str]]] = {
    "pretrain": {
        "llama-70b": ("p5.48xlarge", 16, 12, 1, "us-east-1"),
        "moe-8x22b": ("p5.48xlarge", 8, 9, 2, "us-east-1"),
        "llama-8b-ablations": ("p4d.24xlarge", 2, 3, 1, "us-east-1"),
    },
    "posttrain": {
        "sft-chat-v4": ("p4d.24xlarge", 4, 3, 2, "us-east-1"),
        "rlhf-ppo": ("p4d.24xlarge", 4, 4, 3, "us-east-1"),
        "dpo-safety": ("g5.12xlarge", 4, 2, 2, "us-east-1"),
    },
    "eval": {
        "harness-nightly": ("g5.12xlarge", 3, 7, 0, "us-east-1"),
        "long-context-eval": ("p4d.24xlarge", 1, 2, 3, "us-east-1"),
    },
    "data": {
        "web-crawl-dedup": ("c7i.16xlarge", 6, 5, 2, "us-east-1"),
        "tokenize-corpus-v5": ("c7i.16xlarge", 4, 4, 3, "us-east-1"),
    },
    "inference": {
        "chat-serving": ("g5.12xlarge", 6, 30, 0, "us-west-2"),
        "batch-embeddings": ("g5.12xlarge", 2, 2, 1, "us-west-2"),
    },
}
TEAM_ACCOUNT = {"pretrain": "training", "posttrain": "training", "eval": "eval", "data": "data",
                "inference": "inference"}
# Inconsistent tag keys, as real organisations have them (CUR 2.0 writes `user_<key>`).
TAG_STYLES = (
    (0.55, ("user_team", "user_project", "user_experiment")),
    (0.25, ("user_Team", "user_Project", "user_Experiment")),
    (0.20, ("user_owner_team", "user_project", None)),
)


@dataclass
class Stream:
    """One billed resource × usage type. Slots are hours from the window start."""

    account: str  # key of ACCOUNTS
    product_code: str  # line_item_product_code
    servicecode: str  # product_servicecode
    product_name: str
    product_family: str
    usage_type: str
    operation: str
    resource_id: str
    region: str
    unit: str  # pricing_unit
    rate: int  # UNITS per usage unit
    amount: float  # usage per slot (or per month when `per_month`)
    start: int
    end: int
    description: str
    granularity: int = 1  # 1 hourly, 24 daily
    per_month: bool = False  # `amount` is per month (GB-Mo): spread over the month's hours
    sigma: float = 0.0  # lognormal noise of the usage
    growth: float = 0.0  # relative growth of the usage per 30 days
    integer: bool = False  # usage is a count (requests)
    hours: int = ALL_HOURS  # bit h set: active at hour-of-day h
    instance_type: str = ""
    line_type: str = "Usage"
    sp_rate: int = 0  # UNITS per hour, SavingsPlanCoveredUsage
    commitment: int = 0  # UNITS per hour, SavingsPlanRecurringFee
    used: int = 0  # UNITS per hour, SavingsPlanRecurringFee
    savings_plan_arn: str = ""
    capacity_reservation_arn: str = ""  # CUR 2.0 capacity_reservation_* columns (ODCR)
    capacity_status: str = ""  # Used | Unused
    tags: tuple[tuple[str, str], ...] = ()
    team: str | None = None  # the team the tags name (None: untagged), for expected shares


@dataclass
class Experiment:
    team: str
    project: str
    name: str
    instance_type: str
    nodes: int
    start: int  # hour slot
    end: int
    instances: list[str] = field(default_factory=list)


@dataclass
class Cluster:
    """A scheduler-managed GPU fleet (connectors.synthetic.slurm): long-lived nodes whose tags
    name the cluster and the node, never a team; jobs say who used them."""

    name: str
    instance_type: str
    region: str
    account: str  # key of ACCOUNTS
    nodes: dict[str, str]  # node name (p5-001) → EC2 instance id


@dataclass
class Organisation:
    seed: int
    start: date
    days: int
    scale: float
    experiments: list[Experiment] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    buckets: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # bucket → (team, project, class)
    log_groups: dict[str, str] = field(default_factory=dict)  # log group → team
    clusters: list[Cluster] = field(default_factory=list)
    savings_plan_arn: str = ""
    capacity_reservation_arn: str = ""

    @property
    def hours(self) -> int:
        return self.days * 24


def _hex_id(*parts: object, length: int = 17) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:length]


class _Builder:
    def __init__(self, seed: int, start: date, days: int, scale: float):
        self.org = Organisation(seed=seed, start=start, days=days, scale=scale)
        self.rng = np.random.default_rng([seed, 7])
        self.hours = days * 24
        self.counters: dict[str, int] = {}

    def rotate(self, purpose: str, period: int, hits: int) -> bool:
        """True for `hits` of every `period` calls: shares that hold whatever the seed."""
        count = self.counters.get(purpose, self.org.seed)
        self.counters[purpose] = count + 1
        return count % period < hits

    def tags(self, team: str, project: str | None, experiment: str | None, tagged: bool):
        if not tagged:
            return (), None
        roll = self.rng.random()
        for weight, keys in TAG_STYLES:
            if roll < weight:
                break
            roll -= weight
        value = team if self.rng.random() > 0.1 else f" {team.capitalize()}"  # sloppy spellings exist
        pairs = [(keys[0], value)]
        if project and keys[1]:
            pairs.append((keys[1], project))
        if experiment and keys[2]:
            pairs.append((keys[2], experiment))
        return tuple(pairs), team

    def add(self, **kwargs) -> Stream:
        stream = Stream(**kwargs)
        self.org.streams.append(stream)
        return stream

    def node(self, exp: Experiment | None, team: str, project: str, instance: str, region: str,
             start: int, end: int, tagged: bool, index: int, hours: int = ALL_HOURS) -> str:
        price, family, _ = INSTANCES[instance]
        prefix, location = REGIONS[region]
        account = TEAM_ACCOUNT[team]
        run = exp.name if exp else project
        instance_id = "i-" + _hex_id(self.org.seed, run, index)
        tags, tag_team = self.tags(team, project, exp.name if exp else None, tagged)
        usage_prefix = "" if region == "us-east-1" else prefix
        self.add(account=account, product_code="AmazonEC2", servicecode="AmazonEC2",
                 product_name="Amazon Elastic Compute Cloud", product_family="Compute Instance",
                 usage_type=f"{usage_prefix}BoxUsage:{instance}", operation="RunInstances",
                 resource_id=instance_id, region=region, unit="Hrs", rate=units(price), amount=1.0,
                 start=start, end=end, hours=hours, instance_type=instance, tags=tags, team=tag_team,
                 description=f"${Decimal(price):f} per On Demand Linux {instance} Instance Hour")
        # the root + scratch volume: tagged less often than the instance (tags not propagated)
        vol_tags, vol_team = self.tags(team, project, exp.name if exp else None, tagged and not self.rotate("volume", 10, 3))
        size = 4096 if family in ("p5", "p4d") else 1024
        self.add(account=account, product_code="AmazonEC2", servicecode="AmazonEC2",
                 product_name="Amazon Elastic Compute Cloud", product_family="Storage",
                 usage_type=f"{prefix}EBS:VolumeUsage.gp3", operation="CreateVolume-Gp3",
                 resource_id="vol-" + _hex_id(self.org.seed, run, index, "vol"), region=region, unit="GB-Mo",
                 rate=units(EBS_GP3), amount=float(size), per_month=True, start=start, end=end, hours=hours,
                 tags=vol_tags, team=vol_team,
                 description=f"$0.08 per GB-month of General Purpose (gp3) provisioned storage - {location}")
        if family in ("p5", "p4d"):  # NCCL / data loading traffic between AZs
            self.add(account=account, product_code="AmazonEC2", servicecode="AWSDataTransfer",
                     product_name="AWS Data Transfer", product_family="Data Transfer",
                     usage_type=f"{prefix}DataTransfer-Regional-Bytes", operation="InterZone-In",
                     resource_id=instance_id, region=region, unit="GB", rate=units("0.01"), amount=40.0,
                     sigma=0.6, start=start, end=end, hours=hours, tags=(), team=None,
                     description="$0.010 per GB - regional data transfer - in/out/between EC2 AZs or using elastic IPs or ELB")
        return instance_id

    def clusters(self) -> None:
        scale = self.org.scale
        for team, projects in TEAMS.items():
            for project, (instance, nodes, run_days, gap_days, region) in projects.items():
                nodes = max(1, round(nodes * scale))
                run_no = int(self.rng.integers(30, 990))
                always_on = gap_days == 0
                slot = 0 if always_on else int(self.rng.integers(0, 24 * (gap_days + 1)))
                while slot < self.hours:
                    length = run_days * 24 + int(self.rng.integers(-12, 13)) if not always_on else self.hours
                    end = min(self.hours, slot + max(6, length))
                    exp = Experiment(team, project, f"{project}-run-{run_no:04d}", instance, nodes, slot, end)
                    for index in range(nodes):  # launch scripts that drop tags leave some nodes bare
                        tagged = not self.rotate("node", 7, 1)
                        exp.instances.append(self.node(exp, team, project, instance, region, slot, end, tagged, index))
                    self.org.experiments.append(exp)
                    run_no += 1
                    slot = end + gap_days * 24 + int(self.rng.integers(0, 12))
                    if always_on:
                        break

    def inference_fleet(self) -> None:
        """Always-on p4d serving fleet covered by a Compute Savings Plan, plus a diurnal g5 tier."""
        nodes = max(1, round(4 * self.org.scale))
        price = units(INSTANCES["p4d.24xlarge"][0])
        sp_rate = int(Decimal(price) * SAVINGS_PLAN_DISCOUNT)
        self.org.savings_plan_arn = f"arn:aws:savingsplans::{PAYER[0]}:savingsplan/{_hex_id(self.org.seed, 'sp', length=8)}"
        for index in range(nodes):
            tags, team = self.tags("inference", "chat-serving", None, True)
            instance_id = "i-" + _hex_id(self.org.seed, "serving-p4d", index)
            common = dict(account="inference", product_code="AmazonEC2", servicecode="AmazonEC2",
                          product_name="Amazon Elastic Compute Cloud", product_family="Compute Instance",
                          usage_type="USW2-BoxUsage:p4d.24xlarge", operation="RunInstances",
                          resource_id=instance_id, region="us-west-2", unit="Hrs", rate=price, amount=1.0,
                          start=0, end=self.hours, instance_type="p4d.24xlarge", tags=tags, team=team)
            self.add(**common, line_type="SavingsPlanCoveredUsage", sp_rate=sp_rate,
                     savings_plan_arn=self.org.savings_plan_arn,
                     description="Savings Plan covered usage: p4d.24xlarge Linux US West (Oregon)")
            self.add(**common, line_type="SavingsPlanNegation",
                     description=f"SavingsPlanNegation used by AccountId : {ACCOUNTS['inference'][0]} and UsageSku : p4d.24xlarge")
        used = sp_rate * nodes
        commitment = int((Decimal(used) / SAVINGS_PLAN_USE / (UNITS // 100)).to_integral_value(rounding="ROUND_CEILING")) * (UNITS // 100)
        self.add(account="inference", product_code="ComputeSavingsPlans", servicecode="ComputeSavingsPlans",
                 product_name="Savings Plans for AWS Compute usage", product_family="Savings Plans",
                 usage_type="ComputeSP:1yrNoUpfront", operation="", resource_id=self.org.savings_plan_arn,
                 region="", unit="Hrs", rate=commitment, amount=1.0, start=0, end=self.hours,
                 line_type="SavingsPlanRecurringFee", commitment=commitment, used=used,
                 savings_plan_arn=self.org.savings_plan_arn, tags=(("user_team", PLATFORM_TEAM),), team=PLATFORM_TEAM,
                 description=f"1 year No Upfront Compute Savings Plan with ${Decimal(commitment) / UNITS:f} hourly commitment")
        daytime = sum(1 << h for h in range(13, 24)) | sum(1 << h for h in range(0, 3))  # US business hours in UTC
        for index in range(max(1, round(8 * self.org.scale))):
            self.node(None, "inference", "chat-serving", "g5.12xlarge", "us-west-2", 0, self.hours,
                      not self.rotate("node", 7, 1), 100 + index, hours=daytime)

    def storage(self) -> None:
        """S3 buckets, FSx for Lustre scratch and CloudWatch log groups."""
        scale = self.org.scale
        buckets = [  # (bucket, team, project, class, TB at start, growth per 30 days, tagged)
            ("ckpt-llama-70b", "pretrain", "llama-70b", "STANDARD", 900, 0.35, True),
            ("ckpt-moe-8x22b", "pretrain", "moe-8x22b", "STANDARD", 500, 0.30, True),
            ("ckpt-archive", "pretrain", None, "STANDARD_IA", 1800, 0.05, False),
            ("posttrain-runs", "posttrain", "sft-chat-v4", "STANDARD", 120, 0.2, True),
            ("eval-results", "eval", "harness-nightly", "STANDARD", 15, 0.1, True),
            ("datasets-raw", "data", "web-crawl-dedup", "STANDARD", 800, 0.08, True),
            ("datasets-tokenized", "data", "tokenize-corpus-v5", "STANDARD", 350, 0.1, True),
            ("datasets-tokenized-copy", "pretrain", None, "STANDARD", 340, 0.0, False),
            ("datasets-archive", "data", None, "GLACIER", 5000, 0.02, True),
            ("serving-models", "inference", "chat-serving", "STANDARD", 8, 0.0, True),
        ]
        copies = max(1, round(scale))
        for copy in range(copies):
            for bucket, team, project, cls, tb, growth, tagged in buckets:
                name = bucket if copy == 0 else f"{bucket}-{copy:03d}"
                self.org.buckets[name] = (team, project or "", cls)
                suffix, price = S3_CLASSES[cls]
                tags, tag_team = self.tags(team, project, None, tagged)
                common = dict(account=TEAM_ACCOUNT[team], product_code="AmazonS3", servicecode="AmazonS3",
                              product_name="Amazon Simple Storage Service", resource_id=name, region="us-east-1",
                              start=0, end=self.hours, tags=tags, team=tag_team)
                self.add(**common, product_family="Storage", usage_type=suffix, operation="StandardStorage",
                         unit="GB-Mo", rate=units(price), amount=tb * 1000.0, per_month=True, granularity=24,
                         growth=growth,
                         description=f"${Decimal(price):f} per GB-Mo for {cls} storage")
                if cls == "STANDARD":
                    self.add(**common, product_family="API Request", usage_type="Requests-Tier1", operation="PutObject",
                             unit="Requests", rate=units("0.000005"), amount=4000.0, sigma=0.8, integer=True,
                             description="$0.005 per 1,000 PUT, COPY, POST, or LIST requests")
                    self.add(**common, product_family="API Request", usage_type="Requests-Tier2", operation="GetObject",
                             unit="Requests", rate=units("0.0000004"), amount=60000.0, sigma=0.8, integer=True,
                             description="$0.0004 per 1,000 GET and all other requests")
            for team, capacity_tb in (("pretrain", 48), ("posttrain", 12)):
                tags, tag_team = self.tags(team, None, None, True)
                self.add(account="training", product_code="AmazonFSx", servicecode="AmazonFSx",
                         product_name="Amazon FSx", product_family="Storage",
                         usage_type="USE1-Lustre-PERSISTENT_2-250-Storage", operation="CreateFileSystem",
                         resource_id=f"arn:aws:fsx:us-east-1:{ACCOUNTS['training'][0]}:file-system/fs-0{_hex_id(self.org.seed, team, copy)}",
                         region="us-east-1", unit="GB-Mo", rate=units("0.21"), amount=capacity_tb * 1000.0,
                         per_month=True, granularity=24, start=0, end=self.hours, tags=tags, team=tag_team,
                         description="$0.210 per GB-month of Lustre PERSISTENT_2 250 MB/s/TiB storage")
            for team in TEAMS:
                for project in TEAMS[team]:
                    group = f"/ml/{team}/{project}" + (f"-{copy:03d}" if copy else "")
                    self.org.log_groups[group] = team
                    account = TEAM_ACCOUNT[team]
                    region = "us-west-2" if team == "inference" else "us-east-1"
                    prefix = REGIONS[region][0]
                    arn = f"arn:aws:logs:{region}:{ACCOUNTS[account][0]}:log-group:{group}"
                    tags, tag_team = self.tags(team, project, None, self.rotate("log group", 2, 1))
                    common = dict(account=account, product_code="AmazonCloudWatch", servicecode="AmazonCloudWatch",
                                  product_name="AmazonCloudWatch", resource_id=arn, region=region, start=0,
                                  end=self.hours, tags=tags, team=tag_team)
                    self.add(**common, product_family="Data Payload", usage_type=f"{prefix}DataProcessing-Bytes",
                             operation="PutLogEvents", unit="GB", rate=units("0.50"), amount=0.8, sigma=0.5,
                             description="$0.50 per GB custom log data ingested")
                    self.add(**common, product_family="Storage Snapshot", usage_type=f"{prefix}TimedStorage-ByteHrs",
                             operation="HourlyStorageMetering", unit="GB-Mo", rate=units("0.03"), amount=2000.0,
                             growth=0.6, per_month=True, granularity=24,
                             description="$0.03 per GB-mo of log storage")


def build_organisation(seed: int, start: date, days: int, scale: float = 1.0) -> Organisation:
    """The organisation for this seed and window. `scale` multiplies fleets and buckets."""
    if days < 1:
        raise ValueError("days must be at least 1")
    builder = _Builder(seed, start, days, scale)
    builder.clusters()
    builder.inference_fleet()
    builder.storage()
    return builder.org


def inject_gpu_anomaly(org: Organisation, *, team: str = "eval", days: int = 3, nodes: int = 4,
                       instance: str = "p4d.24xlarge") -> list[str]:
    """A forgotten sweep: `nodes` extra GPU instances for `team` over the window's last
    `days` days, tagged like the team's first instance (what the spend-anomaly rule should
    catch on that team's EC2 spend). Returns the new instance ids."""
    template = next(s for s in org.streams if s.team == team and s.product_family == "Compute Instance")
    price = INSTANCES[instance][0]
    start = max(org.hours - days * 24, 0)
    added = []
    for index in range(nodes):
        instance_id = "i-" + _hex_id(org.seed, "injected-sweep", team, index)
        org.streams.append(replace(
            template, usage_type=f"BoxUsage:{instance}", resource_id=instance_id, region="us-east-1",
            rate=units(price), start=start, end=org.hours, hours=ALL_HOURS, instance_type=instance,
            description=f"${Decimal(price):f} per On Demand Linux {instance} Instance Hour"))
        added.append(instance_id)
    return added
