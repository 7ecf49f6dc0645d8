"""The job states every job source maps its own onto, and the mapping: one vocabulary for the
connectors that read job records and for the config that names states (a rule's, a command's);
and the work a job does, which tells a re-run of a failed job from its run's other jobs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime

# Slurm's job states (squeue/sacct), which every source maps onto; UNKNOWN where a source
# cannot tell (a Kubernetes pod in phase Unknown). sacct prints a state flag instead of the base
# state when one is set (job_state_string: COMPLETING, SPECIAL_EXIT, REQUEUE_HOLD, ...): those too.
STATES = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                    "PENDING", "PREEMPTED", "RUNNING", "REQUEUED", "RESIZING", "REVOKED", "SUSPENDED", "TIMEOUT",
                    "UNKNOWN", "COMPLETING", "CONFIGURING", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
                    "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED"})
# The states a job ends in for good (Slurm's base states past running): a record of one with a
# start and no end has ended, when it does not say. Not the states a job still runs or waits in
# (RUNNING, PENDING, SUSPENDED, ...), nor the flags of one requeued or completing.
FINISHED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                      "PREEMPTED", "REVOKED", "TIMEOUT"})
STATE_SYNONYMS = {"CANCELED": "CANCELLED", "SUCCEEDED": "COMPLETED", "SUCCESS": "COMPLETED", "COMPLETE": "COMPLETED",
                  "DONE": "COMPLETED", "OOM": "OUT_OF_MEMORY", "OOMKILLED": "OUT_OF_MEMORY", "ERROR": "FAILED"}


def normal_state(value: str | None) -> str | None:
    """`CANCELLED by 0` → CANCELLED, `Succeeded` → COMPLETED; None for a value that is no state."""
    if value is None or not str(value).strip():
        return None
    word = str(value).strip().split()[0].upper().replace("-", "_")
    word = STATE_SYNONYMS.get(word, word)
    return word if word in STATES else None


# A Slurm array task as sacct shows it: `7_3` (array job 7, task 3)
ARRAY_TASK = re.compile(r"^\s*\d+_(\d+)\s*$")


# What people append to a job's name when they resubmit it by hand (`train-try2`, `train_retry`,
# `train.attempt-3`, `sft-rerun`): the attempt's own words, so the same work. A version
# (`train_v2`) or a bare number (`train2`) may be other work and is kept.
ATTEMPT_SUFFIX = re.compile(r"(?:[-_.](?:retry|try|attempt|rerun|restart|resubmit)[-_.]?\d*)+$")


def work_of(job_id: str | None, name: str | None, scheduler: str | None) -> tuple[str, str | None] | None:
    """What a job of a run does, to tell a re-run of failed work from the run's other work: its
    name (Slurm's JobName, a jobs file's `name`, any case, without an ATTEMPT_SUFFIX) and, for an
    array task, its task (a requeue keeps both, a resubmission its name). None where the record
    cannot tell: no name, or a Kubernetes pod (a Job's retry is a new pod, a new name)."""
    if not name or not name.strip() or scheduler == "kubernetes":
        return None
    task = ARRAY_TASK.match(job_id or "")
    return ATTEMPT_SUFFIX.sub("", name.strip().lower()) or name.strip().lower(), task and task.group(1)


def same_work(one: tuple | None, other: tuple | None) -> bool:
    """Whether two jobs of a run may do the same work: yes unless both are told and differ (an
    eval suite's benchmarks, a sweep's tasks are side by side, never each other's re-run)."""
    return one is None or other is None or one == other


def failures_it_may_redo(failed_by: Mapping, work: tuple | None) -> Iterable:
    """What `failed_by` (work -> a failure of it) holds for the works a job doing `work` may
    re-run by same_work's rule: looked up, not scanned (a sweep fails thousands of tasks)."""
    return failed_by.values() if work is None else (failed_by.get(work), failed_by.get(None))


# Ends that are no evidence of a failure: a job after one of them is no restart (no state: a
# jobs file without a `state` column; UNKNOWN: a pod whose phase Kubernetes lost).
NOT_FAILED = (None, "COMPLETED", "UNKNOWN")


class Restarts:
    """A run's jobs, told one by one in start order: whether each re-ran failed work (started
    after one doing the same work, by same_work's rule, had ended in a state other than
    NOT_FAILED): the run's `restarts` count and each attempt's mark alike."""

    def __init__(self) -> None:
        self.failed_by: dict = {}  # work → the earliest end of a job of it that did not finish

    def told(self, start: datetime, end: datetime | None, state: str | None, work: tuple | None) -> bool:
        restart = any(ended is not None and start >= ended for ended in failures_it_may_redo(self.failed_by, work))
        if end is not None and state not in NOT_FAILED:
            self.failed_by[work] = min(self.failed_by.get(work, end), end)
        return restart
