"""Reading JSON that comes from outside (an export's manifest, a slurmrestd answer, a lake
file anyone could have written): one `loads` whose every failure is a ValueError.

Python's JSON parser recurses once per `[` or `{`: a document nested some thousands deep
(100,000 `[` is 100 kB) raises RecursionError, which no reader's `except ValueError`
catches, and the command ended in a traceback. Here it is a ValueError like any other
document that is not JSON, so each reader names its file or URL and what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.core.lake_file_errors import damaged_file


class NestedTooDeep(ValueError):
    """The document nests arrays or objects deeper than the parser can follow."""


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`; NestedTooDeep (a ValueError) for a document nested too deeply."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeep("JSON nested too deeply to read (arrays or objects thousands of levels deep)") from None


def lake_loads(text: str | None, path: Path, what: str) -> Any:
    """A JSON column of the lake's own one-file table at `path` (a finding's evidence, a
    plan's inputs); a text that is not JSON is a DataError naming the file, with the
    command that writes it again. NULL reads as an empty object."""
    try:
        return loads(text or "{}")
    except ValueError as exc:
        table, source = path.parent.parent.parent.name, path.parent.parent.name.split("=", 1)[1]
        raise damaged_file(str(path), table, source, f"{what} is not JSON: {exc}") from None
