"""Two configs on one lake (service/core/claims.py), beyond one billing name: an inventory source
of a name another config takes otherwise is refused as a bill is; a refusal is recorded for the
config refused, the other's record untouched; a config left broken keeps its claim as its last run
read the name; `forget` with a config declaring no sources says it reads them all; a source known
by a failure's mark alone is the config's that declares it."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core import failure_marks
from service.core.claims import REFUSED_KEY
from service.core.config import load_config
from service.core.lake import Lake
from service.ingest.freshness import source_freshness
from service.serve.families import source_families
from tests.test_claims_one_name import OTHER, config
from tests.test_lake_integrity import BILLED, attributed_total, spendlake

HEADER = "job_id,start_time,end_time,gpus\n"


def inventory_config(root: Path, name: str, **jobs: str) -> Path:
    """`root / name`: jobs-file inventory sources (name → the CSV of one job it reads) into `root / lake`."""
    entries = []
    for source, job in jobs.items():
        (root / f"{name}-{source}.csv").write_text(f"{HEADER}{job},2024-09-20T10:00:00Z,2024-09-20T11:00:00Z,8\n")
        entries.append({"name": source, "kind": "jobs-file", "path": f"{name}-{source}.csv"})
    path = root / name
    path.write_text(yaml.safe_dump({"lake": "lake", "inventory": entries}))
    return path


def job_ids(root: Path, source: str) -> list[str]:
    files = str(root / "lake" / "jobs" / f"source={source}" / "*" / "data.parquet")
    return [row[0] for row in duckdb.sql(f"SELECT job_id FROM read_parquet('{files}') ORDER BY 1").fetchall()]


def test_an_inventory_name_another_config_reads_otherwise_is_refused_naming_it(tmp_path):
    first = inventory_config(tmp_path, "finance.yaml", trace="7")
    assert spendlake(first, "inventory").exit_code == 0
    second = inventory_config(tmp_path, "research.yaml", trace="8", other="9")
    refused = spendlake(second, "inventory")
    assert refused.exit_code == 3, refused.output  # was 0: research's job 8 taken into trace beside finance's 7
    assert f"trace (jobs-file): FAILED: inventory[0].name: source 'trace' is read by {first} too, another config on " \
           f"this lake, as jobs-file with path {tmp_path / 'finance.yaml-trace.csv'}; this config reads it as " \
           f"jobs-file with path {tmp_path / 'research.yaml-trace.csv'}, and taking it here would replace the " \
           "snapshots that config stored" in refused.output
    assert f"`spendlake --config {first} forget trace`" in refused.output
    assert "other (jobs-file) jobs snapshot_date=" in refused.output  # the config's other source goes on
    assert job_ids(tmp_path, "trace") == ["7"] and job_ids(tmp_path, "other") == ["9"]
    record = Lake(tmp_path / "lake").read_state("sources")["trace"]
    assert record["config"] == str(first) and not record["last_run_failed"]
    alike = inventory_config(tmp_path, "copy.yaml", trace="7")  # the same file and settings: one inventory
    (tmp_path / "copy.yaml-trace.csv").unlink()
    data = yaml.safe_load(alike.read_text())
    data["inventory"][0] |= {"path": "finance.yaml-trace.csv", "freshness_hours": 12}  # how fresh: not what it holds
    alike.write_text(yaml.safe_dump(data))
    assert spendlake(alike, "inventory").exit_code == 0


def test_a_refused_run_is_recorded_for_the_config_refused_the_other_configs_record_untouched(tmp_path):
    first = config(tmp_path, "finance.yaml", "export")
    assert spendlake(first, "ingest").exit_code == 0
    second = config(tmp_path, "research.yaml", "export-b", OTHER)
    lake = Lake(tmp_path / "lake")
    before = lake.read_state("sources")["trey"]
    assert spendlake(second, "ingest").exit_code == 3
    record = lake.read_state("sources")["trey"]
    assert {k: v for k, v in record.items() if k != REFUSED_KEY} == before  # finance.yaml's runs, as they were
    status = spendlake(second, "status", "--format", "table")
    assert f"failing: source trey: sources[0].name: source 'trey' is read by {first} too" in status.output, \
        status.output  # was not said: research.yaml's trey read finance.yaml's success
    assert "failing" not in spendlake(first, "status", "--format", "table").output
    now = datetime.now(timezone.utc)
    [refused] = source_freshness(load_config(second), Lake.of(load_config(second)), now)  # serve's /api/v1/status
    assert (refused.state, refused.failures_total, refused.last_success) == ("failing", 1, None)
    [held] = source_freshness(load_config(first), Lake.of(load_config(first)), now)
    assert (held.state, held.failures_total, held.last_error) == ("stale", 0, None)  # the sample is of 2024
    failures = {m.name: m.samples[0].value for m in source_families(load_config(second), Lake.of(load_config(second)))
                if m.name == "spendlake_source_failures"}
    assert failures == {"spendlake_source_failures": 1}
    first.unlink()  # finance.yaml gone: research.yaml takes the name, its refusals end
    assert spendlake(second, "ingest").exit_code == 0
    assert REFUSED_KEY not in lake.read_state("sources")["trey"]
    assert "failing" not in spendlake(second, "status", "--format", "table").output


def test_a_refused_inventory_run_is_recorded_for_the_config_refused(tmp_path):
    first = inventory_config(tmp_path, "finance.yaml", trace="7")
    assert spendlake(first, "inventory").exit_code == 0
    second = inventory_config(tmp_path, "research.yaml", trace="8")
    assert spendlake(second, "inventory").exit_code == 3
    assert spendlake(second, "inventory").exit_code == 3
    now = datetime.now(timezone.utc)
    [refused] = source_freshness(load_config(second), Lake.of(load_config(second)), now)
    assert (refused.state, refused.failures_total) == ("failing", 2) and "is read by" in refused.last_error
    [held] = source_freshness(load_config(first), Lake.of(load_config(first)), now)
    assert (held.state, held.failures_total, held.last_error) == ("ok", 0, None)


def test_a_config_left_broken_keeps_its_claim_as_its_last_run_read_the_name(tmp_path):
    first = config(tmp_path, "finance.yaml", "export")
    assert spendlake(first, "ingest").exit_code == 0
    first.write_text(first.read_text() + "  - [unclosed\n")  # left broken (unparseable)
    second = config(tmp_path, "research.yaml", "export-b", OTHER)
    refused = spendlake(second, "ingest")
    assert refused.exit_code == 3, refused.output  # was 0: finance.yaml's bill replaced while it was broken
    assert f"source 'trey' is read by {first} too, another config on this lake, as focus at {tmp_path / 'export'} " \
           "when it last ran it (that file cannot be read now: " in refused.output
    assert f"fix {first} (its claim stands while the file is there)" in refused.output
    assert attributed_total(second) == BILLED  # finance.yaml's bill, kept
    alike = config(tmp_path, "copy.yaml", "export")  # the location finance.yaml last read: one bill
    assert spendlake(alike, "ingest").exit_code == 0
    assert spendlake(second, "ingest").exit_code == 3  # copy.yaml ran it last, and reads it elsewhere
    first.unlink()
    alike.unlink()  # neither file is there: their claims end with them
    assert spendlake(second, "ingest").exit_code == 0


def test_forget_with_a_config_declaring_no_sources_says_it_reads_every_source(tmp_path):
    first = config(tmp_path, "finance.yaml", "export")
    assert spendlake(first, "ingest").exit_code == 0
    every = tmp_path / "every.yaml"
    every.write_text(yaml.safe_dump({"lake": "lake", "sources": []}))
    said = spendlake(every, "forget", "trey", "--yes")
    assert said.exit_code == 2 and "remove it from the config first" not in said.output, said.output  # was said
    assert "this config declares no sources, so it reads every source the lake holds, trey among them" in said.output
    assert f"{first} declares it and reads it: remove it there, then run `spendlake --config {first} forget trey`" \
           in said.output
    first.write_text(first.read_text().replace("name: trey", "name: trey-b"))  # renamed there
    said = spendlake(every, "forget", "trey", "--yes")
    assert f"run it with {first}, which ran the source last and no longer names it: `spendlake --config {first} " \
           "forget trey`" in said.output, said.output
    nothing = spendlake(every, "forget", "vision", "--yes")
    assert "the lake holds nothing of source 'vision'" in nothing.output and "sources it holds: trey" in nothing.output
    assert Lake(tmp_path / "lake").ledger()  # nothing forgotten


def test_another_configs_source_known_by_a_failure_mark_alone_is_said_to_be_that_configs(tmp_path):
    first = config(tmp_path, "finance.yaml", "export")
    second = config(tmp_path, "research.yaml", "export-b", OTHER)
    data = yaml.safe_load(second.read_text())
    data["sources"] = [{**data["sources"][0], "name": "vision"}, {"name": "extra", "kind": "focus", "location": "none"}]
    second.write_text(yaml.safe_dump(data))
    assert spendlake(first, "ingest").exit_code == 0
    assert spendlake(second, "ingest").exit_code == 3  # extra's location is missing: failed
    lake = Lake(tmp_path / "lake")
    state = lake.read_state("sources")
    failed = state.pop("extra")  # its failure could not be written (a full disk): a mark holds it
    lake.write_state("sources", state)
    failure_marks.leave(lake.root, "extra", failed["last_failure"], failed["last_error"])
    status = spendlake(first, "status", "--format", "table")
    assert f"orphaned: extra is not in the config but the lake holds it (source state); it counts nowhere here; " \
           f"{second}, another config on this lake, still declares it and reads it" in status.output, status.output
    assert "`spendlake forget extra`" not in status.output  # was advised
    asked = CliRunner().invoke(cli, ["--config", str(first), "forget", "extra"], input="n\n")
    assert f"{second}, another config on this lake, still declares it and reads it?" in asked.output, asked.output


def gpu_config(root: Path, name: str, **settings: object) -> Path:
    """`root / name`: one gpu-metrics source `gpus` reading `root / gm.parquet` (written once) into `root / lake`."""
    if not (root / "gm.parquet").exists():
        duckdb.sql(f"COPY (SELECT 'i-1' AS resource_id, 0 AS gpu, TIMESTAMP '2026-12-05' + INTERVAL (h) HOUR AS hour, "
                   f"50.0 AS util_pct FROM range(24) t(h)) TO '{root / 'gm.parquet'}'")
    path = root / name
    path.write_text(yaml.safe_dump({"lake": "lake", "inventory": [
        {"name": "gpus", "kind": "gpu-metrics", "path": "gm.parquet", **settings}]}))
    return path


def test_settings_a_gpu_metrics_file_does_not_read_leave_two_configs_reading_it_alike(tmp_path):
    """review51 item 4: a second config on one gpu-metrics file differing only in deadline_seconds (how long its
    Prometheus queries may take) or lookback_hours (the API's window; a `path` source reads every row) was refused
    (exit 3, 'with deadline_seconds 300.0; this config ... 120.0'): neither changes what it stores."""
    assert spendlake(gpu_config(tmp_path, "a.yaml"), "inventory").exit_code == 0
    for name, settings in (("b.yaml", {"deadline_seconds": 120}), ("d.yaml", {"lookback_hours": 744})):
        run = spendlake(gpu_config(tmp_path, name, **settings), "inventory")
        assert run.exit_code == 0, run.output
    (tmp_path / "other.parquet").write_bytes((tmp_path / "gm.parquet").read_bytes())
    other = spendlake(gpu_config(tmp_path, "e.yaml", path="other.parquet"), "inventory")
    assert other.exit_code == 3 and "is read by" in other.output  # another file is another inventory


def test_a_broken_configs_claim_recorded_before_a_setting_was_added_reads_it_as_its_default(tmp_path):
    """review51 item 4: the claim of a config left broken is its last run's key, every setting it had then; a
    setting a later version adds (its default) refused an identical config. A setting the record lacks differs
    only where this config sets it otherwise than its default."""
    first = inventory_config(tmp_path, "finance.yaml", trace="7")
    assert spendlake(first, "inventory").exit_code == 0
    first.write_text(first.read_text() + "inventory: [unclosed\n")  # left broken
    lake = Lake(tmp_path / "lake")
    state = lake.read_state("sources")
    key = state["trace"]["read_as"]["key"]
    settings = json.loads(key[1])
    del settings["gpu_unit"]  # as recorded by a version without the setting
    state["trace"]["read_as"]["key"] = [key[0], json.dumps(settings, sort_keys=True), key[2]]
    lake.write_state("sources", state)

    def reading(name: str, **more: str) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump({"lake": "lake", "inventory": [
            {"name": "trace", "kind": "jobs-file", "path": "finance.yaml-trace.csv", **more}]}))
        return path

    alike = spendlake(reading("copy.yaml"), "inventory")
    assert alike.exit_code == 0, alike.output  # was 3: 'as jobs-file ... when it last ran it'
    lake.write_state("sources", state)  # finance.yaml's claim, as its last run left it
    otherwise = spendlake(reading("percent.yaml", gpu_unit="percent"), "inventory")
    assert otherwise.exit_code == 3 and "when it last ran it" in otherwise.output, otherwise.output
