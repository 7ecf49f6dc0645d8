"""`timeout_seconds` and `deadline_seconds`: the settings of an HTTP source's requests (gpu-metrics'
Prometheus queries or CloudWatch calls, k8s-pods', slurm-jobs' slurmrestd), declared once with their
default and check.

`timeout_seconds` bounds each request's attempt, its whole answer; `deadline_seconds` all of a
run's requests together, their attempts and the waits between them (service/core/deadline.py
`Deadline`): a server not answering held a source `max_attempts` x `timeout_seconds` and the
backoffs for each of its requests (k8s-pods asks some twenty: 50 minutes by default), and serve's
jobs behind it. By default it is 300 s, or one `timeout_seconds` for each request a run makes when
all is well (`requests`) when that is more, at most MAX_DEADLINE (3600 s, the most deadline_seconds
may be set to): a raised timeout_seconds whose requests each came within it, one attempt each, ends
as it did while they add up to an hour or less. `requests` counts each query's pieces as asked: a
Prometheus answering one "too many samples" has it asked again in halves (prometheus_api.pieces),
requests no default counts; such a run may need deadline_seconds raised.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from service.core.config_base import NestedValueError, Strict
from service.core.deadline import SOURCE_REQUESTS, Deadline

DEFAULT_DEADLINE = 300.0  # seconds, for all of a source's requests (deadline_seconds)
MAX_DEADLINE = 3600.0  # the most deadline_seconds may be, and its default


class RequestLimits(Strict):
    """The two bounds; a kind says how many requests one of its runs makes (`requests`)."""

    timeout_seconds: float = Field(default=30, gt=0, le=600, description="per HTTP request, its whole answer")
    deadline_seconds: float | None = Field(default=None, gt=0, le=MAX_DEADLINE, description=(
        "all of the source's HTTP requests together, their attempts and the waits between them; an attempt is "
        "given what is left of it when that is less than timeout_seconds; at least timeout_seconds (default: "
        "300, or timeout_seconds for each request of a run when that is more, at most 3600)"))

    HELD: ClassVar[str] = SOURCE_REQUESTS  # what the deadline holds, as its error says it

    def requests(self) -> int:
        """How many HTTP requests one run of the source makes when every one is answered at once."""
        raise NotImplementedError

    @property
    def deadline(self) -> float:
        """deadline_seconds, or its default: 300 s, or one timeout_seconds for each request when that is more,
        at most MAX_DEADLINE (a value one could write)."""
        return self.deadline_seconds or min(MAX_DEADLINE, max(DEFAULT_DEADLINE, self.timeout_seconds * self.requests()))

    def start_deadline(self, config_path: str) -> Deadline:
        """The run's Deadline from now, named as errors say it (`inventory[0].deadline_seconds`)."""
        return Deadline.after(self.deadline, f"{config_path}.deadline_seconds", self.HELD)

    @model_validator(mode="after")
    def _deadline_holds_a_timeout(self) -> RequestLimits:
        if self.deadline_seconds is not None and self.deadline_seconds < self.timeout_seconds:
            raise NestedValueError(("deadline_seconds",), f"{self.deadline_seconds:g} s is less than timeout_seconds "
                                   f"({self.timeout_seconds:g} s), which no request would be given: raise it, or "
                                   "lower timeout_seconds")
        return self
