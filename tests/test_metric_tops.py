"""RELIABILITY 61: a scrape reads the metric tops ingest stored for the lake's state (a small
file), and they are the attribution's own numbers, folded as the scrape folds them."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import defaultdict
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
import yaml
from prometheus_client import CollectorRegistry
from servicekit import commit, make_config, removed_while_listed

from service.attribution import attribute, metrics_anchor
from service.attribution import commitment_tops, spend_tops
from service.attribution import tops as tops_module
from service.core.config import parse_config
from service.core.errors import SpendlakeError
from service.core import lake as lake_module
from service.core import snapshot as snapshot_module
from service.core.lake import Lake
from service.core.units import fold_top
from service.ingest.rollups import rollup
from service.serve.metrics import LakeCollector
from tests.test_commitments import NOW as COMMITMENTS_NOW
from tests.test_commitments import config_file  # noqa: F401 (a fixture)

NOW = datetime(2026, 11, 28, 0, 0, tzinfo=timezone.utc)
FAMILIES = ("spendlake_spend_usd", "spendlake_experiment_spend_usd", "spendlake_unallocated_ratio")
ROWS = [
    ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp", "project": "llm", "experiment": "a"}),
    ("2026-11-27 06:00:00", "2026-11-27 07:00:00", "USD", "4", {"team": "NLP", "project": "llm", "experiment": "b"}),
    ("2026-11-25 05:00:00", "2026-11-25 06:00:00", "USD", "10", {"team": "nlp", "project": "rl", "experiment": "c"}),
    ("2026-11-19 12:00:00", "2026-11-20 12:00:00", "USD", "48", {"team": "vision", "experiment": "d"}),  # cut by 7d
    ("2026-11-26 00:00:00", "2026-11-27 00:00:00", "USD", "7.3", {"team": "speech", "project": "asr"}),  # cut by 24h
    ("2026-11-02 05:00:00", "2026-11-02 06:00:00", "USD", "100", {"team": "vision", "project": "vit"}),
    ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "USD", "1", {}),
    ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "EUR", "1000", {"team": "nlp"}),  # never in _usd
    ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "USD", "3", {"team": "infra", "service": "support"}),
]


def config_for(tmp_path, shared: bool):
    config = make_config(tmp_path, top_n=2)
    if shared:  # shared costs split over the teams: the tops take the whole attribution's path
        attribution = parse_config({"attribution": {"shared": [
            {"match": {"service": "Amazon Elastic Compute Cloud"}, "split": "proportional", "by": "team"}]}}).attribution
        config = config.model_copy(update={"attribution": attribution})
    return config


def samples(config, turn=None) -> dict[tuple, float]:
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, clock=NOW.timestamp, turn=turn))
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in registry.collect() for s in family.samples if s.name in FAMILIES}
    assert registry.get_sample_value("spendlake_lake_readable") == 1
    return found


def expected(config) -> dict[tuple, float]:
    """The scrape's numbers as it computed them before the tops: one whole attribution per
    window, folded in Python."""
    lake = Lake.of(config)
    found = {}
    defaults = {d: config.attribution.dimensions[d].default for d in spend_tops.DIMENSIONS}
    for name, window in spend_tops.windows(metrics_anchor(lake, NOW)).items():
        pairs, experiments, nowhere = defaultdict(Decimal), defaultdict(Decimal), defaultdict(Decimal)
        total = Decimal(0)
        for row in attribute(lake, config, window, by=spend_tops.DIMENSIONS).rows:
            if row.currency != "USD":
                continue
            pairs[(row.values["team"], row.values["project"])] += row.cost
            experiments[(row.values["experiment"],)] += row.cost
            total += row.cost
            for dim in spend_tops.DIMENSIONS:
                nowhere[dim] += row.cost if row.values[dim].lower() == defaults[dim] else 0
        for (team, project, folded), cost in fold_top(pairs, config.service.top_n).items():
            found[("spendlake_spend_usd", (*folded_label(folded), ("project", project), ("team", team),
                                           ("window", name)))] = float(cost)
        for (experiment, folded), cost in fold_top(experiments, config.service.top_n).items():
            found[("spendlake_experiment_spend_usd", (("experiment", experiment), *folded_label(folded),
                                                      ("window", name)))] = float(cost)
        for dim in spend_tops.DIMENSIONS:
            found[("spendlake_unallocated_ratio", (("dimension", dim), ("window", name)))] = float(nowhere[dim] / total)
    return found


def folded_label(folded: str) -> tuple:
    """The folded rest's label; a ranked value has none."""
    return (("folded", folded),) if folded else ()


@pytest.mark.parametrize("shared", [False, True], ids=["direct", "shared-split"])
def test_61_stored_tops_are_the_attributions_numbers_folded(tmp_path, shared):
    config = config_for(tmp_path, shared)
    commit(Lake(config.lake), "cur", ROWS)
    computed = samples(config)  # nothing stored yet: computed for the scrape
    rollup(config)
    [stored_file] = (config.lake / tops_module.TOPS_TABLE).glob("source=all/config=*/*.parquet")
    stored = samples(config)
    assert stored == computed
    want = expected(config)
    assert stored.keys() == want.keys()
    for key, value in want.items():
        assert stored[key] == pytest.approx(value, abs=1e-9), key
    assert ("spendlake_spend_usd", (("folded", "true"), ("project", "other"), ("team", "other"), ("window", "mtd"))) \
        in stored
    assert stored_file.stat().st_size < 20_000


# Stores the tops of the lake of the config argv[1] in a fresh interpreter; prints whether pandas got imported.
STORE_TOPS = """
import sys
from service.attribution import build_tops
from service.core.config import load_config
from service.core.lake import Lake
config = load_config(sys.argv[1])
lake = Lake.of(config)
with lake.lock("ingest"):
    assert build_tops(lake, config)
print("pandas" in sys.modules)
"""


def test_61_storing_the_tops_imports_no_pandas(tmp_path):
    """The spend tops add the groups a window's edge cuts (here the 24h and 7d windows') to
    DuckDB; as an Arrow table that made pyarrow import pandas, 0.2 CPU s (0.4 s) of each
    ingest's rollup phase for one row (bench/README.md, the rollup phase)."""
    config = config_for(tmp_path, shared=False)
    commit(Lake(config.lake), "cur", ROWS)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(config.lake), "sources": [{"name": "cur", "kind": "focus",
                                                                       "location": str(tmp_path / "export")}]}))
    done = subprocess.run([sys.executable, "-c", STORE_TOPS, str(path)], cwd=Path(__file__).parent.parent,
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]


def memory_limit(con) -> str:
    return con.cursor().execute("SELECT current_setting('memory_limit')").fetchone()[0]


def test_61_the_rollup_build_spills_beyond_the_writer_memory_limit(tmp_path, monkeypatch):
    """A month of a million experiments rolls up into 9M groups: unbounded, 2.7 GB inside
    the service's ingest job; under the limit it spills (bench/metrics_cardinality_bench.py)."""
    config = config_for(tmp_path, shared=False)
    commit(Lake(config.lake), "cur", ROWS)
    limits, commit_snapshot = [], Lake.commit_snapshot

    def spy(self, con, relation, **where):
        if where["table"] == "attribution_rollup":
            limits.append(memory_limit(con))
        return commit_snapshot(self, con, relation, **where)

    monkeypatch.setattr(Lake, "commit_snapshot", spy)
    rollup(config)
    reference = duckdb.connect()
    reference.execute("SET memory_limit = ?", [lake_module.WRITER_MEMORY_LIMIT])
    assert limits == [memory_limit(reference)]


def test_61_a_reader_rolling_periods_up_in_memory_spills_beyond_a_readers_memory_limit(tmp_path, monkeypatch):
    """A scrape before the tops are stored, or a report before the rollups are, rolls the
    period up in memory: 2.6 GB for a month of 1M experiments, unbounded; then the writer's
    600 MB, now a reader's 400 MB (a `runs` at 10M lines peaked at 1,131 MB under the writer's).
    Over stored rollups the limit is left to DuckDB (with it, DuckDB held more, not less)."""
    config = config_for(tmp_path, shared=False)
    commit(Lake(config.lake), "cur", ROWS)
    limits, compute = [], tops_module.spend_tops

    def spy(session, *args):
        limits.append(memory_limit(session.con))
        return compute(session, *args)

    monkeypatch.setattr(tops_module, "spend_tops", spy)
    computed = samples(config)  # nothing stored: the scrape rolls the period up in memory
    rollup(config)  # the tops, from the rollup just stored
    reference = duckdb.connect()
    default = memory_limit(reference)
    reference.execute("SET memory_limit = ?", [lake_module.READER_MEMORY_LIMIT])
    assert limits == [memory_limit(reference), default]
    assert samples(config) == computed


def test_61_a_scrape_reads_the_stored_tops_and_a_changed_lake_is_not_read_from_old_ones(tmp_path, monkeypatch):
    config = config_for(tmp_path, shared=False)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    rollup(config)
    before = samples(config)

    def no_lake_sums(*args, **kwargs):
        raise AssertionError("the scrape summed the lake instead of reading the stored tops")

    with monkeypatch.context() as patch:
        patch.setattr(spend_tops, "WindowSums", no_lake_sums)
        assert samples(config) == before  # read from the stored file alone
        commit(lake, "cur", [*ROWS, ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "USD", "500",
                                     {"team": "nlp", "project": "llm", "experiment": "a"})], delivery_id="d2")
        with pytest.raises(AssertionError, match="summed the lake"):
            tops_module.read_tops(lake, config, NOW)  # the stored tops are of the previous delivery
    changed = samples(config)  # computed for the scrape until the next build
    key = ("spendlake_spend_usd", (("project", "llm"), ("team", "nlp"), ("window", "24h")))
    assert changed[key] == before[key] + 500
    rollup(config)
    assert len(list((config.lake / tops_module.TOPS_TABLE).glob("source=all/config=*/*.parquet"))) == 1
    with monkeypatch.context() as patch:
        patch.setattr(spend_tops, "WindowSums", no_lake_sums)
        assert samples(config) == changed


def stored_tops_then_a_new_delivery(tmp_path):
    """A lake whose tops are stored, then a delivery committed without them: (config, lake,
    the scrape's samples before the delivery)."""
    config = config_for(tmp_path, shared=False)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    rollup(config)
    before = samples(config)
    commit(lake, "cur", [*ROWS, ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "USD", "500",
                                 {"team": "nlp", "project": "llm", "experiment": "a"})], delivery_id="d2")
    return config, lake, before


def test_61_while_a_writer_holds_the_lake_a_scrape_shows_the_previous_tops_instead_of_computing(tmp_path,
                                                                                                 monkeypatch):
    """An ingest committed a delivery and is building its tops: a scrape shows the previous
    state's stored tops (spendlake_metric_tops_current 0) rather than computing the new
    state's beside the build (at a million values: past a scrape's timeout, twice the memory)."""
    config, lake, before = stored_tops_then_a_new_delivery(tmp_path)

    def no_lake_sums(*args, **kwargs):
        raise AssertionError("the scrape summed the lake instead of reading the stored tops")

    with monkeypatch.context() as patch, lake.lock():
        patch.setattr(spend_tops, "WindowSums", no_lake_sums)
        assert lake.writing()
        assert samples(config) == before
        assert current_flag(config) == 0
    assert not lake.writing()
    changed = samples(config)  # no writer: computed for the scrape
    key = ("spendlake_spend_usd", (("project", "llm"), ("team", "nlp"), ("window", "24h")))
    assert changed[key] == before[key] + 500
    assert current_flag(config) == 1


def current_flag(config, turn=None) -> float:
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, clock=NOW.timestamp, turn=turn))
    return registry.get_sample_value("spendlake_metric_tops_current")


def test_61_while_a_service_job_holds_its_turn_a_scrape_shows_the_previous_tops_and_computes_only_in_turn(
        tmp_path, monkeypatch):
    """No writer holds the lake, but a service job has the turn (a report rolling a month up):
    a scrape without tops for the lake's state shows the previous state's instead of running a
    second DuckDB computation beside it (at a million values: 0.78 GB more). With the turn
    free it computes them holding the turn, so no job starts beside it."""
    config, lake, before = stored_tops_then_a_new_delivery(tmp_path)
    turn = threading.Lock()

    def no_lake_sums(*args, **kwargs):
        raise AssertionError("the scrape summed the lake beside a running job")

    with monkeypatch.context() as patch, turn:
        patch.setattr(spend_tops, "WindowSums", no_lake_sums)
        assert samples(config, turn) == before
        assert current_flag(config, turn) == 0
    sums = spend_tops.WindowSums

    def in_turn(*args, **kwargs):
        assert turn.locked(), "the scrape computed without holding the jobs' turn"
        return sums(*args, **kwargs)

    monkeypatch.setattr(spend_tops, "WindowSums", in_turn)
    changed = samples(config, turn)
    key = ("spendlake_spend_usd", (("project", "llm"), ("team", "nlp"), ("window", "24h")))
    assert changed[key] == before[key] + 500
    assert current_flag(config, turn) == 1
    assert not turn.locked()


def test_61_a_page_showing_the_previous_tops_is_not_served_again_once_the_current_ones_can_be_shown(tmp_path):
    """The service keeps its page until a lake file changes; storing the tops or a job
    letting go of the turn changes none it watches. A page with the previous state's tops
    (current 0) was served for minutes after the new ones existed: a scrape loop right after
    the service's first ingest saw no spend series at all."""
    config, lake, before = stored_tops_then_a_new_delivery(tmp_path)
    turn = threading.Lock()
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, clock=NOW.timestamp, turn=turn))  # one service, scraped twice
    key = ("spendlake_spend_usd", (("project", "llm"), ("team", "nlp"), ("window", "24h")))

    def scrape() -> tuple[float, float]:
        return (registry.get_sample_value(key[0], dict(key[1])),
                registry.get_sample_value("spendlake_metric_tops_current"))

    with turn:
        assert scrape() == (before[key], 0)
    assert scrape() == (before[key] + 500, 1)


def test_61_with_no_tops_stored_for_the_config_a_scrape_beside_a_build_shows_none_rather_than_computing(
        tmp_path, monkeypatch):
    """A first start or a config change: the writer builds the rollups and tops of the new
    config and none are stored. The scrape leaves the tops' families empty (current 0) and
    still answers the rest, rather than rolling the month up beside the build."""
    config = config_for(tmp_path, shared=False)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)

    def no_lake_sums(*args, **kwargs):
        raise AssertionError("the scrape summed the lake beside the build")

    with monkeypatch.context() as patch, lake.lock():
        patch.setattr(spend_tops, "WindowSums", no_lake_sums)
        assert samples(config) == {}
        assert current_flag(config) == 0
    assert samples(config)  # no writer, no job: computed for the scrape


def test_43_a_scrape_takes_its_windows_end_and_its_numbers_from_one_lake_state(tmp_path, monkeypatch):
    """An ingest committing while a scrape starts: the windows' end and the sums both come from
    the new state (an end read before the commit cut the new hour off the new data's sums)."""
    config = config_for(tmp_path, shared=False)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    rollup(config)
    later = [*ROWS, ("2026-11-27 08:00:00", "2026-11-27 09:00:00", "USD", "500",
                     {"team": "nlp", "project": "llm", "experiment": "a"})]
    take_snapshot = snapshot_module.take_snapshot
    committed = []

    def commit_first(of, *tables):
        if not committed:  # the scrape has begun; its first snapshot meets the new delivery
            committed.append(commit(lake, "cur", later, delivery_id="d2"))
        return take_snapshot(of, *tables)

    with monkeypatch.context() as patch:
        patch.setattr(snapshot_module, "take_snapshot", commit_first)
        patch.setattr(lake_module, "take_snapshot", commit_first)
        during = samples(config)
    assert committed
    after = samples(config)
    assert during == after
    key = ("spendlake_spend_usd", (("project", "llm"), ("team", "nlp"), ("window", "24h")))
    assert after[key] == pytest.approx(4 + 4 + 500)


COMMITMENT_FAMILIES = ("spendlake_commitment_utilization_ratio", "spendlake_commitment_unused_usd")


def commitment_samples(config, now) -> dict[tuple, float]:
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, clock=now.timestamp))
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in registry.collect() for s in family.samples if s.name in COMMITMENT_FAMILIES}
    assert registry.get_sample_value("spendlake_lake_readable") == 1
    return found


def test_61_a_scrape_reads_the_stored_commitment_tops_without_computing_commitments(config_file, monkeypatch):
    config = parse_config(yaml.safe_load(config_file.read_text()), str(config_file))
    on_the_fly = commitment_samples(config, COMMITMENTS_NOW)  # nothing stored yet: computed for the scrape
    # the numbers test_commitments checks by hand (30 days to the data's end)
    plan, reservation = (("team", "Inference"), ("type", "Savings Plan")), (("team", "platform"),
                                                                            ("type", "Reserved Instance"))
    assert on_the_fly == {("spendlake_commitment_utilization_ratio", plan): 0.75,
                          ("spendlake_commitment_unused_usd", plan): 8.0,
                          ("spendlake_commitment_utilization_ratio", reservation): 0.0,
                          ("spendlake_commitment_unused_usd", reservation): 148.0}
    rollup(config)

    def no_commitments(*args, **kwargs):
        raise AssertionError("the scrape computed the commitments instead of reading the stored tops")

    monkeypatch.setattr(commitment_tops, "commitments", no_commitments)
    assert commitment_samples(config, COMMITMENTS_NOW) == on_the_fly


def test_a_team_named_other_is_told_from_the_folded_teams_in_the_commitment_families(tmp_path):
    """With top_n 2, a second Savings Plan owned by a team named `other` ($32 unused) ranks beside
    platform's reservation ($148); Inference's plan ($8 of $32 unused) folds: one series
    {type="Savings Plan",team="other"} said $40 unused, 0.375 used, neither's; the folded rest
    carries `folded="true"`, the ranked team keeps exactly its labels. Stored and computed alike."""
    from tests.attribution_helpers import declared_sources
    from tests.rules_lake import build_lake
    from tests.test_commitments import hour, rows

    other_plan = [{"ChargeCategory": "Purchase", "CommitmentDiscountId": "sp-2", "CommitmentDiscountStatus": "Unused",
                   "CommitmentDiscountCategory": "Spend", "CommitmentDiscountType": "Savings Plan",
                   "ResourceId": "sp-2", "SubAccountId": "777788889999", "BillingCurrency": "USD",
                   "BilledCost": "8", "EffectiveCost": "8", "Tags": {"team": "other"}, **hour(h)} for h in range(4)]
    lake = Lake(tmp_path / "lake")
    build_lake(lake, {"costs": rows() + other_plan}, COMMITMENTS_NOW.date())
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "service": {"top_n": 2},
                           "attribution": {"dimensions": {"team": {"tags": ["team"], "rules": [
                               {"match": {"account": "444455556666"}, "value": "platform"}]}}}})
    plan, rest = ("team", "other"), ("type", "Savings Plan")
    want = {("spendlake_commitment_unused_usd", (plan, rest)): 32.0,
            ("spendlake_commitment_utilization_ratio", (plan, rest)): 0.0,
            ("spendlake_commitment_unused_usd", (("folded", "true"), plan, rest)): 8.0,
            ("spendlake_commitment_utilization_ratio", (("folded", "true"), plan, rest)): 0.75,
            ("spendlake_commitment_unused_usd", (("team", "platform"), ("type", "Reserved Instance"))): 148.0,
            ("spendlake_commitment_utilization_ratio", (("team", "platform"), ("type", "Reserved Instance"))): 0.0}
    assert commitment_samples(config, COMMITMENTS_NOW) == want
    rollup(config)
    assert commitment_samples(config, COMMITMENTS_NOW) == want


def test_the_idle_ratio_is_each_clusters_own_never_a_pooled_other(tmp_path):
    """With `top_n: 1` and three clusters, the idle ratio stays one series per cluster: a pooled
    `other` (the idle of a100 and h100 over their cost) is no cluster's share, yet the idle alert
    would fire on it. Hand figures, each p5.48xlarge hour $80: p5 two instances, one full for the
    hour and one half held ($40 idle of $160: 0.25); a100 one instance never held (1.0); h100
    one instance fully held (0.0). Pooled, a100 and h100 made `other` 0.5, over the 0.3 threshold."""
    from service.attribution.tops import compute_tops
    from tests.attribution_helpers import config as make_config
    from tests.test_clusters_allocation import gpu_line, job, setup

    start = "2026-11-02T10:00:00"
    lines = [gpu_line("i-p1", start=start, cluster="p5"), gpu_line("i-p2", start=start, cluster="p5"),
             gpu_line("i-a1", start=start, cluster="a100"), gpu_line("i-h1", start=start, cluster="h100")]
    jobs = [job("1", 8, start, "2026-11-02T11:00:00", instance_ids=["i-p1"]),
            job("2", 8, start, "2026-11-02T10:30:00", instance_ids=["i-p2"]),
            job("3", 8, start, "2026-11-02T11:00:00", instance_ids=["i-h1"], cluster="h100")]
    lake, _ = setup(tmp_path, lines, jobs, {"cluster_tag": "cluster"})
    cfg = make_config({"clusters": {"cluster_tag": "cluster"}}, lake)
    cfg = cfg.model_copy(update={"service": cfg.service.model_copy(update={"top_n": 1})})
    tops = compute_tops(lake, cfg, datetime(2026, 11, 2, 11, tzinfo=timezone.utc), ("clusters",))
    idle = {(t.window, t.labels[0]): t.value for t in tops if t.family == "idle"}
    assert idle == {(w, c): ratio for w in ("24h", "7d", "mtd")
                    for c, ratio in (("p5", Decimal("0.25")), ("a100", Decimal(1)), ("h100", Decimal(0)))}
    assert {(t.window, t.labels[0]) for t in tops if t.family == "run"} == {
        (w, r) for w in ("24h", "7d", "mtd") for r in ("1", "other")}  # runs still fold beyond top_n


def test_a_service_started_on_a_damaged_lake_shows_the_stored_tops_of_its_last_good_state(tmp_path):
    """A service (re)started while a cost partition is missing had no spend, cluster or
    commitment series at all (cost alerts resolved); it shows the tops stored for the last
    state it could read, marked as such, and the current ones once the partition is back."""
    config = config_for(tmp_path, shared=False)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    rollup(config)
    before = samples(config)
    file = next(lake.table_dir("costs").glob("*/*/data.parquet"))
    moved = file.rename(tmp_path / "aside.parquet")
    registry = CollectorRegistry()
    registry.register(LakeCollector(config, clock=NOW.timestamp))
    shown = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in registry.collect() for s in family.samples if s.name in FAMILIES}
    assert shown == before
    assert registry.get_sample_value("spendlake_lake_readable") == 0
    assert registry.get_sample_value("spendlake_metrics_last_good", {"group": "spend"}) == 1
    assert registry.get_sample_value("spendlake_metric_tops_current") == 0
    assert registry.get_sample_value("spendlake_lake_partitions_damaged", {"state": "missing"}) == 1
    with pytest.raises(SpendlakeError, match="is missing"):  # a query outside the scrape still refuses
        tops_module.read_tops(lake, config, NOW)
    moved.rename(file)
    assert samples(config) == before


def test_a_value_named_other_is_told_from_the_folded_rest_whether_or_not_it_ranks():
    # every family folds so (spend, experiments, runs, findings, commitments): the rest is
    # (`other`, "true"), everything not ranked, a value called other among them when it does not
    # rank; one that ranks keeps its own key, folded ""
    from decimal import Decimal

    from service.core.units import fold_top

    values = {("other",): Decimal(5), ("a",): Decimal(9), ("b",): Decimal(1)}
    assert fold_top(values, 1) == {("a", ""): Decimal(9), ("other", "true"): Decimal(6)}
    assert fold_top(values, 2) == {("a", ""): Decimal(9), ("other", ""): Decimal(5), ("other", "true"): Decimal(1)}
    assert fold_top(values, 3) == {("a", ""): Decimal(9), ("other", ""): Decimal(5), ("b", ""): Decimal(1)}


OTHER_ROWS = [  # a team, project and experiment named `other` ranks in the last 24 hours, not in the month
    ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "50", {"team": "other", "project": "other", "experiment": "other"}),
    ("2026-11-27 06:00:00", "2026-11-27 07:00:00", "USD", "40", {"team": "nlp", "project": "llm", "experiment": "a"}),
    ("2026-11-27 07:00:00", "2026-11-27 08:00:00", "USD", "5", {"team": "infra", "project": "ops", "experiment": "i"}),
    ("2026-11-02 05:00:00", "2026-11-02 06:00:00", "USD", "500", {"team": "vision", "project": "vit", "experiment": "v"}),
    ("2026-11-03 05:00:00", "2026-11-03 06:00:00", "USD", "300", {"team": "speech", "project": "asr", "experiment": "s"}),
]


def test_a_team_project_or_experiment_named_other_is_told_from_the_folded_rest_by_the_folded_label(tmp_path):
    """`spendlake_spend_usd{team="other",project="other"}` summed a team named `other` (ranked) with
    the pairs beyond the top N (50 + 5), as the run family did before session 42: the folded rest
    carries `folded="true"`; a ranked value named `other` keeps its own series with exactly its
    labels; one not ranked is in the rest. Stored and computed alike."""
    config = make_config(tmp_path, top_n=2)
    commit(Lake(config.lake), "cur", OTHER_ROWS)
    computed = samples(config)
    rollup(config)
    assert samples(config) == computed

    def series(name, window):
        return {k: v for (n, k), v in computed.items() if n == name and dict(k)["window"] == window}

    assert series("spendlake_spend_usd", "24h") == pytest.approx({
        (("project", "other"), ("team", "other"), ("window", "24h")): 50,
        (("project", "llm"), ("team", "nlp"), ("window", "24h")): 40,
        (("folded", "true"), ("project", "other"), ("team", "other"), ("window", "24h")): 5})
    assert series("spendlake_experiment_spend_usd", "24h") == pytest.approx({
        (("experiment", "other"), ("window", "24h")): 50, (("experiment", "a"), ("window", "24h")): 40,
        (("experiment", "other"), ("folded", "true"), ("window", "24h")): 5})
    assert series("spendlake_spend_usd", "mtd") == pytest.approx({
        (("project", "vit"), ("team", "vision"), ("window", "mtd")): 500,
        (("project", "asr"), ("team", "speech"), ("window", "mtd")): 300,
        (("folded", "true"), ("project", "other"), ("team", "other"), ("window", "mtd")): 95})


def test_43_after_a_sighup_changing_attribution_a_scrape_beside_the_build_shows_the_replaced_configs_tops(tmp_path):
    """A SIGHUP to a config with other attribution: its first ingest builds its rollups and tops; a scrape
    meanwhile found no tops of the new config at all and showed none, so the spend families were empty
    (cost alerts resolved and fired again). It shows the replaced config's last stored tops, marked not
    current, until the new config's are stored; after a restart too (the service notes whose tops it stored)."""
    from service.serve.service import served_before, store_rollups

    old = config_for(tmp_path, shared=False)
    lake = Lake(old.lake)
    commit(lake, "cur", ROWS)
    store_rollups(old)  # the service's start: `spendlake rollup`, and whose tops it stored noted in the lake
    before = samples(old)
    new = config_for(tmp_path, shared=True)
    assert tops_module.tops_owner(new) != tops_module.tops_owner(old)

    def scraped(earlier):
        registry = CollectorRegistry()
        registry.register(LakeCollector(new, clock=NOW.timestamp, earlier=earlier))
        return ({(s.name, tuple(sorted(s.labels.items()))): s.value
                 for family in registry.collect() for s in family.samples if s.name in FAMILIES},
                registry.get_sample_value("spendlake_metric_tops_current"))

    replaced = (tops_module.tops_owner(old),)
    assert served_before(lake, new) == replaced and served_before(lake, old) == ()  # a restart with `new`
    with lake.lock():  # the new config's first ingest, building its rollups and tops
        assert scraped(replaced) == (before, 0)
        assert scraped(()) == ({}, 0)
    store_rollups(new)
    assert served_before(lake, new) == ()
    after, current = scraped(replaced)
    assert current == 1 and after == samples(new) and after != before


def test_a_replaced_configs_tops_removed_as_a_scrape_lists_them_are_none_not_an_unreadable_lake(tmp_path, monkeypatch):
    """A build removes a replaced config's folder of tops once its last file goes (_drop_replaced); a scrape
    beside it that found the folder and then listed it (the derived files' check, or the replaced tops it
    shows) met FileNotFoundError, said as the lake being unreadable (`spendlake_lake_readable` 0, an error
    logged). A folder removed as it is listed is listed again: tops removed are none stored."""
    old, new = config_for(tmp_path, shared=False), config_for(tmp_path, shared=True)
    lake = Lake(old.lake)
    commit(lake, "cur", ROWS)
    rollup(old)
    folder = tops_module.tops_folder(lake, old)
    with monkeypatch.context() as build:
        removed_while_listed(build, folder)
        assert tops_module.previous_tops(lake, tops_module.tops_owner(old)) is None and not folder.exists()
    rollup(old)  # stored again
    registry = CollectorRegistry()
    registry.register(LakeCollector(new, clock=NOW.timestamp, earlier=(tops_module.tops_owner(old),)))
    removed_while_listed(monkeypatch, folder)
    with lake.lock():  # the new config's build
        assert registry.get_sample_value("spendlake_lake_readable") == 1
        assert registry.get_sample_value("spendlake_metric_tops_current") == 0
    assert not folder.exists()


def test_a_restart_onto_a_new_version_shows_no_tops_of_the_earlier_form_beside_the_start_rollup(tmp_path):
    """A restart onto a version whose tops have another form (TOPS_FORMAT 5's spend labels lack `folded`):
    while the start's rollup held the jobs' turn, a scrape showed the tops the earlier version noted it
    stored (served_before), and add_folded's label check raised out of the collector: /metrics answered
    500 until the build was done. Only tops noted with this version's form stand in."""
    from service.serve.service import served_before, store_rollups

    config = config_for(tmp_path, shared=False)
    lake = Lake(config.lake)
    commit(lake, "cur", ROWS)
    earlier = "0ld0ld0ld0ld0ld0"  # the earlier version's tops_owner and its stored tops, labels (team, project)
    with lake.lock():
        con = lake.connect()
        try:
            rows = con.sql(f"SELECT {tops_module.COLUMNS}", params=[
                [NOW, NOW], ["anchor", "spend"], ["", "mtd"], [[], ["nlp", "llm"]], ["0", "8"]])
            lake.commit_snapshot(con, rows, table=tops_module.TOPS_TABLE, source="all", key="config", value=earlier,
                                 version="earlier")
        finally:
            con.close()
        lake.write_state("jobs", {"tops_owner": earlier})  # as that version noted it: no form
    turn = threading.Lock()
    with turn:  # the start's rollup has the jobs' turn
        registry = CollectorRegistry()
        registry.register(LakeCollector(config, clock=NOW.timestamp, turn=turn, earlier=served_before(lake, config)))
        assert registry.get_sample_value("spendlake_metric_tops_current") == 0
        assert registry.get_sample_value("spendlake_spend_usd", {"team": "nlp", "project": "llm", "window": "mtd"}) \
            is None
    assert served_before(lake, config) == ()
    other = config_for(tmp_path, shared=True)
    store_rollups(other)  # this version notes the form of the tops it stored: another config stands in for them
    assert served_before(lake, config) == (tops_module.tops_owner(other),)


def test_a_replaced_configs_tops_are_removed_a_grace_after_a_newer_lake_state_is_stored(tmp_path):
    """The tops of a config a SIGHUP or restart replaced stayed on disk for ever (`build_tops` pruned
    only its own config's folder). They go by the rollup versions' rule: kept while they describe the
    lake's current state (another config used on the lake reads them), found superseded by a build of
    a newer state, and removed by a build a grace later; until then a scrape can still show them."""
    from datetime import timedelta

    old, new = config_for(tmp_path, shared=False), config_for(tmp_path, shared=True)
    lake = Lake(old.lake)
    commit(lake, "cur", ROWS)
    rollup(old)
    replaced = tops_module.tops_folder(lake, old)
    before = tops_module.previous_tops(lake, tops_module.tops_owner(old))
    assert before and list(replaced.glob("*.parquet"))
    rollup(new)
    now = datetime.now(timezone.utc)
    with lake.lock():
        tops_module.build_tops(lake, new, now=now + timedelta(hours=2))
    assert tops_module.previous_tops(lake, tops_module.tops_owner(old)) == before  # the current state's: kept

    commit(lake, "cur", [("2026-10-20 00:00:00", "2026-10-20 01:00:00", "USD", "5", {"team": "nlp"})], "d2")
    rollup(new)  # the new config's tops of the newer state stored: the old ones found superseded, kept for readers
    now = datetime.now(timezone.utc)
    assert tops_module.previous_tops(lake, tops_module.tops_owner(old)) == before
    with lake.lock():
        tops_module.build_tops(lake, new, now=now + timedelta(minutes=59))
    assert tops_module.previous_tops(lake, tops_module.tops_owner(old)) == before  # within the grace
    with lake.lock():
        tops_module.build_tops(lake, new, now=now + timedelta(minutes=61))
    assert not replaced.exists()
    assert tops_module.previous_tops(lake, tops_module.tops_owner(old)) is None
    assert list(tops_module.tops_folder(lake, new).glob("*.parquet"))  # the new config's own stay
    assert samples(new) == expected(new)  # read from the stored tops, as before
    since = lake.read_state("rollups_superseded")["since"]
    assert not [key for key in since if key.startswith("metric_tops/")]  # what is gone is forgotten
