"""What the allocation assumes of a window's instances, said (service/attribution/instance_checks.py):
a GPU instance type the GPU table does not size is sized by the most GPUs a job holds there and
one no job reaches is no capacity; a job naming instance ids no bill holds meets no instance.
`attribute` and `runs` warn, once per type and per cluster, on stderr and in their notes, read on
the answer's own connection."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner
from test_clusters_focus import focus_file

from service.cli.main import cli
from service.core.lake import Lake

WINDOW = ["--since", "2026-11-01", "--until", "2026-12-01"]


def _cluster(tmp_path, instance_type: str, clusters: dict | None = None, jobs: tuple = (("j1", "i-0e", 4),)):
    """i-0e of `instance_type` ($80 for 10:00-11:00) with `jobs` (id, instance ids, GPUs) holding it
    for the hour (j1 4 GPUs of i-0e); i-0f of the same type, tagged in cluster gpu, with no job."""
    bill = tmp_path / "bill" / "2026-11"
    bill.mkdir(parents=True)
    sku = json.dumps({"InstanceType": instance_type})  # FOCUS 1.2's, any provider's type
    (bill / "focus.csv").write_text(focus_file(("SkuPriceDetails", "Tags"), [
        ("i-0e", (sku, "{}"), "80", "2026-11-02T10:00:00Z"),
        ("i-0f", (sku, json.dumps({"cluster": "gpu"})), "80", "2026-11-02T10:00:00Z")]))
    records = tmp_path / "jobs.csv"
    records.write_text("job_id,start_time,end_time,gpus,instance_ids,cluster\n" + "".join(
        f"{job},2026-11-02T10:00:00Z,2026-11-02T11:00:00Z,{gpus},{ids},gpu\n" for job, ids, gpus in jobs))
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "bill")}],
        "inventory": [{"name": "jobs", "kind": "jobs-file", "path": str(records)}],
        "attribution": {"clusters": {"cluster_tag": "cluster", **(clusters or {})}}}))
    for command in (["ingest"], ["inventory"]):
        done = CliRunner().invoke(cli, ["--config", str(path), *command])
        assert done.exit_code == 0, done.output
    return path


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def _attributed(path) -> tuple[dict[str, Decimal], list[str]]:
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "run", *WINDOW, "--format", "json"])
    assert shown.exit_code == 0, shown.output
    answer = json.loads(shown.stdout)
    warnings = _warnings(shown.stderr)
    assert all(warning.removeprefix("warning: ") in answer.get("notes", []) for warning in warnings)
    return {row["run"]: Decimal(str(row["cost"])) for row in answer["rows"]}, warnings


def _listed(path) -> tuple[list[str], list[str]]:
    listed = CliRunner().invoke(cli, ["--config", str(path), "runs", *WINDOW, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    return _warnings(listed.stderr), json.loads(listed.stdout).get("notes", [])


def test_a_gpu_type_missing_from_the_table_is_warned_of_once_with_its_cost_gpus_and_the_key(tmp_path):
    # p9-x900.48xlarge stands for a type newer than the table: j1's 4 GPUs size i-0e (j1 pays
    # all $80) and i-0f, with no job, is no capacity ($80 unallocated). Said once, in `attribute`
    # and `runs` (stderr and JSON notes); before, nothing was said at all.
    path = _cluster(tmp_path, "p9-x900.48xlarge")
    costs, warnings = _attributed(path)
    assert costs == {"j1": Decimal(80), "unallocated": Decimal(80)}
    assert len(warnings) == 1
    assert "instance type p9-x900.48xlarge (USD 160.00 in the window) is not in the GPU table" in warnings[0]
    assert "taken to have as many GPUs as the most a job holds on one (4 here)" in warnings[0]
    assert "attribution.clusters.gpus_per_instance" in warnings[0]
    said, notes = _listed(path)
    assert said == warnings and [f"warning: {note}" for note in notes] == warnings


def test_a_type_the_config_sizes_or_zeroes_is_not_warned_of(tmp_path):
    # gpus_per_instance: 8 makes j1 pay half of i-0e, the rest and i-0f idle, without a warning
    path = _cluster(tmp_path, "p9-x900.48xlarge", {"gpus_per_instance": {"P9-X900.48xlarge": 8}})
    costs, warnings = _attributed(path)
    assert costs == {"j1": Decimal(40), "idle": Decimal(120)}
    assert warnings == []
    zeroed = _cluster(tmp_path / "zero", "p9-x900.48xlarge", {"gpus_per_instance": {"p9-x900.48xlarge": 0}})
    assert _attributed(zeroed)[1] == []


@pytest.mark.parametrize("instance_type", ["p6-b300.48xlarge", "a2-ultragpu-8g", "a4-highgpu-8g", "g2-standard-96",
                                           "Standard_ND96isr_MI300X_v5"])
def test_the_newer_8_gpu_types_are_in_the_built_in_table(tmp_path, instance_type):
    # each has 8 GPUs: before it was sized by j1's 4 (j1 $80, i-0f unallocated) and said nothing
    costs, warnings = _attributed(_cluster(tmp_path, instance_type))
    assert costs == {"j1": Decimal(40), "idle": Decimal(120)}
    assert warnings == []


def test_an_nc_a10_v4_size_is_left_to_the_config_and_warned_of(tmp_path):
    # its GPU count came from a third-party listing (and a size may hold part of an A10): not built in
    costs, warnings = _attributed(_cluster(tmp_path, "Standard_NC32ads_A10_v4"))
    assert costs == {"j1": Decimal(80), "unallocated": Decimal(80)}
    assert len(warnings) == 1 and "instance type standard_nc32ads_a10_v4" in warnings[0]


def test_jobs_naming_instances_no_bill_holds_are_warned_of_once_per_cluster(tmp_path):
    # j2 names its Azure VM by its bare name, j3 a typo and i-0e: neither name meets an instance
    # line, so j2's hours cost nothing and j3 holds only i-0e's half; before, nothing was said
    path = _cluster(tmp_path, "p5.48xlarge", jobs=(("j1", "i-0e", 4), ("j2", "nd-01", 8), ("j3", "i-0e;i-0x", 8)))
    costs, warnings = _attributed(path)
    assert costs == {"j1": Decimal(40), "j3": Decimal(40), "idle": Decimal(80)}
    assert warnings == ["warning: 2 job(s) of cluster gpu name instances no bill line of the window holds: i-0x, "
                        "nd-01; their hours reach no instance's cost (an instance id must be the bill's ResourceId: an "
                        "EC2 id or ARN, an Azure resource id; for a bare VM or node name use the jobs' nodes with "
                        "attribution.clusters.node_tag)"]
    said, notes = _listed(path)
    assert said == warnings and [f"warning: {note}" for note in notes] == warnings


def test_the_warnings_are_read_on_the_answer_s_connection_and_kept_by_its_snapshot(tmp_path, monkeypatch):
    # the check of session 53 opened a connection of its own on every `attribute` and `runs`
    path = _cluster(tmp_path, "p9-x900.48xlarge", jobs=(("j1", "i-0e", 4), ("j2", "nd-01", 8)))
    opened = []
    connect = Lake.connect
    monkeypatch.setattr(Lake, "connect", lambda self, *args, **kwargs: opened.append(1) or connect(self, *args, **kwargs))
    for command in (["attribute", "--by", "run"], ["runs"]):
        opened.clear()
        shown = CliRunner().invoke(cli, ["--config", str(path), *command, *WINDOW, "--format", "json"])
        assert shown.exit_code == 0, shown.output
        assert len(_warnings(shown.stderr)) == 2 and len(opened) == 1, (command, opened)
    from service.attribution import AttributionQuery, attribute_query
    from service.attribution.instance_checks import instance_warnings
    from service.core.config import load_config

    config = load_config(path)
    lake = Lake.of(config)
    query = AttributionQuery.parse(config, since="2026-11-01", until="2026-12-01", by="run")
    answer = attribute_query(lake, config, query, job_rules=True)
    assert len(answer.instance_warnings) == 2

    class Unread:  # the service asks on every request: the check of that snapshot is kept, not read again
        def execute(self, *args):
            raise AssertionError("read again")

    assert instance_warnings(Unread(), config.attribution.clusters, True, answer.window, "billed", answer.data_through,
                             answer.read_in) == answer.instance_warnings


def test_a_change_to_the_built_in_gpu_table_makes_the_stored_rollups_stale(tmp_path, monkeypatch):
    # the stored rollups' version did not name the built-in table: a type added to it (a release
    # with p9-x900.48xlarge: 8) still read the rollups ingest stored when it sized i-0e by j1 (j1 80)
    from service.core.config_clusters import GPU_INSTANCE_TYPES

    path = _cluster(tmp_path, "p9-x900.48xlarge")
    assert list((tmp_path / "lake").glob("attribution_rollup/source=*/billing_period=*/*.parquet"))
    assert _attributed(path)[0] == {"j1": Decimal(80), "unallocated": Decimal(80)}
    monkeypatch.setitem(GPU_INSTANCE_TYPES, "p9-x900.48xlarge", 8)
    assert _attributed(path) == ({"j1": Decimal(40), "idle": Decimal(120)}, [])
