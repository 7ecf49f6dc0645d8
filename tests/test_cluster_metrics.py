"""Metrics of shared GPU clusters, hand-computed: one p5.48xlarge node of cluster `gpu-west`
($98.32 an hour, 8 GPUs) billed for the last 8 hours, and three jobs on it:
A 4 GPUs all 8 hours (32 GPU-hours: $393.28), B 2 GPUs the last 4 hours (8: $98.32),
C 1 GPU the last 2 hours (2: $24.58); nobody held 22 of its 64 GPU-hours: idle $270.38,
a ratio of 22/64 = 0.34375."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from prometheus_client import CollectorRegistry
from stackkit import CLUSTERS, iso, write_demo_exports

from service.core.config import parse_config
from service.ingest.billing import ingest
from service.ingest.inventory import run_inventory
from service.serve.metrics import LakeCollector

pytestmark = pytest.mark.slow  # ingests an export and a jobs file

TOP = datetime(2026, 11, 20, 12, tzinfo=timezone.utc)  # the export's last hour ends here


def scrape(config) -> dict[str, dict[tuple, float]]:
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, clock=(TOP + timedelta(days=3)).timestamp))
    found: dict[str, dict[tuple, float]] = {}
    for family in registry.collect():
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster-metrics")
    sections = write_demo_exports(folder / "exports", TOP)
    at = {hours: iso(TOP - timedelta(hours=hours)) for hours in (8, 4, 2)}
    (folder / "exports" / "jobs.csv").write_text(
        "job_id,start_time,end_time,gpus,nodes,cluster,state,run_id\n"
        f"1,{at[8]},{iso(TOP)},4,gpu-001,gpu-west,COMPLETED,run-a\n"
        f"2,{at[4]},,2,gpu-001,gpu-west,RUNNING,run-b\n"
        f"3,{at[2]},{iso(TOP)},1,gpu-001,gpu-west,FAILED,run-c\n")
    config = parse_config({"lake": str(folder / "lake"), "service": {"top_n": 2}, "attribution": CLUSTERS,
                           **sections})
    assert not ingest(config).failed
    assert not any(outcome.failed for outcome in run_inventory(config, now=TOP))
    return config


def test_run_cost_keeps_the_top_runs_and_folds_the_rest_into_other(config):
    runs = scrape(config)["spendlake_run_cost_usd"]
    for window in ("24h", "7d"):
        assert {dict(k)["run"]: v for k, v in runs.items() if dict(k)["window"] == window} == pytest.approx(
            {"run-a": 393.28, "run-b": 98.32, "other": 24.58}), window


def lake_with_runs(folder, runs: tuple[str, str, str], top_n: int):
    """The module's lake with its three jobs' runs named `runs` (A's, B's, C's) and `top_n`."""
    sections = write_demo_exports(folder / "exports", TOP)
    at = {hours: iso(TOP - timedelta(hours=hours)) for hours in (8, 4, 2)}
    a, b, c = runs
    (folder / "exports" / "jobs.csv").write_text(
        "job_id,start_time,end_time,gpus,nodes,cluster,state,run_id\n"
        f"1,{at[8]},{iso(TOP)},4,gpu-001,gpu-west,COMPLETED,{a}\n"
        f"2,{at[4]},,2,gpu-001,gpu-west,RUNNING,{b}\n"
        f"3,{at[2]},{iso(TOP)},1,gpu-001,gpu-west,FAILED,{c}\n")
    config = parse_config({"lake": str(folder / "lake"), "service": {"top_n": top_n}, "attribution": CLUSTERS,
                           **sections})
    assert not ingest(config).failed
    assert not any(outcome.failed for outcome in run_inventory(config, now=TOP))
    return config


def test_a_run_named_other_is_told_from_the_runs_folded_into_other_by_the_folded_label(tmp_path):
    """`spendlake_run_cost_usd{run="other"}` summed a run of that name with the runs beyond the
    top N: the folded rest carries `folded="true"`, a run named `other` its own series (ranked) or
    its share of the rest (not ranked); named runs keep exactly {run, window}."""
    ranked = scrape(lake_with_runs(tmp_path / "ranked", ("other", "run-b", "run-c"), top_n=1))["spendlake_run_cost_usd"]
    assert {k: v for k, v in ranked.items() if dict(k)["window"] == "24h"} == pytest.approx({
        (("run", "other"), ("window", "24h")): 393.28,
        (("folded", "true"), ("run", "other"), ("window", "24h")): 98.32 + 24.58})
    folded = scrape(lake_with_runs(tmp_path / "folded", ("run-a", "run-b", "other"), top_n=2))["spendlake_run_cost_usd"]
    assert {k: v for k, v in folded.items() if dict(k)["window"] == "24h"} == pytest.approx({
        (("run", "run-a"), ("window", "24h")): 393.28, (("run", "run-b"), ("window", "24h")): 98.32,
        (("folded", "true"), ("run", "other"), ("window", "24h")): 24.58})


def test_cluster_idle_ratio_is_the_share_no_job_held(config):
    idle = scrape(config)["spendlake_cluster_idle_ratio"]
    assert idle == pytest.approx({(("cluster", "gpu-west"), ("team", ""), ("window", w)): 22 / 64
                                  for w in ("24h", "7d", "mtd")})


def test_an_owned_clusters_idle_ratio_carries_its_team_for_the_idle_alert(config):
    """SpendlakeClusterIdleHigh routes on `team`: without it every cluster's idle alert went to platform."""
    clusters = config.attribution.clusters.model_copy(update={"owners": {"gpu-west": "nlp", "gpu-east": "vision"}})
    owned = config.model_copy(update={"attribution": config.attribution.model_copy(update={"clusters": clusters})})
    idle = scrape(owned)["spendlake_cluster_idle_ratio"]
    assert set(idle) == {(("cluster", "gpu-west"), ("team", "nlp"), ("window", w)) for w in ("24h", "7d", "mtd")}


def test_a_clusters_owner_is_found_in_any_case_as_the_cluster_tag_is_compared(config):
    """`owners: {GPU-West: nlp}` for the instances tagged `gpu-west`: one cluster, as attribution
    (`--where cluster=GPU-West`) counts it; the alert went to platform."""
    clusters = config.attribution.clusters.model_copy(update={"owners": {" GPU-West": "nlp"}})
    owned = config.model_copy(update={"attribution": config.attribution.model_copy(update={"clusters": clusters})})
    idle = scrape(owned)["spendlake_cluster_idle_ratio"]
    assert {dict(labels)["team"] for labels in idle} == {"nlp"}


def test_a_cluster_owner_must_name_a_team():
    from service.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"attribution\.clusters\.owners.*must not be empty"):
        parse_config({"lake": "/data/lake", "attribution": {"clusters": {"owners": {"gpu-west": " "}}}})


def test_two_owners_of_one_cluster_named_in_other_cases_are_refused():
    from service.core.errors import ConfigError

    owners = {"GPU-West": "nlp", "gpu-west ": "vision"}  # one would have won silently
    with pytest.raises(ConfigError, match=r"attribution\.clusters\.owners.*'GPU-West' and 'gpu-west ' are one cluster"):
        parse_config({"lake": "/data/lake", "attribution": {"clusters": {"owners": owners}}})


def test_without_clusters_the_families_are_empty(config):
    plain = config.model_copy(update={"attribution": parse_config({"lake": str(config.lake)}).attribution})
    found = scrape(plain)
    assert "spendlake_run_cost_usd" not in found and "spendlake_cluster_idle_ratio" not in found


def test_61_a_scrape_reads_the_stored_cluster_tops_without_allocating(config, monkeypatch):
    """Ingest stored the tops of this lake state (the job snapshot included); a scrape reads
    them without running the allocation, and they equal the ones computed on the fly."""
    from service.attribution import cluster_tops, metrics_anchor
    from service.attribution.tops import compute_tops, stored_tops
    from service.core.lake import Lake

    lake = Lake.of(config)
    end = metrics_anchor(lake, TOP)
    stored = [t for t in stored_tops(lake, config, lake.snapshot(), end) or [] if t.family in ("run", "idle")]
    assert stored == [t for t in compute_tops(lake, config, end, ("clusters",)) if t.family != "anchor"]
    assert {t.family for t in stored} == {"run", "idle"}
    before = scrape(config)

    def no_allocation(*args, **kwargs):
        raise AssertionError("the scrape ran the cluster allocation instead of reading the stored tops")

    monkeypatch.setattr(cluster_tops, "placed_totals", no_allocation)
    after = scrape(config)
    assert after["spendlake_lake_readable"] == {(): 1.0}
    for family in ("spendlake_run_cost_usd", "spendlake_cluster_idle_ratio"):
        assert after[family] == before[family]


def test_the_tops_per_run_and_cluster_equal_the_per_job_usage_summed(config):
    """The tops sum the parts by run and cluster in SQL (placement kinds, not one row per
    job); they equal what `cluster_usage` gives per job, summed by run and cluster."""
    from service.attribution.clusters import placed_totals, usage_in
    from service.attribution.compute import RollupSession
    from service.attribution.metric_top import windows
    from service.core.lake import Lake

    lake = Lake.of(config)
    session = RollupSession(lake, config.attribution)
    try:
        for name, window in windows(TOP).items():
            usage = usage_in(session, config.attribution, window, "billed")
            totals = placed_totals(session, config.attribution, window, "billed")
            assert totals.runs == {key: cost for key, (cost, _) in usage.runs().items()}, name
            assert totals.clusters == usage.clusters, name
            assert totals.runs[("run-a", "USD")] == Decimal("393.28")
    finally:
        session.con.close()

