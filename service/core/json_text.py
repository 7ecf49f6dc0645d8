"""Reading JSON that comes from outside (an export's manifest, a slurmrestd answer, a lake
file anyone could have written): one `loads` whose every failure is a ValueError.

Python's JSON parser recurses once per `[` or `{`: a document nested some thousands deep
(100,000 `[` is 100 kB) raises RecursionError, which no reader's `except ValueError`
catches, and the command ended in a traceback. Here it is a ValueError like any other
document that is not JSON, so each reader names its file or URL and what to do.
"""

from __future__ import annotations

import json
from typing import Any


class NestedTooDeep(ValueError):
    """The document nests arrays or objects deeper than the parser can follow."""


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`; NestedTooDeep (a ValueError) for a document nested too deeply."""
    try:
        return json.loads(text)
    except RecursionError:
        raise NestedTooDeep("JSON nested too deeply to read (arrays or objects thousands of levels deep)") from None
