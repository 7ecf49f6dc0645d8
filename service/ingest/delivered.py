"""When the cloud delivered a bill, as its source tells it (LedgerEntry.delivered_at), for the
report's notes on a bill delivered again (report/sections/restated.py), which otherwise name
when spendlake ingested it: hours or days later for a lake ingested daily, or after a pause.

- An AWS Data Exports delivery (CUR 2.0, FOCUS) is told by its execution id, which begins with the
  time of the export's run (`2025-12-28T13:14:37.728Z-<uuid>`): `execution id`.
- Else its files' latest write time as the connector listed them (S3 LastModified, a local
  file's mtime; a legacy CUR's assembly id is a bare uuid): `files`. A copy that lost its write
  times (a plain `cp`) reads as written when copied.
- A connector that lists no times tells none: the note names the ingest's time, and says so.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import replace
from datetime import datetime, timezone

from connectors.base import CostConnector
from service.core.ledger import FILES_REMOVED, LedgerEntry
from service.core.units import utc_iso_seconds

EXECUTION_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)-")


def delivered(entry: LedgerEntry, connector: CostConnector, removed: Container[str] = ()) -> LedgerEntry:
    """`entry` with when its delivery was delivered and by what, where its id or files tell it; a
    period of `removed`, read again only because files of its last delivery are gone, was delivered by
    no one (FILES_REMOVED)."""
    if entry.billing_period in removed:
        return replace(entry, delivered_at=None, delivered_by=FILES_REMOVED)
    if found := EXECUTION_TIME.match(entry.delivery_id):
        try:
            at = datetime.fromisoformat(found.group(1).replace("Z", "+00:00"))
        except ValueError:  # 2025-13-45…: no time
            pass
        else:
            return replace(entry, delivered_at=utc_iso_seconds(at), delivered_by="execution id")
    written = [connector.listed_modified(uri) for uri in entry.files]
    if not written or not all(written):
        return entry
    return replace(entry, delivered_at=utc_iso_seconds(datetime.fromtimestamp(max(written), timezone.utc)),
                   delivered_by="files")
