"""A stop asked from outside (SIGTERM, SIGINT) while a command writes the lake: the signal
handler (service/cli/interrupt.py) records it here, and the loops that take one source's or
one delivery's failure and go on to the next ask here first. DuckDB turns the exception the
handler raises inside a query into its own error, which those loops would otherwise count as
that source's failure before running the other sources."""

from __future__ import annotations

_received: list[int] = []  # the signals taken since the command began (the main thread's)


class Interrupted(BaseException):
    """Raised in the main thread by the signal: a BaseException, as KeyboardInterrupt is, so no
    `except Exception` takes it for one delivery's failure, and every `finally` runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def stop(signum: int) -> None:
    """Record the stop and raise it (the signal handler)."""
    _received.append(signum)
    raise Interrupted(signum)


def stopped() -> int | None:
    """The signal that asked the running command to stop, if one did."""
    return _received[0] if _received else None


def forget_stops() -> None:
    """A new command begins (the tests run several in one process)."""
    _received.clear()


def raise_if_stopped() -> None:
    """Call where a failure is about to be counted as one source's or delivery's: a stop is none,
    and ends the run."""
    if _received:
        raise Interrupted(_received[0])
