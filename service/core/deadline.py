"""A source's `Deadline`: when all of its requests, their attempts and the waits between them, must be
done by (its deadline_seconds, service/core/source_deadline.py), and the error once it has passed. The HTTP
client (connectors/http_json.py) and the AWS clients (connectors/aws_client.py `ends_by`) both hold to it,
the reports' S3 client too (report.deadline_seconds).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from service.core.errors import SourceError


SOURCE_REQUESTS = "the source's requests"


class DeadlinePassed(SourceError):
    """The source's Deadline ended its requests: what is left of them would be asked past it too."""


@dataclass(frozen=True)
class Deadline:
    """When all of a source's requests, their attempts and the waits between them, must be done by
    (`at`, time.monotonic()); `seconds` and `setting` as errors name them (`inventory[0].deadline_seconds`)."""

    at: float
    seconds: float
    setting: str
    requests: str = SOURCE_REQUESTS  # what it holds, as its error says it

    @classmethod
    def after(cls, seconds: float, setting: str, requests: str = SOURCE_REQUESTS) -> Deadline:
        return cls(time.monotonic() + seconds, seconds, setting, requests)

    def left(self) -> float:
        return self.at - time.monotonic()

    def overdue(self, where: str, smaller: str) -> DeadlinePassed:
        """The source's error once it has passed: its requests at `where`; `smaller`, what asks less of them."""
        return DeadlinePassed(f"{self.requests} were not all answered within {self.seconds:g} s "
                              f"({self.setting}), retries included", where=where,
                              hint=f"raise {self.setting}, or {smaller}")
