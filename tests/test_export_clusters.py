"""`spendlake export --with-attribution` on a shared GPU cluster: an instance's GPU line is
exported as its parts per job and the cluster's idle rest, as `attribute` allocates it
(service/attribution/allocation.py), with the jobs' dimensions and FOCUS Allocated columns,
every dollar once. The figures are worked out by hand in the test's comment."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import duckdb
import pytest
import yaml
from attribution_helpers import add_jobs, declared_sources, line, make_lake, relation
from click.testing import CliRunner
from conftest import DATA
from test_export import assert_ties_out, export_sums, lake_sums

from connectors.jobs_base import job_row
from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.core.schema import MONEY, QUANTITY
from service.export import ExportOptions, export_focus
from service.ingest.billing import ingest

D = Decimal
# One hour of a p5.48xlarge (8 GPUs) billed $80 (effective $64, list $96), 1 hour of usage.
GPU_HOUR = line("2026-11-02T10:00:00", "80", effective="64", list_cost="96", resource="i-a",
                instance_type="p5.48xlarge", tags={"team": "platform"}, quantity="1")
STORAGE = line("2026-11-02T10:00:00", "5", service="Amazon Simple Storage Service", tags={"team": "nlp"})


def job(job_id: str, gpus: int, start: str, end: str, **fields) -> dict:
    return job_row(record_id=f"p5/{job_id}", job_id=job_id, cluster="p5", instance_ids=["i-a"], gpus=float(gpus),
                   start_time=datetime.fromisoformat(start), end_time=datetime.fromisoformat(end), **fields)


JOBS = [job("101", 4, "2026-11-02T10:00:00", "2026-11-02T11:00:00", run_id="pretrain-7", state="COMPLETED",
            user="alice", team="nlp", project="llm", experiment="exp-1", job_type="pretrain", name="train"),
        job("102", 2, "2026-11-02T10:15:00", "2026-11-02T10:45:00", state="FAILED", user="bob", team="vision",
            job_type="eval", name="eval")]


def cluster_config(lake) -> dict:
    """The config of a lake with a job source: every source declared, `clusters:` on."""
    return {"lake": str(lake.root), "sources": declared_sources(lake, inventory=True), "attribution": {"clusters": {}}}


def exported(folder) -> list[dict]:
    table = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/*/*.parquet')")
    return [dict(zip(table.columns, row)) for row in table.fetchall()]


@pytest.mark.parametrize("version,prefix", [("1.3", ""), ("1.2", "x_")])
def test_a_cluster_hour_is_exported_as_its_jobs_parts_and_the_idle_rest(tmp_path, version, prefix):
    # Job 101 holds 4 of the 8 GPUs for the hour: 4·60 / (8·60) = 1/2 → $40 (effective $32,
    # list $48, 0.5 h), 4 GPU-hours. Job 102 holds 2 GPUs for 30 minutes: 2·30 / 480 = 1/8 →
    # $10 ($8, $12, 0.125 h), 1 GPU-hour. Idle: the other 3/8 → $30 ($24, $36, 0.375 h), 3 GPU-hours.
    lake = make_lake(tmp_path, [GPU_HOUR, STORAGE])
    add_jobs(lake, JOBS)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump(cluster_config(lake)))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["--config", str(config_file), "export", "--format", "focus", "--with-attribution",
                                      "--focus-version", version, "--out", str(out)])
    assert result.exit_code == 0, result.output
    lines = exported(out)
    parts = {line["x_run"]: line for line in lines if line["ResourceId"] == "i-a"}
    assert sorted(parts) == ["102", "idle", "pretrain-7"]
    money = {run: (p["BilledCost"], p["EffectiveCost"], p["ListCost"], p["ConsumedQuantity"]) for run, p in parts.items()}
    assert money == {"pretrain-7": (D(40), D(32), D(48), D("0.5")), "102": (D(10), D(8), D(12), D("0.125")),
                     "idle": (D(30), D(24), D(36), D("0.375"))}
    dims = ("x_team", "x_project", "x_experiment", "x_job_type", "x_job_state", "x_cluster", "x_user")
    assert tuple(parts["pretrain-7"][d] for d in dims) == ("nlp", "llm", "exp-1", "pretrain", "COMPLETED", "p5", "alice")
    assert tuple(parts["102"][d] for d in dims) == ("vision", "unallocated", "unallocated", "eval", "FAILED", "p5", "bob")
    # idle keeps the instance line's team, shows `idle` in run/job type/state and the cluster
    assert tuple(parts["idle"][d] for d in dims) == ("platform", "unallocated", "unallocated", "idle", "idle", "p5",
                                                     "unallocated")
    for run, ratio, gpu_hours, placed, name in [("pretrain-7", 0.5, 4, "job:101", "train"),
                                                ("102", 0.125, 1, "job:102", "eval"),
                                                ("idle", 0.375, 3, "idle:p5", "idle:p5")]:
        part = parts[run]
        assert part[f"{prefix}AllocatedMethodId"] == "spendlake-cluster-gpu-time"
        assert json.loads(part[f"{prefix}AllocatedMethodDetails"]) == {
            "Elements": [{"AllocatedRatio": ratio, "UsageUnit": "GPU-Hours", "UsageQuantity": gpu_hours}],
            "x_Placement": placed}
        assert (part[f"{prefix}AllocatedResourceId"], part[f"{prefix}AllocatedResourceName"]) == (placed, name)
        assert json.loads(part[f"{prefix}AllocatedTags"]) == {"spendlake/cluster": "p5", "spendlake/run": run}
        assert (part["ChargePeriodStart"], part["ChargePeriodEnd"]) == (datetime(2026, 11, 2, 10, tzinfo=UTC),
                                                                   datetime(2026, 11, 2, 11, tzinfo=UTC))
    # a line no cluster holds is exported whole, with no Allocated columns
    [storage] = [line for line in lines if line["ServiceName"] == "Amazon Simple Storage Service"]
    assert (storage["BilledCost"], storage["x_team"], storage["x_run"], storage[f"{prefix}AllocatedMethodId"]) == (
        D(5), "nlp", "unallocated", None)
    # every dollar (and hour of usage) once: the export's sums per period and currency are the lake's
    assert_ties_out(lake_sums(lake), export_sums(out), rows=False)
    [(hours,)] = duckdb.sql(f"SELECT sum(ConsumedQuantity) FROM read_parquet('{out}/*/*.parquet')").fetchall()
    assert hours == D(1)


def test_a_daily_line_is_exported_per_hour_and_ties_out(tmp_path):
    # $1,920 for a day of i-a = $80 an hour; job 101 holds all 8 GPUs 10:00-12:00 ($160); the
    # day's 24 hours are each one part (22 idle hours of $80, two of the job's).
    lake = make_lake(tmp_path, [line("2026-11-02T00:00:00", "1920", end="2026-11-03T00:00:00", resource="i-a",
                                     instance_type="p5.48xlarge")])
    add_jobs(lake, [job("101", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00")])
    export_focus(parse_config(cluster_config(lake)), ExportOptions(str(tmp_path / "out"), "1.3", attribution=True))
    lines = exported(tmp_path / "out")
    assert len(lines) == 24 and all(line["BilledCost"] == D(80) for line in lines)
    assert sorted(line["ChargePeriodStart"].hour for line in lines if line["x_run"] == "101") == [10, 11]
    assert_ties_out(lake_sums(lake), export_sums(tmp_path / "out"), rows=False)


def test_eks_split_rows_export_the_parent_hour_as_pod_parts(tmp_path):
    # tests/data/cur2-eks-split, AWS's worked example: the parent's first hour ($10) goes to its
    # pods by their split cost (1.85 + 2.35 + 3.18 + 2.35) and the unused 0.27 to the pods'
    # cluster's idle; the bill's $23.50 stays.
    cfg = parse_config({"lake": str(tmp_path / "lake"), "attribution": {"clusters": {"cluster_tag": "cluster"}},
                        "sources": [{"name": "cur2", "kind": "aws-cur2", "location": str(DATA / "cur2-eks-split")}]})
    ingest(cfg)
    export_focus(cfg, ExportOptions(str(tmp_path / "out"), "1.3", attribution=True))
    pods = {line["AllocatedResourceId"]: line for line in exported(tmp_path / "out")
            if line["AllocatedMethodId"] == "spendlake-cluster-eks-split"}
    assert sorted((placed, part["BilledCost"]) for placed, part in pods.items()) == [
        ("idle:gpu-cluster", D("0.27")), ("job:namespace1/pod1", D("1.85")), ("job:namespace1/pod3", D("2.35")),
        ("job:namespace2/pod2", D("3.18")), ("job:namespace2/pod4", D("2.35"))]
    [element] = json.loads(pods["job:namespace1/pod1"]["AllocatedMethodDetails"])["Elements"]
    assert element == {"AllocatedRatio": 0.185, "UsageUnit": "USD split cost", "UsageQuantity": 1.85}
    assert_ties_out(lake_sums(Lake.of(cfg)), export_sums(tmp_path / "out"), rows=False)


def test_a_cluster_hours_parts_contract_at_their_exact_share_of_the_lines_product(tmp_path):
    # $3 for an hour of i-a priced at 0.1 x PricingQuantity 1, no ContractedCost (FOCUS: the
    # product). Jobs 101 and 102 each hold its 8 GPUs for 20 minutes: thirds, $1 each and idle $1.
    # Each part's quantity is 0.3333333333333333 (one 0.3333333333333334): a product per part,
    # rounded to 12 decimals, contracted each at 0.033333333333, 0.099999999999 in all; the line's
    # product 0.1 split exactly is 0.033333333333 twice and the remainder, 0.033333333334, once.
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    relation(con, [line("2026-11-02T10:00:00", "3", resource="i-a", instance_type="p5.48xlarge")]).create_view("hour")
    priced = con.sql(f"SELECT * REPLACE (CAST('0.1' AS {MONEY}) AS ContractedUnitPrice, "
                     f"CAST('1' AS {QUANTITY}) AS PricingQuantity, 'Hrs' AS PricingUnit) FROM hour")
    lake.commit_costs(con, priced, source="cur", delivery_id="d1", periods=None)
    con.close()
    add_jobs(lake, [job("101", 8, "2026-11-02T10:00:00", "2026-11-02T10:20:00"),
                    job("102", 8, "2026-11-02T10:20:00", "2026-11-02T10:40:00")])
    export_focus(parse_config(cluster_config(lake)), ExportOptions(str(tmp_path / "out"), "1.3", attribution=True))
    parts = sorted((line["BilledCost"], line["ContractedCost"]) for line in exported(tmp_path / "out"))
    assert parts == [(D(1), D("0.033333333333")), (D(1), D("0.033333333333")), (D(1), D("0.033333333334"))]


def test_an_export_out_of_memory_names_the_temporary_directory_it_spills_to_not_the_lakes_staging(tmp_path,
                                                                                                  monkeypatch):
    # a reader's connection spills to a private folder of the system's temporary directory
    # (service/core/connection.py): the lake's _staging and `ingest` are the writer's advice
    import tempfile

    from service.attribution import per_line

    lake = make_lake(tmp_path, [GPU_HOUR, STORAGE])
    add_jobs(lake, JOBS)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump(cluster_config(lake)))
    monkeypatch.setattr(per_line, "EXPORT_MEMORY_LIMIT", "1MB")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    result = CliRunner().invoke(cli, ["--config", str(config_file), "export", "--format", "focus", "--with-attribution",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 3 and "out of memory" in result.output, result.output
    said = " ".join(result.output.split())
    assert f"temporary directory ({tmp_path / 'tmp'})" in said and "set TMPDIR" in said
    assert "_staging" not in said and "ingest" not in said and not (tmp_path / "out").exists()


def test_an_attributed_export_reads_with_the_exports_memory_not_a_readers(tmp_path, monkeypatch):
    # the allocation's statement under every cost column needs more than a reader's 381 MiB at
    # runs_bench's 10M month with clusters (out of memory in 2 of 5 runs); the rows it writes
    # pass through Python in batches of 16,384 instead of 65,536, which leaves DuckDB the room
    from attribution_helpers import query_memory_limits, readers_memory_limit

    from service.core.lake import EXPORT_MEMORY_LIMIT

    lake = make_lake(tmp_path, [GPU_HOUR, STORAGE])
    add_jobs(lake, JOBS)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump(cluster_config(lake)))
    limits = query_memory_limits(monkeypatch)
    result = CliRunner().invoke(cli, ["--config", str(config_file), "export", "--format", "focus", "--with-attribution",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    wanted = duckdb.connect(config={"memory_limit": EXPORT_MEMORY_LIMIT}).execute(
        "SELECT current_setting('memory_limit')").fetchall()[0][0]
    assert limits == [wanted] and wanted != readers_memory_limit()


def test_an_attributed_exports_periods_and_lookups_allocate_its_lines_once(tmp_path, monkeypatch):
    # each read of `export_lines` allocates every line again: 8 reads (the periods, the service
    # categories, 3 units, 3 known names) took ~200 of the export's ~550 s at 10M lines; the
    # Tax sums and the write read it once each
    lake = make_lake(tmp_path, [GPU_HOUR, STORAGE])
    add_jobs(lake, JOBS)
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump(cluster_config(lake)))
    reads = []
    execute = duckdb.DuckDBPyConnection.execute

    def counted(self, query, *args, **kwargs):
        if "FROM export_lines" in query and not query.startswith("DESCRIBE"):
            reads.append(query)
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", counted)
    result = CliRunner().invoke(cli, ["--config", str(config_file), "export", "--format", "focus", "--with-attribution",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert len(reads) == 1, reads
    lines = exported(tmp_path / "out")
    assert {(line["ServiceCategory"], line["x_run"]) for line in lines} == {
        ("Compute", "pretrain-7"), ("Compute", "102"), ("Compute", "idle"), ("Storage", "unallocated")}
