"""How two spellings of a value are the same value: as DuckDB's `lower(trim(value))` gives it.

Lines are compared in SQL (`lower(trim(Tags[...]))`), values a user or a config gives in
Python: both sides must fold alike, or a filter, rule or budget silently misses lines. Python's
`str.strip()` and `str.lower()` differ from DuckDB's on a few characters: DuckDB trims only
the space separators (Unicode Zs), not tabs or line breaks; it lowercases `İ` to `i` (Python:
`i̇`, two characters) and every `Σ` to `σ` (Python: `ς` at a word's end). Checked against
DuckDB for every code point (tests/test_folding.py).
"""

from __future__ import annotations

# the Unicode space separators (category Zs), what DuckDB's trim() removes; written out, as
# finding them at import took 0.15 s of every command's start
SPACES = ("\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
          "\u202f\u205f\u3000")


def folded(value: str) -> str:
    """`value` as DuckDB's lower(trim(value)) gives it."""
    value = value.strip(SPACES)
    if value.isascii():
        return value.lower()
    return "".join("i" if c == "\u0130" else c.lower() for c in value)  # per character: no final-sigma rule
