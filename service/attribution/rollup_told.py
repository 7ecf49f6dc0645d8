"""A period rolled up from its raw lines because its stored rollup is missing or stale
(service/attribution/rollup.py `rollup_view`), told to the person waiting: a command's reader is
told once on stderr (`told_by`, the CLI's), when the periods hold NOTE_LINES lines or more: a
wait worth a word, and its fix (`spendlake rollup`); -v logs it always. The context variable is
set for a command, never left set in the process. serve keeps such periods (rollup_kept.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

# The bench's 10M-line month rolls up in ~11 CPU s with `clusters:`, ~3.6 without (bench/README.md
# query42): from a million lines on a reader waits a second or more
NOTE_LINES = 1_000_000

_tell: ContextVar[Callable[[str], None] | None] = ContextVar("spendlake_rollup_tell", default=None)


@contextmanager
def told_by(tell: Callable[[str], None]) -> Iterator[None]:
    """While inside, the first note of periods rolled up from their raw lines goes to `tell`; later ones not."""
    said: list[str] = []

    def once(text: str) -> None:
        if not said:
            said.append(text)
            tell(text)

    token = _tell.set(once)
    try:
        yield
    finally:
        _tell.reset(token)


def tell_rolled_up(parts: Sequence[Any]) -> None:
    """Say that `parts` (rollup_versions.Partition) are rolled up from their raw lines, to the
    reader `told_by` names, when they hold NOTE_LINES lines or more."""
    tell = _tell.get()
    lines = sum(part.entry.rows for part in parts if part.entry is not None)
    if tell is None or lines < NOTE_LINES:
        return
    named = ", ".join(f"{part.source} {part.period}" for part in parts[:5]) + (" …" if len(parts) > 5 else "")
    tell(f"{len(parts)} period(s) ({named}; {lines:,} lines) have no stored rollup for this config (it changed "
         "since the last ingest or `spendlake rollup`, or a build failed): attributed from their raw lines, "
         "which is slower; `spendlake rollup` stores them")
