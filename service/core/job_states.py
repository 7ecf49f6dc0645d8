"""The job states every job source maps its own onto, and the mapping: one vocabulary for the
connectors that read job records and for the config that names states (a rule's, a command's)."""

from __future__ import annotations

# Slurm's job states (squeue/sacct), which every source maps onto; UNKNOWN where a source
# cannot tell (a Kubernetes pod in phase Unknown). sacct prints a state flag instead of the base
# state when one is set (job_state_string: COMPLETING, SPECIAL_EXIT, REQUEUE_HOLD, ...): those too.
STATES = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                    "PENDING", "PREEMPTED", "RUNNING", "REQUEUED", "RESIZING", "REVOKED", "SUSPENDED", "TIMEOUT",
                    "UNKNOWN", "COMPLETING", "CONFIGURING", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
                    "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED"})
STATE_SYNONYMS = {"CANCELED": "CANCELLED", "SUCCEEDED": "COMPLETED", "SUCCESS": "COMPLETED", "COMPLETE": "COMPLETED",
                  "DONE": "COMPLETED", "OOM": "OUT_OF_MEMORY", "OOMKILLED": "OUT_OF_MEMORY", "ERROR": "FAILED"}


def normal_state(value: str | None) -> str | None:
    """`CANCELLED by 0` → CANCELLED, `Succeeded` → COMPLETED; None for a value that is no state."""
    if value is None or not str(value).strip():
        return None
    word = str(value).strip().split()[0].upper().replace("-", "_")
    word = STATE_SYNONYMS.get(word, word)
    return word if word in STATES else None
