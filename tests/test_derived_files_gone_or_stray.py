"""A derived file that is damaged, gone while its record is kept, or in a period folder the
ledger holds no cost partition for (renamed): `status` says so in one line naming what to run,
`verify` names each for what it is, and the rollup build writes the first again and removes the
others, the tops build the metric tops no build names a grace after (service/core/derived_sweep.py,
service/ingest/status.py). Lake: tests/test_run_story.py's."""

from __future__ import annotations

import csv
import io
import json
import shutil
from datetime import datetime, timedelta, timezone

from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from service.attribution.placed import PLACED_TABLE
from service.attribution.rollup_build import build_rollups
from service.attribution.tops import TOPS_TABLE, build_tops, tops_folder
from service.cli.main import cli
from service.core import commit, derived_records, derived_sweep
from service.core.config import load_config
from service.core.lake import Lake
from service.serve.app import Api
from service.serve.families import integrity_families
from tests.test_inventory_integrity import flip
from tests.test_lake_derived_files import unseen_by_its_stat
from tests.test_run_story import lake_with_a_story


def placed_file(lake: Lake):
    [placed] = lake.table_dir(PLACED_TABLE).glob("source=cur/billing_period=*/*.parquet")
    return placed


def derived_line(path: str) -> list[str]:
    result = CliRunner().invoke(cli, ["--config", path, "status", "--format", "table"])
    assert result.exit_code == 0, result.output
    return [line for line in result.stderr.splitlines() if line.startswith("derived:")]


def verify(path: str) -> tuple[int, list[dict]]:
    result = CliRunner().invoke(cli, ["--config", path, "verify", "--format", "json"])
    return result.exit_code, json.loads(result.stdout)


def test_status_says_a_placed_file_verify_found_altered_and_to_run_rollup(tmp_path):
    """derived46: `status` read only the cost partitions' verify state: a placed file verify
    found altered (here one whose stat the write kept, so only verify's hash sees it) went unsaid."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed = placed_file(lake)
    assert derived_line(path) == []
    flip(placed, 100)
    unseen_by_its_stat(lake, placed)
    assert verify(path)[0] == 3
    [line] = derived_line(path)  # main: none
    assert f"{PLACED_TABLE} file source=cur/billing_period=2026-11/{placed.name} is altered" in line, line
    assert "found by `spendlake verify`" in line and "run `spendlake rollup`" in line, line
    build_rollups(lake, cfg.attribution)
    assert derived_line(path) == []


def test_a_deleted_placed_files_kept_record_is_lost_in_verify_and_status_until_the_build(tmp_path):
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed = placed_file(lake)
    placed.unlink()
    code, rows = verify(path)
    assert code == 3  # main: 0, the record unread
    [row] = [r for r in rows if r["table"] == PLACED_TABLE]
    assert (row["check"], row["detail"], row["partition"]) == (
        "lost", derived_sweep.LOST, f"billing_period=2026-11/{placed.name}")
    [line] = derived_line(path)
    assert "is lost" in line and "run `spendlake rollup`" in line, line
    [snapshots] = [f for f in integrity_families(lake) if f.name == "spendlake_lake_snapshots_damaged"]
    assert {s.labels["state"]: s.value for s in snapshots.samples if s.labels["kind"] == PLACED_TABLE}["lost"] == 1
    said = CliRunner().invoke(cli, ["--config", path, "verify"]).output
    assert "deleted or moved by hand" in said and "failing disk" not in said, said  # review46: not the disk's doing
    build_rollups(lake, cfg.attribution)
    assert verify(path)[0] == 0 and placed.exists() and derived_line(path) == []


def test_csv_and_json_carry_the_derived_line_as_a_row_of_their_table_and_sources_too(tmp_path):
    """status47: the table said `derived:` on stderr; `--format json` and `csv` said nothing of a
    lost placed file (exit 0, the partitions alone), so a script never learnt of it."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed_file(lake).unlink()
    [line] = derived_line(path)

    def shown(*args: str):
        result = CliRunner().invoke(cli, ["--config", path, "status", *args])
        assert result.exit_code == 0 and "derived:" not in result.stderr, result.output  # a row, not stderr
        return result.stdout

    for sources in ((), ("--sources",)):
        rows = json.loads(shown(*sources, "--format", "json"))
        assert [f"derived: {r['note']}" for r in rows if r["note_kind"] == "derived"] == [line]  # main: none
        assert len({tuple(r) for r in rows}) == 1  # every row of the table has its keys
        notes = [(r["note_kind"], r["note"]) for r in rows if r["note_kind"] is not None]  # (the source is stale too)
        csv_rows = list(csv.DictReader(io.StringIO(shown(*sources, "--format", "csv"))))
        assert [(r["note_kind"], r["note"]) for r in csv_rows if r["note_kind"]] == notes and len(csv_rows) == len(rows)
    build_rollups(lake, cfg.attribution)
    rows = json.loads(shown("--format", "json"))
    assert rows and not [r for r in rows if r["note_kind"] == "derived"]


def test_verify_during_a_build_tells_no_file_lost_that_the_build_is_placing(tmp_path, monkeypatch):
    """review46: a build records a derived file before it moves it into place; a verify (the
    service's daily one, a cron's) in between said `lost`, exit 3, for a build going well."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    real, seen = commit.install, []

    def verify_then_install(staged, target):
        if PLACED_TABLE in str(target):  # its record is written, the file not yet in place
            seen.append(verify(path))
        real(staged, target)

    monkeypatch.setattr(commit, "install", verify_then_install)
    with lake.lock("ingest"):  # as every build holds it
        build_rollups(lake, cfg.attribution)
    assert seen and all(code == 0 and all(r["check"] != "lost" for r in rows) for code, rows in seen), seen


def test_a_renamed_placed_period_folder_is_stray_in_verify_and_removed_by_the_build(tmp_path):
    """derived46: verify called a renamed period folder's files "unrecorded: written before derived
    files were recorded", and no build removed them."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed = placed_file(lake)
    renamed = placed.parent.with_name("billing_period=2026-11.old")
    placed.parent.rename(renamed)
    code, rows = verify(path)
    assert code == 3  # its record is kept where the file was
    checks = {r["partition"]: (r["check"], r["detail"]) for r in rows if r["table"] == PLACED_TABLE}
    assert checks == {f"billing_period=2026-11.old/{placed.name}": ("stray", derived_sweep.STRAY),  # main: unrecorded
                      f"billing_period=2026-11/{placed.name}": ("lost", derived_sweep.LOST)}
    [line] = derived_line(path)
    assert "1 derived file(s) damaged or lost and 1 stray" in line, line
    build_rollups(lake, cfg.attribution)
    assert not renamed.exists() and placed.exists()  # main: the renamed folder kept for ever
    assert verify(path)[0] == 0 and derived_line(path) == []


def test_a_build_removes_the_kept_record_of_a_superseded_file_deleted_by_hand(tmp_path):
    """A record whose file is gone and which no build writes again (another config's version, or
    one dropped halfway) would keep verify at exit 3: the build removes it."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed = placed_file(lake)
    other = placed.with_name("0-other-version.parquet")
    other.write_bytes(placed.read_bytes())
    record = derived_records.record_file(lake.root, placed)
    derived_records.record_file(lake.root, other).write_bytes(record.read_bytes())
    other.unlink()
    assert verify(path)[0] == 3
    build_rollups(lake, cfg.attribution)
    assert not derived_records.record_file(lake.root, other).exists() and verify(path)[0] == 0


def test_a_placed_folder_copied_in_for_a_period_the_ledger_lacks_is_stray_and_removed_by_the_build(tmp_path):
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed = placed_file(lake)
    copied = placed.parent.with_name("billing_period=2026-10") / placed.name
    copied.parent.mkdir()
    copied.write_bytes(placed.read_bytes())
    code, rows = verify(path)
    assert code == 0 and [r["check"] for r in rows if r["partition"].startswith("billing_period=2026-10")] == ["stray"]
    assert derived_line(path) == [f"derived: 1 derived file(s) stray: {derived_sweep.STRAY}"]
    build_rollups(lake, cfg.attribution)
    assert not copied.parent.exists() and placed.exists() and derived_line(path) == []


def test_a_lost_ledger_makes_no_derived_file_stray(tmp_path):
    """review46: with the ledger lost, status (exit 3: the partitions unlisted, `spendlake ingest`
    restores it) also called every derived file stray and said `spendlake rollup` removes them,
    which refuses until the ingest."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    lake.ledger_file.unlink()
    shown = CliRunner().invoke(cli, ["--config", path, "status", "--format", "table"])
    assert shown.exit_code == 3 and "unlisted" in shown.output, shown.output
    assert "stray" not in shown.output, shown.output


def built_tops(lake: Lake, cfg, now: datetime):
    """The story's metric tops built at `now` (the grace's clock), as ingest and `spendlake rollup` do."""
    with lake.lock("ingest"):
        build_tops(lake, cfg, now=now)
    [tops] = tops_folder(lake, cfg).glob("*.parquet")
    return tops


def test_a_renamed_metric_tops_folder_is_stray_its_record_lost_and_the_build_sweeps_both_after_the_grace(tmp_path):
    """status47: verify called a renamed tops folder's file "unrecorded: written before derived files
    were recorded", its kept record went unsaid (lost() read the period tables alone), and the tops
    build kept the renamed folder for ever (its file named the lake's current state)."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    now = datetime.now(timezone.utc)
    tops = built_tops(lake, cfg, now)
    renamed = tops.parent.with_name(f"{tops.parent.name}.old")
    tops.parent.rename(renamed)
    code, rows = verify(path)
    checks = {r["partition"]: (r["check"], r["detail"]) for r in rows if r["table"] == TOPS_TABLE}
    assert code == 3 and checks == {  # main: exit 0, {renamed: unrecorded}
        f"{renamed.name}/{tops.name}": ("stray", derived_sweep.STRAY_TOPS),
        f"{tops.parent.name}/{tops.name}": ("lost", derived_sweep.LOST)}
    [line] = derived_line(path)
    assert "1 derived file(s) damaged or lost and 1 stray" in line and f"{TOPS_TABLE} file" in line, line
    [snapshots] = [f for f in integrity_families(lake) if f.name == "spendlake_lake_snapshots_damaged"]
    assert {s.labels["state"]: s.value for s in snapshots.samples if s.labels["kind"] == TOPS_TABLE}["lost"] == 1

    assert built_tops(lake, cfg, now) == tops  # written again; the stray one found, kept for the grace
    assert verify(path)[0] == 0 and derived_line(path) == [
        f"derived: 1 derived file(s) stray: {derived_sweep.STRAY_TOPS}"]
    built_tops(lake, cfg, now + timedelta(minutes=59))
    assert renamed.exists()
    built_tops(lake, cfg, now + timedelta(minutes=61))
    assert not renamed.exists() and tops.exists()  # main: kept for ever
    assert verify(path) == (0, [r for r in verify(path)[1] if r["check"] == "ok"]) and derived_line(path) == []


def test_metric_tops_copied_in_are_stray_and_a_copy_beside_the_current_file_no_longer_stops_the_build(tmp_path):
    """A folder copied in (`config=<owner> copy`, `source=all.bak`) is stray and goes a grace after the
    build found it; a file copied beside the current one (`<state> copy.parquet`) goes at the next build,
    which refused it as an invalid version name (main: the tops not refreshed until it was deleted)."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    now = datetime.now(timezone.utc)
    tops = built_tops(lake, cfg, now)
    copies = [tops.parent.with_name(f"{tops.parent.name} copy"),
              tops.parent.parent.with_name("source=all.bak") / tops.parent.name]
    for copy in copies:
        shutil.copytree(tops.parent, copy)
    beside = tops.with_name(f"{tops.stem} copy.parquet")
    shutil.copy(tops, beside)
    code, rows = verify(path)
    assert code == 0 and sorted(r["check"] for r in rows if r["table"] == TOPS_TABLE) == ["ok", "stray", "stray",
                                                                                          "stray"]
    assert built_tops(lake, cfg, now) == tops and not beside.exists()  # main: DataError, invalid version value
    built_tops(lake, cfg, now + timedelta(minutes=61))
    assert not any(copy.exists() for copy in copies) and not copies[1].parent.exists()
    assert [r["check"] for r in verify(path)[1] if r["table"] == TOPS_TABLE] == ["ok"]


def test_the_tops_build_forgets_the_record_of_a_tops_file_deleted_by_hand(tmp_path):
    lake, cfg, path = lake_with_a_story(tmp_path)
    tops = built_tops(lake, cfg, datetime.now(timezone.utc))
    other = tops.with_name("0" * 16 + ".parquet")  # another lake state's, as a build names them
    derived_records.record_file(lake.root, other).write_bytes(derived_records.record_file(lake.root, tops).read_bytes())
    code, rows = verify(path)
    assert code == 3 and [r["check"] for r in rows if r["table"] == TOPS_TABLE] == ["ok", "lost"]  # main: 0, unsaid
    built_tops(lake, cfg, datetime.now(timezone.utc))
    assert not derived_records.record_file(lake.root, other).exists() and verify(path)[0] == 0


def test_the_api_status_carries_the_derived_line_as_the_cli_json_does(tmp_path):
    """api47: `/api/v1/status` said nothing of a lost placed file, while `status --format json`
    carries it as a note row; it adds `lake_notes`, those rows' source, note_kind and note."""
    lake, cfg, path = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    placed_file(lake).unlink()
    [line] = derived_line(path)
    result = CliRunner().invoke(cli, ["--config", path, "status", "--format", "json"])
    cli_notes = [{key: r[key] for key in ("source", "note_kind", "note")} for r in json.loads(result.stdout)
                 if r["note_kind"] is not None]
    body = json.loads(Api(load_config(path), CollectorRegistry()).handle("/api/v1/status", {}, None).body)
    assert body["lake_notes"] == cli_notes and [f"derived: {n['note']}" for n in body["lake_notes"]] == [line]
    assert {"now", "sources", "jobs", "periods", "notes"} <= set(body)  # its keys as before
