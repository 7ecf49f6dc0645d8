"""Exports of the lake to other tools' formats: a FOCUS Cost and Usage dataset.

- `export_focus(config, ExportOptions(...)) -> ExportResult` (service/export/dataset.py);
- `export_window(since, until)`: the window `--since` / `--until` name, either bound open.
"""

from __future__ import annotations

from datetime import datetime

from service.core.timewindow import parse_instant, parse_window, utc_now
from service.export.dataset import ExportedPeriod, ExportOptions, ExportResult, export_focus

__all__ = ["ExportOptions", "ExportResult", "ExportedPeriod", "export_focus", "export_window"]


def export_window(since: str | None, until: str | None, *,
                  now: datetime | None = None) -> tuple[datetime | None, datetime | None]:
    """(since, until) from what was typed; a bound not given is open (None)."""
    if since:
        window = parse_window(since, until, now=now)
        return window.since, (window.until if until else None)
    return None, (parse_instant(until, now=now or utc_now(), option="--until") if until else None)
