"""The metric families derived from the lake, as functions of (config, lake, now).

`LakeCollector` (service/serve/metrics.py) calls these at scrape time; spend, clusters and
commitments read the tops ingest stored for the lake's state (`ScrapeTops`). Each returns complete
families; a family with nothing to report is returned empty, so its HELP/TYPE still show.
Money is USD only (`_usd`: other currencies are never converted or summed in). Label values
are bounded by `service.top_n`: the largest values by spend or waste are kept, the rest are
summed under `other` with `folded="true"` (`add_folded`), so a value itself named `other` keeps its own.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from service.attribution import ScrapeTops, metrics_anchor
from service.core import derived_records, derived_sweep
from service.core.bill_overlap import account_periods, lake_overlaps
from service.core.claims import other_configs
from service.core.config import Config
from service.core.coverage import billing_data_through, inventory_data_through
from service.core.lake import Lake
from service.core.snapshot_ledger import snapshot_checks, sound
from service.core.units import fold_top, folded_key, iso_seconds, top_keys
from service.findings.budgets import budget_status
from service.findings.owners import unowned
from service.findings.store import load_findings
from service.ingest.freshness import freshness_limits, sources_state


def source_families(config: Config, lake: Lake) -> list[Metric]:
    state = sources_state(lake)
    last = GaugeMetricFamily("spendlake_source_last_success_timestamp_seconds",
                             "When the source last ingested without error.", labels=["source"])
    limit = GaugeMetricFamily("spendlake_source_freshness_limit_seconds",
                              "How far the source's data, or its last successful ingest, may lag.", labels=["source"])
    failures = CounterMetricFamily("spendlake_source_failures", "Ingest runs of the source that failed (with those "
                                   "the lake's state could not record, a full disk, since the service started).",
                                   labels=["source"])
    for name, hours in sorted(freshness_limits(config).items()):  # configured sources only: bounded
        record = state.get(name, {})
        if record.get("last_success"):
            last.add_metric([name], iso_seconds(record["last_success"]))
        limit.add_metric([name], hours * 3600)
        failures.add_metric([name], int(record.get("failures_total", 0)))
    return [last, limit, failures]


def integrity_families(lake: Lake) -> list[Metric]:
    """Cost partitions that do not match the ledger (the quick check now, or the last
    `spendlake verify`), when verify last ran, sources no config on the lake declares (another config's
    are its own: counted, they kept SpendlakeOrphanedSources firing while both configs ran), and bills
    two sources hold (service.core.bill_overlap)."""
    states = ("missing", "truncated", "altered", "unlisted")
    damaged = GaugeMetricFamily("spendlake_lake_partitions_damaged",
                                "Cost partitions that do not match the delivery ledger, by state.", labels=["state"])
    found = {(c.source, c.period): c.state for c in lake.cost_checks() if not c.ok}
    verify = lake.read_state("verify")
    for problem in verify.get("problems", []):
        found.setdefault((problem["source"], problem["billing_period"]), problem["state"])
    for state in states:
        damaged.add_metric([state], sum(1 for s in found.values() if s == state))
    verified = GaugeMetricFamily("spendlake_lake_verify_timestamp_seconds",
                                 "When `spendlake verify` (the daily verify job) last re-hashed the lake.")
    if verify.get("checked_at"):
        verified.add_metric([], iso_seconds(verify["checked_at"]))
    orphaned = GaugeMetricFamily("spendlake_lake_orphaned_sources",
                                 "Sources the lake holds that neither the config nor another config on the lake "
                                 "declares (they count nowhere).")
    orphans = lake.orphans()
    orphaned.add_metric([], len(orphans.keys() - other_configs(lake).keys()) if orphans else 0)
    overlaps = GaugeMetricFamily("spendlake_lake_bill_overlaps",
                                 "Billing accounts' periods two declared sources hold the same cost of (one bill "
                                 "configured as two sources, summed twice: `spendlake status` names them).")
    overlaps.add_metric([], account_periods(lake_overlaps(lake)))
    snapshots = GaugeMetricFamily("spendlake_lake_snapshots_damaged",
                                  "Inventory snapshots (kind `snapshot`) and derived files (kind `attribution_rollup`, "
                                  "`attribution_placed`, `metric_tops`) that do not match their record (the quick check "
                                  "now, or the last `spendlake verify`), by kind and state (a derived file `lost`: its "
                                  "record kept, the file gone).", labels=["kind", "state"])
    bad = Counter(c.state for c in sound(lake, snapshot_checks(lake)) if not c.ok)
    for state in states[:3]:
        snapshots.add_metric(["snapshot", state], bad[state])
    # a derived file is read only while it matches its record (queries compute it meanwhile):
    # only bytes changed on disk count, not one merely unrecorded
    found = derived_records.problems(lake)
    derived = Counter((c.table, c.state) for c in (derived_records.check(lake, path, found)
                                                   for path in derived_records.derived_files(lake)) if c.damaged)
    for table in derived_records.DERIVED_TABLES:
        for state in states[1:3]:
            snapshots.add_metric([table, state], derived[(table, state)])
    gone = Counter(c.table for c in derived_sweep.lost(lake))  # verify's exit 3 too: record kept, file gone
    for table in derived_records.DERIVED_TABLES:
        snapshots.add_metric([table, "lost"], gone[table])
    return [damaged, verified, orphaned, overlaps, snapshots]


def data_through_families(config: Config, lake: Lake) -> list[Metric]:
    """How far each configured source's data reaches (service/core/coverage.py): billing
    sources to the end of their latest usage charge period, inventory sources to their
    latest snapshot or GPU sample."""
    family = GaugeMetricFamily("spendlake_data_through_timestamp_seconds",
                               "End of the source's data: its latest usage charge period, snapshot or sample.",
                               labels=["source"])
    billing = billing_data_through(lake)
    through = {s.name: billing.get(s.name) for s in config.sources}
    through |= inventory_data_through(lake, [s.name for s in config.inventory])
    for source, moment in sorted(through.items()):  # configured sources only: bounded
        if moment is not None:
            family.add_metric([source], moment.timestamp())
    return [family]


def spend_families(tops: ScrapeTops) -> list[Metric]:
    """Attributed USD spend per (team, project) and per experiment, and the unallocated
    share per dimension, for each window (ending at the data's end): the tops ingest stored
    for this lake state (service/attribution/tops.py), so a scrape reads a small file."""
    spend = folded_family("spendlake_spend_usd", "Attributed billed cost in USD over the window.",
                          ["team", "project", "window"])
    experiments = folded_family("spendlake_experiment_spend_usd",
                                "Attributed billed cost in USD per experiment over the window.", ["experiment", "window"])
    unallocated = GaugeMetricFamily("spendlake_unallocated_ratio",
                                    "Share of the window's USD spend that no rule or tag placed (0-1; a net "
                                    "credit on either side takes it below 0 or above 1).",
                                    labels=["dimension", "window"])
    for top in tops.group("spend"):
        if top.family == "unallocated":
            unallocated.add_metric([*top.labels, top.window], float(top.value))
        else:
            add_folded(spend if top.family == "spend" else experiments, top.labels, top.value, top.window)
    return [spend, experiments, unallocated]


class FoldedGauge(GaugeMetricFamily):
    """A gauge whose values fold beyond the top N (`add_folded`): its label names end in `folded`,
    which only the folded rest carries."""

    def __init__(self, name: str, documentation: str, labels: list[str]):
        super().__init__(name, documentation, labels=[*labels, "folded"])
        self.ranked_labels = tuple(labels)


def folded_family(name: str, documentation: str, labels: list[str]) -> FoldedGauge:
    return FoldedGauge(name, documentation, labels)


def add_folded(family: FoldedGauge, labels: tuple[str, ...], value: Decimal | int,
               window: str | None = None) -> None:
    """A sample of a `folded_family` whose `labels` end in its `folded` flag ("" for a ranked
    value, "true" for the rest, `other`: `folded_key`), a top's `window` before the flag: a ranked
    value keeps exactly its labels, one named `other` among them, and the rest has `folded="true"`."""
    *named, folded = labels
    values = dict(zip(family.ranked_labels, [*named, *([] if window is None else [window])], strict=True))
    family.add_sample(family.name, {**values, **({"folded": folded} if folded else {})}, float(value))


def tops_state_family(tops: ScrapeTops) -> list[Metric]:
    """Whether the tops-based families (spend, clusters, commitments) describe the lake as it
    is, or, while a writer builds the new state's, the previous state's stored ones."""
    family = GaugeMetricFamily(
        "spendlake_metric_tops_current", "1 when the spend, cluster and commitment families describe the lake's "
        "current state; 0 while an ingest or rollup builds them and the previous state's are shown.")
    family.add_metric([], 1 if tops.current else 0)
    return [family]


def findings_families(config: Config, lake: Lake) -> list[Metric]:
    """Open findings, the monthly waste of the `waste` ones, and the impact of every one by
    category (an overrun and unowned spend are not waste: only the waste family sums waste,
    and it equals the report's "Waste by rule" total). Teams beyond the top N by impact are
    folded into `other`; rule, category and severity are bounded by the rule registry."""
    found = load_findings(lake, status="open", checked=False)  # stored findings read no cost partition
    teams = teams_of(found, config)
    impact_by_team: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
    for finding, team in zip(found, teams):
        impact_by_team[(team,)] += finding.impact_usd
    kept = set(top_keys(impact_by_team, config.service.top_n))
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    waste: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
    impact: dict[tuple[str, ...], Decimal] = defaultdict(Decimal)
    for finding, team in zip(found, teams):
        label = folded_key((team,), kept)  # (team, folded)
        counts[(finding.rule, finding.severity, *label)] += 1
        impact[(finding.rule, finding.category, *label)] += finding.impact_usd
        if finding.category == "waste":
            waste[(finding.rule, *label)] += finding.monthly_waste_usd
    count_family = folded_family("spendlake_findings", "Open findings.", ["rule", "severity", "team"])
    waste_family = folded_family("spendlake_waste_monthly_usd",
                                 "Waste of the open waste findings, in USD: a month of what goes on; a finished "
                                 "cost (failed-reruns, Capacity Blocks) once.", ["rule", "team"])
    impact_family = folded_family(
        "spendlake_finding_impact_usd", "USD at stake in the open findings by category: monthly waste, "
        "a budget overrun or anomaly excess (overspend), unallocated spend of the window (ownership).",
        ["rule", "category", "team"])
    add_all(count_family, counts.items())
    add_all(waste_family, waste.items())
    add_all(impact_family, impact.items())
    return [count_family, waste_family, impact_family, anomaly_family(config, found)]


def anomaly_family(config: Config, found) -> GaugeMetricFamily:
    """Impact (actual − expected, USD, over the episode) of the open spend anomalies by team
    and service; anomalies inside a planned run (severity info) are not anomalies."""
    impact: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for finding, team in zip(found, teams_of(found, config)):
        if finding.rule == "spend-anomaly" and finding.severity != "info" and finding.evidence.get("currency") == "USD":
            key = (team, finding.evidence.get("service") or "none")
            impact[key] += Decimal(str(finding.evidence.get("impact_usd", 0)))
    family = folded_family("spendlake_anomaly_impact_usd",
                           "Impact in USD of the open spend anomalies (actual minus expected spend).", ["team", "service"])
    add_all(family, fold_top(impact, config.service.top_n).items())
    return family


def budget_families(config: Config, lake: Lake, now: datetime) -> list[Metric]:
    """Each configured budget's month-to-date and forecast spend as a share of its amount, as
    of the data's end, and whether its value is on no cost line (its ratios 0 count nothing, a
    typo, not no spend: bounded by the config, one series per budget); a budget whose month the
    lake holds no usage of has no ratios, its `no data` (/api/v1/budgets) said by its own gauge."""
    labels = ["budget", "dimension", "value"]
    used = GaugeMetricFamily("spendlake_budget_used_ratio", "Month-to-date spend over the budget's amount.",
                             labels=labels)
    forecast = GaugeMetricFamily("spendlake_budget_forecast_ratio",
                                 "Forecast end-of-month spend over the budget's amount.", labels=labels)
    unmatched = GaugeMetricFamily("spendlake_budget_unmatched", "1 when no cost line of the lake carries the "
                                  "budget's value and a known value nearly spells it (a likely typo: its ratios "
                                  "count nothing), else 0 (a value with no spend yet is 0).", labels=labels)
    no_data = GaugeMetricFamily("spendlake_budget_no_data", "1 when the lake holds no usage of the month the budget "
                                "judges (an empty lake, a month whose export is not in yet): its ratios are not "
                                "exported, where a 0 read as nothing spent; else 0.", labels=labels)
    for status in budget_status(lake, config, metrics_anchor(lake, now)):
        budget = status.budget
        key = [budget.name, budget.dimension, budget.value]
        no_data.add_metric(key, 1 if status.no_data else 0)
        if not status.no_data:
            used.add_metric(key, float(status.used_ratio))
            forecast.add_metric(key, float(status.forecast_ratio))
        unmatched.add_metric(key, 1 if status.unmatched_warning else 0)
    return [used, forecast, unmatched, no_data]


def teams_of(found: list, config: Config) -> list[str]:
    """Each finding's team; one stored without any is nobody's as attribution names it (the team
    dimension's `default`), never a literal `unallocated` that a real team may be called."""
    nobody = unowned(config).team
    return [finding.team or nobody for finding in found]


def add_all(family: GaugeMetricFamily, items: Iterable[tuple[tuple[str, ...], Decimal | int]]) -> None:
    """Folded samples (labels ending in the `folded` flag), in label order."""
    for labels, value in sorted(items):
        add_folded(family, labels, value)


def commitment_families(tops: ScrapeTops) -> list[Metric]:
    """Commitments over the 30 days to the data's end, USD only, by type and the team that owns
    each commitment; the `top_n` teams by unused commitment, the rest `other`
    (service/attribution/commitment_tops.py, stored per lake state)."""
    ratio = folded_family("spendlake_commitment_utilization_ratio",
                          "Used / commitment of Savings Plans, reservations and committed use discounts over "
                          "the 30 days to the data's end (USD), by commitment type and owning team.", ["type", "team"])
    unused = folded_family("spendlake_commitment_unused_usd",
                           "Commitment paid for and left unused over the 30 days to the data's end, USD, "
                           "by commitment type and owning team.", ["type", "team"])
    family = {"commitment_unused": unused, "commitment_utilization": ratio}
    for top in tops.group("commitments"):
        add_folded(family[top.family], top.labels, top.value)
    return [ratio, unused]
