"""The lake keeps its own truth (RELIABILITY 35-39): a partition that is missing, truncated or
altered is an error for every query, `ingest` restores it, and only configured sources count."""

from __future__ import annotations

import json
import os
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core import integrity
from service.core.lake import Lake
from service.serve.families import integrity_families
from tests.conftest import SAMPLES, written_shorter

SAMPLE = SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"
BILLED = "193.807689048914"
WINDOW = ["--since", "2024-01-01", "--until", "2025-01-01"]
QUERIES = [["attribute", *WINDOW, "--format", "json"], ["attribute", "--check", "--format", "json"],
           ["status", "--format", "json"], ["rules", "run", "--dry-run", "--format", "json"],
           ["report", "--date", "2024-06-30"]]


def write_config(tmp_path: Path, name: str = "trey") -> Path:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                    "sources": [{"name": name, "kind": "focus", "location": str(tmp_path / "export")}]}))
    return path


@pytest.fixture
def lake(tmp_path):
    (tmp_path / "export").mkdir()
    shutil.copy(SAMPLE, tmp_path / "export" / SAMPLE.name)
    config = write_config(tmp_path)
    result = spendlake(config, "ingest")
    assert result.exit_code == 0, result.output
    return config, Lake(tmp_path / "lake")


def spendlake(config: Path, *args: str):
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def partition(lake: Lake, source: str = "trey") -> Path:
    return lake.root / "costs" / f"source={source}" / "billing_period=2024-06" / "data.parquet"


def ingested_sample(root: Path, source: str, config_name: str, export: str) -> Path:
    """A config of `root / config_name` on the lake `root / "lake"` whose source `source` (the
    Trey sample, copied into `root / export`) is ingested."""
    (root / export).mkdir()
    shutil.copy(SAMPLE, root / export / SAMPLE.name)
    config = root / config_name
    config.write_text(yaml.safe_dump({"lake": str(root / "lake"), "sources": [
        {"name": source, "kind": "focus", "location": str(root / export)}]}))
    assert spendlake(config, "ingest").exit_code == 0
    return config


def team_b(tmp_path: Path) -> Path:
    """A second config on the same lake, its source `team-b` (the same sample) ingested."""
    return ingested_sample(tmp_path, "team-b", "team-b.yaml", "export-b")


def attributed_total(config: Path) -> str | None:
    result = spendlake(config, "attribute", *WINDOW, "--format", "json")
    assert result.exit_code == 0, result.output
    totals = json.loads(result.output)["totals"]
    return totals[0]["cost"] if totals else None


def assert_every_query_exits_3_naming(config: Path, file: Path, state: str) -> None:
    for args in QUERIES:
        result = spendlake(config, *args)
        assert result.exit_code == 3, (args, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        assert "Traceback" not in result.output
        if args[0] != "status":
            assert str(file) in result.output and f"is {state}" in result.output, (args, result.output)
            assert "spendlake ingest --source trey" in result.output


def test_35_deleted_partition_makes_every_query_exit_3_and_ingest_restores_it(lake):
    config, lake = lake
    file = partition(lake)
    file.unlink()
    assert_every_query_exits_3_naming(config, file, "missing")
    status = spendlake(config, "status", "--format", "json")
    assert json.loads(status.output.split("\nerror:")[0])[0]["check"] == "missing"
    restored = spendlake(config, "ingest")
    assert restored.exit_code == 0 and "trey 2024-06: committed 1000 rows" in restored.output
    assert attributed_total(config) == BILLED


def test_36_truncated_partition_exits_3_without_traceback_and_ingest_restores_it(lake):
    config, lake = lake
    file = partition(lake)
    file.write_bytes(file.read_bytes()[:5000])
    assert_every_query_exits_3_naming(config, file, "truncated")
    assert "committed" in spendlake(config, "ingest").output  # never "unchanged"
    assert attributed_total(config) == BILLED


def test_a_shorter_partition_that_reads_is_altered_not_truncated(lake):
    """Another Parquet file of the period's first 100 lines written in its place: smaller than
    the ledger says, so every query called it truncated, a file cut short."""
    config, lake = lake
    file = partition(lake)
    written_shorter(file)
    assert_every_query_exits_3_naming(config, file, "altered")
    said = spendlake(config, "attribute", *WINDOW).output
    assert "a readable Parquet file of 100 rows where the ledger says 1,000: changed since it was recorded, not cut " \
           "short" in said, said
    file.write_bytes(file.read_bytes()[:3000])
    assert "is truncated (3,000 bytes, the ledger says" in spendlake(config, "attribute", *WINDOW).output
    assert "no readable Parquet footer: cut short" in spendlake(config, "attribute", *WINDOW).output


def test_36_a_file_cut_to_its_recorded_size_but_without_footer_is_truncated(lake):
    config, lake = lake
    file = partition(lake)
    data = file.read_bytes()
    file.write_bytes(data[:-8] + b"\0" * 8)  # same size, Parquet footer magic gone
    assert_every_query_exits_3_naming(config, file, "truncated")


def test_37_altered_bytes_are_caught_by_verify_and_then_by_every_query(lake):
    config, lake = lake
    file = partition(lake)
    data = bytearray(file.read_bytes())
    data[2000:2100] = bytes(100)  # same size, same footer: only the hash can tell
    file.write_bytes(bytes(data))
    verified = spendlake(config, "verify", "--format", "json")
    assert verified.exit_code == 3
    [row] = [r for r in json.loads(verified.output.split("\nerror:")[0]) if r["table"] == "costs"]
    assert row["check"] == "altered" and "SHA-256" in row["detail"]
    assert_every_query_exits_3_naming(config, file, "altered")
    assert "committed" in spendlake(config, "ingest").output  # the delivery id is unchanged
    assert spendlake(config, "verify").exit_code == 0
    assert attributed_total(config) == BILLED


def test_37_bytes_flipped_in_place_are_caught_by_the_next_query_before_any_verify(lake):
    """Same size, same footer, but the file was written after its commit: every read hashes it."""
    config, lake = lake
    file = partition(lake)
    data = bytearray(file.read_bytes())
    data[2000:6096] = bytes(b ^ 0xFF for b in data[2000:6096])  # 4 KB flipped, as an outsider did
    file.write_bytes(bytes(data))
    assert file.stat().st_size == lake.ledger()[0].size
    assert_every_query_exits_3_naming(config, file, "altered")
    assert "written after its commit" in spendlake(config, "attribute", *WINDOW).output
    assert "committed" in spendlake(config, "ingest").output  # restored, though the delivery id is unchanged
    assert attributed_total(config) == BILLED


def test_37_a_partition_touched_but_not_changed_reads_as_before(lake, monkeypatch):
    """A new modification time alone costs one hash per read, not an error, until the next
    ingest records the time again; a copy that keeps the times (cp -a, rsync -a) costs none."""
    config, lake = lake
    file = partition(lake)
    hashed = []
    real = integrity.sha256_file
    monkeypatch.setattr(integrity, "sha256_file", lambda path: hashed.append(path) or real(path))
    assert attributed_total(config) == BILLED and hashed == []
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert spendlake(config, "report", "--date", "2024-06-30", "--out", str(lake.root.parent / "r")).exit_code == 0
    assert hashed.count(file) == 1  # a command checks it many times (a report: 28), hashes it once
    assert attributed_total(config) == BILLED and hashed.count(file) == 1
    assert "unchanged" in spendlake(config, "ingest").output  # under its lock, the time is recorded again
    assert lake.ledger()[0].mtime_ns == file.stat().st_mtime_ns
    hashed.clear()
    assert attributed_total(config) == BILLED and hashed == []  # reads hash it no more


def test_37_a_partition_committed_before_times_were_recorded_gets_its_time_at_the_next_ingest(lake):
    config, lake = lake
    ledger = json.loads(lake.ledger_file.read_text())
    del ledger["entries"][0]["mtime_ns"]  # as a ledger of before 2026-12-06 holds it
    lake.ledger_file.write_text(json.dumps(ledger))
    assert lake.ledger()[0].mtime_ns is None and attributed_total(config) == BILLED
    assert "unchanged" in spendlake(config, "ingest").output
    assert lake.ledger()[0].mtime_ns == partition(lake).stat().st_mtime_ns


def test_37_a_rewritten_partition_with_other_numbers_fails_verify_on_its_sums(lake, tmp_path):
    config, lake = lake
    file = partition(lake)
    con = lake.connect()
    other = tmp_path / "other.parquet"
    con.execute("COPY (SELECT * REPLACE (BilledCost * 2 AS BilledCost) FROM read_parquet(?)) TO '"
                + str(lake.root / "_staging" / "x.parquet") + "'", [str(file)])
    con.close()
    shutil.move(lake.root / "_staging" / "x.parquet", other)
    entry = lake.ledger()[0]
    # Same rows; size differs, so even the quick check catches it (no hash needed)
    shutil.copy(other, file)
    assert file.stat().st_size != entry.size
    assert_every_query_exits_3_naming(config, file, "altered")


def test_38_ledger_and_data_disagree_ingest_reingests_with_the_same_delivery_id(lake):
    config, lake = lake
    before = lake.ledger()[0]
    partition(lake).unlink()
    again = spendlake(config, "ingest")
    assert "committed" in again.output and "unchanged" not in again.output
    after = lake.ledger()[0]
    assert after.delivery_id == before.delivery_id and after.sha256 == before.sha256
    assert "unchanged" in spendlake(config, "ingest").output  # and then it is a no-op again


def test_38_a_partition_the_ledger_does_not_list_is_an_error_not_extra_money(lake):
    config, lake = lake
    stray = partition(lake).parent.parent.parent / "source=trey" / "billing_period=2024-07" / "data.parquet"
    stray.parent.mkdir(parents=True)
    shutil.copy(partition(lake), stray)
    result = spendlake(config, *QUERIES[0])
    assert result.exit_code == 3 and "unlisted" in result.output and str(stray) in result.output


def test_38_a_lost_ledger_is_not_an_empty_lake_status_lists_its_partitions_unlisted_and_ingest_restores_it(lake):
    config, lake = lake
    (lake.root / "_ledger" / "deliveries.json").unlink()
    assert_every_query_exits_3_naming(config, partition(lake), "unlisted")
    for fmt in ("json", "table"):  # "the lake is empty" with exit 0 before
        result = spendlake(config, "status", "--format", fmt)
        assert result.exit_code == 3 and "trey 2024-06: unlisted" in result.output, result.output
    assert spendlake(config, "ingest").exit_code == 0
    assert attributed_total(config) == BILLED


def test_39_a_renamed_source_counts_nowhere_status_lists_it_and_forget_removes_it(lake, tmp_path):
    config, lake = lake
    write_config(tmp_path, name="trey-research")
    assert "trey-research 2024-06: committed" in spendlake(config, "ingest").output
    assert attributed_total(config) == BILLED  # not twice the bill
    check = json.loads(spendlake(config, "attribute", "--check", "--format", "json").output)
    assert {r["source"] for r in check} == {"trey-research"}
    status = spendlake(config, "status", "--format", "json")
    assert status.exit_code == 0
    rows = json.loads(status.output.split("\norphaned:")[0])
    assert {(r["source"], r["check"], r["billed_cost"]) for r in rows} == {
        ("trey", "orphaned", BILLED), ("trey-research", "ok", BILLED)}
    assert "`spendlake forget trey` removes it" in status.output
    refused = spendlake(config, "forget", "trey-research", "--yes")
    assert refused.exit_code == 2 and "is in the config" in refused.output
    asked = CliRunner().invoke(cli, ["--config", str(config), "forget", "trey"], input="n\n")
    assert asked.exit_code != 0 and partition(lake).exists()
    gone = spendlake(config, "forget", "trey", "--yes")
    assert gone.exit_code == 0 and "forgot trey: 1,000 cost rows" in gone.output
    assert not partition(lake).exists() and not (lake.root / "attribution_rollup" / "source=trey").exists()
    assert [e.source for e in lake.ledger()] == ["trey-research"]
    assert json.loads(spendlake(config, "status", "--format", "json").output)[0]["source"] == "trey-research"
    assert attributed_total(config) == BILLED


def test_39_44_forgetting_a_source_verify_found_damaged_clears_its_damage(lake, tmp_path):
    """A verify keeps the problems of partitions it did not check (another config's), and
    forget left the forgotten source's there: the damaged gauge stayed 1 and
    SpendlakeLakeDamaged fired for a partition no longer on the lake."""
    config, lake = lake
    file = partition(lake)
    data = bytearray(file.read_bytes())
    data[2000:2100] = bytes(100)  # same size, same footer: only verify's hash tells
    file.write_bytes(bytes(data))
    assert spendlake(config, "verify").exit_code == 3
    write_config(tmp_path, name="trey-research")
    assert spendlake(config, "ingest").exit_code == 0
    assert spendlake(config, "forget", "trey", "--yes").exit_code == 0
    assert lake.read_state("verify")["problems"] == []
    assert spendlake(config, "verify").exit_code == 0
    damaged = integrity_families(Lake(lake.root, sources={"trey-research"}))[0]
    assert sum(sample.value for sample in damaged.samples) == 0


def test_32_39_forget_removes_a_partition_folder_that_is_a_symlink_not_what_it_points_to(lake, tmp_path):
    config, lake = lake
    write_config(tmp_path, name="trey-research")
    assert spendlake(config, "ingest").exit_code == 0
    folder = lake.table_dir("costs") / "source=trey"
    elsewhere = tmp_path / "other-lake" / "costs" / "source=trey"  # another lake's data, linked in
    shutil.move(folder, elsewhere.parent.mkdir(parents=True) or elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    kept = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    gone = spendlake(config, "forget", "trey", "--yes")
    assert gone.exit_code == 0 and "forgot trey" in gone.output
    assert not folder.is_symlink() and not folder.exists()  # "forgot" and still listed as orphaned before
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == kept and kept
    assert "orphaned" not in spendlake(config, "status").output


def test_a_forget_killed_between_a_tables_files_and_their_records_is_finished_by_the_next(lake, tmp_path, monkeypatch):
    # killed there (break49: its 16th removal), the rollup's records stayed while the ledger and every folder
    # of the source were gone: `forget trey --yes` said "the lake holds nothing of source 'trey'", status was silent
    from service.core import lake_sources

    config, lake = lake
    write_config(tmp_path, name="trey-research")
    assert spendlake(config, "ingest").exit_code == 0
    records = lake.root / "_ledger" / "derived" / "attribution_rollup" / "source=trey"
    assert list(records.rglob("*.json"))
    original = lake_sources.forget_records

    def killed_at_the_rollups_records(root, table, source):
        if table == "attribution_rollup":
            raise KeyboardInterrupt  # the process dies here
        original(root, table, source)

    monkeypatch.setattr(lake_sources, "forget_records", killed_at_the_rollups_records)
    with pytest.raises(KeyboardInterrupt):
        Lake(lake.root, sources={"trey-research"}).forget("trey")
    monkeypatch.setattr(lake_sources, "forget_records", original)
    assert not any(lake.root.glob("*/source=trey")) and list(records.rglob("*.json"))
    status = spendlake(config, "status")
    assert "orphaned: trey is not in the config but the lake holds it (attribution_rollup records, source state)" in status.output
    gone = spendlake(config, "forget", "trey", "--yes")
    assert gone.exit_code == 0 and "forgot trey: 0 cost rows" in gone.output, gone.output
    assert not records.exists() and "orphaned" not in spendlake(config, "status").output
    assert attributed_total(config) == BILLED


def test_44_an_orphan_another_config_on_the_lake_declares_is_named_with_that_config(lake, tmp_path):
    config, lake = lake
    other = team_b(tmp_path)
    status = spendlake(other, "status")
    assert status.exit_code == 0, status.output
    declared = f"{config.resolve()}, another config on this lake, still declares it and reads it"
    assert declared in status.output and "forget trey" not in status.output
    asked = CliRunner().invoke(cli, ["--config", str(other), "forget", "trey"], input="n\n")
    assert declared in asked.output and partition(lake).exists()
    config.write_text("sources: [")  # being edited: unreadable now, so its sources stay its own
    assert declared in spendlake(other, "status").output
    config.unlink()  # the config gone: what it ingested is an orphan like any other
    assert "`spendlake forget trey` removes it" in spendlake(other, "status").output
    gone = spendlake(other, "forget", "trey", "--yes")
    assert gone.exit_code == 0 and "warning" not in gone.output and not partition(lake).exists()


def test_another_configs_sources_are_no_orphans_in_the_gauge_the_alert_reads(lake, tmp_path):
    """spendlake_lake_orphaned_sources counted another config's sources on the lake: with two configs
    SpendlakeOrphanedSources fired for as long as both ran. Counted once that config is gone."""
    from service.core.config import load_config

    config, _ = lake
    other = Lake.of(load_config(team_b(tmp_path)))

    def orphaned() -> float:
        [family] = [f for f in integrity_families(other) if f.name == "spendlake_lake_orphaned_sources"]
        return family.samples[0].value

    assert "trey" in other.orphans() and orphaned() == 0
    config.unlink()  # the config gone: its source counts nowhere
    assert orphaned() == 1


@pytest.mark.parametrize("how", ["copied", "moved"])
def test_44_a_lake_copied_or_moved_with_its_configs_keeps_the_other_configs_sources(tmp_path, how):
    home = tmp_path / "finops"  # two configs beside the lake, paths relative to their folder
    for team in ("a", "b"):
        (home / f"export-{team}").mkdir(parents=True)
        shutil.copy(SAMPLE, home / f"export-{team}" / SAMPLE.name)
        (home / f"{team}.yaml").write_text(yaml.safe_dump({"lake": "lake", "sources": [
            {"name": f"team-{team}", "kind": "focus", "location": f"export-{team}"}]}))
        assert spendlake(home / f"{team}.yaml", "ingest").exit_code == 0
    elsewhere = tmp_path / "new-home"
    (shutil.copytree if how == "copied" else shutil.move)(home, elsewhere)
    status = spendlake(elsewhere / "a.yaml", "status")
    assert status.exit_code == 0, status.output
    # moved: the recorded b.yaml is gone (was: forget suggested); copied: the original b.yaml reads
    # the original lake (was: named as this copy's reader)
    assert f"{elsewhere / 'b.yaml'}, another config on this lake, still declares it" in status.output, status.output
    assert "forget team-b" not in status.output
    assert attributed_total(elsewhere / "a.yaml") == BILLED
    if how == "copied":
        (elsewhere / "b.yaml").unlink()  # the copy's own other config gone: an orphan of the copy
        assert "`spendlake forget team-b` removes it" in spendlake(elsewhere / "a.yaml", "status").output
        assert "forget team-b" not in spendlake(home / "a.yaml", "status").output


def test_44_another_configs_verify_keeps_the_damage_this_configs_verify_found(lake, tmp_path):
    """Each config's verify rewrote `_state/verify.json` with its own sources alone: team B's
    verify erased what team A's found, and A's queries answered from the altered partition."""
    config, lake = lake
    other = team_b(tmp_path)
    file = partition(lake)
    data = bytearray(file.read_bytes())
    data[2000:2100] = bytes(100)  # same size, same footer: only verify's hash tells
    file.write_bytes(bytes(data))
    assert spendlake(config, "verify").exit_code == 3
    assert spendlake(other, "verify").exit_code == 0  # team B's partitions are sound
    assert_every_query_exits_3_naming(config, file, "altered")
    assert "committed" in spendlake(config, "ingest").output and spendlake(config, "verify").exit_code == 0
    assert spendlake(other, "verify").exit_code == 0 and attributed_total(config) == BILLED


def test_44_another_configs_rules_run_leaves_this_configs_findings_open(lake, tmp_path):
    """Team B's `rules run` resolved every finding team A's had stored (B's rules do not read
    A's source, so they saw none of them): A's open findings, and their alerts, were gone."""
    config, _ = lake

    def open_ids(path: Path) -> list[str]:
        listed = spendlake(path, "findings", "--format", "json")
        assert listed.exit_code == 0, listed.output
        return sorted(f["id"] for f in json.loads(listed.output))

    assert spendlake(config, "rules", "run", "--format", "json").exit_code == 0
    found = open_ids(config)
    assert found  # the sample's unallocated spend
    (tmp_path / "export-b").mkdir()
    (tmp_path / "export-b" / "bill.csv").write_text(SAMPLE.read_text(encoding="utf-8-sig").splitlines()[0] + "\n")
    other = tmp_path / "team-b.yaml"  # a second config on the lake: a bill of no lines yet
    other.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "team-b", "kind": "focus", "location": str(tmp_path / "export-b")}]}))
    assert spendlake(other, "ingest").exit_code == 0
    assert spendlake(other, "rules", "run", "--format", "json").exit_code == 0
    assert open_ids(config) == found
    config.unlink()  # its config gone: nobody else judges them, so the next run may resolve them
    assert spendlake(other, "rules", "run", "--format", "json").exit_code == 0
    assert open_ids(other) == []


def test_44_a_config_built_in_code_judges_every_finding_and_seen_by_keeps_only_stored_ones(lake, tmp_path):
    """A config with no file (built from a dict) never records what it saw, so every finding a
    file's config had seen stayed that config's and was never resolved by it; ids the findings
    store no longer holds stayed in `seen_by` for ever."""
    from service.core.config import parse_config
    from service.findings.run import run_rules
    from service.findings.store import load_findings

    config, lake_ = lake
    assert spendlake(config, "rules", "run", "--format", "json").exit_code == 0
    assert [f for f in load_findings(lake_) if f.status == "open"]  # the sample's unallocated spend
    state = lake_.read_state("rules")
    lake_.write_state("rules", {**state, "seen_by": {**state["seen_by"], "gone-id": str(config)}})
    (tmp_path / "export-b").mkdir()
    (tmp_path / "export-b" / "bill.csv").write_text(SAMPLE.read_text(encoding="utf-8-sig").splitlines()[0] + "\n")
    built = {"lake": str(tmp_path / "lake"), "sources": [
        {"name": "team-b", "kind": "focus", "location": str(tmp_path / "export-b")}]}
    (tmp_path / "team-b.yaml").write_text(yaml.safe_dump(built))
    assert spendlake(tmp_path / "team-b.yaml", "ingest").exit_code == 0
    run_rules(parse_config(built))  # sees none of them: they resolve
    findings = load_findings(lake_)
    assert findings and {f.status for f in findings} == {"resolved"}
    assert set(lake_.read_state("rules")["seen_by"]) <= {f.id for f in findings}


def test_39_inventory_of_an_unconfigured_source_is_not_read(lake, tmp_path):
    config, lake = lake
    con = lake.connect()
    for source in ("trey", "gone"):
        lake.commit_snapshot(con, con.sql("SELECT 'i-1' AS resource_id, 'us' AS region, 'team' AS key, "
                                          f"'{source}' AS value"),
                             table="resource_tags", source=source, key="snapshot_date", value="2024-06-30")
    con.close()
    from service.core.config import load_config

    seen = Lake.of(load_config(config)).query().execute("SELECT DISTINCT value FROM resource_tags").fetchall()
    assert seen == [("trey",)]
    assert Lake.of(load_config(config)).orphans() == {"gone": ["resource_tags"]}


def test_the_ledger_records_size_hash_and_sums_of_each_partition(lake):
    _, lake = lake
    [entry] = lake.ledger()
    file = partition(lake)
    assert entry.size == file.stat().st_size and len(entry.sha256) == 64
    assert entry.mtime_ns == file.stat().st_mtime_ns  # as committed: a read re-hashes a file written since
    assert entry.totals[0].billed_cost == Decimal(BILLED)


@pytest.mark.parametrize("damaged", [False, True])
def test_53_verify_on_a_full_disk_shows_what_it_checked_then_exits_3_disk_full(lake, monkeypatch, damaged):
    config, lake = lake
    if damaged:
        file = partition(lake)
        file.write_bytes(file.read_bytes()[:-100] + bytes(100))  # same size, footer gone
    real_dump = json.dump

    def full_disk(data, handle, **kw):  # the write of what verify found fails as on a full disk
        if "verify.json" in handle.name:
            raise OSError(28, "No space left on device")
        return real_dump(data, handle, **kw)

    monkeypatch.setattr(json, "dump", full_disk)
    result = spendlake(config, "verify", "--format", "csv")
    assert result.exit_code == 3 and "Traceback" not in result.output, result.output
    table, error = result.output.split("\nerror: ")  # main: the error alone, nothing checked shown
    assert table.splitlines()[1].startswith("trey,2024-06," + ("truncated" if damaged else "ok")), table
    assert error.startswith(f"{lake.root / '_state' / 'verify.json'}: disk full"), error
    assert "the checks above were not recorded" in error and "free disk space" in error
    assert not (lake.root / "_state" / "verify.json").exists()


def test_the_daily_job_verifies_the_lake_before_the_report_and_metrics_and_alerts_see_it(lake, tmp_path):
    from datetime import date, datetime, time, timezone

    from prometheus_client import CollectorRegistry

    from service.core.config import load_config
    from service.serve.metrics import JobMetrics, LakeCollector
    from service.serve.scheduler import ServiceScheduler, Tasks
    from service.serve.service import verify_lake

    config_path, lake = lake
    config = load_config(config_path)
    file = partition(lake)
    data = bytearray(file.read_bytes())
    data[3000:3050] = bytes(50)
    file.write_bytes(bytes(data))
    order: list[str] = []
    registry = CollectorRegistry()
    tasks = Tasks(ingest=lambda: None, rules=None, daily=lambda day: order.append("report"),
                  verify=lambda: (order.append("verify"), verify_lake(config)))
    metrics = JobMetrics(registry, tasks.names())
    scheduler = ServiceScheduler(lake, metrics, tasks, ingest_every=timedelta_hours(1), daily_at=time(6),
                                 clock=lambda: datetime(2024, 7, 1, 7, tzinfo=timezone.utc))
    scheduler.run_daily()
    assert order == ["verify", "report"]  # a failed verify does not stop the report
    assert registry.get_sample_value("spendlake_job_failures_total", {"job": "verify", "task": "verify"}) == 1
    assert lake.read_state("jobs")["daily"]["last_run_date"] == date(2024, 7, 1).isoformat()
    scrape = CollectorRegistry()
    scrape.register(LakeCollector(config))
    assert scrape.get_sample_value("spendlake_lake_partitions_damaged", {"state": "altered"}) == 1
    assert scrape.get_sample_value("spendlake_lake_verify_timestamp_seconds") > 0
    assert scrape.get_sample_value("spendlake_lake_readable") == 0  # spend cannot be read from a damaged lake


def timedelta_hours(hours: int):
    from datetime import timedelta

    return timedelta(hours=hours)


def test_35_a_damaged_cache_of_file_periods_is_read_again_not_a_stop_to_every_ingest(lake, tmp_path):
    config, lake = lake
    cache = lake.root / "_state" / "file_periods.json"
    assert json.loads(cache.read_text())["trey"]  # what the first ingest learnt of its file
    cache.write_text('{"trey": {')  # cut short
    result = spendlake(config, "ingest")
    assert result.exit_code == 0, result.output
    assert "file_periods.json" in result.output and "read again" in result.output
    assert json.loads(cache.read_text()) == {}  # written anew: the next new file is surveyed into it
    assert "read again" not in spendlake(config, "ingest").output
    assert attributed_total(config) == BILLED


def test_a_query_on_a_lake_without_a_bill_says_so_once(tmp_path):
    result = spendlake(write_config(tmp_path), "attribute", "--since", "7d", "--format", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["rows"] == []
    assert result.stderr.count("\n") == 1 and "is empty: run `spendlake ingest`" in result.stderr, result.stderr


def test_check_on_a_lake_without_a_bill_says_there_is_nothing_to_reconcile(tmp_path):
    config = write_config(tmp_path)
    result = spendlake(config, "attribute", "--check", "--format", "json")
    assert result.exit_code == 3 and json.loads(result.stdout) == []  # nothing reconciled is no check passed
    assert f"the lake at {tmp_path / 'lake'} is empty: nothing to reconcile — run `spendlake ingest`" in result.stderr


def test_verify_piped_without_format_on_an_empty_lake_prints_the_json_contract_not_a_sentence(tmp_path):
    # piped, the default format is JSON (as `budgets` since f200b9e): no partitions is [], not a sentence
    config = write_config(tmp_path)
    piped = spendlake(config, "verify")
    assert piped.exit_code == 0 and json.loads(piped.stdout) == [], piped.output
    table = spendlake(config, "verify", "--format", "table")
    assert table.exit_code == 0 and "holds no cost partition or inventory snapshot" in table.stdout, table.output


def test_a_lake_inside_a_source_location_is_skipped_not_read_as_a_second_bill(lake, tmp_path):
    config, lake = lake
    shutil.copytree(lake.root, tmp_path / "export" / "lake-backup")  # a backup kept beside the exports
    shutil.rmtree(lake.root)
    result = spendlake(config, "ingest")
    assert result.exit_code == 0, result.output
    assert f"trey {tmp_path / 'export' / 'lake-backup'}: skipped, a spendlake lake" in result.output, result.output
    assert "skipped, a folder whose name starts with" not in result.output  # the lake told once, not its folders
    assert attributed_total(config) == BILLED  # was twice: the backup's partitions read as FOCUS files
