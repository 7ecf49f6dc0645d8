"""The Slurm cluster's jobs (connectors.synthetic.slurm) as `sacct --json` writes them: Slurm
22.05's openapi/dbv0.0.38 documents, the shape tests/data/slurm/ captured from a real cluster
(slashes escaped as json-c writes them; steps `batch`, `extern` and an srun step `0`; written
without sacct's indentation, which no reader sees and which would triple the writing time).

One file per day, as a site's cron writes them just after midnight UTC:

    sacct --json --allusers --duplicates --starttime=<day> --endtime=<day+1> > sacct-<day>.json

so every job active that day is listed as it stood at the day's end: a long attempt RUNNING
in several files (without its comment, which Slurm stores when a job ends) and ended in
a later one, a job submitted late in the evening PENDING, each attempt of a requeued job a
record of its own (the slurm-jobs connector keeps one per record, the ended one).

    paths = write_sacct(org, cluster, out_dir)

`running_comments=True` writes a running job's comment too (`spendlake demo`: its running runs are
found by their name, `runs --run sft-chat-v5-28`, as the ended ones are; the default keeps the
shape 22.05 gave tests/data/slurm/sacct-running.json, a running job without its comment). No Slurm
version's sacct shows one: slurmctld sends slurmdbd a job's comment with its end alone (the job
complete message, with AccountingStoreFlags=job_comment; the job start message carries none: 22.05's
files in tests/data/slurm/ and Slurm's current accounting_storage_slurmdbd.c alike), so such files
are the demo's, whatever release META declares (22.05.8: the one whose openapi/dbv0.0.38 shape they
have; a later release would change their shape, not this).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

from connectors.synthetic.org import Cluster, Organisation
from connectors.synthetic.slurm import DAY, SlurmJob, cluster_jobs

CPUS_PER_GPU = 24  # p5.48xlarge: 192 vCPUs, 8 GPUs
MEMORY_MB_PER_GPU = 250_000
META = {"plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"},
        "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}}
ZERO = {"seconds": 0, "microseconds": 0}
TERMINATED = {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 15, "name": "Terminated"}}
KILLED = {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 9, "name": "Killed"}}
SUCCESS = {"status": "SUCCESS", "return_code": 0}
FAILURE = {"status": "FAILED", "return_code": 1}


def write_sacct(org: Organisation, cluster: Cluster, out_dir: str | Path, *,
                running_comments: bool = False) -> list[Path]:
    """One `sacct --json` file per day of the window under `out_dir` (replacing the files of
    an earlier window); returns their paths. `running_comments`: module docstring."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("sacct-*.json"):  # another window's days must not linger
        stale.unlink()
    jobs = cluster_jobs(org, cluster)
    epoch = int(datetime(org.start.year, org.start.month, org.start.day, tzinfo=timezone.utc).timestamp())
    paths = []
    for day in range(org.days):
        begin, end = day * DAY, (day + 1) * DAY
        listed = [job for job in jobs if job.submit < end and (job.end is None or job.end >= begin)]
        document = {"meta": META, "errors": [], "jobs": [_record(job, cluster.name, epoch, end, running_comments)
                                                         for job in listed]}
        path = out / f"sacct-{org.start + timedelta(days=day):%Y-%m-%d}.json"
        path.write_text(json.dumps(document).replace("/", "\\/"), encoding="utf-8")
        paths.append(path)
    return paths


def hostlist(nodes: tuple[str, ...]) -> str:
    """p5-001, p5-002, p5-003, p5-005 → `p5-[001-003,005]`, as Slurm prints a NodeList."""
    if not nodes:
        return "None assigned"
    groups: dict[tuple[str, int], list[int]] = {}
    for node in sorted(nodes):
        prefix, digits = re.fullmatch(r"(.*?)(\d+)", node).groups()
        groups.setdefault((prefix, len(digits)), []).append(int(digits))
    names = []
    for (prefix, width), numbers in groups.items():
        ranges: list[list[int]] = []
        for number in numbers:
            if ranges and number == ranges[-1][1] + 1:
                ranges[-1][1] = number
            else:
                ranges.append([number, number])
        text = ",".join(f"{a:0{width}d}" + (f"-{b:0{width}d}" if b > a else "") for a, b in ranges)
        names.append(prefix + text if len(numbers) == 1 else f"{prefix}[{text}]")
    return ",".join(names)


def _as_of(job: SlurmJob, moment: int) -> tuple[str, int | None, int | None]:
    """The job's state, start and end as sacct shows them at `moment`."""
    if job.start is None:  # pending, or cancelled while pending
        return (job.state, None, job.end) if job.end is not None and job.end <= moment else ("PENDING", None, None)
    if job.start > moment:
        return "PENDING", None, None
    if job.end is None or job.end > moment:
        return "RUNNING", job.start, None
    return job.state, job.start, job.end


def _tres(kind: str, count: int | None, name: str | None = None) -> dict:
    ids = {"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5, "gres": 1001}
    return {"type": kind, "name": name, "id": ids[kind], "count": count}


def _record(job: SlurmJob, cluster: str, epoch: int, moment: int, running_comments: bool = False) -> dict:
    state, start, end = _as_of(job, moment)
    nodes = job.nodes if start is not None else ()
    gpus, cpus = job.gpus_per_node * len(job.nodes or (1,)), CPUS_PER_GPU * job.gpus_per_node * len(job.nodes or (1,))
    at = lambda seconds: 0 if seconds is None else epoch + seconds  # noqa: E731
    if start is None and state == "CANCELLED":  # Slurm records the cancel as start and end
        start = end
    elapsed = (end if end is not None else moment) - start if start is not None else 0
    exit_code = FAILURE if state in ("FAILED", "OUT_OF_MEMORY") else SUCCESS
    return {
        "account": job.account,
        # Slurm stores the comment when the job ends: a running or pending job shows none (unless asked)
        "comment": {"administrator": None, "job": job.comment if job.comment and (
            running_comments and state == "RUNNING" or state not in ("RUNNING", "PENDING")) else None, "system": None},
        "allocation_nodes": len(nodes),
        "array": {"job_id": 0, "limits": {"max": {"running": {"tasks": 0}}}, "task": None, "task_id": None},
        "association": {"account": job.account, "cluster": cluster, "partition": None, "user": job.user},
        "cluster": cluster,
        "constraints": "",
        "container": None,
        "derived_exit_code": exit_code,
        "time": {"elapsed": elapsed, "eligible": at(job.submit + (2 if job.attempt else 0)), "end": at(end),
                 "start": at(start), "submission": at(job.submit), "suspended": 0, "system": ZERO,
                 "limit": job.limit_minutes, "total": ZERO, "user": ZERO},
        "exit_code": exit_code,
        "flags": ["CLEAR_SCHEDULING", "STARTED_ON_SCHEDULE"] if nodes else [],
        "group": "research",
        "het": {"job_id": 0, "job_offset": None},
        "job_id": job.job_id,
        "name": job.name,
        "mcs": {"label": ""},
        "nodes": hostlist(nodes),
        "partition": job.partition,
        "priority": 10_000 + job.job_id * 7919 % 5000,
        "qos": job.qos,
        "required": {"CPUs": cpus, "memory": 0},
        "kill_request_user": job.cancelled_by if state == "CANCELLED" else None,
        "reservation": {"id": 0, "name": 0},
        "state": {"current": state, "reason": "BeginTime" if job.attempt else
                  "Resources" if state == "PENDING" else "None"},
        "steps": _steps(job, state, at(start), at(end), epoch + moment, nodes) if nodes else [],
        "tres": {
            "allocated": [_tres("cpu", cpus), _tres("energy", None), _tres("node", len(nodes)), _tres("billing", cpus),
                          _tres("gres", gpus, "gpu")] if nodes else [],
            "requested": [_tres("cpu", cpus), _tres("mem", MEMORY_MB_PER_GPU * gpus),
                          _tres("node", max(1, len(job.nodes))), _tres("billing", cpus), _tres("gres", gpus, "gpu")],
        },
        "user": job.user,
        "wckey": {"wckey": job.wckey, "flags": []} if job.wckey else {"wckey": "", "flags": ["ASSIGNED_DEFAULT"]},
        "working_directory": f"/fsx/{job.account}/{job.user}",
    }


def _steps(job: SlurmJob, state: str, start: int, end: int, now: int, nodes: tuple[str, ...]) -> list[dict]:
    """batch on the first node, extern on all, and for batch jobs the srun step 0 (torchrun)."""
    running = state == "RUNNING"
    own = {"COMPLETED": ("COMPLETED", SUCCESS), "FAILED": ("FAILED", FAILURE), "RUNNING": ("RUNNING", SUCCESS),
           "OUT_OF_MEMORY": ("OUT_OF_MEMORY", KILLED)}.get(state, ("CANCELLED", TERMINATED))
    per_node = job.gpus_per_node
    cpus = CPUS_PER_GPU * per_node

    def step(step_id, name: str, on: tuple[str, ...], step_state, tres: list[dict], tasks: int, began: int,
             distribution: str) -> dict:
        finished = 0 if running else end
        return {"nodes": {"list": list(on), "count": len(on), "range": hostlist(on)},
                "tres": {"requested": {"max": [], "min": [], "average": [], "total": []},
                         "consumed": {"max": [], "min": [], "average": [], "total": []}, "allocated": tres},
                "time": {"elapsed": max(0, (now if running else end) - began), "end": finished, "start": began,
                         "suspended": 0, "system": ZERO, "total": ZERO, "user": ZERO},
                "exit_code": step_state[1], "tasks": {"count": tasks}, "pid": None,
                "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": []}, "kill_request_user": None,
                "state": step_state[0], "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
                "step": {"job_id": job.job_id, "het": {"component": None}, "id": step_id, "name": name},
                "task": {"distribution": distribution}}

    steps = [
        step("batch", "batch", nodes[:1], own, [_tres("cpu", cpus), _tres("mem", 0), _tres("node", 1),
                                                _tres("gres", per_node, "gpu")], 1, start, "Unknown"),
        step("extern", "extern", nodes, ("RUNNING", SUCCESS) if running else ("COMPLETED", SUCCESS),
             [_tres("cpu", cpus * len(nodes)), _tres("energy", None), _tres("node", len(nodes)),
              _tres("billing", cpus * len(nodes)), _tres("gres", per_node * len(nodes), "gpu")],
             len(nodes), start, "Unknown"),
    ]
    if job.partition != "debug":  # an interactive session runs no srun step of its own
        steps.append(step(0, "torchrun", nodes, own, [_tres("cpu", cpus * len(nodes)), _tres("mem", 0),
                                                      _tres("node", len(nodes)),
                                                      _tres("gres", per_node * len(nodes), "gpu")],
                          len(nodes) * per_node, start + 1, "Block"))
    return steps
