"""`attribute_resources` (a commitment's owner in the metric tops and `spendlake commitments`)
reads the tag keys ingest recorded in the ledger, not every line's tags, and answers as the
scan of the lines did; a partition from before that record is scanned."""

from __future__ import annotations

import pytest

from service.attribution import compute, resources
from service.attribution.needs import Needs
from service.attribution.resources import attribute_resources
from service.attribution.rollup import rollup_view
from tests.attribution_helpers import config, line, make_lake

LINES = [line("2026-11-02 00:00", "6", tags={"user:Team": "NLP", "project": "llm"}, resource="sp-1"),
         line("2026-11-02 01:00", "2", tags={"team": "vision"}, resource="sp-1"),  # the latest line wins
         line("2026-11-02 00:00", "3", tags={"Team": "infra"}, resource="ri-2"),
         line("2026-11-02 00:00", "1", resource="i-3")]
WANT = {"sp-1": {"team": "vision", "project": "unallocated", "experiment": "unallocated"},
        "ri-2": {"team": "infra", "project": "unallocated", "experiment": "unallocated"}}


def test_a_resources_owner_comes_from_the_recorded_tag_keys_without_scanning_the_tags(tmp_path, monkeypatch):
    lake = make_lake(tmp_path, LINES)
    assert {key for entry in lake.ledger() for key in entry.tag_keys} == {"user:Team", "project", "team", "Team"}

    def scan():
        raise AssertionError("every line's tags decoded for their keys")
    monkeypatch.setattr(resources, "all_tag_keys_sql", scan)
    assert attribute_resources(lake, config(), ["sp-1", "ri-2"]) == WANT


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "before-the-record"])
def test_a_partition_without_recorded_tag_keys_is_scanned_for_them(tmp_path, monkeypatch, recorded):
    lake = make_lake(tmp_path, LINES)
    if not recorded:
        monkeypatch.setattr(resources, "recorded_tag_keys", lambda parts: None)
    assert attribute_resources(lake, config(), ["sp-1", "ri-2"]) == WANT


def test_the_owners_spellings_roll_up_a_period_without_its_stored_rollup_by_lines_alone(tmp_path, monkeypatch):
    # the spellings count lines: a period without its stored rollup is rolled up with no measure
    # summed and no hows kept (the bench's 10M-line month: commitment-unused 12.2 -> 10.5 CPU s)
    lake = make_lake(tmp_path, LINES)
    for file in (lake.root / "attribution_rollup").rglob("*.parquet"):
        file.unlink()
    asked = []

    def spy(lake, config, con, snapshot, view, needs=Needs(), split=None):
        asked.append((needs.measures, needs.hows, len(split.missing)))
        return rollup_view(lake, config, con, snapshot, view, needs, split)
    monkeypatch.setattr(compute, "rollup_view", spy)
    assert attribute_resources(lake, config(), ["sp-1", "ri-2"]) == WANT
    assert asked == [((), False, 1)]
