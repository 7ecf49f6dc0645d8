"""Instance types of a GPU family that the GPU table (service/core/config_clusters.py
`GPU_INSTANCE_TYPES`, with `attribution.clusters.gpus_per_instance`) does not size. The
allocation then takes such an instance's capacity from the most GPUs a job holds on it (a 4-GPU
job on an 8-GPU node pays the whole node, idle 0), and one no job reaches is no capacity at
all (its cost unallocated, not its cluster's idle): `attribute` and `runs` warn, once per type."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from service.attribution.allocation import INSTANCE_LINE
from service.attribution.sql import MEASURES
from service.core.config_clusters import GPU_INSTANCE_TYPES, ClustersConfig
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window
from service.core.units import amounts_text

# Instance type names of the providers' accelerator families: AWS P, G, Gr, Trn, Inf, DL
# (`p6-b300.48xlarge`, `g4ad.xlarge`); Google Cloud A2/A3/A4 and G2/G4 (`a4-highgpu-8g`,
# `g2-standard-4`); Azure N series (`Standard_ND96isr_MI300X_v5`, `Standard_NC40ads_H100_v5`).
GPU_FAMILY = re.compile(r"^(?:(?:p|g|gr|trn|inf|dl)\d[a-z0-9-]*\.[a-z0-9-]+|[ag]\d-[a-z0-9-]+|standard_n[cdgv][a-z0-9_-]*)$")

# per instance type of the window's instance lines (as the allocation reads them), its cost by currency
_TYPES_SQL = (f"SELECT lower(trim(x_instance_type)) AS t, BillingCurrency, sum({{cost}}) FROM (SELECT *, "
              "coalesce(ChargePeriodStart, BillingPeriodStart) AS cp_start, ChargePeriodEnd AS cp_end FROM costs) "
              f"WHERE {INSTANCE_LINE} AND cp_start >= $since AND cp_start < $until GROUP BY ALL ORDER BY t, BillingCurrency")



@dataclass(frozen=True)
class UnsizedType:
    instance_type: str
    amounts: tuple[tuple[str | None, Decimal], ...]  # its cost in the window, by currency

    def text(self) -> str:
        return (f"instance type {self.instance_type} ({amounts_text(self.amounts)} in the window) is not in the GPU "
                "table: its instances are sized by the most GPUs a job holds on them, and one no job reaches is not "
                "its cluster's idle; set its GPUs in attribution.clusters.gpus_per_instance "
                f"(e.g. {self.instance_type}: 8), or 0 if it has none")


def unsized_types(lake: Lake, clusters: ClustersConfig | None, window: Window, cost: str = "billed",
                  snapshot: Snapshot | None = None) -> list[UnsizedType]:
    """The GPU-family instance types billed in `window` that neither the built-in table nor the
    config sizes (none without `clusters`)."""
    if clusters is None or not lake.ledger():
        return []
    known = set(GPU_INSTANCE_TYPES) | {name.strip().lower() for name in clusters.gpus_per_instance}
    found: dict[str, list[tuple[str | None, Decimal]]] = {}
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=("costs",)) as con:
        rows = con.execute(_TYPES_SQL.format(cost=MEASURES[cost]), {
            "since": window.since.replace(tzinfo=None), "until": window.until.replace(tzinfo=None)}).fetchall()
    for instance_type, currency, amount in rows:
        if instance_type not in known and GPU_FAMILY.match(instance_type):
            found.setdefault(instance_type, []).append((currency, amount or Decimal(0)))
    return [UnsizedType(name, tuple(amounts)) for name, amounts in found.items()]
