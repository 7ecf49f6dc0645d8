"""What the shared-cluster allocation (service/attribution/allocation.py) assumes of a window's
instances without saying so, said as warnings of `attribute` and `runs`:
- an instance type of a GPU family that the GPU table (service/core/config_clusters.py
  `GPU_INSTANCE_TYPES`, with `attribution.clusters.gpus_per_instance`) does not size: its
  instances are taken to have the most GPUs a job holds on one (a 4-GPU job on an 8-GPU node
  pays the whole node, idle 0), and one no job reaches is no capacity (its cost unallocated, not
  its cluster's idle);
- job records naming instance ids that no instance line of the window bills (a bare Azure VM
  name, a typo, a node of another cloud): those jobs meet no instance, so their hours cost nothing
  and their instances' cost goes to idle or unallocated.
Both are read on the answer's own connection (its snapshot's `costs` and `jobs`), never on a
second one, and kept by what they read: the service asks on every request."""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import duckdb

from service.attribution.allocation import INSTANCE_ID, INSTANCE_LINE
from service.attribution.allocation_placement import instance_key
from service.attribution.jobs import JOBS_TABLE
from service.attribution.sql import MEASURES
from service.core.config_clusters import ClustersConfig
from service.core.folding import folded
from service.core.snapshot import Snapshot
from service.core.timewindow import Window
from service.core.units import amounts_text

# Instance type names of the providers' accelerator families: AWS P, G, Gr, Trn, Inf, DL
# (`p6-b300.48xlarge`, `g4ad.xlarge`); Google Cloud A2/A3/A4 and G2/G4 (`a4-highgpu-8g`,
# `g2-standard-4`); Azure N series (`Standard_ND96isr_MI300X_v5`, `Standard_NC40ads_H100_v5`).
GPU_FAMILY = re.compile(r"^(?:(?:p|g|gr|trn|inf|dl)\d[a-z0-9-]*\.[a-z0-9-]+|[ag]\d-[a-z0-9-]+|standard_n[cdgv][a-z0-9_-]*)$")
SHOWN_IDS = 3  # instance ids a warning names; it counts the rest

_START = "coalesce(ChargePeriodStart, BillingPeriodStart)"
# each instance of the window's instance lines (as the allocation reads them: its id in the form
# a job's id meets it), its type and currency, what its lines starting in the window cost, and
# the span its lines bill
_INSTANCES_SQL = (
    f"SELECT {instance_key(INSTANCE_ID)} AS k, lower(trim(x_instance_type)) AS t, BillingCurrency, "
    "sum(CASE WHEN cp_start >= $since THEN {cost} END), min(cp_start), max(cp_end) FROM ("
    f"SELECT ResourceId, x_instance_type, x_split_parent_resource_id, BillingCurrency, {{cost}}, {_START} AS cp_start, "
    f"greatest(coalesce(ChargePeriodEnd, {_START}), {_START}) AS cp_end FROM costs) AS lines "
    f"WHERE {INSTANCE_LINE} AND cp_start < $until AND cp_end > $since GROUP BY ALL")
# each instance id a job of the span names (in the form a bill's id meets it), its job and cluster
# and the GPUs the job holds there (its `gpus` over its ids, as the allocation places it)
_JOB_IDS = (
    f"SELECT trim(cluster) AS cluster, job_id, gpus / len(instance_ids) AS g, {instance_key('iid')} AS k FROM ("
    "SELECT cluster, job_id, gpus, instance_ids, unnest(instance_ids) AS iid FROM jobs "
    "WHERE coalesce(len(instance_ids), 0) > 0 AND gpus > 0 AND start_time < $until "
    "AND coalesce(end_time, $until) > $since AND ($run IS NULL OR lower(trim(run_id)) = $run)) AS ids")
_UNBILLED_SQL = (
    f"SELECT cluster, count(DISTINCT job_id), count(DISTINCT k), list(DISTINCT k ORDER BY k)[1:{SHOWN_IDS}] "
    f"FROM ({_JOB_IDS}) AS ids WHERE k NOT IN (SELECT unnest($billed)) GROUP BY cluster ORDER BY cluster NULLS LAST")
# the bound lists as relations, so DuckDB hashes them: list_contains on each job's row scanned the list
# (1M job instance rows against 5,000 billed keys: 7.0 CPU s, against 0.04; review54 P2-7)
_ASSUMED_SQL = (
    f"SELECT t, max(g) FROM ({_JOB_IDS}) AS ids JOIN (SELECT unnest($keys) AS k, unnest($types) AS t) AS typed "
    "USING (k) GROUP BY t")


@dataclass(frozen=True)
class UnsizedType:
    instance_type: str
    amounts: tuple[tuple[str | None, Decimal], ...]  # its cost in the window, by currency
    assumed: Decimal | None  # the most GPUs a job naming one of its instances holds there (None: no job does)

    def text(self) -> str:
        assumed = (f"as many GPUs as the most a job holds on one ({self.assumed.normalize():f} here)"
                   if self.assumed is not None else "as many GPUs as the most a job holds on one")
        return (f"instance type {self.instance_type} ({amounts_text(self.amounts)} in the window) is not in the GPU "
                f"table: its instances are taken to have {assumed}, and one no job reaches is not its cluster's "
                "idle (its cost stays unallocated); set its GPUs in attribution.clusters.gpus_per_instance "
                f"(e.g. {self.instance_type}: 8), or 0 if it has none")


@dataclass(frozen=True)
class UnbilledIds:
    cluster: str | None
    jobs: int
    ids: int  # the distinct instance ids they name that no bill line holds
    shown: tuple[str, ...]  # the first SHOWN_IDS of them

    def text(self) -> str:
        more = f" and {self.ids - len(self.shown):,} more" if self.ids > len(self.shown) else ""
        where = f"cluster {self.cluster}" if self.cluster else "no cluster"
        return (f"{self.jobs:,} job(s) of {where} name instances no bill line of the window holds: "
                f"{', '.join(self.shown)}{more}; their hours reach no instance's cost (an instance id must be the "
                "bill's ResourceId: an EC2 id or ARN, an Azure resource id; for a bare VM or node name use the "
                "jobs' nodes with attribution.clusters.node_tag)")


def instance_warnings(con: duckdb.DuckDBPyConnection, clusters: ClustersConfig | None, has_jobs: bool, window: Window,
                      cost: str, data_through: datetime | None, snapshot: Snapshot | None = None,
                      run: str | None = None) -> tuple[str, ...]:
    """The warnings of the window's instances, read on `con` (an answer's connection with the
    `costs` view, and `jobs` when `has_jobs`); none without `clusters`. Jobs are asked of only
    up to `data_through` (the bill's end: later hours have no instance lines yet) and within the
    span the window's instance lines bill. `snapshot`: the one `con` reads, by which the
    warnings are kept (None: not kept). `run`: of one run's story, its jobs' ids alone."""
    if clusters is None:
        return ()
    run = folded(run) if run else None
    key = _kept_key(clusters, has_jobs, window, cost, data_through, snapshot, run)
    with _KEPT:
        if key is not None and key in _CHECKED:
            _CHECKED.move_to_end(key)
            return _CHECKED[key]
    found = _checked(con, clusters, has_jobs, window, cost, data_through, run)
    if key is not None:
        with _KEPT:  # the service's requests run in threads
            _CHECKED[key] = found
            while len(_CHECKED) > CHECKS_KEPT:
                _CHECKED.popitem(last=False)
    return found


def _checked(con, clusters: ClustersConfig, has_jobs: bool, window: Window, cost: str,
             data_through: datetime | None, run: str | None) -> tuple[str, ...]:
    since, until = (moment.replace(tzinfo=None) for moment in (window.since, window.until))
    rows = con.execute(_INSTANCES_SQL.format(cost=MEASURES[cost]), {"since": since, "until": until}).fetchall()
    known = set(clusters.gpu_table()) | {name.strip().lower() for name in clusters.gpus_per_instance}
    unsized: dict[str, list[tuple[str | None, Decimal]]] = {}
    for _, instance_type, currency, amount, _, _ in rows:
        if instance_type not in known and GPU_FAMILY.match(instance_type):
            unsized.setdefault(instance_type, [])
            if amount is not None:
                unsized[instance_type].append((currency, amount))
    if not rows or not has_jobs:
        return tuple(UnsizedType(name, _summed(amounts), None).text() for name, amounts in unsized.items())
    keys = sorted({row[0] for row in rows})
    assumed: dict[str, Decimal] = {}
    if unsized:
        of_type = {row[0]: row[1] for row in rows if row[1] in unsized}
        assumed = dict(con.execute(_ASSUMED_SQL, {"keys": list(of_type), "types": list(of_type.values()),
                                                  "since": since, "until": until, "run": run}).fetchall())
    # the jobs of the hours the instance lines bill, up to the bill's end
    start = max(since, min(row[4] for row in rows))
    end = min(until, max(row[5] for row in rows), *([data_through.replace(tzinfo=None)] if data_through else []))
    unbilled = [UnbilledIds(*row[:3], tuple(row[3])) for row in con.execute(
        _UNBILLED_SQL, {"billed": keys, "since": start, "until": end, "run": run}).fetchall()] if start < end else []
    return (*(UnsizedType(name, _summed(amounts), _gpus(assumed.get(name))).text() for name, amounts in unsized.items()),
            *(ids.text() for ids in unbilled))


def _summed(amounts: list[tuple[str | None, Decimal]]) -> tuple[tuple[str | None, Decimal], ...]:
    totals: dict[str | None, Decimal] = {}
    for currency, amount in amounts:
        totals[currency] = totals.get(currency, Decimal(0)) + amount
    return tuple(totals.items())


def _gpus(value) -> Decimal | None:
    return None if value is None else Decimal(str(value))


# Kept by what a check reads: the cost partitions' deliveries and the job snapshots of the
# answer's snapshot, the GPU table, the window, the measure and the bill's end.
_CHECKED: OrderedDict[tuple, tuple[str, ...]] = OrderedDict()
_KEPT = threading.Lock()
CHECKS_KEPT = 64


def _kept_key(clusters: ClustersConfig, has_jobs: bool, window: Window, cost: str, data_through: datetime | None,
              snapshot: Snapshot | None, run: str | None) -> tuple | None:
    if snapshot is None or any(check.entry is None for check in snapshot.checks):
        return None
    jobs = snapshot.tables.get(JOBS_TABLE, ())
    if has_jobs and (not jobs or any(pin.digest is None and pin.record is None for pin in jobs)):
        return None
    return (tuple((check.path, check.entry.delivery_id, check.entry.ingested_at, check.entry.rows)
                  for check in snapshot.checks),
            tuple((pin.path, pin.digest, repr(pin.record)) for pin in jobs) if has_jobs else (),
            tuple(sorted(clusters.gpu_table().items())), window.since, window.until, cost, data_through, run)
