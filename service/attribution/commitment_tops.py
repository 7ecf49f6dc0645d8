"""The `commitments` group of the metric tops: commitments over the 30 days to the data's end
(service/attribution/commitment_usage.py), USD only, by type and the team that owns each
commitment; the `service.top_n` teams by unused commitment (folded "") and the rest as (`other`,
"true"), so a team named `other` is not summed into it (service/core/units.py `folded_key`):

- family `commitment_unused` (type, team, folded): commitment paid for and left unused, USD;
- family `commitment_utilization` (type, team, folded): used / commitment, where the commitment
  is not zero.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from service.attribution.commitment_usage import commitments
from service.attribution.metric_top import COMMITMENT_DAYS, COMMITMENT_WINDOW, USD, Top
from service.core.config import Config
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.timewindow import Window
from service.core.units import folded_key, top_keys


def commitment_tops(lake: Lake, config: Config, end: datetime, snapshot: Snapshot) -> list[Top]:
    result = commitments(lake, config, Window(end - timedelta(days=COMMITMENT_DAYS), end), by=("team",),
                         snapshot=snapshot)
    used_by: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    unused_by: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for row in result.rows:
        if row.currency == USD:
            key = (row.type or "unknown", row.owner.get("team") or "unallocated")
            used_by[key] += row.used
            unused_by[key] += row.unused
    teams: dict[tuple[str], Decimal] = defaultdict(Decimal)
    for (_, team), amount in unused_by.items():
        teams[(team,)] += amount
    kept = set(top_keys(teams, config.service.top_n))
    folded_used: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
    folded_unused: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
    for (kind, team), amount in unused_by.items():
        key = (kind, *folded_key((team,), kept))
        folded_unused[key] += amount
        folded_used[key] += used_by[(kind, team)]
    tops = []
    for key in sorted(folded_unused):
        whole = folded_used[key] + folded_unused[key]
        tops.append(Top(end, "commitment_unused", COMMITMENT_WINDOW, key, folded_unused[key]))
        if whole > 0:
            tops.append(Top(end, "commitment_utilization", COMMITMENT_WINDOW, key, folded_used[key] / whole))
    return tops
