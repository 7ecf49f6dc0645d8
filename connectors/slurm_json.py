"""sacct --json documents and slurmrestd /slurmdb/vX/jobs answers → attempts
(connectors/slurm_records.py makes them rows): the OpenAPI data parser of Slurm 22.05 (v0.0.36-38:
plain numbers, state a string) and of 23.02+ (v0.0.39+: numbers as {"set", "infinite",
"number"}, state a list of the base state and its flags) alike."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby
from typing import Any

from connectors.hostlist import hosts
from connectors.jobs_base import from_epoch
from connectors.slurm_records import Attempt, BadRecord, GpuShares, field_text, gres_gpus, unshared_gres
from service.core.job_states import normal_state

def number(value: Any) -> float | None:
    """A plain number, or v0.0.39+'s {"set": true, "infinite": false, "number": 5}."""
    if isinstance(value, dict):
        return value.get("number") if value.get("set", True) and not value.get("infinite") else None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _nested_text(value: Any, key: str) -> str | None:
    """A string, or the `key` member of an object (comment.job, wckey.wckey)."""
    if isinstance(value, dict):
        value = value.get(key)
    return value if isinstance(value, str) and value.strip() else None


def json_attempts(data: Any, default_cluster: str | None, shares: GpuShares = ()) -> Iterable[Attempt]:
    """Attempts of a `sacct --json` document or a slurmrestd /slurmdb/vX/jobs answer."""
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise BadRecord(NO_JOBS)
    return record_attempts(data["jobs"], default_cluster, shares)


NO_JOBS = 'not a sacct --json document: no "jobs" list'


def record_attempts(records: Iterable[Any], default_cluster: str | None, shares: GpuShares = ()) -> Iterator[Attempt]:
    """The attempts of a document's "jobs", read one at a time (connectors/sacct_json.py streams them)."""
    for index, record in enumerate(records):
        try:
            yield _json_attempt(record, default_cluster, shares)
        except (BadRecord, ValueError, TypeError, KeyError, AttributeError) as exc:
            job = record.get("job_id") if isinstance(record, dict) else None
            raise BadRecord(f"jobs[{index}] (job {job}): {type(exc).__name__}: {exc}") from None


# The flags sacct prints in place of the base state, in its order (job_state_string, Slurm 23.02+)
SACCT_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
               "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")


def sacct_state(current: Any) -> str | None:
    """The state sacct prints for `state.current`: v0.0.38's string, or v0.0.39+'s list of the
    base state and its flags (a requeued attempt is ["PENDING", "REQUEUED"]: sacct says
    REQUEUED), a flag sacct shows winning over the base state; flags it never shows
    (UPDATE_DB, LAUNCH_FAILED, POWER_UP_NODE) are passed over."""
    if isinstance(current, str):
        return normal_state(current)
    if not isinstance(current, list):
        return None
    named = [text.strip().upper() for text in current if isinstance(text, str)]
    shown = next((flag for flag in SACCT_FLAGS if flag in named), None)
    return shown or next((state for state in map(normal_state, named) if state), None)


def _pending_tasks(array: dict[str, Any]) -> str:
    """An array's pending `task` (22.05: a hex bitmap, `0x3F`) as sacct prints it: `0-5%1`."""
    text = str(array["task"])
    if text.lower().startswith("0x"):
        bits = int(text, 16)
        tasks = [index for index in range(bits.bit_length()) if bits >> index & 1]
        runs = [[task for _, task in run] for _, run in groupby(enumerate(tasks), lambda pair: pair[1] - pair[0])]
        text = ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)
    limit = number((((array.get("limits") or {}).get("max") or {}).get("running") or {}).get("tasks"))
    return f"{text}%{int(limit)}" if limit and "%" not in text else text


def _json_attempt(record: dict[str, Any], default_cluster: str | None, shares: GpuShares) -> Attempt:
    raw_id = str(record["job_id"])
    array, het = record.get("array") or {}, record.get("het") or {}
    array_job, task = number(array.get("job_id")), number(array.get("task_id"))
    het_job, offset = number(het.get("job_id")), number(het.get("job_offset"))
    if array_job and task is not None:
        job_id, submitted_as = f"{array_job}_{task}", str(array_job)
    elif array_job and array.get("task"):  # the tasks not yet started, as sacct shows them: 5_[0-5%1]
        job_id, submitted_as = f"{array_job}_[{_pending_tasks(array)}]", str(array_job)
    elif het_job and offset is not None:
        job_id, submitted_as = f"{het_job}+{offset}", str(het_job)
    else:
        job_id = submitted_as = raw_id
    current = (record.get("state") or {}).get("current")
    state = sacct_state(current)
    if state is None:
        raise BadRecord(f"state {current!r} is not a Slurm job state")
    times = record.get("time") or {}
    tres = (record.get("tres") or {}).get("allocated") or []
    gres = [(entry.get("name") or "", float(number(entry.get("count")) or 0))
            for entry in tres if entry.get("type") == "gres"]
    nodes_text = record.get("nodes")
    try:
        nodes = hosts(nodes_text) or None if isinstance(nodes_text, str) else None
    except ValueError as exc:
        raise BadRecord(f"nodes: {exc}") from None
    return Attempt(raw_id=raw_id, job_id=job_id, submitted_as=submitted_as,
                   cluster=field_text(record.get("cluster")) or default_cluster, state=state,
                   submit=from_epoch(number(times.get("submission"))), start=from_epoch(number(times.get("start"))),
                   end=from_epoch(number(times.get("end"))), elapsed=number(times.get("elapsed")),
                   gpus=gres_gpus(gres, shares), unshared=unshared_gres(gres, shares),
                   nodes=nodes, user=field_text(record.get("user")), account=field_text(record.get("account")),
                   partition=field_text(record.get("partition")), qos=field_text(record.get("qos")),
                   name=field_text(record.get("name")), wckey=_nested_text(record.get("wckey"), "wckey"),
                   comment=_nested_text(record.get("comment"), "job"))
