"""What the lake holds: one entry per (source, billing period, currency), from the ledger."""

from __future__ import annotations

from service.core.lake import Lake


# The columns `spendlake status` shows, in order (JSON carries the same keys).
STATUS_COLUMNS = ("source", "billing_period", "currency", "rows", "billed_cost", "effective_cost", "final",
                  "ingested_at", "delivery_id")


def status(lake: Lake) -> list[dict]:
    rows = []
    for entry in lake.ledger():
        for totals in entry.totals:
            rows.append({
                "source": entry.source,
                "billing_period": entry.billing_period,
                "currency": totals.currency,
                "rows": totals.rows,
                "billed_cost": None if totals.billed_cost is None else format(totals.billed_cost, "f"),
                "effective_cost": None if totals.effective_cost is None else format(totals.effective_cost, "f"),
                "delivery_id": entry.delivery_id,
                "ingested_at": entry.ingested_at,
                "final": entry.final,
            })
        if not entry.totals:  # an empty snapshot still replaced its period
            rows.append({"source": entry.source, "billing_period": entry.billing_period, "currency": None,
                         "rows": 0, "billed_cost": "0", "effective_cost": "0", "delivery_id": entry.delivery_id,
                         "ingested_at": entry.ingested_at, "final": entry.final})
    return rows
