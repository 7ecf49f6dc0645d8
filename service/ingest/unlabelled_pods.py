"""GPU pods without any label (kube-state-metrics v2 without --metric-labels-allowlist), said
by the inventory run that commits them (service/ingest/inventory.py), kept in the source's record
of the `sources` state: a warning once, then INFO while it lasts."""

from __future__ import annotations

import logging

from service.core.units import utc_now_iso

log = logging.getLogger(__name__)

UNLABELLED_KEY = "pods_without_labels_since"


def say_unlabelled_pods(source: str, pods: int, record: dict) -> None:
    """GPU pods without any label (kube-state-metrics v2 without --metric-labels-allowlist):
    said as a warning on the first run that finds them so, then at INFO until they carry
    labels again. Every dimension reads a job's labels (by its tag keys, its name by default)
    before its rules, so there is no config to tell that nobody wants them; but an operator
    who chose namespace rules knows it after the first run, and an hourly warning they cannot
    act on hides the ones they can. The source's record keeps when it was first said."""
    if not pods:
        record.pop(UNLABELLED_KEY, None)
        return
    said = record.get(UNLABELLED_KEY)
    log.log(logging.INFO if said else logging.WARNING,
            "inventory source %s: none of the %d GPU pod(s) has a label in kube_pod_labels, so no team, project or run "
            "comes from pod labels (every pod's cost goes to its dimensions' rules or default): kube-state-metrics v2 writes "
            "only the labels its --metric-labels-allowlist names (none by default); start it with "
            "--metric-labels-allowlist=pods=[team,project,run] (the keys your dimensions and the source's run_labels "
            "read)%s", source, pods,
            f"; said as a warning at {said}, and again once the pods have had labels" if said else
            "; said as a warning this once, at INFO on later runs until the pods carry labels")
    record.setdefault(UNLABELLED_KEY, utc_now_iso())
