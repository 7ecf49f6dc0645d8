"""Tag keys recorded at ingest (bench/README.md, runs_bench): each ledger entry names the
distinct keys of its partition's Tags, and attribution reads them there instead of decoding
every line's Tags map per query; a ledger written before that record is read as before."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

from service.attribution.api import attribute
from service.core.lake import LEDGER_FILE, Lake
from service.core.timewindow import Window
from tests.attribution_helpers import config, line, make_lake

WINDOW = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc))


def lines() -> list[dict]:
    return [line("2026-11-01 00:00", "2", tags={"Team": "nlp", "owner": "ana"}, resource="i-1"),
            line("2026-11-01 01:00", "1", tags={"user:team": "vision"}, resource="i-2"),
            line("2026-11-01 02:00", "0.5", resource="bucket-x")]


def rewrite_ledger(lake: Lake, change) -> None:
    ledger = json.loads((lake.root / LEDGER_FILE).read_text())
    for item in ledger["entries"]:
        change(item)
    (lake.root / LEDGER_FILE).write_text(json.dumps(ledger))


def by_team(lake: Lake) -> dict[str, Decimal]:
    result = attribute(lake, config({"dimensions": {"team": {"tags": ["team"]}}}, lake), WINDOW, by=("team",))
    return {row.values["team"]: row.cost for row in result.rows}


def test_ingest_records_each_partitions_tag_keys_in_the_ledger(tmp_path):
    lake = make_lake(tmp_path, lines())
    [entry] = lake.ledger()
    assert entry.tag_keys == ("Team", "owner", "user:team")
    assert json.loads((lake.root / LEDGER_FILE).read_text())["entries"][0]["tag_keys"] == ["Team", "owner", "user:team"]


def test_attribution_reads_the_recorded_keys_not_the_lines(tmp_path):
    lake = make_lake(tmp_path, lines())
    assert by_team(lake) == {"nlp": Decimal(2), "vision": Decimal(1), "unallocated": Decimal("0.5")}
    rewrite_ledger(lake, lambda item: item.update(tag_keys=["Team"]))  # a record naming one key only
    assert by_team(lake) == {"nlp": Decimal(2), "unallocated": Decimal("1.5")}


def test_a_ledger_without_tag_keys_is_read_from_the_partition(tmp_path):
    lake = make_lake(tmp_path, lines())
    rewrite_ledger(lake, lambda item: item.pop("tag_keys"))  # as ingest wrote it before 2026-12
    assert lake.ledger()[0].tag_keys is None
    assert by_team(lake) == {"nlp": Decimal(2), "vision": Decimal(1), "unallocated": Decimal("0.5")}


def test_a_ledger_entry_with_a_field_of_a_later_version_is_still_read(tmp_path):
    """Each new ledger field (data_through, tag_keys) was a one-way upgrade: an earlier
    spendlake refused the whole ledger. A field it does not know is left out instead."""
    lake = make_lake(tmp_path, lines())
    rewrite_ledger(lake, lambda item: item.update(a_later_field={"any": "value"}))
    [entry] = lake.ledger()
    assert entry.tag_keys == ("Team", "owner", "user:team") and entry.rows == 3
    assert by_team(lake) == {"nlp": Decimal("2"), "vision": Decimal("1"), "unallocated": Decimal("0.5")}
