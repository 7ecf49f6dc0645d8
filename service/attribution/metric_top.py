"""One sample of the metric tops (service/attribution/tops.py) and the windows they cover.

A family is a group of samples a scrape turns into one Prometheus family; the groups are
computed (and may fail) on their own: `spend` (spend, experiment, unallocated), `clusters`
(run, idle) and `commitments` (commitment_unused, commitment_utilization).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from service.core.lake import Lake
from service.core.coverage import data_end, snapshot_data_end
from service.core.snapshot import Snapshot
from service.core.timewindow import Window, relative_window

USD = "USD"
WINDOWS = ("24h", "7d", "mtd")
COMMITMENT_DAYS = 30
COMMITMENT_WINDOW = f"{COMMITMENT_DAYS}d"
# group → its families; a family's labels, in order, are in the module docstrings that compute them
GROUPS = {"spend": ("spend", "experiment", "unallocated"), "clusters": ("run", "idle"),
          "commitments": ("commitment_unused", "commitment_utilization")}
GROUP_OF = {family: group for group, families in GROUPS.items() for family in families}


@dataclass(frozen=True)
class Top:
    """One sample; family `anchor` (no labels) says the tops were computed, whatever the lake holds."""

    anchor: datetime
    family: str
    window: str
    labels: tuple[str, ...]
    value: Decimal


def windows(end: datetime) -> dict[str, Window]:
    """The metrics' windows, ending at `end` (the data's end): `mtd` is the month holding the
    data's last instant."""
    return {name: relative_window(name, end) for name in WINDOWS}


def metrics_anchor(lake: Lake, now: datetime) -> datetime:
    """Where the metrics' windows end: the lake's data end, or `now` for a lake without data."""
    return data_end(lake) or now


def snapshot_anchor(lake: Lake, snapshot: Snapshot, now: datetime) -> datetime:
    """`metrics_anchor` of the lake state `snapshot` saw."""
    return snapshot_data_end(lake, snapshot) or now
