"""SIGTERM or SIGINT during a command that writes the lake: one line saying what stopped and
what it left, and the shell's exit code for the signal (128 + its number: 143, 130).

DESIGN.md's codes 0-3 say how a command that ran to its end came out; a run stopped from
outside is neither bad input nor bad data, and a supervisor (systemd, Kubernetes, a CI job)
reads 143 as "terminated", as it would without the handler.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import click

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """Raised in the main thread by the signal: a BaseException, as KeyboardInterrupt is, so no
    `except Exception` takes it for one delivery's failure, and every `finally` runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextmanager
def interruptible(what: str, left: str) -> Iterator[None]:
    """Run the block; on SIGTERM or SIGINT stop it, say `what` was interrupted and `left`, and
    exit 128 + the signal's number. DuckDB turns an exception raised inside a query into its
    own ("Query interrupted"): the signal received is what decides, whatever came up."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread takes signals
        yield
        return
    received: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        received.append(signum)
        for other in SIGNALS:  # one is enough: a second must not cut the cleanup short
            signal.signal(other, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, stop) for signum in SIGNALS}
    try:
        yield
    except BaseException:
        if not received:
            raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:  # also when the block swallowed the exception and returned
        click.echo(f"error: {what} interrupted by {signal.Signals(received[0]).name}: {left}", err=True)
        sys.exit(128 + received[0])
