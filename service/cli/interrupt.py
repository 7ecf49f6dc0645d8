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

from service.core.stopping import forget_stops, stop, stopped

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def interruptible(what: str, left: str) -> Iterator[None]:
    """Run the block; on SIGTERM or SIGINT stop it, say `what` was interrupted and `left`, and
    exit 128 + the signal's number. DuckDB turns an exception raised inside a query into its
    own ("Query interrupted"): the signal received is what decides, whatever came up."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread takes signals
        yield
        return
    forget_stops()

    def handler(signum: int, _frame: object) -> None:
        for other in SIGNALS:  # one is enough: a second must not cut the cleanup short
            signal.signal(other, signal.SIG_IGN)
        stop(signum)

    previous = {signum: signal.signal(signum, handler) for signum in SIGNALS}
    try:
        yield
    except BaseException:
        if stopped() is None:
            raise
    finally:
        for number, before in previous.items():
            signal.signal(number, before)
    signum = stopped()
    if signum is not None:  # also when the block swallowed the exception and returned
        forget_stops()
        click.echo(f"error: {what} interrupted by {signal.Signals(signum).name}: {left}", err=True)
        sys.exit(128 + signum)
