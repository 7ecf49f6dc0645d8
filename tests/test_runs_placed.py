"""The parts allocation placed per instance-hour, stored beside each period's rollup
(service/attribution/placed.py): `runs`' idle shares, a run's story's instances and idle-gpu's
held hours read them instead of allocating the window's raw lines again, with the same answers;
a missing, stale or damaged file is allocated from the raw lines (a query never writes), and the
files are recorded, verified and removed as the rollups are. Figures: tests/test_run_story.py's
lake (r1's row idle share 0.4688, its instances i-a and i-b; r2's 0.8125)."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone

import pytest
from click.testing import CliRunner

from service.attribution import RunsQuery, held_hours_lookup, run_inputs, run_rows, runs
from service.attribution import placed as placed_module
from service.attribution import rollup as rollup_module
from service.attribution.allocation_stage import drop_stage
from service.attribution.placed import PLACED_TABLE, placed_relation
from service.attribution.rollup import rollup_relation
from service.attribution.rollup_build import build_rollups
from service.attribution.rollup_versions import READ_TABLES, ROLLUP_TABLE, cost_partitions
from service.cli.main import cli
from service.core import derived_records, integrity
from service.core.integrity import sha256_file
from service.core.lake import Lake
from service.core.timewindow import Window
from tests.attribution_helpers import add_jobs
from tests.test_clusters_allocation import job
from tests.test_inventory_integrity import flip
from tests.test_lake_derived_files import alter_where_it_still_decodes
from tests.test_run_story import lake_with_a_story, story

WINDOW = Window(datetime(2026, 11, 2, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))


def answers(lake, cfg) -> tuple:
    """What the stored parts feed: every run's row (its idle share), r1's story, the held hours."""
    rows = runs(lake, cfg, RunsQuery.parse(since="2026-11-02", until="2026-11-03")).to_json()
    held = held_hours_lookup(lake, cfg)(WINDOW, "BilledCost")
    return rows, story(lake, cfg).to_json(), held


@pytest.fixture
def allocations(monkeypatch) -> list[str]:
    """Each time the window's raw lines are allocated for the parts (the fallback), its where."""
    calls = []
    parts_sql = run_inputs.parts_sql

    def counting(lake, con, config, where, *args):
        calls.append(where)
        return parts_sql(lake, con, config, where, *args)

    monkeypatch.setattr(run_inputs, "parts_sql", counting)
    return calls


def placed_files(lake: Lake) -> list:
    return sorted(lake.table_dir(PLACED_TABLE).glob("source=*/billing_period=*/*.parquet"))


def test_the_stored_parts_give_the_same_answers_as_the_raw_lines_without_allocating_them(tmp_path, allocations):
    lake, cfg, _ = lake_with_a_story(tmp_path)
    computed = answers(lake, cfg)
    assert len(allocations) == 3 and not placed_files(lake)  # the idle shares, the story's instances, the held hours
    assert [(r["run"], r["idle_share"]) for r in computed[0]["rows"]][:2] == [("r1", "0.4688"), ("r2", "0.8125")]
    build_rollups(lake, cfg.attribution)
    [rollup_file] = lake.table_dir(ROLLUP_TABLE).glob("source=*/billing_period=*/*.parquet")
    [placed] = placed_files(lake)
    assert placed.name == rollup_file.name  # the rollup's version: config, delivery, inventory and jobs
    allocations.clear()
    assert answers(lake, cfg) == computed
    assert allocations == []  # main: 3, the window's lines allocated for each


def test_a_new_jobs_snapshot_makes_the_stored_parts_stale_and_the_raw_lines_answer(tmp_path, allocations):
    lake, cfg, _ = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    before = answers(lake, cfg)
    add_jobs(lake, [job("8", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-b"], run_id="r1")])
    allocations.clear()
    after = answers(lake, cfg)
    assert after != before and len(allocations) == 3  # the stored parts are of the jobs before
    shutil.rmtree(lake.table_dir(PLACED_TABLE))
    assert answers(lake, cfg) == after


@pytest.mark.parametrize("damage", ["cut short", "altered"])
def test_a_damaged_placed_file_is_allocated_from_the_raw_lines_verified_and_written_again(tmp_path, allocations,
                                                                                          damage):
    lake, cfg, path = lake_with_a_story(tmp_path)
    computed = answers(lake, cfg)
    build_rollups(lake, cfg.attribution)
    [placed] = placed_files(lake)
    if damage == "cut short":
        placed.write_bytes(placed.read_bytes()[:placed.stat().st_size // 2])
    else:
        flip(placed, 100)  # same size and footer: only verify's hash finds it
    result = CliRunner().invoke(cli, ["--config", path, "verify"])
    assert result.exit_code == 3 and "attribution_placed file source=cur/billing_period=2026-11" in result.output, (
        result.output)
    allocations.clear()
    assert answers(lake, cfg) == computed and allocations  # read no more: the raw lines answer
    build_rollups(lake, cfg.attribution)  # written again
    assert CliRunner().invoke(cli, ["--config", path, "verify"]).exit_code == 0
    allocations.clear()
    assert answers(lake, cfg) == computed and allocations == []


def test_a_superseded_placed_file_goes_with_its_rollup_after_the_grace(tmp_path):
    lake, cfg, _ = lake_with_a_story(tmp_path)
    now = datetime.now(timezone.utc)
    build_rollups(lake, cfg.attribution, now=now)
    [old] = placed_files(lake)
    add_jobs(lake, [job("8", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-b"], run_id="r1")])
    build_rollups(lake, cfg.attribution, now=now)  # found superseded: kept for readers that hold it
    assert len(placed_files(lake)) == 2 and old.exists()
    build_rollups(lake, cfg.attribution, now=now + timedelta(hours=2))
    [current] = placed_files(lake)
    [rollup_file] = lake.table_dir(ROLLUP_TABLE).glob("source=*/billing_period=*/*.parquet")
    assert current != old and current.name == rollup_file.name
    assert not (lake.root / "_ledger" / "derived" / PLACED_TABLE / "source=cur" / "billing_period=2026-11"
                / f"{old.stem}.json").exists()  # its record went with it


def test_a_config_without_clusters_stores_no_placed_parts(tmp_path):
    lake, cfg, _ = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution.model_copy(update={"clusters": None}))
    assert list(lake.table_dir(ROLLUP_TABLE).rglob("*.parquet")) and not placed_files(lake)


def test_forgetting_a_source_removes_its_placed_parts_and_their_records(tmp_path):
    """`spendlake forget` removes every table of a source (SOURCE_TABLES): the placed parts and
    their records go with its costs and rollups, and nothing of the source is left orphaned."""
    lake, cfg, _ = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    assert placed_files(lake)
    assert PLACED_TABLE in lake.forget("cur")
    assert not placed_files(lake) and not (lake.table_dir(PLACED_TABLE) / "source=cur").exists()
    assert not (lake.root / "_ledger" / "derived" / PLACED_TABLE / "source=cur").exists()
    assert "cur" not in lake.orphans()


def test_a_file_where_a_placed_period_folder_should_be_is_none_stored_and_the_raw_lines_answer(tmp_path,
                                                                                                 allocations):
    """break45: `runs` exited 3 ("not a directory") when a file stood where a period's placed folder
    should be: the check's stat let NotADirectoryError out; it is derived data, so none is stored."""
    lake, cfg, _ = lake_with_a_story(tmp_path)
    computed = answers(lake, cfg)
    build_rollups(lake, cfg.attribution)
    [placed] = placed_files(lake)
    shutil.rmtree(placed.parent)
    placed.parent.write_text("not a folder")
    allocations.clear()
    assert answers(lake, cfg) == computed and allocations  # the raw lines answer


def test_rollup_counts_a_period_whose_placed_parts_it_wrote_again_as_built(tmp_path):
    """break45: `spendlake rollup` repaired a deleted placed file and said "0 built, 1 already stored"."""
    lake, cfg, _ = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    [placed] = placed_files(lake)
    placed.unlink()
    done = build_rollups(lake, cfg.attribution)
    assert (done.built, done.stored) == (1, 0) and placed.exists()
    again = build_rollups(lake, cfg.attribution)  # nothing to write
    assert (again.built, again.stored) == (0, 1)


def test_a_placed_file_altered_in_place_is_found_at_read_and_the_raw_lines_answer(tmp_path, allocations):
    """derived46: a byte flipped in place (same size, same footer) passed every read's check of
    size and footer rows, and `runs` answered from the altered parts (exit 0) until `spendlake
    verify`: the record holds the file's stat, and a read re-hashes a file whose stat changed."""
    lake, cfg, _ = lake_with_a_story(tmp_path)
    computed = answers(lake, cfg)
    build_rollups(lake, cfg.attribution)
    [placed] = placed_files(lake)
    alter_where_it_still_decodes(placed, "billed", lambda before, now: before != now)
    allocations.clear()
    assert answers(lake, cfg) == computed and allocations  # main: the altered idle shares, read from the file


def test_a_build_records_again_the_stat_of_a_placed_file_linked_since_and_reads_it_without_hashing(
        tmp_path, allocations, monkeypatch):
    """A link (`cp -al`) changes a file's change time, not its bytes: reads re-hash it and use it;
    the next build records its stat again, so reads stop re-hashing it."""
    lake, cfg, _ = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    [placed] = placed_files(lake)
    os.link(placed, tmp_path / "linked.parquet")
    hashed = []
    for module in (derived_records, integrity):  # the build's own hash, the reads' (known_sha256)
        monkeypatch.setattr(module, "sha256_file", lambda path: hashed.append(path) or sha256_file(path))
    computed = answers(lake, cfg)
    assert placed in hashed and allocations == []  # re-hashed, the same bytes: read
    build_rollups(lake, cfg.attribution)
    hashed.clear()
    assert answers(lake, cfg) == computed and allocations == []
    assert placed not in hashed  # without restat: hashed at each read


def test_a_jobs_ingest_and_build_while_runs_reads_leaves_it_the_placed_parts_of_its_rollups_jobs(tmp_path,
                                                                                                 monkeypatch):
    # the placed file was chosen by the lake's jobs at the time it was read, the rollup by those when the
    # session opened: a jobs ingest and its build between the two gave idle shares of other jobs than the costs
    lake, cfg, _ = lake_with_a_story(tmp_path)
    build_rollups(lake, cfg.attribution)
    before = answers(lake, cfg)[0]
    idle_shares = run_rows.idle_shares

    def a_writer_commits_first(*args):
        add_jobs(lake, [job("8", 8, "2026-11-02T11:00:00", "2026-11-02T12:00:00", instance_ids=["i-b"], run_id="r1")])
        build_rollups(lake, cfg.attribution)
        return idle_shares(*args)

    monkeypatch.setattr(run_rows, "idle_shares", a_writer_commits_first)
    during = runs(lake, cfg, RunsQuery.parse(since="2026-11-02", until="2026-11-03")).to_json()
    monkeypatch.setattr(run_rows, "idle_shares", idle_shares)
    after = answers(lake, cfg)[0]
    assert len(placed_files(lake)) == 2  # the build's and the one before it, kept for readers such as this one
    shares = {when: [(r["run"], r["cost"], r["idle_share"]) for r in rows["rows"] if r["currency"]]
              for when, rows in (("before", before), ("during", during), ("after", after))}
    assert shares["before"] == [("r1", "160.000000000000", "0.4688"), ("r2", "10.000000000000", "0.8125")]
    assert shares["after"] == [("r1", "80.000000000000", "0.5000")]  # the new snapshot holds job 8 alone
    # the costs of the rollup the session opened on, the idle shares of its placed parts (main: of the build's, 0.5000
    # for r1 and none for r2); its job records are the lake's as it reads them, as before
    assert shares["during"] == shares["before"]


def test_a_build_allocates_a_period_once_for_its_rollup_and_its_placed_parts_and_stores_the_same_rows(
        tmp_path, monkeypatch):
    # the rollup and the placed parts each allocated the period's lines (+2.1 CPU s at 1M beside 4.8): now the
    # attributed rows are staged once and grouped for both; the files hold the rows of the two allocations
    lake, cfg, _ = lake_with_a_story(tmp_path)
    allocated = []
    for module in (rollup_module, placed_module):
        inputs = module.allocation_inputs
        monkeypatch.setattr(module, "allocation_inputs",
                            lambda *args, inputs=inputs: allocated.append(1) or inputs(*args))
    assert build_rollups(lake, cfg.attribution).built == 1
    assert len(allocated) == 1  # main: 2
    [part] = cost_partitions(lake, lake.snapshot())
    [rollup_file] = lake.table_dir(ROLLUP_TABLE).glob("source=*/billing_period=*/*.parquet")
    [placed] = placed_files(lake)
    con = lake.query(tables=READ_TABLES)
    try:
        for name, allocate in (("rollup", lambda: rollup_relation(lake, cfg.attribution, con, part, None)),
                               ("placed", lambda: placed_relation(lake, cfg.attribution, con, part))):
            relation, *_, stage = allocate()  # each allocated alone, as before
            relation.create(f"apart_{name}")
            drop_stage(con, stage)
        for name, file in (("rollup", rollup_file), ("placed", placed)):
            stored = f"read_parquet('{file}', hive_partitioning = false)"
            assert con.sql(f"DESCRIBE SELECT * FROM {stored}").fetchall() == con.sql(
                f"DESCRIBE SELECT * FROM apart_{name}").fetchall()
            assert con.sql(f"SELECT count(*) FROM {stored}").fetchall()[0][0] > 2
            for one, other in ((stored, f"apart_{name}"), (f"apart_{name}", stored)):
                assert con.sql(f"SELECT * FROM {one} EXCEPT ALL SELECT * FROM {other}").fetchall() == [], name
    finally:
        con.close()
