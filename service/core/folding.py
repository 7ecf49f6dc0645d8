"""How two spellings of a value are the same value: as DuckDB's `lower(trim(value))` gives it, in NFC.

Lines are compared in SQL (`lower(trim(Tags[...]))`), values a user or a config gives in
Python: both sides must fold alike, or a filter, rule or budget silently misses lines. Python's
`str.strip()` and `str.lower()` differ from DuckDB's on a few characters: DuckDB trims only
the space separators (Unicode Zs), not tabs or line breaks; it lowercases `İ` to `i` (Python:
`i̇`, two characters) and every `Σ` to `σ` (Python: `ς` at a word's end). Checked against
DuckDB for every code point (tests/test_folding.py).

A value typed decomposed (NFD: `u` + U+0308 for `ü`, as macOS input methods and some terminals
give it) looks like the composed one bills and configs carry (NFC) and must match it: folded
values are NFC, and so are the values a config gives lines (`composed`: a rule's value, a
default, a cluster's owner), so that they are one value with the bills' spelling. Lines are not
normalised in SQL (`nfc_normalize` on every line costs what README's Unicode note says): a value
is compared with both forms a line may write it in (`folded_forms`, `folded_in`).

`İ` is the one letter whose forms lower apart: DuckDB lowers it composed to `i` but decomposed
(`I` + U+0307) to `i` + U+0307, which is also what Python lowers `İ` to. A value folds both
`İ` and `i` + U+0307 to `i`, so `İ`, its decomposed form and `i̇` typed are one value, and is
compared with the decomposed line's `i` + U+0307 as well, where the value has `İ` (or `i̇`):
`İZMİR` matches a line `İzmir` composed, not decomposed (each `i` either way: 2^n forms).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

# the Unicode space separators (category Zs), what DuckDB's trim() removes; written out, as
# finding them at import took 0.15 s of every command's start
SPACES = ("\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
          "\u202f\u205f\u3000")


def folded(value: str) -> str:
    """`value` as DuckDB's lower(trim(value)) gives it, composed (NFC)."""
    value = value.strip(SPACES)
    if value.isascii():
        return value.lower()
    value = unicodedata.normalize("NFC", value)  # `I` + U+0307 typed is `İ`, which lowers to `i`
    lowered = "".join("i" if c == "\u0130" else c.lower() for c in value)  # per character: no final-sigma rule
    return unicodedata.normalize("NFC", lowered.replace("i\u0307", "i"))  # `i̇` typed: `İ` as Python lowers it


def composed(value: str) -> str:
    """`value` in NFC, as bills write it: for the values a config gives lines and findings."""
    return value if value.isascii() else unicodedata.normalize("NFC", value)


def folded_forms(value: str) -> list[str]:
    """`value` folded, as SQL's lower(trim()) gives a line holding it composed (as bills write
    it) or decomposed (NFD, a bill written on macOS): one form for most values, two at most (three
    for a value with `İ` and another letter that decomposes)."""
    forms = [folded(value)]
    if not forms[0].isascii() or not value.isascii():
        # SQL lowers a decomposed line letter by letter: `İ` as `i` + U+0307, not `i`
        text = unicodedata.normalize("NFD", unicodedata.normalize("NFC", value.strip(SPACES)))
        forms += [unicodedata.normalize("NFD", forms[0]), "".join(c.lower() for c in text)]
    return list(dict.fromkeys(forms))


def folded_in(bind: Callable[[str], str], value: str) -> str:
    """`IN (...)` of `value`'s `folded_forms`, for SQL's lower(trim(x)) of a line; `bind` gives
    each form's parameter marker."""
    return f"IN ({', '.join(bind(form) for form in folded_forms(value))})"
