"""The known names closest to one that matched nothing (difflib), for "did you mean" hints."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from service.core.output import printable

SHOWN = 10  # known names listed when none is close


def closest(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` known names most like `word`, best first, compared case-insensitively."""
    by_lower: dict[str, str] = {}
    for name in known:
        by_lower.setdefault(name.lower(), name)
    return [by_lower[m] for m in difflib.get_close_matches(word.strip().lower(), list(by_lower), n=n, cutoff=0.6)]


def suggestion(word: str, known: Iterable[str], what: str, *, first: Iterable[str] = (), shown: int = SHOWN) -> str:
    """'closest <what>: a, b' or, with none close, the first `shown` known ones: `first` in its
    order (the likelier ones), then the others sorted."""
    first = list(dict.fromkeys(first))
    known = first + sorted(set(known) - set(first))
    near = closest(word, known)
    if near:
        return printable(f"closest {what}: {', '.join(near)}")
    if not known:
        return f"no {what} known yet"
    return printable(f"known {what}: {', '.join(known[:shown])}{', ...' if len(known) > shown else ''}")
