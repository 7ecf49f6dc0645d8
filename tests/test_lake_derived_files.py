"""The lake's derived files, rebuilt rather than failed on (RELIABILITY 36-37 for the attribution
rollups and the metric tops): one cut short or with its footer altered is computed from the
lake instead, the same numbers, said with -v, and `spendlake rollup` writes it again; a scrape
never fails on one."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

import duckdb
import pyarrow.parquet as pq
import pytest
from servicekit import commit

from service.attribution import attribute
from service.attribution import tops as tops_module
from service.attribution.rollup import ROLLUP_TABLE
from service.core.errors import DataError
from service.core.lake import Lake
from service.core.parquet_footer import read_footer
from service.core.snapshot_ledger import unnamed_damage
from service.core.timewindow import Window
from service.ingest.rollups import rollup
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
