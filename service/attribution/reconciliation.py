"""Reconciliation: Σ attributed (unallocated included) against Σ source cost, per source,
billing period, currency and cost measure, over the whole lake (`spendlake attribute --check`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from service.attribution.compute import RollupSession, attributed_sums
from service.attribution.needs import Needs
from service.attribution.sessions import engine_of, read_sessions, sql_dims
from service.attribution.sql import MEASURES
from service.core.config import Config, EngineConfig, attribution_of
from service.core.config_attribution import AttributionConfig
from service.core.lake import Lake


@dataclass(frozen=True)
class Reconciliation:
    source: str
    billing_period: str
    currency: str | None
    cost: str
    source_total: Decimal
    attributed_total: Decimal
    # Σ (source value as delivered − as the lake stores it, at 12 decimals): the delivery's
    # own total is source_total + rounding
    rounding: Decimal = Decimal(0)

    @property
    def difference(self) -> Decimal:
        return self.attributed_total - self.source_total

    @property
    def ok(self) -> bool:
        return self.difference == 0


def reconcile(lake: Lake, config: AttributionConfig | Config,
              engine: EngineConfig | None = None) -> list[Reconciliation]:
    """Σ attributed (unallocated included) against Σ source cost, per source, billing
    period, currency and cost measure, over the whole lake."""
    engine = engine or engine_of(config)
    config = attribution_of(config)
    return read_sessions(lake, config, engine, lambda session: _reconcile(session, config),
                         Needs(sql_dims(config, (), {})))


def _reconcile(session: RollupSession | None, config: AttributionConfig) -> list[Reconciliation]:
    if session is None:
        return []
    dims = sql_dims(config, (), {})
    results = []
    for measure, column in MEASURES.items():
        source: dict[tuple, Decimal] = {}
        for src, period, currency, total in session.con.execute(
                f"SELECT source, billing_period, BillingCurrency, coalesce(sum({column}), 0) FROM costs "
                "GROUP BY source, billing_period, BillingCurrency").fetchall():
            source[(src, period, currency)] = total
        attributed: dict[tuple, Decimal] = defaultdict(Decimal)
        for (_, currency, partition, _, _), amount in attributed_sums(
                session.con, config, dims, measure, "total", None, False, per_partition=True).items():
            attributed[(*partition, currency)] += amount
        rounded = {(e.source, e.billing_period, t.currency): dict(t.rounding).get(column, Decimal(0))
                   for e in session.ledger_entries() for t in e.totals}
        for key in sorted(set(source) | set(attributed), key=lambda k: (k[0], k[1], k[2] or "")):
            results.append(Reconciliation(key[0], key[1], key[2], measure, source.get(key, Decimal(0)),
                                          attributed.get(key, Decimal(0)), rounded.get(key, Decimal(0))))
    return results
