"""The known names closest to one that matched nothing (difflib), for "did you mean" hints."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from service.core.output import one_line

SHOWN = 10  # known names listed when none is close
NEAR = 0.8  # difflib's ratio from which a name is taken for a typo of a known one (nlpp: nlp 0.86)
ALIKE = 0.4  # difflib's ratio from which `ranked` lists a name before the unlike ones (r1: r2 0.5, ev1 0.4)
SEPARATORS = re.compile(r"[\W_]+")


def closest(word: str, known: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` known names most like `word`, best first, compared case-insensitively."""
    by_lower: dict[str, str] = {}
    for name in known:
        by_lower.setdefault(name.lower(), name)
    return [by_lower[m] for m in difflib.get_close_matches(word.strip().lower(), list(by_lower), n=n, cutoff=0.6)]


def ranked(word: str, known: Iterable[str]) -> list[str]:
    """The known names, the most like `word` first, for `suggestion`'s `first` when none may be
    close enough for `closest` (a renamed run: r1 and r1-renamed, 0.33): those holding `word` or
    held in it (case and separators aside), then those of difflib's ratio ALIKE or more (the
    higher first), then the others; each tier sorted."""
    bare = SEPARATORS.sub("", word.lower())
    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word.strip().lower())  # as get_close_matches: the cheap bounds first

    def key(name: str) -> tuple:
        other = SEPARATORS.sub("", name.lower())
        matcher.set_seq1(name.lower())
        ratio = matcher.ratio() if matcher.real_quick_ratio() >= ALIKE and matcher.quick_ratio() >= ALIKE else 0
        return not (bare and other and (bare in other or other in bare)), -ratio if ratio >= ALIKE else 0, name

    return sorted(set(known), key=key)


def near_miss(word: str, known: Iterable[str]) -> bool:
    """A known name differs from `word` only in case and separators (ml_infra, ML-Infra) or by
    so little that `word` is likely its typo, not a name of its own."""
    bare = SEPARATORS.sub("", word.lower())
    known = [name.lower() for name in known]
    return any(bare and SEPARATORS.sub("", name) == bare for name in known) or bool(
        difflib.get_close_matches(word.strip().lower(), known, n=1, cutoff=NEAR))


def suggestion(word: str, known: Iterable[str], what: str, *, first: Iterable[str] = (), shown: int = SHOWN) -> str:
    """'closest <what>: a, b' or, with none close, the first `shown` known ones: `first` in its
    order (the likelier ones), then the others sorted; on one line, a known value's line feed
    shown as `\\n` (a tag value is anyone's text: its rest must not print as a line of its own)."""
    first = list(dict.fromkeys(first))
    known = first + sorted(set(known) - set(first))
    near = closest(word, known)
    if near:
        return one_line(f"closest {what}: {', '.join(near)}")
    if not known:
        return f"no {what} known yet"
    return one_line(f"known {what}: {', '.join(known[:shown])}{', ...' if len(known) > shown else ''}")
