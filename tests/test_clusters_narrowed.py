"""`attribute --where cluster=X` before `spendlake rollup`: the period is rolled up in memory from
the lines that can be in X only (allocation's instance lines, lines tagged X), and the answer,
its spellings and its suggestions are those every line gives (the stored rollups hold them all).
p5.48xlarge billed $80 an hour: 8 GPUs, $10 a GPU-hour."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from service.attribution import attribute, materialise
from service.attribution.compute import RollupSession
from service.attribution.needs import Needs
from service.attribution.rollup import narrowed_to
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake
from tests.test_clusters_allocation import gpu_line, job, setup

NOVEMBER = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
CLUSTER = {"cluster_tag": "cluster"}


def lines_and_jobs():
    # i-a (cluster p5), two hours: run "unassigned" holds all 8 GPUs the first hour ($80) and 4
    # the second ($40, idle $40); a p5 volume ($5, the run's default); four lines outside p5.
    inside = [gpu_line("i-a", start=f"2026-11-02T{h}:00:00", cluster="p5") for h in (10, 11)]
    inside.append(line("2026-11-02T10:00:00", "5", resource="vol-1", tags={"cluster": "P5"}))
    outside = [line(f"2026-11-03T0{h}:00:00", "7", resource=f"vol-{h}", tags={"cluster": "gpu-east"})
               for h in range(3)] + [line("2026-11-03T05:00:00", "11")]
    jobs = [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], run_id="unassigned"),
            job("2", 4, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="unassigned")]
    return [*inside, *outside], jobs


def answer(lake, cfg, **kwargs):
    result = attribute(lake, cfg, NOVEMBER, **kwargs)
    return [(row.values, row.cost) for row in result.rows], result.unmatched


def from_raw_lines_and_stored(lake, cfg, **kwargs):
    raw = answer(lake, cfg, **kwargs)
    materialise(lake, cfg)
    return raw, answer(lake, cfg, **kwargs)


def test_a_cluster_query_rolls_up_only_the_lines_that_can_be_in_the_cluster(tmp_path):
    lines, jobs = lines_and_jobs()
    lake, cfg = setup(tmp_path, lines, jobs, CLUSTER)
    needs = Needs(("run", "cluster"), ("billed",), hows=False, where=(("cluster", ("P5",)),))
    session = RollupSession(lake, cfg.attribution, needs=needs)
    try:
        assert session.narrowed
        # the two instance-hours' job and idle parts and the volume: nothing from outside p5
        assert session.con.execute("SELECT sum(lines), sum(billed) FROM attribution_rollups").fetchall() == [(4, 165)]
    finally:
        session.con.close()
    raw, stored = from_raw_lines_and_stored(lake, cfg, by=("run",), where={"cluster": ("P5",)})
    assert raw == stored
    assert stored[0] == [({"run": "unassigned"}, 120), ({"run": "idle"}, 40), ({"run": "unallocated"}, 5)]


def test_a_cluster_nothing_matches_is_suggested_from_every_cluster(tmp_path):
    # the narrowed rollup holds no line of gpu-east; the suggestion still names it
    lines, jobs = lines_and_jobs()
    lake, cfg = setup(tmp_path, lines, jobs, CLUSTER)
    raw, stored = from_raw_lines_and_stored(lake, cfg, by=("run",), where={"cluster": ("gpu-eats",)})
    assert raw == stored
    assert raw[1] and "gpu-east" in raw[1][0][2]


def test_a_value_the_lines_left_out_spell_otherwise_is_shown_as_every_line_spells_it(tmp_path):
    # run's default `Unassigned` is on the four lines outside p5 and the volume (5 lines), the
    # jobs' `unassigned` on three parts: every line spells it `Unassigned`, p5's lines alone not
    lines, jobs = lines_and_jobs()
    lake, cfg = setup(tmp_path, lines, jobs, CLUSTER, dimensions={"run": {"tags": ["run"], "default": "Unassigned"}})
    raw, stored = from_raw_lines_and_stored(lake, cfg, by=("run",), where={"cluster": ("p5",)})
    assert raw == stored
    assert stored[0] == [({"run": "Unassigned"}, 125), ({"run": "idle"}, 40)]


@pytest.mark.parametrize("attribution, by, narrowed", [
    ({}, ("run",), True),
    ({}, ("team",), False),  # the lines carry a team tag: a line left out could spell a shown team
    ({"shared": [{"match": {"service": "AWS Support"}, "split": "even", "by": "run"}]}, ("run",), False),
    ({"dimensions": {"cluster": {"tags": ["cluster"], "default": "p5"}}}, ("run",), False),
    ({"dimensions": {"cluster": {"tags": ["cluster"], "rules": [{"match": {"account": "1"}, "value": "P5 "}]}}},
     ("run",), False),
])
def test_a_period_is_narrowed_only_when_the_lines_left_out_cannot_change_the_answer(attribution, by, narrowed):
    cfg = config({"clusters": CLUSTER, **attribution}).attribution
    needs = Needs((*by, "cluster"), ("billed",), hows=False, where=(("cluster", ("p5",)),))
    assert (narrowed_to(cfg, needs, ["cluster", "team"], None) is not None) is narrowed


def test_a_value_of_a_dimension_no_line_is_tagged_with_is_suggested_from_its_rules(tmp_path):
    # env has rules only: the narrowed period keeps no line (nothing to bind a value against)
    lines = [line("2026-11-02T10:00:00", "5", region="us-west-2"), line("2026-11-02T11:00:00", "7")]
    lake = make_lake(tmp_path, lines)
    cfg = config({"dimensions": {"env": {"rules": [{"match": {"region": "us-west-2"}, "value": "west"}],
                                         "default": "east"}}}, lake)
    raw, stored = from_raw_lines_and_stored(lake, cfg, by=("team",), where={"env": ("wset",)})
    assert raw == stored
    assert raw[0] == [] and "west" in raw[1][0][2]


def test_a_default_the_database_lowercases_to_the_value_keeps_every_line(tmp_path):
    # DuckDB lowercases `İSTANBUL` to `istanbul`, Python to `i̇stanbul`: the untagged line's
    # default is in team istanbul, as the tagged one is
    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "3", tags={"team": "Istanbul"}),
                                line("2026-11-02T11:00:00", "7")])
    cfg = config({"dimensions": {"team": {"default": "İSTANBUL"}}}, lake)
    raw, stored = from_raw_lines_and_stored(lake, cfg, by=("project",), where={"team": ("istanbul",)})
    assert raw == stored
    assert raw[0] == [({"project": "unallocated"}, 10)]


def test_a_constant_the_database_lowercases_to_a_shown_value_is_spelled_as_every_line_spells_it(tmp_path):
    # cc `Istanbul` (a rule) on two lines of team vision, the default `İSTANBUL` on one and on the
    # five lines outside vision: DuckDB shows both as `istanbul`, every line spells it `İSTANBUL`
    west = [line(f"2026-11-02T1{h}:00:00", "1", region="us-west-2", tags={"team": "vision"}) for h in range(2)]
    lines = [*west, line("2026-11-02T12:00:00", "1", tags={"team": "vision"}),
             *(line(f"2026-11-03T1{h}:00:00", "1", tags={"team": "nlp"}) for h in range(5))]
    lake = make_lake(tmp_path, lines)
    cfg = config({"dimensions": {"cc": {"rules": [{"match": {"region": "us-west-2"}, "value": "Istanbul"}],
                                        "default": "İSTANBUL"}}}, lake)
    raw, stored = from_raw_lines_and_stored(lake, cfg, by=("cc",), where={"team": ("vision",)})
    assert raw == stored
    assert raw[0] == [({"cc": "İSTANBUL"}, 3)]


def test_a_filter_typed_as_python_lowercases_differently_still_finds_its_lines(tmp_path):
    # `İSTANBUL` and a final `Σ` fold in Python (`i̇stanbul`, `οδυσσευς`) unlike DuckDB's lower()
    # (`istanbul`, `οδυσσευσ`) that the lines are folded by: the filter must fold as the lines do
    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "3", tags={"team": "Istanbul"}),
                                line("2026-11-02T11:00:00", "4", tags={"team": "İSTANBUL"}),
                                line("2026-11-02T12:00:00", "5", tags={"team": "ΟΔΥΣΣΕΥΣ"}),
                                line("2026-11-02T13:00:00", "7")])
    cfg = config({}, lake)
    for value, total in (("İSTANBUL", 7), ("istanbul", 7), ("ΟΔΥΣΣΕΥΣ", 5), ("οδυσσευσ", 5)):
        raw, stored = from_raw_lines_and_stored(lake, cfg, by=("team",), where={"team": (value,)})
        assert raw == stored, value
        assert sum(amount for _, amount in raw[0]) == total, (value, raw[0])
