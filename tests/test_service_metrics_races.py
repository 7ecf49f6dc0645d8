"""What a scrape shows beside a writer, a damaged lake or a folder removed while it lists: no tops
computed beside a running job, the last good families (and the stored last good budgets) marked
while the lake cannot be read, and an answer, never an error, when a writer removes what it lists."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest
from servicekit import NOW, ROWS, commit, make_config, removed_while_listed, scrape

from rules.base import Finding
from service.core.config import parse_config
from service.attribution.rollup_build import build_rollups
from service.core.lake import Lake
from service.findings.store import store_findings
from service.serve.metrics import LakeCollector


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


def test_a_lake_folder_gone_under_the_service_keeps_the_findings_last_read_marked_as_the_other_cost_groups(tmp_path):
    """The lake folder moved away under `spendlake serve`: spend and budgets kept their last values,
    marked, but the findings read as none (the findings table was simply not there), so the findings
    families went empty and their group read 0, "read now". They are kept and marked like the others."""
    from service.core.pinned_root import pin_root

    config, lake, used = nlp_over_budget(tmp_path)
    store_findings(lake, [Finding(id="f1", rule="idle-gpu", severity="warning", resource_id="i-1", team="nlp",
                                  category="waste", impact_usd=Decimal(500), monthly_waste_usd=Decimal(500),
                                  summary="idle")])
    pin_root(lake.root)  # as the service does at start
    registry = scrape(LakeCollector(config, clock=NOW.timestamp))
    families = [("spendlake_findings", {"rule": "idle-gpu", "severity": "warning", "team": "nlp"}),
                ("spendlake_waste_monthly_usd", {"rule": "idle-gpu", "team": "nlp"}),
                ("spendlake_finding_impact_usd", {"rule": "idle-gpu", "category": "waste", "team": "nlp"}), used]
    before = [registry.get_sample_value(*family) for family in families]
    assert before == [1, 500, 500, 1.2]

    lake.root.rename(tmp_path / "lake.moved")
    assert registry.get_sample_value("spendlake_lake_readable") == 0
    assert [registry.get_sample_value(*family) for family in families] == before
    for group in ("spend", "findings", "budgets"):
        assert registry.get_sample_value("spendlake_metrics_last_good", {"group": group}) == 1, group

    (tmp_path / "lake.moved").rename(lake.root)
    assert registry.get_sample_value("spendlake_lake_readable") == 1
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "findings"}) == 0


def test_a_lake_folder_gone_between_a_scrape_and_the_services_store_of_the_budgets_is_logged_not_raised(
        tmp_path, caplog):
    """A scrape read the budgets anew, then the lake folder was moved before the service's loop stored them: the
    state write's DataError (the pinned folder is gone) escaped keep_last_good, which catches a full disk only,
    and ended `spendlake serve` with a traceback, where the scrapes would have kept the budgets' last values."""
    from service.core.pinned_root import pin_root

    config, lake, used = nlp_over_budget(tmp_path)
    pin_root(lake.root)  # as the service does at start
    collector = LakeCollector(config, clock=NOW.timestamp)
    registry = scrape(collector)
    assert registry.get_sample_value(*used) == 1.2
    lake.root.rename(tmp_path / "lake.moved")
    collector.keep_last_good(wait=True)  # the loop's store, as a stop makes it
    assert "cannot store the last good budgets" in caplog.text and "the lake folder is gone" in caplog.text
    assert registry.get_sample_value(*used) == 1.2  # the scrape keeps them, marked
    (tmp_path / "lake.moved").rename(lake.root)
    assert registry.get_sample_value("spendlake_lake_readable") == 1  # read anew once the folder is back
    collector.keep_last_good(wait=True)  # and stored
    assert (lake.root / "_state" / "metrics_last_good.json").exists()


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


def test_a_scrape_while_a_source_is_forgotten_answers_and_keys_the_lake_after_it(tmp_path, monkeypatch):
    """A table's folder removed while the cache key lists it (`spendlake forget` removing a source's
    folders) raised out of the collector too. The key lists the lake again, as every reader does
    (files.listed): it is the lake after the folder went, which the page computed next reads, so the
    next scrape, the lake unchanged since, keeps that page; a file the writer removes after changes it."""
    config, lake, used = nlp_over_budget(tmp_path)
    forgotten = lake.table_dir("costs") / "source=old"
    (forgotten / "billing_period=2026-10").mkdir(parents=True)  # what `forget` is removing
    left = lake.table_dir("costs") / "source=older" / "billing_period=2026-09" / "data.parquet"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"")  # what it removes next (no ledger entry: no reader reads it)
    collector = LakeCollector(config, clock=NOW.timestamp)
    computed = computed_pages(monkeypatch, collector)
    registry = scrape(collector)
    removed_while_listed(monkeypatch, forgotten)
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 1
    assert not forgotten.exists()
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 1  # the lake unchanged since: kept
    left.unlink()
    assert registry.get_sample_value(*used) == 1.2 and len(computed) == 2


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


def test_a_derived_file_written_in_place_changes_the_scrapes_cache_key(tmp_path):
    """break46: the key listed the partitions' `data.parquet` only, so a rollup or metric tops
    file written in place showed in the integrity family only once the cached page expired (5 min)."""
    config = make_config(tmp_path)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    build_rollups(lake, config.attribution)
    collector = LakeCollector(config, clock=NOW.timestamp)
    key = collector.fingerprint()
    [rollup, *_] = sorted(lake.table_dir("attribution_rollup").glob("source=*/*=*/*.parquet"))
    rollup.write_bytes(rollup.read_bytes())  # written again in place: same size, another time
    assert collector.fingerprint() != key
