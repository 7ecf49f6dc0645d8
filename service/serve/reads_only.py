"""`spendlake serve` on a lake it may not write: a lake a batch job writes, mounted read-only for the
service (or a volume remounted read-only, its permissions another user's). The service starts and
answers reads (the API, /metrics, the reports written before, probes), where it refused to start;
it takes no service lock (core/serving.py `serving_or_reading`) and stores nothing (the metrics'
last good values). Each of its scheduled jobs, which all write the lake, fails at each fire in one
log line naming the lake (`job ingest failed: ...`), counted in `spendlake_job_failures_total{task}`
(alert SpendlakeJobFailing; the data's own age in SpendlakeSourceStale). A SIGHUP or a restart once
the lake is writable runs them again.

A service whose config says `service.read_only: true` (the lake is a batch job's on purpose) takes no
lock either and schedules no job at all: nothing fails, and it says so once as it starts, and in
/api/v1/status (`read_only`).
"""

from __future__ import annotations

from pathlib import Path

from service.core.errors import SpendlakeError
from service.serve.scheduler import Tasks


def reads_only(tasks: Tasks, root: Path, refused: SpendlakeError) -> Tasks:
    """`tasks` (their names kept, so their metrics show) each failing without running: `refused`
    says why the lake at `root` cannot be written. No rollups are stored before the first ingest."""

    def refusing(job: str):
        def refuse(*_) -> None:
            raise SpendlakeError(f"not run: this service cannot write the lake ({_why(refused)}), so it serves "
                                 "reads only", where=str(root),
                                 hint=f"run the {job} where the lake is writable (the job that writes it), or give "
                                      "the service write access and restart it (or send SIGHUP)")
        return refuse

    return Tasks(ingest=refusing("ingest"), rules=None if tasks.rules is None else refusing("rules"),
                 daily=refusing("daily report"), verify=None if tasks.verify is None else refusing("verify"))


def reads_only_warning(root: Path, refused: SpendlakeError | None) -> str:
    """What the service says of itself as it starts on such a lake (a warning: it asks the operator to act);
    `refused` None: its config says so (`service.read_only: true`, a lake a batch job writes), nothing to do."""
    if refused is None:
        return (f"the lake {root} is served for reads only (service.read_only: true): the API, /metrics and the "
                "reports its writer stored; no ingest, rules, verify or daily report runs here")
    return (f"warning: the lake {root} is not writable by this service ({_why(refused)}): serving reads only "
            "(the API, /metrics, the reports written before); its ingest, rules, verify and daily report fail "
            "at each run until it is writable and the service restarted or sent SIGHUP")


def _why(refused: SpendlakeError) -> str:
    return f"{refused.where}: {refused.message}" if refused.where else refused.message
