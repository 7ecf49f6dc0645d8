"""The metrics' last good budget families, kept in `_state/metrics_last_good.json`.

Spend, clusters and commitments have stored tops (service/attribution/tops.py) and the
findings their store, so a service started on a damaged lake still shows them; budgets sum
each budget's month at scrape time and had no stored form: a service (re)started while a
partition was damaged showed no budget series until it was back, and the budget alerts
resolved. The service's loop stores the budget families a scrape read anew (a scrape itself
writes nothing) and, while it cannot read them and has none in memory, the collector shows the
stored ones (marked last good). Only for the budgets the config declares as they were stored,
under the same attribution, and in the month they summed (the data's end's): other budgets or
attribution, or last month's once the data reaches a new one, show nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging

from prometheus_client.core import Metric

from service.core.config import Config
from service.core.errors import DataError
from service.core.lake import Lake

log = logging.getLogger(__name__)

STATE = "metrics_last_good"
STORED_GROUPS = frozenset({"budgets"})  # the cost groups with no other stored form


class StoredFamilies:
    """The stored groups' families of one lake and config: `load` what was stored, `store` what
    was read (written only when it changed: a scrape reads it every few minutes)."""

    def __init__(self, lake: Lake, config: Config):
        self.lake = lake
        self.owner = budgets_key(config)
        self._written: dict[str, dict] = {}
        self._looked: set[str] = set()

    def load(self, group: str, month: str) -> list[Metric] | None:
        """The group's families as stored for `month`, the first time only (then the collector holds them)."""
        if group in self._looked:
            return None
        self._looked.add(group)
        try:
            stored = self.lake.read_state(STATE).get(group)
        except (DataError, OSError) as exc:
            log.warning("metrics: the stored last good %s are not shown: %s", group, exc)
            return None
        if not stored or stored.get("owner") != self.owner or stored.get("month") != month:
            return None
        self._written[group] = {"month": month, "families": stored["families"]}
        return [_metric(family) for family in stored["families"]]

    def store(self, group: str, found: list[Metric], month: str) -> None:
        """Store the group's families, summed in `month`."""
        record = {"month": month, "families": [_record(metric) for metric in found]}
        if self._written.get(group) == record or not any(f["samples"] for f in record["families"]):
            return  # unchanged, or nothing to show (no budget declared): no file
        try:
            state = self.lake.read_state(STATE)
        except DataError:  # an unreadable file is written afresh
            state = {}
        try:
            self.lake.write_state(STATE, {**state, group: {"owner": self.owner, **record}})
        # a full disk, the lake folder gone (pinned_root): the scrape still answers; a restart shows no stored ones
        except (OSError, DataError) as exc:
            log.warning("metrics: cannot store the last good %s: %s", group, exc)
            return
        self._written[group] = record


def budgets_key(config: Config) -> str:
    """Which budgets the stored families are of, and the attribution that summed them (what a
    team or project spent): a config declaring others, or placing spend otherwise, shows none."""
    return hashlib.sha256(json.dumps([[b.model_dump(mode="json") for b in config.budgets],
                                      config.attribution.fingerprint()], sort_keys=True).encode()).hexdigest()[:16]


def _record(metric: Metric) -> dict:
    return {"name": metric.name, "documentation": metric.documentation, "type": metric.type,
            "samples": [[s.name, s.labels, s.value] for s in metric.samples]}


def _metric(record: dict) -> Metric:
    metric = Metric(record["name"], record["documentation"], record["type"])
    for name, labels, value in record["samples"]:
        metric.add_sample(name, labels, value)
    return metric
