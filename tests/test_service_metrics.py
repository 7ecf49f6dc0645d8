"""The scrape-time collector: freshness per source, caching per lake change, a valid page."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import require_binary
from prometheus_client import CollectorRegistry, generate_latest
from servicekit import MemoryConnector, commit, make_config

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

ROWS = [("2026-11-20 00:00:00", "2026-11-20 01:00:00", "USD", "3.5", {"team": "nlp"}),
        ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "1.25", {"team": "vision"})]


@pytest.fixture
def memory_source(monkeypatch):
    monkeypatch.setitem(CONNECTORS.added, "focus", MemoryConnector)
    monkeypatch.setattr(MemoryConnector, "ROWS", list(ROWS))
    return MemoryConnector


def scrape(collector: LakeCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


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


NOW = datetime(2026, 11, 28, 0, 0, tzinfo=timezone.utc)


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


def test_61_the_service_scrape_computes_no_tops_while_a_job_runs(tmp_path, monkeypatch):
    """The service hands its jobs' turn to the collector: while the daily report runs (it may
    roll a month up), a scrape of a lake with no stored tops does not compute them beside it."""
    import threading
    import urllib.request

    from service.attribution import spend_tops
    from service.serve.scheduler import Tasks
    from service.serve.service import Service

    config = make_config(tmp_path)
    commit(Lake(config.lake), "cur", ROWS)  # no rollups or tops stored

    def no_lake_sums(*args, **kwargs):
        raise AssertionError("the scrape summed the lake beside a running job")

    monkeypatch.setattr(spend_tops, "WindowSums", no_lake_sums)
    reporting, release = threading.Event(), threading.Event()

    def daily(_day):
        reporting.set()
        release.wait(20)

    service = Service(config, tasks=Tasks(ingest=lambda: None, rules=None, daily=daily))
    urls: list[str] = []
    thread = threading.Thread(target=service.run, args=(lambda line: urls.extend(line.split()[2:3]),), daemon=True)
    thread.start()
    try:
        assert reporting.wait(20)  # the make-up daily run holds the turn
        with urllib.request.urlopen(f"{urls[0]}/metrics", timeout=20) as response:
            page = response.read().decode()
    finally:
        release.set()
        service.stop()
        thread.join(20)
    assert "spendlake_metric_tops_current 0.0" in page
    assert "spendlake_lake_readable 1.0" in page


def test_a_damaged_partition_keeps_the_cost_families_of_the_last_good_read_marked(tmp_path):
    """While a cost partition was missing, /metrics showed no spend, budget, finding, cluster or
    commitment series: every cost alert reading them resolved exactly while the lake was damaged.
    The families of the last scrape that read them stay, each group marked, until it reads again."""
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}).budgets})
    lake = Lake(config.lake)
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "24", {"team": "nlp"})])
    store_findings(lake, [Finding(id="f1", rule="idle-gpu", severity="warning", resource_id="i-1", team="nlp",
                                  category="waste", impact_usd=Decimal(500), monthly_waste_usd=Decimal(500),
                                  summary="idle")])
    now = [NOW.timestamp()]
    registry = scrape(LakeCollector(config, clock=lambda: now[0]))
    series = {"spendlake_budget_used_ratio": {"budget": "nlp-monthly", "dimension": "team", "value": "nlp"},
              "spendlake_spend_usd": {"team": "nlp", "project": "unallocated", "window": "mtd"},
              "spendlake_waste_monthly_usd": {"rule": "idle-gpu", "team": "nlp"}}

    def values():
        return [registry.get_sample_value(name, labels) for name, labels in series.items()]

    before = values()
    assert before == [1.2, 24, 500]
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "spend"}) == 0

    file = next(lake.table_dir("costs").glob("*/*/data.parquet"))
    moved = file.rename(tmp_path / "aside.parquet")
    now[0] += 301  # a scrape after the cached page aged
    assert registry.get_sample_value("spendlake_lake_partitions_damaged", {"state": "missing"}) == 1
    assert registry.get_sample_value("spendlake_lake_readable") == 0
    assert values() == before
    for group in ("spend", "budgets", "commitments"):  # no clusters configured: read nothing
        assert registry.get_sample_value("spendlake_metrics_last_good", {"group": group}) == 1
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "findings"}) == 0  # read no partition
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "integrity"}) is None

    moved.rename(file)
    assert registry.get_sample_value("spendlake_lake_readable") == 1
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "spend"}) == 0
    assert values() == before


def test_budgets_are_not_summed_beside_a_writer_the_last_read_ones_are_shown(tmp_path, monkeypatch):
    """A scrape during an ingest summed each budget's month from the lake state the writer had
    just committed, whose rollups were not stored yet: from the raw lines, beside the writer
    (15 s on a 150k-line month at load, where the other families read stored tops). Meanwhile
    the last read budgets are shown, marked; once the writer lets go they are read again."""
    from service.findings import budgets

    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}).budgets})
    lake = Lake(config.lake)
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp"})])
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    used = ("spendlake_budget_used_ratio", {"budget": "nlp-monthly", "dimension": "team", "value": "nlp"})
    assert registry.get_sample_value(*used) == pytest.approx(0.2)
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "10", {"team": "nlp"})],
           delivery_id="d2")

    def no_budget_sums(*args, **kwargs):
        raise AssertionError("the scrape summed the budgets beside the writer")

    with monkeypatch.context() as patch, lake.lock():
        patch.setattr(budgets, "budget_statuses", no_budget_sums)
        assert registry.get_sample_value(*used) == pytest.approx(0.2)
        assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "budgets"}) == 1
        assert registry.get_sample_value("spendlake_lake_readable") == 1
    assert registry.get_sample_value(*used) == pytest.approx(0.5)
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "budgets"}) == 0


def test_a_service_started_on_a_damaged_lake_shows_the_stored_findings(tmp_path):
    """The stored findings read no cost partition, yet a service started while one was missing
    showed none (idle GPU, failed re-runs and anomaly alerts resolved); `spendlake findings`
    still refuses on the damaged lake, as every query does."""
    from click.testing import CliRunner

    from service.cli.main import cli

    config = make_config(tmp_path)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    store_findings(lake, [Finding(id="f1", rule="idle-gpu", severity="warning", resource_id="i-1", team="nlp",
                                  category="waste", impact_usd=Decimal(500), monthly_waste_usd=Decimal(500),
                                  summary="idle")])
    next(lake.table_dir("costs").glob("*/*/data.parquet")).unlink()
    registry = scrape(LakeCollector(config))
    assert registry.get_sample_value("spendlake_waste_monthly_usd", {"rule": "idle-gpu", "team": "nlp"}) == 500
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "findings"}) == 0  # read now
    assert registry.get_sample_value("spendlake_lake_readable") == 0
    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {config.lake}\nsources:\n- {{name: cur, kind: focus, location: {tmp_path / 'export'}}}\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "findings"])
    assert result.exit_code == 3 and "is missing" in result.output, result.output


NLP_BUDGET = {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}


def nlp_over_budget(tmp_path):
    """A config with nlp's $20 monthly budget and a lake where nlp spent $24 in November (1.2 used),
    and the sample of that budget's used ratio."""
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [NLP_BUDGET]}).budgets})
    lake = Lake(config.lake)
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "24", {"team": "nlp"})])
    return config, lake, ("spendlake_budget_used_ratio", {"budget": "nlp-monthly", "dimension": "team", "value": "nlp"})


def test_a_service_restarted_on_a_damaged_lake_shows_the_budgets_it_last_stored(tmp_path, caplog):
    """Budgets have no stored tops: a service (re)started while a cost partition was missing showed
    no budget series until it was back, and the budget alerts resolved. The service stores the
    budget families a scrape read (`_state/metrics_last_good.json`, from its loop, not part of the
    page's cache key) and a new one shows them, marked, while it cannot read them; only for the
    budgets stored."""
    config, lake, used = nlp_over_budget(tmp_path)
    collector = LakeCollector(config, clock=NOW.timestamp)
    registry = scrape(collector)
    assert registry.get_sample_value(*used) == 1.2
    stored = lake.root / "_state" / "metrics_last_good.json"
    assert not stored.exists()  # a scrape writes nothing: the service's loop stores them
    key = collector.fingerprint()
    collector.keep_last_good()
    assert stored.exists() and collector.fingerprint() == key  # storing them is no lake change
    written = stored.stat().st_mtime_ns
    collector.keep_last_good()
    assert registry.get_sample_value(*used) == 1.2
    collector.keep_last_good()
    assert stored.stat().st_mtime_ns == written  # the same families: not written again

    next(lake.table_dir("costs").glob("*/*/data.parquet")).rename(tmp_path / "aside.parquet")
    restarted = scrape(LakeCollector(config, clock=NOW.timestamp))
    assert restarted.get_sample_value("spendlake_lake_readable") == 0
    assert restarted.get_sample_value(*used) == 1.2
    assert restarted.get_sample_value("spendlake_metrics_last_good", {"group": "budgets"}) == 1

    other = config.model_copy(update={"budgets": parse_config({"budgets": [{**NLP_BUDGET, "amount": "40"}]}).budgets})
    assert scrape(LakeCollector(other, clock=NOW.timestamp)).get_sample_value(*used) is None  # not those stored

    (lake.root / "_state" / "metrics_last_good.json").write_text('{"budgets": {"owner": 1}}')
    edited = scrape(LakeCollector(config, clock=NOW.timestamp))
    assert edited.get_sample_value(*used) is None
    assert edited.get_sample_value("spendlake_lake_readable") == 0
    assert "the stored last good budgets are not shown: " in caplog.text


def removed_while_listed(monkeypatch, folder) -> None:
    """`folder` removed by a writer just after its parent was listed, before it is listed itself, the
    next time a scrape lists that parent (pathlib's glob lists each folder with os.scandir, as it reads)."""
    real = os.scandir

    def scandir(path=None):
        with real(path) as found:
            entries = list(found)
        if isinstance(path, (str, os.PathLike)) and Path(path) == folder.parent and folder.exists():
            shutil.rmtree(folder)
        return contextlib.nullcontext(iter(entries))

    monkeypatch.setattr(os, "scandir", scandir)


def computed_pages(monkeypatch, collector: LakeCollector) -> list[None]:
    """One item per page the collector computes from here on."""
    computed, compute = [], collector.compute
    monkeypatch.setattr(collector, "compute", lambda: computed.append(None) or compute())
    return computed


def test_a_scrape_while_a_writer_empties_the_staging_area_answers(tmp_path, monkeypatch):
    """/metrics answered 500 while serve's start jobs ran (the CI of a717359): the page's cache key
    listed every folder of the lake, `_staging` too, which each rollup and ingest run removes and makes
    again (Lake.clean_staging); removed between the lake's listing and its own, pathlib's glob raised
    FileNotFoundError out of the collector. The key reads the tables' folders only: work in progress
    there is no change of the lake, and the page is kept."""
    config, lake, used = nlp_over_budget(tmp_path)
    lake.clean_staging()  # as a writer leaves it
    collector = LakeCollector(config, clock=NOW.timestamp)
    computed = computed_pages(monkeypatch, collector)
    registry = scrape(collector)
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 1
    removed_while_listed(monkeypatch, lake.staging)
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 1
    assert registry.get_sample_value("spendlake_lake_readable") == 1


def test_a_scrape_while_a_source_is_forgotten_answers_and_keeps_no_page(tmp_path, monkeypatch):
    """A table's folder removed while the cache key lists it (`spendlake forget` removing a source's
    folders) raised out of the collector too: the scrape computes the page, and keeps it for no key,
    so the next scrape reads the lake as it is then."""
    config, lake, used = nlp_over_budget(tmp_path)
    forgotten = lake.table_dir("costs") / "source=old"
    (forgotten / "billing_period=2026-10").mkdir(parents=True)  # what `forget` is removing
    collector = LakeCollector(config, clock=NOW.timestamp)
    computed = computed_pages(monkeypatch, collector)
    registry = scrape(collector)
    removed_while_listed(monkeypatch, forgotten)
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 1
    assert not forgotten.exists()
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 2  # not the page kept for no key
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 2  # the lake unchanged since: kept


def test_storing_the_last_good_budgets_never_waits_for_a_scrape(tmp_path):
    """The service's loop stores them between polls for SIGTERM and SIGHUP: waiting for a scrape
    computing the page (seconds at scale) would hold the signals that long."""
    import threading

    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [
        {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}]}).budgets})
    lake = Lake(config.lake)
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "24", {"team": "nlp"})])
    collector = LakeCollector(config, clock=NOW.timestamp)
    scrape(collector).get_sample_value("spendlake_lake_readable")
    stored = lake.root / "_state" / "metrics_last_good.json"
    with collector._lock:  # a scrape computing
        done = threading.Thread(target=collector.keep_last_good)
        done.start()
        done.join(5)
        assert not done.is_alive() and not stored.exists()
    collector.keep_last_good()
    assert stored.exists()


def test_last_months_budgets_are_not_shown_as_last_good_once_the_data_reaches_a_new_month(tmp_path):
    """The budgets stored (and held) in November were shown, marked last good, by a service restarted
    in December on a damaged lake, while December's month to date is what the data's end asks: the
    alert for November's exceeded budget kept firing into a month that had spent $1 of it. Last good
    budgets are of the month they summed (the data's end's): in another month none are shown, by a
    restart or by the running service."""
    config, lake, used = nlp_over_budget(tmp_path)
    running = LakeCollector(config, clock=NOW.timestamp)
    registry = scrape(running)
    assert registry.get_sample_value(*used) == 1.2
    running.keep_last_good()

    december = datetime(2026, 12, 2, tzinfo=timezone.utc)
    running.clock = december.timestamp
    commit(lake, "cur", [("2026-12-01 05:00:00", "2026-12-01 06:00:00", "USD", "1", {"team": "nlp"})], "d2")
    november = next(lake.table_dir("costs").glob("*/billing_period=2026-11*/data.parquet"))
    november.rename(tmp_path / "aside.parquet")
    for shown in (registry, scrape(LakeCollector(config, clock=december.timestamp))):
        assert shown.get_sample_value("spendlake_lake_readable") == 0
        assert shown.get_sample_value(*used) is None
        assert shown.get_sample_value("spendlake_metrics_last_good", {"group": "budgets"}) is None

    (tmp_path / "aside.parquet").rename(november)  # read again: December's month to date, and stored as such
    assert registry.get_sample_value(*used) == pytest.approx(0.05)
    running.keep_last_good()
    november.rename(tmp_path / "aside.parquet")
    restarted = scrape(LakeCollector(config, clock=december.timestamp))
    assert restarted.get_sample_value(*used) == pytest.approx(0.05)
    assert restarted.get_sample_value("spendlake_metrics_last_good", {"group": "budgets"}) == 1


def test_budgets_summed_under_another_attribution_are_not_shown_as_last_good(tmp_path):
    """A budget sums its team's spend as attribution places it: stored under a config reading the
    team from tag `team`, they were shown, marked last good, by a service restarted (or reloaded)
    on the damaged lake with attribution reading it from `owner`, where team nlp spends nothing;
    the stored budgets are of the budgets and the attribution they were summed under."""
    from service.serve.metrics import LastGood, kept_by_reload

    budget = {"name": "nlp-monthly", "dimension": "team", "value": "nlp", "amount": "20"}
    config = make_config(tmp_path)
    config = config.model_copy(update={"budgets": parse_config({"budgets": [budget]}).budgets})
    other = config.model_copy(update={"attribution": parse_config({"attribution": {"dimensions": {
        "team": {"tags": ["owner"]}}}}).attribution})
    lake = Lake(config.lake)
    commit(lake, "cur", [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "24", {"team": "nlp"})])
    used = ("spendlake_budget_used_ratio", {"budget": "nlp-monthly", "dimension": "team", "value": "nlp"})
    collector = LakeCollector(config, clock=NOW.timestamp)
    assert scrape(collector).get_sample_value(*used) == 1.2
    collector.keep_last_good()
    assert scrape(LakeCollector(other, clock=NOW.timestamp)).get_sample_value(*used) == 0  # read: none of it

    next(lake.table_dir("costs").glob("*/*/data.parquet")).rename(tmp_path / "aside.parquet")
    assert scrape(LakeCollector(config, clock=NOW.timestamp)).get_sample_value(*used) == 1.2  # the same config
    assert scrape(LakeCollector(other, clock=NOW.timestamp)).get_sample_value(*used) is None
    assert "budgets" not in kept_by_reload(LastGood(collector._last_good.groups, collector._last_good.months),
                                           config, other).groups


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
