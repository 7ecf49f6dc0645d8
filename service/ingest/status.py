"""What the lake holds: one entry per (source, billing period, currency), from the ledger,
with each partition's check against its file, and the sources the config no longer names."""

from __future__ import annotations

from service.core.lake import Lake
from service.core.units import exact_text

# The columns `spendlake status` shows, in order (JSON carries the same keys).
STATUS_COLUMNS = ("source", "billing_period", "currency", "rows", "billed_cost", "effective_cost", "final",
                  "check", "ingested_at", "delivery_id")


def status(lake: Lake) -> list[dict]:
    """`check`: `ok`, `missing`, `truncated`, `altered` (size or footer against the ledger,
    or the last `spendlake verify`), `orphaned` (a source the config does not declare),
    `unlisted` (a partition on disk the ledger does not know: a ledger lost or rolled back)."""
    found = lake.cost_checks()
    checks = {(c.source, c.period): c.state for c in found}
    damaged = {(p["source"], p["billing_period"]): p["state"] for p in lake.read_state("verify").get("problems", [])}
    rows = []
    for entry in lake.ledger():
        check = "orphaned" if not lake.counts(entry.source) else checks.get(entry.key, "ok")
        if check == "ok":
            check = damaged.get(entry.key, "ok")
        base = {"source": entry.source, "billing_period": entry.billing_period, "delivery_id": entry.delivery_id,
                "ingested_at": entry.ingested_at, "final": entry.final, "check": check}
        for totals in entry.totals:
            rows.append({**base, "currency": totals.currency, "rows": totals.rows,
                         "billed_cost": exact_text(totals.billed_cost),
                         "effective_cost": exact_text(totals.effective_cost)})
        if not entry.totals:  # an empty snapshot still replaced its period
            rows.append({**base, "currency": None, "rows": 0, "billed_cost": "0", "effective_cost": "0"})
    rows += [{"source": c.source, "billing_period": c.period, "check": c.state} for c in found if c.state == "unlisted"]
    return [{key: row.get(key) for key in STATUS_COLUMNS} for row in rows]


def copies_skipped(lake: Lake) -> list[str]:
    """Per source, the copies its last ingest skipped (files or manifests holding what another
    it reads holds: service.ingest.copies, connectors.aws_export), one line each source, and the
    stale ones (copies of what a file held before it changed) in a line of their own."""
    lines = []
    for source, record in sorted(lake.read_state("sources").items()):
        copies = sorted((record.get("copies") or {}).items())
        if copies:
            copy, original = copies[0]
            more = f" and {len(copies) - 1} more" if len(copies) > 1 else ""
            lines.append(f"source {source}: {len(copies)} copied file(s) under its location skipped by its last "
                         f"ingest (read once): {copy}, the same as {original}{more}; move copies out of the location "
                         "to quiet this")
        stale = sorted((record.get("stale_copies") or {}).items())
        if stale:
            copy, original = stale[0]
            more = f" and {len(stale) - 1} more" if len(stale) > 1 else ""
            lines.append(f"source {source}: {len(stale)} stale copied file(s) under its location skipped by its last "
                         f"ingest (not read: the file each copied changed since): {copy}, a copy of {original}{more}; "
                         "delete them or copy the files again")
    return lines
