"""The scrape-time collector: freshness per source, caching per lake change, a valid page, the cost,
findings and budget families (what a scrape shows beside a writer or a damaged lake:
test_service_metrics_races.py)."""

from __future__ import annotations

import errno
import subprocess
import time
from datetime import datetime, timezone
from decimal import Decimal

import pytest
from conftest import require_binary
from prometheus_client import CollectorRegistry, generate_latest
from servicekit import NOW, ROWS, MemoryConnector, commit, make_config, scrape

from rules.base import Finding
from service.core.config import parse_config
from service.core.errors import SpendlakeError
from service.core.lake import Lake
from service.core.registry import CONNECTORS
from service.core.schema import cost_select_list
from service.findings.store import store_findings
from service.ingest.billing import ingest
from service.ingest.freshness import source_freshness
from service.ingest.inventory import run_inventory
from service.serve.metrics import JobMetrics, LakeCollector


@pytest.fixture
def memory_source(monkeypatch):
    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", list(ROWS))
    return MemoryConnector


@pytest.mark.slow
def test_success_sets_last_success_and_a_failure_leaves_it_and_is_counted(tmp_path, memory_source):
    config = make_config(tmp_path)
    registry = scrape(LakeCollector(config))
    last = ("spendlake_source_last_success_timestamp_seconds", {"source": "cur"})
    assert registry.get_sample_value(*last) is None
    assert registry.get_sample_value("spendlake_source_failures_total", {"source": "cur"}) == 0

    before = time.time()
    assert not ingest(config).failed
    succeeded_at = registry.get_sample_value(*last)
    assert before - 1 <= succeeded_at <= time.time()
    end = datetime(2026, 11, 27, 6, tzinfo=timezone.utc).timestamp()
    assert registry.get_sample_value("spendlake_data_through_timestamp_seconds", {"source": "cur"}) == end

    memory_source.ROWS = None  # the bucket becomes unreadable
    assert ingest(config).failed
    assert registry.get_sample_value(*last) == succeeded_at
    assert registry.get_sample_value("spendlake_source_failures_total", {"source": "cur"}) == 1
    assert registry.get_sample_value("spendlake_lake_readable") == 1


def test_11_a_failure_the_full_disk_kept_out_of_the_state_file_is_counted(tmp_path, memory_source, monkeypatch):
    """The state file was the counter: while the disk was full no failure could be written, so
    spendlake_source_failures_total stood still (and SpendlakeSourceFailing, which reads it,
    never fired) and the source read `ok` (status, `/readyz`) exactly while every run failed;
    the cached page showed the old count too."""
    config = parse_config({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "cur", "kind": "focus", "location": str(tmp_path / "x")}, {"name": "gcp", "kind": "focus",
                                                                      "location": str(tmp_path / "y")}],
        "inventory": [{"name": "trace", "kind": "jobs-file", "path": str(tmp_path / "absent.csv")}]})
    registry = scrape(LakeCollector(config))
    failures = lambda source: registry.get_sample_value("spendlake_source_failures_total", {"source": source})
    memory_source.ROWS = None  # the bucket unreadable
    assert ingest(config).failed and failures("cur") == failures("gcp") == 1
    memory_source.ROWS = list(ROWS)
    assert not ingest(config).failed and failures("cur") == 1  # ok again: `/readyz` ready, status ok
    time.sleep(1)  # the state's times are whole seconds: the failure below comes after this success
    memory_source.ROWS = None

    def full_disk(lake, name, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(lake.state_file(name)))

    with monkeypatch.context() as full:
        full.setattr(Lake, "write_state", full_disk)
        with pytest.raises(SpendlakeError, match="disk full"):
            ingest(config)
        [outcome] = run_inventory(config)
        assert "disk full" not in str(outcome.error)  # its own failure said, the unrecorded one counted
    assert failures("cur") == failures("gcp") == 2 and failures("trace") == 1
    states = {row.source: row for row in source_freshness(config, Lake.of(config), datetime.now(timezone.utc))}
    assert states["cur"].state == "failing" and states["cur"].failures_total == 2, states["cur"]  # was: ok
    assert ingest(config).failed  # the disk freed: the file counts from what it held
    assert failures("cur") == failures("gcp") == 3


@pytest.mark.slow
def test_collector_recomputes_only_when_the_lake_changes_or_the_page_ages(tmp_path):
    config = make_config(tmp_path)
    now = [1000.0]
    collector = LakeCollector(config, max_age_seconds=300, clock=lambda: now[0])
    calls = []
    compute = collector.compute
    collector.compute = lambda: calls.append(1) or compute()
    registry = scrape(collector)

    generate_latest(registry)
    generate_latest(registry)
    assert len(calls) == 1
    commit(Lake(config.lake), "cur", ROWS)
    generate_latest(registry)
    assert len(calls) == 2
    assert registry.get_sample_value("spendlake_data_through_timestamp_seconds", {"source": "cur"}) is not None
    now[0] += 301  # a page is recomputed at least every max_age_seconds even when the lake does not change
    generate_latest(registry)
    assert len(calls) == 3


def test_an_unreadable_lake_is_reported_not_raised(tmp_path):
    config = make_config(tmp_path)
    state = config.lake / "_state" / "sources.json"
    state.parent.mkdir(parents=True)
    state.write_text("{not json")
    registry = scrape(LakeCollector(config))
    assert registry.get_sample_value("spendlake_lake_readable") == 0


def test_the_scraped_page_passes_promtool_check_metrics(tmp_path, memory_source):
    require_binary("promtool")
    config = make_config(tmp_path)
    ingest(config)
    registry = CollectorRegistry()
    jobs = JobMetrics(registry, ["ingest", "daily"])
    jobs.duration("ingest").observe(1.5)
    jobs.failures("daily").inc()
    jobs.last_success("ingest").set_to_current_time()
    registry.register(LakeCollector(config))
    page = generate_latest(registry)
    assert b'spendlake_source_last_success_timestamp_seconds{source="cur"}' in page
    assert b'spendlake_job_failures_total{job="daily",task="daily"} 1.0' in page  # issue 6 names `job`
    assert_promtool_passes(page)


def assert_promtool_passes(page: bytes) -> None:
    checked = subprocess.run([require_binary("promtool"), "check", "metrics"], input=page, capture_output=True,
                             timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not checked.stdout.strip() and not checked.stderr.strip()


def test_spend_by_team_project_and_window_and_the_unallocated_share(tmp_path):
    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", [
        ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp", "project": "llm"}),
        ("2026-11-25 05:00:00", "2026-11-25 06:00:00", "USD", "10", {"team": "nlp", "project": "llm"}),
        ("2026-11-02 05:00:00", "2026-11-02 06:00:00", "USD", "100", {"team": "vision", "project": "vit"}),
        ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "USD", "1", {}),
        ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "EUR", "1000", {"team": "nlp"}),  # never in _usd
    ])
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))

    def spend(team, project, window):
        return registry.get_sample_value("spendlake_spend_usd", {"team": team, "project": project, "window": window})

    assert (spend("nlp", "llm", "24h"), spend("nlp", "llm", "7d"), spend("nlp", "llm", "mtd")) == (4, 14, 14)
    assert spend("vision", "vit", "7d") is None and spend("vision", "vit", "mtd") == 100
    assert spend("unallocated", "unallocated", "24h") == 1
    ratio = registry.get_sample_value("spendlake_unallocated_ratio", {"dimension": "team", "window": "24h"})
    assert ratio == pytest.approx(1 / 5)
    assert registry.get_sample_value("spendlake_unallocated_ratio", {"dimension": "project", "window": "mtd"}) == \
        pytest.approx(1 / 115)


@pytest.mark.slow  # ten thousand experiments
def test_ten_thousand_experiments_stay_under_the_series_cap(tmp_path):
    config = make_config(tmp_path)
    lake = Lake(config.lake)
    con = lake.connect()
    select = cost_select_list({
        "BillingPeriodStart": "TIMESTAMP '2026-11-01'", "ChargePeriodStart": "TIMESTAMP '2026-11-27 05:00:00'",
        "ChargePeriodEnd": "TIMESTAMP '2026-11-27 06:00:00'", "BillingCurrency": "'USD'",
        "BilledCost": "1 + i % 97", "EffectiveCost": "1 + i % 97",
        "Tags": "MAP {'team': 'team-' || (i % 50), 'project': 'p-' || (i % 400), 'experiment': 'run-' || i}",
    })
    lake.commit_costs(con, con.sql(f"SELECT {select} FROM range(10000) AS t(i)"), source="cur",
                      delivery_id="d1", periods=None)
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    samples = [s for family in registry.collect() for s in family.samples]
    experiments = [s for s in samples if s.name == "spendlake_experiment_spend_usd"]
    pairs = [s for s in samples if s.name == "spendlake_spend_usd"]
    top_n = config.service.top_n
    assert len(experiments) == len(pairs) == 3 * (top_n + 1)  # three windows, top N plus `other`
    assert len(samples) < 250
    assert {s.labels["experiment"] for s in experiments if s.labels["experiment"].startswith("run-")} <= \
        {f"run-{i}" for i in range(10000) if i % 97 == 96}  # only the largest experiments get a series
    total = sum(Decimal(1 + i % 97) for i in range(10000))
    mtd = sum(s.value for s in experiments if s.labels["window"] == "mtd")
    assert mtd == pytest.approx(float(total))  # folding into `other` loses nothing


def test_findings_and_waste_by_rule_and_team_with_teams_folded(tmp_path):
    config = make_config(tmp_path, top_n=2)
    lake = Lake(config.lake)
    found = [Finding(id=f"f{i}", rule="idle-gpu", severity="warning", resource_id=f"i-{i}", team=team,
                     category="waste", impact_usd=Decimal(waste), monthly_waste_usd=Decimal(waste), summary="idle") for i, (team, waste) in
             enumerate([("nlp", "900"), ("nlp", "100"), ("vision", "500"), ("speech", "20"), ("infra", "10")])]
    found.append(Finding(id="f9", rule="checkpoint-sprawl", severity="info", resource_id="s3://b/ckpt/",
                         team="nlp", category="waste", impact_usd=Decimal("40.5"), monthly_waste_usd=Decimal("40.5"), summary="old checkpoints"))
    found.append(Finding(id="f10", rule="idle-gpu", severity="critical", resource_id="i-x", team="nlp",
                         category="waste", impact_usd=Decimal("5000"), monthly_waste_usd=Decimal("5000"), summary="gone", status="resolved"))
    store_findings(lake, found)
    registry = scrape(LakeCollector(config))

    def value(name, **labels):
        return registry.get_sample_value(name, labels)

    assert value("spendlake_findings", rule="idle-gpu", severity="warning", team="nlp") == 2
    assert value("spendlake_findings", rule="idle-gpu", severity="warning", team="other", folded="true") == 2
    assert value("spendlake_findings", rule="idle-gpu", severity="critical", team="nlp") is None  # resolved
    assert value("spendlake_waste_monthly_usd", rule="idle-gpu", team="nlp") == 1000
    assert value("spendlake_waste_monthly_usd", rule="idle-gpu", team="vision") == 500
    assert value("spendlake_waste_monthly_usd", rule="idle-gpu", team="other", folded="true") == 30
    assert value("spendlake_waste_monthly_usd", rule="checkpoint-sprawl", team="nlp") == 40.5


def test_a_team_named_other_is_told_from_the_folded_teams_in_the_findings_families(tmp_path):
    """`spendlake_waste_monthly_usd{rule="idle-gpu",team="other"}` summed a ranked team named `other`
    ($500) with the teams beyond service.top_n ($30): $530 in one series, and so the findings, impact
    and anomaly families; the folded rest carries `folded="true"` as the spend families' do, a
    ranked team named `other` keeps exactly its labels."""
    config = make_config(tmp_path, top_n=2)
    lake = Lake(config.lake)
    found = [Finding(id=f"f{i}", rule="idle-gpu", severity="warning", resource_id=f"i-{i}", team=team,
                     category="waste", impact_usd=Decimal(waste), monthly_waste_usd=Decimal(waste), summary="idle")
             for i, (team, waste) in enumerate([("nlp", "900"), ("other", "500"), ("speech", "20"), ("infra", "10")])]
    found += [Finding(id=f"a{i}", rule="spend-anomaly", severity="warning", resource_id=f"anomaly-{team}", team=team,
                      category="overspend", impact_usd=Decimal(impact), summary="above its expected level",
                      evidence={"currency": "USD", "service": "Amazon S3", "impact_usd": impact})
              for i, (team, impact) in enumerate([("nlp", "100"), ("other", "70"), ("speech", "4"), ("infra", "2")])]
    store_findings(lake, found)
    registry = scrape(LakeCollector(config))

    def series(name):
        return {tuple(sorted(s.labels.items())): s.value for family in registry.collect()
                for s in family.samples if s.name == name}

    idle, ranked, rest = (("rule", "idle-gpu"),), (("team", "other"),), (("folded", "true"), ("team", "other"))
    assert series("spendlake_waste_monthly_usd") == {
        (("rule", "idle-gpu"), ("team", "nlp")): 900, (*idle, *ranked): 500, (rest[0], *idle, rest[1]): 30}
    assert series("spendlake_findings") == {
        (("rule", "idle-gpu"), ("severity", "warning"), ("team", "nlp")): 1,
        (*idle, ("severity", "warning"), *ranked): 1, (rest[0], *idle, ("severity", "warning"), rest[1]): 2,
        (("rule", "spend-anomaly"), ("severity", "warning"), ("team", "nlp")): 1,
        (("rule", "spend-anomaly"), ("severity", "warning"), *ranked): 1,
        (rest[0], ("rule", "spend-anomaly"), ("severity", "warning"), rest[1]): 2}
    assert series("spendlake_finding_impact_usd")[(("category", "waste"), *idle, *ranked)] == 500
    assert series("spendlake_finding_impact_usd")[(("category", "waste"), rest[0], *idle, rest[1])] == 30
    # the anomalies' (team, service) pairs: nlp's and other's rank, speech's and infra's fold
    assert series("spendlake_anomaly_impact_usd") == {
        (("service", "Amazon S3"), ("team", "nlp")): 100, (("service", "Amazon S3"), *ranked): 70, (rest[0], ("service", "other"), rest[1]): 6}


def test_budget_used_and_forecast_ratios(tmp_path):
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}).budgets})
    commit(Lake(config.lake), "cur", [
        ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp"}),
        ("2026-11-25 05:00:00", "2026-11-25 06:00:00", "USD", "10", {"team": "nlp"}),
        ("2026-11-25 05:00:00", "2026-11-25 06:00:00", "USD", "50", {"team": "vision"}),
    ])
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    labels = {"budget": "nlp-monthly", "dimension": "team", "value": "nlp"}
    assert registry.get_sample_value("spendlake_budget_used_ratio", labels) == pytest.approx(14 / 20)
    assert registry.get_sample_value("spendlake_budget_forecast_ratio", labels) > 14 / 20
    assert registry.get_sample_value("spendlake_budget_unmatched", labels) == 0


def test_a_budget_whose_value_no_cost_line_carries_says_so(tmp_path):
    """A budget of a typo (team nlpp) exported ratio 0 like a budget with no spend yet, and its
    alerts could never fire; spendlake_budget_unmatched tells the two apart."""
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "typo", "dimension": "team", "value": "nlpp", "amount": "20"}]}).budgets})
    commit(Lake(config.lake), "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp"})])
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    labels = {"budget": "typo", "dimension": "team", "value": "nlpp"}
    assert registry.get_sample_value("spendlake_budget_used_ratio", labels) == 0
    assert registry.get_sample_value("spendlake_budget_unmatched", labels) == 1
    page = generate_latest(registry)
    assert b'spendlake_budget_unmatched{budget="typo",dimension="team",value="nlpp"} 1.0' in page
    assert_promtool_passes(page)


def test_a_budget_with_no_spend_yet_is_not_unmatched(tmp_path):
    """Budgets are set before the spend starts: a new team's budget is 0, not the typo's 1 the
    SpendlakeBudgetUnmatched alert fires on."""
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "new", "dimension": "team", "value": "genomics", "amount": "20"},
        {"name": "typo", "dimension": "team", "value": "nlpp", "amount": "20"}]}).budgets})
    commit(Lake(config.lake), "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp"})])
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    assert registry.get_sample_value("spendlake_budget_unmatched",
                                     {"budget": "new", "dimension": "team", "value": "genomics"}) == 0
    assert registry.get_sample_value("spendlake_budget_unmatched",
                                     {"budget": "typo", "dimension": "team", "value": "nlpp"}) == 1


def test_a_folded_familys_ranked_values_keep_their_labels_and_only_the_rest_says_folded():
    """add_folded gave a ranked value fewer label values than the family's names and relied on
    prometheus_client pairing them by zip, the last name dropped: its own public add_sample, each
    label named, and a count that does not match the family's names is an error, never a shift."""
    from service.serve.families import add_folded, folded_family

    family = folded_family("spendlake_team_spend_usd", "help", ["team", "window"])
    add_folded(family, ("other", ""), Decimal("1.5"), "7d")  # a team named other, ranked
    add_folded(family, ("other", "true"), 2, "7d")  # the rest beyond the top N
    assert [(sample.labels, sample.value) for sample in family.samples] == [
        ({"team": "other", "window": "7d"}, 1.5), ({"team": "other", "window": "7d", "folded": "true"}, 2.0)]
    with pytest.raises(ValueError):
        add_folded(family, ("nlp", "extra", ""), 1, "7d")


def test_a_budget_on_an_empty_lake_exports_no_ratios_but_its_no_data_gauge(tmp_path):
    """An empty lake's budget read spendlake_budget_used_ratio 0 (nothing spent), where /api/v1/budgets
    says `no data`: its ratios are left out and spendlake_budget_no_data says 1; once usage of the month is in, 0."""
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}).budgets})
    labels = {"budget": "nlp-monthly", "dimension": "team", "value": "nlp"}
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    assert registry.get_sample_value("spendlake_budget_used_ratio", labels) is None
    assert registry.get_sample_value("spendlake_budget_forecast_ratio", labels) is None
    assert registry.get_sample_value("spendlake_budget_no_data", labels) == 1
    assert_promtool_passes(generate_latest(registry))
    commit(Lake(config.lake), "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp"})])
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    assert registry.get_sample_value("spendlake_budget_used_ratio", labels) == pytest.approx(4 / 20)
    assert registry.get_sample_value("spendlake_budget_no_data", labels) == 0
