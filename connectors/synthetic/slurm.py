"""The synthetic organisation's Slurm cluster: p5 nodes tagged only with the cluster and the
node, shared by pretraining, post-training, evaluation and debugging jobs.

    cluster = add_slurm_cluster(org)    # bills the nodes (always on); returns the Cluster
    jobs = cluster_jobs(org, cluster)   # every allocation record over the window

connectors.synthetic.sacct writes the jobs as `sacct --json` does, connectors.synthetic.jobfile
as a jobs file. Same organisation and cluster → the same jobs.

**Who a job belongs to**, carried as a real site carries it:
- team: the Slurm account (`sbatch --account=pretrain`);
- project: the wckey (`--wckey=llama-405b`; slurm.conf `TrackWCKey=yes`);
- run, experiment, job_type: key=value pairs in the job comment (`--comment "run=llama-405b-r1
  experiment=llama-405b job_type=pretrain"`; slurm.conf `AccountingStoreFlags=job_comment`); an eval
  job names the run it scores as `parent_run=llama-405b-r1` there too (`runs` shows it as that run's eval_cost).
  Slurm 22.05 stores the comment only when the job ends (tests/data/slurm/sacct-running.json),
  so a training job also carries its run as its name (`--job-name=llama-405b-r1`): the one
  label a running job shows besides account and wckey;
- debug sessions set none of these: their partition (`debug`) says what they are, their run is
  their job id, and most name no wckey.

**The bill**: every node bills BoxUsage all window long (a long-lived fleet: what no job holds
is the cluster's idle), tagged `cluster: <name>` and `slurm-node: <node>` (CUR 2.0
`user_cluster`, `user_slurm_node`); its gp3 volume carries the cluster tag only, its inter-AZ
traffic no tag.

**The workload** on N nodes (p5-001, ...; see `lanes`):
- pretraining takes what the other lanes leave (12 of 16), in blocks of up to 32 nodes, each
  run one node short of its block (a hot spare): attempts end REQUEUED (a node failed: Slurm
  requeues the same job and the spare takes the failed node's place) or FAILED (a crash: the
  researcher resubmits from the last checkpoint, a new job with the same run label), with
  idle gaps between them; the first block's run outlasts any window (RUNNING at its end);
- a pair of nodes per 16 post-trains: SFT on two nodes, DPO on one, runs of 8-40 h; a quarter
  of the attempts end FAILED or OUT_OF_MEMORY and are resubmitted, long ones TIMEOUT at 48 h;
  idle between runs;
- an eighth of the nodes (two to four) evaluate and debug: at 20:00 UTC every night the eval
  harness runs six suites (4 or 8 GPUs each, two sharing a node, queued when the nodes are
  full) on the first block's run's newest checkpoint (EVALUATED_RUN, their `parent_run`); in working hours debug sessions of 1-8 GPUs, most cancelled by their user, long ones
  TIMEOUT at the debug partition's 2 h, now and then one cancelled before it ever started;
- the last `sweep_nodes` (none in the demo) are left to eval sweeps, which
  connectors.synthetic.jobfile adds by the hundred thousand for the benchmark.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import Decimal

import numpy as np

from connectors.synthetic.org import EBS_GP3, INSTANCES, REGIONS, Cluster, Organisation, Stream, units

CLUSTER_TAG, NODE_TAG = "cluster", "slurm-node"  # as the tagging API shows them
BILL_TAGS = {CLUSTER_TAG: "user_cluster", NODE_TAG: "user_slurm_node"}  # as CUR 2.0 writes them
HOUR, DAY = 3600, 86400
BLOCK = 32  # nodes of one pretraining block
SHARED_POOL = 4  # eval/debug nodes at most; a larger cluster pretrains on the rest
JOB_ID_BASE = 41000
USERS = {"pretrain": ("akira", "bea", "carlos"), "posttrain": ("dana", "emil"), "eval": ("evalbot",)}
PRETRAIN_PROJECTS = ("llama-405b", "moe-400b", "vlm-90b", "code-34b", "llama-405b-long", "scaling-3b")
POSTTRAIN = (("sft-chat-v5", "sft", 2), ("dpo-chat-v5", "rl", 1))  # project, job_type, nodes
EVAL_PROJECT = "nightly-evals"
# the run the nightly evals score (its newest checkpoint): the first block's, which outlasts the window
EVALUATED_RUN = f"{PRETRAIN_PROJECTS[0]}-r1"
EVAL_SUITES = (("mmlu", 4, 1.0), ("gsm8k", 4, 0.7), ("humaneval", 4, 0.5), ("long-context", 8, 3.0),
               ("safety", 4, 1.5), ("multilingual", 4, 2.0))  # suite, GPUs, hours
DEBUG_NAMES = ("interactive", "bash", "debug-nccl", "jupyter", "profile-step")
LIMITS = {"train": 14 * 24 * 60, "posttrain": 48 * 60, "eval": 4 * 60, "debug": 2 * 60}  # minutes


@dataclass(frozen=True)
class SlurmJob:
    """One allocation record: a job, or one attempt of a requeued job, as the window's end
    sees it. Times are seconds from the window's start; `start` None: never started; `end`
    None: still running or pending at the window's end."""

    job_id: int
    attempt: int  # requeues before this record
    name: str
    account: str  # the team
    partition: str
    qos: str
    user: str
    wckey: str  # the project; "" when the job names none
    labels: tuple[tuple[str, str], ...]  # the comment's key=value pairs
    submit: int
    start: int | None
    end: int | None
    state: str
    nodes: tuple[str, ...]
    gpus_per_node: int
    limit_minutes: int
    cancelled_by: str | None = None

    @property
    def comment(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.labels)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * len(self.nodes)

    @property
    def run(self) -> str:
        return dict(self.labels).get("run") or str(self.job_id)


def add_slurm_cluster(org: Organisation, *, name: str = "p5-west", nodes: int = 16, region: str = "us-west-2",
                      account: str = "training") -> Cluster:
    """Bill `nodes` p5.48xlarge nodes over the whole window, tagged with the cluster and the node."""
    if nodes < 6:
        raise ValueError(f"{nodes} nodes: a cluster needs at least 6 (pretraining, post-training, eval)")
    instance = "p5.48xlarge"
    price, _, _ = INSTANCES[instance]
    prefix, location = REGIONS[region]
    usage_prefix = "" if region == "us-east-1" else prefix
    width = max(3, len(str(nodes)))
    names = [f"p5-{i:0{width}d}" for i in range(1, nodes + 1)]
    cluster = Cluster(name=name, instance_type=instance, region=region, account=account,
                      nodes={node: "i-" + _hex(org.seed, name, node) for node in names})
    for node, instance_id in cluster.nodes.items():
        common = dict(account=account, product_code="AmazonEC2", resource_id=instance_id, region=region,
                      start=0, end=org.hours, team=None)
        org.streams.append(Stream(
            **common, servicecode="AmazonEC2", product_name="Amazon Elastic Compute Cloud",
            product_family="Compute Instance", usage_type=f"{usage_prefix}BoxUsage:{instance}",
            operation="RunInstances", unit="Hrs", rate=units(price), amount=1.0, instance_type=instance,
            tags=((BILL_TAGS[CLUSTER_TAG], name), (BILL_TAGS[NODE_TAG], node)),
            description=f"${Decimal(price):f} per On Demand Linux {instance} Instance Hour"))
        org.streams.append(Stream(
            **{**common, "resource_id": "vol-" + _hex(org.seed, name, node, "vol")}, servicecode="AmazonEC2",
            product_name="Amazon Elastic Compute Cloud", product_family="Storage",
            usage_type=f"{prefix}EBS:VolumeUsage.gp3", operation="CreateVolume-Gp3", unit="GB-Mo",
            rate=units(EBS_GP3), amount=4096.0, per_month=True, tags=((BILL_TAGS[CLUSTER_TAG], name),),
            description=f"$0.08 per GB-month of General Purpose (gp3) provisioned storage - {location}"))
        org.streams.append(Stream(
            **common, servicecode="AWSDataTransfer", product_name="AWS Data Transfer",
            product_family="Data Transfer", usage_type=f"{prefix}DataTransfer-Regional-Bytes",
            operation="InterZone-In", unit="GB", rate=units("0.01"), amount=40.0, sigma=0.6,
            description="$0.010 per GB - regional data transfer - in/out/between EC2 AZs or using elastic IPs or ELB"))
    org.clusters.append(cluster)
    return cluster


def lanes(nodes: list[str]) -> tuple[list[list[str]], list[list[str]], list[str]]:
    """(pretraining blocks, post-training pairs, eval/debug pool) of a cluster's nodes."""
    if len(nodes) < 6:
        raise ValueError(f"{len(nodes)} nodes: the workload needs at least 6 (pretraining, post-training, eval)")
    pairs = max(1, len(nodes) // 16)
    shared = min(SHARED_POOL, max(2, len(nodes) // 8))
    pretrain = nodes[:len(nodes) - 2 * pairs - shared]
    blocks = [pretrain[i:i + BLOCK] for i in range(0, len(pretrain), BLOCK)]
    if len(blocks) > 1 and len(blocks[-1]) < 2:
        blocks[-2] += blocks.pop()
    rest = nodes[len(pretrain):]
    return blocks, [rest[2 * i:2 * i + 2] for i in range(pairs)], rest[2 * pairs:]


def cluster_jobs(org: Organisation, cluster: Cluster, *, sweep_nodes: int = 0) -> list[SlurmJob]:
    """Every allocation record of the cluster over the window, by job id and attempt; the last
    `sweep_nodes` nodes are left free (connectors.synthetic.jobfile fills them with sweeps)."""
    work = _Workload(org, cluster)
    blocks, pairs, pool = lanes(list(cluster.nodes)[:len(cluster.nodes) - sweep_nodes])
    for index, block in enumerate(blocks):
        work.pretrain(block, PRETRAIN_PROJECTS[index % len(PRETRAIN_PROJECTS)], outlasts_window=index == 0)
    for pair in pairs:
        work.posttrain(pair)
    work.shared(pool)
    return work.numbered()


def node_hour_gpu_seconds(jobs: list[SlurmJob], nodes: list[str], hours: int) -> np.ndarray:
    """GPU-seconds the jobs held on each node in each hour of the window: (nodes, hours)."""
    held = np.zeros((len(nodes), hours), dtype=np.float64)
    row = {node: i for i, node in enumerate(nodes)}
    for job in jobs:
        if job.start is None or not job.nodes:
            continue
        end = hours * HOUR if job.end is None else job.end
        slots = np.arange(job.start // HOUR, -(-end // HOUR))
        overlap = np.minimum(end, (slots + 1) * HOUR) - np.maximum(job.start, slots * HOUR)
        for node in job.nodes:
            held[row[node], slots] += job.gpus_per_node * overlap
    return held


def _hex(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:17]


class _Workload:
    def __init__(self, org: Organisation, cluster: Cluster):
        self.rng = np.random.default_rng([org.seed, 41, org.clusters.index(cluster)])
        self.start, self.days = org.start, org.days
        self.horizon = org.hours * HOUR
        self.drafts: list[list[SlurmJob]] = []  # the records of each job, job_id 0 until numbered

    def seconds(self, low: float, high: float) -> int:
        return int(self.rng.uniform(low, high))

    def pick(self, choices):
        return choices[int(self.rng.integers(len(choices)))]

    def new_job(self) -> list[SlurmJob]:
        self.drafts.append([])
        return self.drafts[-1]

    def add(self, job: list[SlurmJob], *, submit: int, start: int | None, end: int, state: str,
            **fields) -> bool:
        """Record an attempt as the window's end sees it; False once the window is over."""
        if submit >= self.horizon:
            return False
        if (start if start is not None else end) >= self.horizon:
            start, end, state, fields["nodes"], fields["cancelled_by"] = None, None, "PENDING", (), None
        elif end >= self.horizon:
            end, state, fields["cancelled_by"] = None, "RUNNING", None
        job.append(SlurmJob(job_id=0, attempt=len(job), submit=submit, start=start, end=end, state=state, **fields))
        return end is not None

    def pretrain(self, block: list[str], project: str, outlasts_window: bool) -> None:
        used, spare = list(block[:-1]), block[-1]
        t = self.seconds(HOUR, 8 * HOUR) if outlasts_window else self.seconds(0, 48 * HOUR)
        run_no = 1
        while t < self.horizon:
            planned = self.horizon + 30 * DAY if outlasts_window and run_no == 1 else self.seconds(8 * DAY, 30 * DAY)
            done, user = 0, self.pick(USERS["pretrain"])
            run = f"{project}-r{run_no}"
            fields = dict(name=run, account="pretrain", partition="train", qos="high", user=user, wckey=project,
                          gpus_per_node=8, limit_minutes=LIMITS["train"],
                          labels=(("run", run), ("experiment", project), ("job_type", "pretrain")))
            job, submit, start = self.new_job(), t - self.seconds(60, 900), t
            while True:
                length = self.seconds(18 * HOUR, 96 * HOUR)
                if done + length >= planned:
                    end, state = start + planned - done, "COMPLETED"
                else:
                    end, state = start + length, "REQUEUED" if self.rng.random() < 0.65 else "FAILED"
                if not self.add(job, submit=submit, start=start, end=end, state=state, nodes=tuple(used), **fields):
                    return
                done += end - start
                if state == "COMPLETED":
                    t, run_no = end + self.seconds(12 * HOUR, 48 * HOUR), run_no + 1
                    break
                if state == "REQUEUED":  # the failed node goes to repair, the spare steps in
                    failed = int(self.rng.integers(len(used)))
                    used[failed], spare = spare, used[failed]
                    submit, start = end, end + self.seconds(20 * 60, 90 * 60)
                    continue
                resubmit = end + self.seconds(HOUR, 6 * HOUR)  # someone notices, resubmits from the checkpoint
                job, submit, start = self.new_job(), resubmit - self.seconds(60, 600), resubmit

    def posttrain(self, pair: list[str]) -> None:
        t, numbers = self.seconds(0, 24 * HOUR), {project: 0 for project, _, _ in POSTTRAIN}
        while t < self.horizon:
            project, job_type, width = POSTTRAIN[0] if self.rng.random() < 0.7 else POSTTRAIN[1]
            numbers[project] = number = numbers[project] + 1
            run = f"{project}-{number:02d}"
            fields = dict(name=run, account="posttrain", partition="train", qos="normal",
                          user=self.pick(USERS["posttrain"]), wckey=project, gpus_per_node=8,
                          nodes=tuple(pair[:width]), limit_minutes=LIMITS["posttrain"],
                          labels=(("run", run), ("experiment", project), ("job_type", job_type)))
            remaining = self.seconds(8 * HOUR, 40 * HOUR)
            while remaining > 0:
                roll, limit = self.rng.random(), LIMITS["posttrain"] * 60
                if roll < 0.25:
                    ran = int(remaining * self.rng.uniform(0.1, 0.6))
                    state = "FAILED" if self.rng.random() < 0.6 else "OUT_OF_MEMORY"
                    remaining -= ran // 2  # back to the last checkpoint
                elif remaining > limit:
                    ran, state = limit + self.seconds(0, 30), "TIMEOUT"
                    remaining -= limit
                else:
                    ran, state, remaining = remaining, "COMPLETED", 0
                if not self.add(self.new_job(), submit=t - self.seconds(30, 600), start=t, end=t + ran,
                                state=state, **fields):
                    return
                t += ran + (self.seconds(HOUR // 2, 4 * HOUR) if remaining else self.seconds(2 * HOUR, 30 * HOUR))

    def shared(self, pool: list[str]) -> None:
        """Nightly evals and daytime debug sessions, queued onto the pool's GPUs in submit order."""
        requests = []
        for day in range(self.days):
            base, date = day * DAY, self.start + timedelta(days=day)
            nightly = base + 20 * HOUR + self.seconds(0, 600)
            for order, (suite, gpus, hours) in enumerate(EVAL_SUITES):
                slow = 1.6 if self.rng.random() < 0.04 else 1.0
                length = int(hours * HOUR * self.rng.uniform(0.7, 1.3) * slow)
                limit = LIMITS["eval"] * 60
                state = "FAILED" if self.rng.random() < 0.05 else "TIMEOUT" if length > limit else "COMPLETED"
                length = int(length * self.rng.uniform(0.05, 0.5)) if state == "FAILED" else min(length, limit + 20)
                requests.append((nightly + order, gpus, length, state, dict(
                    name=f"eval-{suite}", account="eval", partition="eval", qos="normal", user="evalbot",
                    wckey=EVAL_PROJECT, limit_minutes=LIMITS["eval"], labels=(
                        ("run", f"{EVAL_PROJECT}-{date:%Y-%m-%d}"), ("experiment", EVAL_PROJECT),
                        ("job_type", "eval"), ("suite", suite), ("parent_run", EVALUATED_RUN)))))
            for _ in range(int(self.rng.poisson(2 * len(pool)))):
                team = "pretrain" if self.rng.random() < 0.6 else "posttrain"
                user, length = self.pick(USERS[team]), self.seconds(10 * 60, 135 * 60)
                roll, limit = self.rng.random(), LIMITS["debug"] * 60
                state = "TIMEOUT" if length > limit else "CANCELLED" if roll < 0.7 else \
                    "COMPLETED" if roll < 0.9 else "FAILED"
                project = (PRETRAIN_PROJECTS[0] if team == "pretrain" else POSTTRAIN[0][0]) \
                    if self.rng.random() < 0.3 else ""
                requests.append((base + self.seconds(9 * HOUR, 19 * HOUR), self.pick((1, 2, 4, 8)),
                                 min(length, limit + 20), state, dict(
                                     name=self.pick(DEBUG_NAMES), account=team, partition="debug", qos="debug",
                                     user=user, wckey=project, limit_minutes=LIMITS["debug"], labels=(),
                                     cancelled_by=user if state == "CANCELLED" else None)))
            if self.rng.random() < 0.15:  # asked for too much, gave up waiting
                submit = base + self.seconds(9 * HOUR, 18 * HOUR)
                self.add(self.new_job(), submit=submit, start=None, end=submit + self.seconds(300, 1800),
                         state="CANCELLED", name="interactive", account="pretrain", partition="debug", qos="debug",
                         user="carlos", wckey="", labels=(), nodes=(), gpus_per_node=8,
                         limit_minutes=LIMITS["debug"], cancelled_by="carlos")
        free = {node: [0] * 8 for node in pool}  # when each GPU of each node is next free
        for submit, gpus, length, state, fields in sorted(requests, key=lambda r: r[0]):
            node = min(pool, key=lambda n: (max(submit, sorted(free[n])[gpus - 1]), pool.index(n)))
            start = max(submit + self.seconds(1, 30), sorted(free[node])[gpus - 1])
            for gpu in sorted(range(8), key=lambda g: free[node][g])[:gpus]:
                free[node][gpu] = start + length
            self.add(self.new_job(), submit=submit, start=start, end=start + length, state=state, nodes=(node,),
                     gpus_per_node=gpus, **fields)

    def numbered(self) -> list[SlurmJob]:
        """Job ids in submit order, as slurmctld hands them out."""
        drafts = sorted((d for d in self.drafts if d), key=lambda d: d[0].submit)
        return [replace(record, job_id=JOB_ID_BASE + number) for number, draft in enumerate(drafts) for record in draft]
