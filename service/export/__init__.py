"""Exports of the lake to other tools' formats: a FOCUS Cost and Usage dataset.

- `export_focus(config, ExportOptions(...)) -> ExportResult` (service/export/dataset.py);
- `export_window(since, until)`: the window `--since` / `--until` name, either bound open.
"""

from __future__ import annotations

from datetime import datetime

from service.core.timewindow import parse_window, since_instant, until_instant, utc_now
from service.export.dataset import ExportedPeriod, ExportOptions, ExportResult, export_focus

__all__ = ["ExportOptions", "ExportResult", "ExportedPeriod", "export_focus", "export_window"]


def export_window(since: str | None, until: str | None, *, now: datetime | None = None,
                  end: datetime | None = None) -> tuple[datetime | None, datetime | None]:
    """(since, until) from what was typed, read as `attribute` reads them (parse_window): a span
    measured back from the window's end, which is the data's `end` when `until` is none or a span
    itself; a bound not given is open (None), so `--since 7d` alone is the data's last 7 days on.
    A `since` at or past the data's `end` without `until` is parse_window's empty window (a UsageError),
    as `attribute`, `runs` and `rules run` say of it."""
    now = now or utc_now()
    if since and (until or end is not None):
        window = parse_window(since, until, now=now, end=end)
        return window.since, window.until if until else None
    stop = until_instant(until, now=now, end=end) if until else None
    return (since_instant(since, end or now, now=now) if since else None), stop
