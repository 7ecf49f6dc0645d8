"""A reader's listings of the lake's partitions and snapshot records beside `spendlake forget`,
which removes a source's folders under the lock while readers list without it: pathlib's glob
let FileNotFoundError out of a folder removed between its parent's listing and its own (it ignores
only PermissionError), so a status, query or verify beside it failed where the source was simply
gone. They list through files.listed, which lists again: the source is then not there."""

from __future__ import annotations

import pytest
from servicekit import ROWS, commit, make_config, removed_while_listed

from service.core.lake import Lake
from service.core.lake_sources import orphaned_sources
from service.core.schema import INVENTORY_TABLES
from service.core.snapshot_ledger import RECORDS, recorded, snapshot_checks, table_files

TABLE = next(iter(INVENTORY_TABLES))


def lake_with_a_source_going(tmp_path, folder: str) -> tuple[Lake, object]:
    """A lake holding source `cur`'s costs, and source `old`'s folder of `folder` (a table, or the
    records of TABLE's snapshots) with one partition in it, as `forget` is removing it."""
    lake = Lake(make_config(tmp_path).lake)
    commit(lake, "cur", ROWS)
    going = lake.root / folder / "source=old"
    (going / "snapshot_date=2026-11-01").mkdir(parents=True)
    (going / "snapshot_date=2026-11-01.json").write_text("{}")
    return lake, going


@pytest.mark.parametrize(("folder", "read", "found"), [
    ("costs", lambda lake: [c.source for c in lake.cost_checks()], ["cur"]),  # snapshot.check_partitions
    (TABLE, lambda lake: snapshot_checks(lake, [TABLE]), []),
    (f"{RECORDS}/{TABLE}", lambda lake: snapshot_checks(lake, [TABLE]), []),
    (f"{RECORDS}/{TABLE}", lambda lake: recorded(lake, TABLE), False),
    ("attribution_rollup", lambda lake: table_files(lake, "attribution_rollup"), []),
    (TABLE, lambda lake: lake.has_table(TABLE), False),  # Lake.has_table: findings, plans, runs ask it
], ids=["cost partitions", "snapshots", "snapshot records", "recorded", "a table's files", "has_table"])
def test_a_source_forgotten_while_a_reader_lists_it_is_gone_not_an_error(tmp_path, monkeypatch, folder, read, found):
    lake, going = lake_with_a_source_going(tmp_path, folder)
    removed_while_listed(monkeypatch, going)
    assert read(lake) == found
    assert not going.exists()


def test_the_orphans_listing_one_level_names_a_source_removed_after_its_table_was_listed(tmp_path, monkeypatch):
    """A guard (passes with pathlib's glob): `status`'s orphans list each table's source folders and
    never into them, so a source removed as they list is named (it was there), never an error."""
    lake, going = lake_with_a_source_going(tmp_path, "costs")
    removed_while_listed(monkeypatch, going)
    assert orphaned_sources(lake, {"cur"}, []) == {"old": ["costs"]}
