"""A GPU instance type the GPU table does not size (service/attribution/unsized_instances.py):
the allocation sizes its instances by the most GPUs a job holds there, and one no job reaches
is no capacity; `attribute` and `runs` say so, once per type, naming the config key."""

from __future__ import annotations

import json
from decimal import Decimal

import yaml
from click.testing import CliRunner
from test_clusters_focus import focus_file

from service.cli.main import cli

WINDOW = ["--since", "2026-11-01", "--until", "2026-12-01"]


def _cluster(tmp_path, instance_type: str, clusters: dict | None = None):
    """i-0e of `instance_type` ($80 for 10:00-11:00) with job j1 holding 4 GPUs of it for the
    hour; i-0f of the same type, tagged in cluster gpu, with no job."""
    bill = tmp_path / "bill" / "2026-11"
    bill.mkdir(parents=True)
    usage = f"USE1-BoxUsage:{instance_type}"
    (bill / "focus.csv").write_text(focus_file(("x_UsageType", "Tags"), [
        ("i-0e", (usage, "{}"), "80", "2026-11-02T10:00:00Z"),
        ("i-0f", (usage, json.dumps({"cluster": "gpu"})), "80", "2026-11-02T10:00:00Z")]))
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,start_time,end_time,gpus,instance_ids,cluster\n"
                    "j1,2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,4,i-0e,gpu\n")
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(jobs)}],
        "attribution": {"clusters": {"cluster_tag": "cluster", **(clusters or {})}}}))
    for command in (["ingest"], ["inventory"]):
        done = CliRunner().invoke(cli, ["--config", str(path), *command])
        assert done.exit_code == 0, done.output
    return path


def _attributed(path) -> tuple[dict[str, Decimal], list[str]]:
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "run", *WINDOW, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    warnings = [line for line in shown.stderr.splitlines() if line.startswith("warning:")]
    return {row["run"]: Decimal(str(row["cost"])) for row in json.loads(shown.stdout)["rows"]}, warnings


def test_a_gpu_type_missing_from_the_table_is_warned_of_once_with_its_cost_and_the_key(tmp_path):
    # p9-x900.48xlarge stands for a type newer than the table: j1's 4 GPUs size i-0e (j1 pays
    # all $80) and i-0f, with no job, is no capacity ($80 unallocated). Both are said once, in
    # `attribute` and `runs`; before, nothing was said at all.
    path = _cluster(tmp_path, "p9-x900.48xlarge")
    costs, warnings = _attributed(path)
    assert costs == {"j1": Decimal(80), "unallocated": Decimal(80)}
    assert len(warnings) == 1
    assert "p9-x900.48xlarge (USD 160.00 in the window)" in warnings[0]
    assert "attribution.clusters.gpus_per_instance" in warnings[0]
    listed = CliRunner().invoke(cli, ["--config", str(path), "runs", *WINDOW, "--format", "csv"])
    assert listed.exit_code == 0, listed.output
    assert [line for line in listed.stderr.splitlines() if line.startswith("warning:")] == warnings


def test_a_type_the_config_sizes_is_capacity_and_not_warned_of(tmp_path):
    # gpus_per_instance: 8 makes j1 pay half of i-0e, the rest and i-0f idle, without a warning.
    path = _cluster(tmp_path, "p9-x900.48xlarge", {"gpus_per_instance": {"P9-X900.48xlarge": 8}})
    costs, warnings = _attributed(path)
    assert costs == {"j1": Decimal(40), "idle": Decimal(120)}
    assert warnings == []


def test_the_newer_gpu_types_are_in_the_built_in_table(tmp_path):
    # p6-b300.48xlarge has 8 B300 GPUs: before it was sized by j1's 4 (j1 $80, i-0f unallocated).
    costs, warnings = _attributed(_cluster(tmp_path, "p6-b300.48xlarge"))
    assert costs == {"j1": Decimal(40), "idle": Decimal(120)}
    assert warnings == []
