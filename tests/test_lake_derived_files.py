"""The lake's derived files, rebuilt rather than failed on (RELIABILITY 36-37 for the attribution
rollups and the metric tops): one cut short or with its footer altered is computed from the
lake instead, the same numbers, said with -v, and `spendlake rollup` writes it again; a scrape
never fails on one."""

from __future__ import annotations

import json
import logging
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from servicekit import commit

from service.attribution import attribute
from service.attribution import tops as tops_module
from service.attribution.rollup_versions import ROLLUP_TABLE
from service.cli.main import cli
from service.core import derived_records
from service.core.errors import DataError
from service.core.integrity import sha256_file
from service.core.lake import Lake
from service.core.parquet_footer import read_footer
from service.core.lake_damage import unnamed_damage
from service.core.timewindow import Window
from service.ingest.rollups import rollup
from service.serve.metrics import LakeCollector
from service.serve.service import verify_lake
from tests.test_inventory_integrity import flip
from tests.test_metric_tops import ROWS, config_for, samples

WINDOW = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
DAMAGES = {"cut short": lambda data: data[:len(data) // 2], "footer altered": lambda data: data[:-8] + bytes(8)}


@pytest.fixture
def config(tmp_path):
    """A lake with one period, its rollup and metric tops stored."""
    config = config_for(tmp_path, shared=True)
    commit(Lake(config.lake), "cur", ROWS)
    rollup(config)
    return config


def answer(config) -> list:
    result = attribute(Lake.of(config), config, WINDOW, by=("team", "project"))
    return sorted((tuple(sorted(r.values.items())), r.currency, r.cost) for r in result.rows)


@pytest.mark.parametrize("damage", DAMAGES)
def test_36_a_damaged_rollup_is_rolled_up_from_the_raw_lines_and_written_again(config, caplog, damage):
    [file] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    before = answer(config)
    file.write_bytes(DAMAGES[damage](file.read_bytes()))
    with caplog.at_level(logging.INFO, logger="service.attribution.rollup"):
        assert answer(config) == before
    assert f"the stored rollup {file} is damaged" in caplog.text, caplog.text
    rollup(config)
    assert read_footer(file) is not None and answer(config) == before


@pytest.mark.parametrize("damage", [*DAMAGES, "bytes flipped"])
def test_37_damaged_metric_tops_are_computed_for_the_scrape_and_written_again(config, caplog, damage):
    [file] = (config.lake / tops_module.TOPS_TABLE).glob("source=all/config=*/*.parquet")
    stored = samples(config)
    if damage == "bytes flipped":
        flip(file, 4, 200)  # the first data page: pyarrow cannot decode it
    else:
        file.write_bytes(DAMAGES[damage](file.read_bytes()))
    with caplog.at_level(logging.INFO, logger="service.attribution.tops"):
        assert samples(config) == stored  # an exception from the collector before
    assert f"the stored tops {file} are damaged" in caplog.text, caplog.text
    rollup(config)
    assert pq.read_table(file).num_rows and samples(config) == stored


def test_37_a_rollup_page_duckdb_fails_on_without_naming_it_is_found_by_reading_the_unrecorded_files(config):
    [file] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    lake, original = Lake.of(config), file.read_bytes()
    unnamed = []  # flips DuckDB reports without the file's name ("Out of buffer" and the like)
    for start in range(4, len(original) - 200, 7):
        flip(file, start)
        unseen_by_its_stat(lake, file)
        try:
            answer(config)
        except (duckdb.Error, DataError) as exc:  # a DataError names the file already
            if isinstance(exc, duckdb.Error) and str(file) not in str(exc):
                unnamed.append(exc)
        file.write_bytes(original)
        if len(unnamed) == 2:
            break
    assert unnamed, "no flip of this rollup gave an error without its name"
    flip(file, 4, len(original) // 2)
    for exc in unnamed:
        damage = unnamed_damage(lake, exc)
        assert damage is not None and damage.where == str(file), damage
        assert "spendlake rollup" in damage.hint


def unseen_by_its_stat(lake: Lake, file: Path) -> None:
    """Record the file's stat as it is now, as if the write that altered it kept its stat (one in
    the tick it was recorded in, or a clock set back): what reads see only when DuckDB fails."""
    record = derived_records.record_file(lake.root, file)
    data = json.loads(record.read_text(encoding="utf-8"))
    record.write_text(json.dumps({**data, "stat": derived_records.stat_of(file.stat())}), encoding="utf-8")


def test_37_a_rollup_page_that_fails_only_past_the_first_rows_is_still_found(config):
    """A flip DuckDB reports only while fetching past the first rows (after `execute` returned,
    here in a file's last row group): the search for the damaged file decodes every page."""
    [stored] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    file = stored.with_name("0-big.parquet")  # a large unrecorded file of the table
    rows = 200_000
    pq.write_table(pa.table({"lines": pa.array(range(rows), pa.int64()),
                             "d_team": pa.array([f"team-{n % 997}" for n in range(rows)])}),
                   file, row_group_size=50_000, compression="zstd")
    lake, original = Lake.of(config), file.read_bytes()
    last = pq.ParquetFile(file).metadata.row_group(3).column(0)
    late = None
    with duckdb.connect() as con:
        for start in range(last.data_page_offset + 20, last.data_page_offset + last.total_compressed_size - 40, 97):
            flip(file, start)
            try:
                result = con.execute("SELECT * FROM read_parquet(?)", [str(file)])
            except duckdb.Error:
                file.write_bytes(original)
                continue  # fails at once: the test above
            try:
                result.fetchall()
            except duckdb.Error as exc:
                if str(file) not in str(exc):
                    late = exc
                    break
            file.write_bytes(original)
    assert late is not None, "no flip of the last row group gave an error without the file's name"
    damage = unnamed_damage(lake, late)
    assert damage is not None and damage.where == str(file), damage
    assert "spendlake rollup" in damage.hint


# ---- records: a page altered where it still decodes (issue 13 items 1 and 4) ----------------------

def write_config_file(config) -> Path:
    """The YAML of `config_for(tmp_path, shared=True)`, so the CLI reads the same config."""
    data = {"lake": str(config.lake), "service": {"listen": "127.0.0.1:0", "top_n": 2},
            "sources": [{"name": "cur", "kind": "focus", "location": str(config.lake.parent / "export")}],
            "attribution": {"shared": [{"match": {"service": "Amazon Elastic Compute Cloud"},
                                        "split": "proportional", "by": "team"}]}}
    path = config.lake.parent / "spendlake.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def verify(path: Path):
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    result = CliRunner().invoke(cli, ["--config", str(path), "verify", "--format", "json"])
    root.handlers[:], root.level = handlers, level  # the CLI sets up its own logging: caplog's handler back
    rows = json.loads(result.output.split("\nerror:")[0])
    return result, rows



def test_a_rollup_build_lists_each_period_folder_once(config, monkeypatch):
    """Which versions are superseded, and since when, come from one listing of the folder: the
    build asked twice (for the grace, then for damaged ones), globbing each period's folder twice."""
    [current] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    owner, data, inventory = current.stem.split("-")
    old = current.with_name(f"{owner}-{'0' * len(data)}-{inventory}.parquet")  # of an older delivery
    shutil.copyfile(current, old)
    shutil.copyfile(derived_records.record_file(config.lake, current), derived_records.record_file(config.lake, old))
    listed: list[Path] = []
    glob = Path.glob

    def counting_glob(self, pattern, *args, **kwargs):
        if self == current.parent:
            listed.append(self)
        return glob(self, pattern, *args, **kwargs)

    monkeypatch.setattr(Path, "glob", counting_glob)
    rollup(config)
    assert listed == [current.parent] and old.exists()  # superseded within the grace: kept


def test_37_damaged_derived_files_are_counted_by_the_lake_damage_metric_until_rollup_writes_them_again(config):
    """`spendlake_lake_snapshots_damaged{kind}` counts rollups and metric tops whose bytes
    changed, found by a read's quick check or by `verify`; not a snapshot, so not its alert."""
    [rollup_file] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    tops = sorted((config.lake / "metric_tops").glob("source=*/*=*/*.parquet"))
    rollup_file.write_bytes(rollup_file.read_bytes()[:rollup_file.stat().st_size // 2])
    flip(tops[0], 100)  # same size and footer: only verify's hash sees it
    result, _ = verify(write_config_file(config))
    assert result.exit_code == 3, result.output

    def damaged(kind: str, state: str) -> float | None:
        scrape = CollectorRegistry()
        scrape.register(LakeCollector(config))
        return scrape.get_sample_value("spendlake_lake_snapshots_damaged", {"kind": kind, "state": state})

    assert damaged("attribution_rollup", "truncated") == 1 and damaged("metric_tops", "altered") == 1  # main: None
    assert damaged("snapshot", "truncated") == damaged("attribution_rollup", "altered") == 0
    rollup(config)
    assert damaged("attribution_rollup", "truncated") == damaged("metric_tops", "altered") == 0

def alter_where_it_still_decodes(file: Path, column: str, differs) -> None:
    """Flip one bit in `column`'s pages where the file still reads whole, with the same size
    and footer, and `differs(original rows, rows now)` (a digit of a sum, a value's text)."""
    original = file.read_bytes()
    with duckdb.connect() as con:
        [(start, length)] = con.execute("SELECT data_page_offset, total_compressed_size FROM parquet_metadata(?) "
                                        "WHERE path_in_schema = ? AND row_group_id = 0", [str(file), column]).fetchall()
        read = f"SELECT * EXCLUDE ({column}), {column} FROM read_parquet(?) ORDER BY ALL"
        before = con.execute(read, [str(file)]).fetchall()
        for at in range(start, start + length):
            data = bytearray(original)
            data[at] ^= 0x01
            file.write_bytes(bytes(data))
            try:
                now = con.execute(read, [str(file)]).fetchall()
                pq.read_table(file)  # the scrape reads tops through pyarrow
            except (duckdb.Error, OSError, ValueError):
                continue
            if differs(before, now):
                return
    file.write_bytes(original)
    pytest.fail(f"no flip in {column} of {file} still decodes with other values")


def another_usd_sum(rows_before: list[tuple], rows_now: list[tuple]) -> bool:
    """The same groups (all but the last column, the one altered), another USD sum of it."""
    usd = [[r[-1] for r in rows if "USD" in r] for rows in (rows_before, rows_now)]
    return ([r[:-1] for r in rows_before] == [r[:-1] for r in rows_now] and None not in usd[1]
            and sum(usd[0]) != sum(usd[1]))


def test_37_a_rollup_altered_where_it_still_decodes_is_named_by_verify_then_rolled_up_from_the_raw_lines(
        config, caplog):
    [file] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    before = answer(config)
    alter_where_it_still_decodes(file, "billed", another_usd_sum)
    check = derived_records.check(Lake.of(config), file)  # size and footer rows as recorded, not the stat
    assert (check.state, check.detail) == ("altered", derived_records.REHASHED)  # main: ok, read as recorded
    result, rows = verify(write_config_file(config))
    assert result.exit_code == 3, result.output  # main: 0, the rollup unchecked
    [row] = [r for r in rows if r["table"] == ROLLUP_TABLE]
    assert row["check"] == "altered" and row["source"] == "cur" and row["billing_period"] == "2026-11"
    assert "SHA-256" in row["detail"] and "USD billed: recorded 177.300000000000" in row["detail"], row
    assert f"error: {file}" in result.output and "spendlake rollup" in result.output, result.output
    with caplog.at_level(logging.INFO, logger="service.attribution.rollup"):
        assert answer(config) == before  # main: the altered sum
    assert f"the stored rollup {file} is damaged" in caplog.text and "found by `spendlake verify`" in caplog.text
    rollup(config)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="service.attribution.rollup"):
        assert answer(config) == before
    assert "rolled up from the raw lines" not in caplog.text  # the stored file, written again, is read
    result, rows = verify(write_config_file(config))
    assert result.exit_code == 0 and {r["check"] for r in rows} == {"ok"}, result.output


def test_37_a_damaged_superseded_rollup_is_removed_by_the_next_build_not_kept_for_the_grace(config):
    """A rollup version superseded by a re-delivery is kept an hour for readers that still hold
    it; damaged, `verify` names it and says to run `spendlake rollup`, so that build removes it."""
    [current] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    owner, data, inventory = current.stem.split("-")
    old = current.with_name(f"{owner}-{'0' * len(data)}-{inventory}.parquet")  # of an older delivery
    shutil.copyfile(current, old)
    shutil.copyfile(derived_records.record_file(config.lake, current), derived_records.record_file(config.lake, old))
    rollup(config)
    assert old.exists()  # sound and within the grace: kept for the readers that may hold it
    old.write_bytes(old.read_bytes()[:old.stat().st_size // 2])
    result, _ = verify(write_config_file(config))
    assert result.exit_code == 3 and f"error: {old}" in result.output and "spendlake rollup" in result.output, result.output
    rollup(config)
    assert not old.exists() and not derived_records.record_file(config.lake, old).exists()  # main: kept an hour
    result, rows = verify(write_config_file(config))
    assert result.exit_code == 0 and {r["check"] for r in rows} == {"ok"}, result.output


def test_37_another_configs_damaged_rollup_is_removed_by_the_next_build(config):
    """A rollup of the current data as another config reads it (the service's config beside a
    CLI user's) is kept for that config; damaged, `verify` says to run `spendlake rollup`, and
    that build removes it (main: kept, so verify and SpendlakeDerivedFileDamaged stayed failing
    until the next delivery); the other config's queries roll it up from the raw lines."""
    [current] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    owner, data, inventory = current.stem.split("-")
    other = current.with_name(f"{'0' * len(owner)}-{data}-{inventory}.parquet")  # another owner's
    shutil.copyfile(current, other)
    shutil.copyfile(derived_records.record_file(config.lake, current), derived_records.record_file(config.lake, other))
    rollup(config)
    assert other.exists()  # sound: another config reads it
    other.write_bytes(other.read_bytes()[:other.stat().st_size // 2])
    result, _ = verify(write_config_file(config))
    assert result.exit_code == 3 and f"error: {other}" in result.output and "spendlake rollup" in result.output
    rollup(config)
    assert not other.exists() and not derived_records.record_file(config.lake, other).exists()
    result, rows = verify(write_config_file(config))
    assert result.exit_code == 0 and {r["check"] for r in rows} == {"ok"}, result.output


def test_37_metric_tops_altered_where_they_still_decode_are_named_by_verify_then_computed(config, caplog):
    [file] = (config.lake / tops_module.TOPS_TABLE).glob("source=all/config=*/*.parquet")
    stored = samples(config)

    def other_value(rows_before, rows_now):  # a value's text changed, still a number
        values = [r[-1] for r in rows_now]
        return rows_before != rows_now and all(re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", v) for v in values)

    alter_where_it_still_decodes(file, "value", other_value)
    assert samples(config) == stored  # its stat changed: re-hashed, computed (main: read altered until verify)
    with pytest.raises(DataError) as failed:  # the service's daily verify job
        verify_lake(config)
    assert failed.value.where == str(file) and "is altered" in failed.value.message
    assert "spendlake rollup" in failed.value.hint
    with caplog.at_level(logging.INFO, logger="service.attribution.tops"):
        assert samples(config) == stored
    assert f"the stored tops {file} are damaged" in caplog.text, caplog.text
    rollup(config)
    result, rows = verify(write_config_file(config))
    assert result.exit_code == 0 and samples(config) == stored
    [row] = [r for r in rows if r["table"] == tops_module.TOPS_TABLE]
    assert (row["check"], row["billing_period"], row["partition"]) == ("ok", None, f"{file.parent.name}/{file.name}")


def test_derived_files_are_recorded_with_size_rows_hash_and_sums_and_dropped_with_them(config):
    [file] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    [tops] = (config.lake / tops_module.TOPS_TABLE).glob("source=all/config=*/*.parquet")
    record = json.loads(derived_records.record_file(config.lake, file).read_text())
    assert (record["size"], record["rows"], record["sha256"]) == (file.stat().st_size, read_footer(file).rows,
                                                                  sha256_file(file))
    # the ledger's totals of the period: every dollar in the rollup once
    assert (record["sums"]["USD"]["billed"], record["sums"]["EUR"]["billed"]) == ("177.300000000000",
                                                                                "1000.000000000000")
    tops_record = json.loads(derived_records.record_file(config.lake, tops).read_text())
    assert tops_record["sha256"] == sha256_file(tops) and tops_record["sums"] is None
    derived_records.drop_versions(config.lake, file.parent, [file.stem])
    assert not file.exists() and not derived_records.record_file(config.lake, file).exists()
    Lake.of(config).forget("cur")
    assert not (config.lake / derived_records.DERIVED_RECORDS / ROLLUP_TABLE / "source=cur").exists()


@pytest.mark.parametrize("record", ["removed", "size", "rows"])
def test_36_a_rollup_without_its_record_is_rolled_up_from_the_raw_lines_and_written_again_with_one(config, caplog,
                                                                                                    record):
    [file] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    before = answer(config)
    recorded = derived_records.record_file(config.lake, file)
    if record == "removed":
        recorded.unlink()  # as a rollup from before records were kept
    else:  # a number edited to text by hand: was a traceback from every query ('<' between 'int' and 'str',
        data = json.loads(recorded.read_text())  # "Cannot specify ',' with 's'")
        recorded.write_text(json.dumps({**data, record: str(data[record])}))
    with caplog.at_level(logging.INFO, logger="service.attribution.rollup"):
        assert answer(config) == before
    assert f"the stored rollup {file} is unrecorded" in caplog.text, caplog.text
    result, rows = verify(write_config_file(config))
    assert result.exit_code == 0 and [r["check"] for r in rows if r["table"] == ROLLUP_TABLE] == ["unrecorded"]
    rollup(config)
    assert derived_records.check(Lake.of(config), file).ok


def test_12_a_rollup_clears_what_a_killed_rollup_left_staged(config):
    """A rollup killed mid-write (SIGKILL: no `finally` runs) leaves its staged file and its
    scratch folder; the next `spendlake rollup` removes them under the lake lock, as ingest does."""
    lake = Lake.of(config)
    [current] = (config.lake / ROLLUP_TABLE).glob("source=cur/billing_period=*/*.parquet")
    lake.staging.mkdir(exist_ok=True)
    shutil.copyfile(current, lake.staging / f"{ROLLUP_TABLE}-{'a' * 32}.parquet")
    scratch = lake.staging / f"scratch-{'b' * 32}"
    scratch.mkdir()
    (scratch / "duckdb_temp_block-0.block").write_bytes(bytes(4096))  # a DuckDB spill
    before = answer(config)
    rollup(config)
    assert sorted(p.name for p in lake.staging.iterdir()) == []
    assert answer(config) == before


def test_a_shorter_derived_file_that_reads_is_altered_a_cut_one_truncated():
    """A rollup or metric tops file smaller than its record: truncated only without a readable
    footer (cut short); one that reads is another file written in its place."""
    record = {"size": 5000, "rows": 30, "id": "x"}
    assert derived_records.judge(record, 4000, lambda: 10) == (
        "altered", "4,000 bytes, the record says 5,000, and a readable Parquet file of 10 rows where the record says "
                   "30: changed since it was recorded, not cut short")
    assert derived_records.judge(record, 4000, lambda: None) == (
        "truncated", "4,000 bytes, the record says 5,000, and no readable Parquet footer: cut short")
    assert derived_records.judge(record, 6000, lambda: 30) == ("altered", "6,000 bytes, the record says 5,000")
