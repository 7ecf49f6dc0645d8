"""With `clusters:`, a rollup sums the lines the allocation does not split by their whole Tags
map before it reads their tags (grouped_lines.py `kept_by_map`): row for row, type for type the
rollup that reads each line's tags, with jobs, idle, instance lines a member bills without its
node tag, inventory tags, rules, shared rules and credits."""

from __future__ import annotations

import pytest

from service.attribution.allocation_stage import drop_stage
from service.attribution.jobs import allocation_inputs
from service.attribution.needs import Needs
from service.attribution.rollup_versions import cost_partitions, inventory_keys, recorded_tag_keys
from service.attribution.sql import rollup_sql
from service.attribution.statement import run_setup
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_rollup_grouped import RULES, inventory_team, lines, rows

CLUSTERS = {"node_tag": "slurm-node", "cluster_tag": "cluster"}


def cluster_lines() -> list[dict]:
    return [*lines(),
            gpu_line("i-a", **{"slurm-node": "p5-001"}), gpu_line("i-a", start="2026-11-02T11:00:00"),  # untagged hour
            gpu_line("i-b", cluster="p5"), gpu_line("i-b", "-8", cluster="p5"),  # idle, a credit
            gpu_line("i-web", "0.5", instance_type="m5.large", project="web"),
            gpu_line("i-web", "0.5", instance_type="m5.large", project="web", start="2026-11-02T11:00:00")]


def rollup_rows(con, lake, cfg, part, keys, needs: Needs, by_tag_map: bool) -> tuple[list, list, str]:
    where, params = "source = $source AND billing_period = $period", {"source": part.source, "period": part.period}
    allocation = allocation_inputs(lake, cfg.attribution, con, where, params)
    sql = rollup_sql(cfg.attribution, recorded_tag_keys([part]), part.source, part.period, keys, allocation, needs,
                     by_tag_map=by_tag_map)
    run_setup(con, sql)
    try:
        return (*rows(con, sql), sql.text)
    finally:
        drop_stage(con, sql.stage)


@pytest.mark.parametrize("inventory", [False, True], ids=["lines", "inventory-tags"])
@pytest.mark.parametrize("needs", [Needs(), Needs(("run", "project"), ("effective",)), Needs(("team",), hows=False)],
                         ids=["stored", "some-dimensions", "no-hows"])
def test_a_cluster_rollup_grouped_per_tag_map_is_the_rollup_read_per_line(tmp_path, inventory, needs):
    jobs = [job("a", 4, "2026-11-02T10:00:00", "2026-11-02T12:00:00", nodes=["p5-001"], instance_ids=["i-a"])]
    lake, cfg = setup(tmp_path, cluster_lines(), jobs, CLUSTERS, **RULES)
    if inventory:
        inventory_team(lake)
    [part] = cost_partitions(lake)
    con = lake.query()
    try:
        keys = inventory_keys(lake, con)
        *by_map, text = rollup_rows(con, lake, cfg, part, keys, needs, True)
        *by_values, _ = rollup_rows(con, lake, cfg, part, keys, needs, False)
    finally:
        con.close()
    assert "a_km AS (" in text  # the kept lines summed by their map before their tags are read
    assert by_map == by_values
