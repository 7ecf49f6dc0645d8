"""The fields of a `sacct --parsable2` line whose free text holds the delimiter.

sacct writes a job name or comment as it is, `|` included (`eval|sweep`), so such a line has
more fields than the header. When the free-text columns sit side by side (README's `--format`
list ends with JobName,Comment), every other field is found from the line's two ends and the
`|`s belong to that text; where they are apart (an older list) the line cannot be read.
"""

from __future__ import annotations

# sacct columns a user writes freely (sbatch --job-name, --comment, a script's path)
FREE_TEXT = frozenset({"JobName", "Comment", "AdminComment", "SystemComment", "WorkDir", "SubmitLine"})


def split_line(fields: list[str], header: list[str]) -> tuple[list[str], bool] | None:
    """`fields` (a line split at every `|`) as the header's columns, when more than it has come
    from `|`s inside free text; None when that cannot be told. The flag: several free-text
    columns were beside each other, so which of them holds the `|`s is a guess (the first)."""
    extra = len(fields) - len(header)
    free = [index for index, name in enumerate(header) if name in FREE_TEXT]
    if extra <= 0 or not free or free != list(range(free[0], free[-1] + 1)):
        return None
    first, after = free[0], len(header) - free[-1] - 1  # fields before them; after them
    middle = fields[first:len(fields) - after]
    cells = ["|".join(middle[:extra + 1]), *middle[extra + 1:]]
    return fields[:first] + cells + fields[len(fields) - after:], len(free) > 1
