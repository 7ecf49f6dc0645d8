"""Slurm hostlists: `p5-[001-004],p5-010` → p5-001, p5-002, p5-003, p5-004, p5-010.

The syntax Slurm prints in NodeList (and accepts in slurm.conf): names separated by commas;
a name may hold several bracketed groups of numbers and ranges (`rack[1-2]-gpu[01,03]` is
every combination, in order); a range keeps the zero padding of its first number
(`[08-10]` → 08, 09, 10). `None assigned` and the empty string are no nodes.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

MAX_HOSTS = 100_000  # a typo such as [1-999999999] must not exhaust memory
NO_NODES = frozenset({"", "None assigned", "(null)"})
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """Every host name of `text`, in the order written; ValueError says what is wrong."""
    text = text.strip()
    if text in NO_NODES:
        return []
    hosts: list[str] = []
    for name in _split_top_level(text):
        hosts.extend(_expand_name(name, budget=MAX_HOSTS - len(hosts)))
    return hosts


@lru_cache(maxsize=65_536)
def hosts(text: str) -> tuple[str, ...]:
    """expand_hostlist once per distinct text (a cluster's jobs repeat their node lists), as a
    tuple the cache can share; ValueError as it."""
    return tuple(expand_hostlist(text))


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside brackets; brackets must pair and not nest."""
    names, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested '[' at position {index + 1} in {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"']' without '[' at position {index + 1} in {text!r}")
        elif char == "," and depth == 0:
            names.append(text[start:index])
            start = index + 1
    if depth:
        raise ValueError(f"'[' without ']' in {text!r}")
    names.append(text[start:])
    for name in names:
        if not name.strip() or any(c.isspace() for c in name.strip()):
            raise ValueError(f"empty or blank host name in {text!r}")
    return [name.strip() for name in names]


def _expand_name(name: str, budget: int) -> list[str]:
    pieces = re.split(r"\[([^\]]*)\]", name)  # literal, group, literal, group, ..., literal
    choices: list[list[str]] = []
    size = 1
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            choices.append([piece])
            continue
        numbers = _expand_group(piece, name)
        size *= len(numbers)
        if size > budget:
            raise ValueError(f"{name!r} names more than {MAX_HOSTS:,} hosts")
        choices.append(numbers)
    return ["".join(parts) for parts in itertools.product(*choices)]


def _expand_group(group: str, name: str) -> list[str]:
    numbers: list[str] = []
    for item in group.split(","):
        match = _RANGE.match(item.strip())
        if not match:
            raise ValueError(f"[{group}] in {name!r} is not a list of numbers and ranges such as [001-004,010]")
        first, last = match.group(1), match.group(2) or match.group(1)
        low, high = int(first), int(last)
        if high < low:
            raise ValueError(f"range {item.strip()} in {name!r} runs backwards")
        if high - low >= MAX_HOSTS:
            raise ValueError(f"{name!r} names more than {MAX_HOSTS:,} hosts")
        width = len(first)
        numbers.extend(str(n).zfill(width) for n in range(low, high + 1))
    return numbers
