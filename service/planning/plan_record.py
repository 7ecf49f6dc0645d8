"""What a plans file written by an older spendlake loses, kept beside it: the lake's state `plans`
(`_state/plans.json`), written with every plans file this version writes.

A spendlake from before plans on runs (2026-12) rewrites the plans file (registering or removing
any plan) with the columns it knows: each plan's `run` and `registered` are dropped, so a plan on a
run would read as its whole project's and count every run of it. Such a file lacks the `run` column
(this version always writes it); each of its rows still as recorded here (name, project, experiment
and start alike) gets back its run and registration time, and a warning names them; a row that
differs (the older version registered that name again) is read as it is. The next registration or
removal writes the file again with them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from service.core.folding import folded
from service.core.lake import Lake
from service.core.timewindow import iso_utc

log = logging.getLogger(__name__)

STATE = "plans"
KEPT = ("run", "registered")  # the columns an older version's rewrite drops
# each plans file's (inode, size, mtime) when its warning was last logged: once per file a process reads (the
# service reads the plans at each rules run, report and API call; a file written again is warned of again)
_WARNED: dict[str, tuple[int, int, int]] = {}


def keep(lake: Lake, rows: Sequence[dict[str, Any]]) -> None:
    """Record what the plans file's `rows` (as written) hold that an older version would drop."""
    lake.write_state(STATE, {"plans": {row["name"]: {
        "project": row["project"], "experiment": row["experiment"], "start": _utc_text(row["start"]),
        "run": row["run"], "registered": row["registered"] and _utc_text(row["registered"])} for row in rows}})


def restored(lake: Lake, records: list[dict[str, Any]], path: str) -> list[dict[str, Any]]:
    """The rows of a plans file without a `run` column (an older version's), each one still as kept
    given back its run and registration time; a warning names those on a run."""
    kept = lake.read_state(STATE).get("plans", {})
    back = []
    for record in records:
        was = kept.get(record["name"]) if isinstance(record["name"], str) else None
        if was and _same(record, was):
            record = {**record, "run": was["run"],
                      "registered": was["registered"] and datetime.fromisoformat(was["registered"].replace(
                          "Z", "+00:00")).replace(tzinfo=None)}
        back.append(record)
    if (on_runs := [f"{r['name']} (run {r['run']})" for r in back if r["run"] is not None]) and _first_read(path):
        log.warning("%s was written by a spendlake from before plans on runs (2026-12), which drops each plan's run: "
                    "plan(s) %s read with the run kept in the lake's state (%s); the next registration or removal "
                    "writes them back, and registering with that older version again drops them again", path,
                    ", ".join(on_runs), lake.state_file(STATE))
    return back


def _first_read(path: str) -> bool:
    """Whether this process reads the file at `path`, as it is now, for the first time."""
    try:
        stat = os.stat(path)
    except OSError:  # gone since it was read: say it
        return True
    seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    first, _WARNED[path] = _WARNED.get(path) != seen, seen
    return first


def _same(record: dict[str, Any], was: dict[str, Any]) -> bool:
    """Whether the older version's row is the plan as kept (not one it registered again under that name)."""
    start = record["start"]
    return (isinstance(start, datetime) and _utc_text(start) == was["start"]
            and folded(record["project"] or "") == folded(was["project"])
            and folded(record["experiment"] or "") == folded(was["experiment"] or ""))


def _utc_text(moment: datetime) -> str:
    """A plans file's time (naive UTC) as the state keeps it."""
    return iso_utc(moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment)
