"""What a `forget` killed part-way leaves (lake49's follow-ups): `verify` names a source's leftover
records as `status` does, and a forget killed after its records, before the source's `_state/`
cleared, is seen by `status` and finished by the next `forget`."""

from __future__ import annotations

import pytest

from service.core import lake_sources
from service.core.lake import Lake
from tests.test_lake_integrity import BILLED, attributed_total, lake, spendlake, write_config  # noqa: F401

ORPHANED = "orphaned: trey is not in the config but the lake holds it"


def killed_at(monkeypatch, where: str, name: str, *, forget: Lake) -> None:
    """Run `forget.forget("trey")`, the process dying when `where` (a function of lake_sources
    or Lake's write_state) is called for `name`; then the stand-in goes."""
    owner = Lake if where == "write_state" else lake_sources
    original = getattr(owner, where)

    def dies(*args):
        if name in args:
            raise KeyboardInterrupt  # the process dies here
        return original(*args)

    monkeypatch.setattr(owner, where, dies)
    with pytest.raises(KeyboardInterrupt):
        forget.forget("trey")
    monkeypatch.setattr(owner, where, original)


def test_verify_names_the_records_a_killed_forget_left_and_what_finishes_them(lake, tmp_path, monkeypatch):
    # status said them (lake49), verify said nothing: exit 0, every row ok, the leftovers unnamed
    config, lake = lake
    write_config(tmp_path, name="trey-research")
    assert spendlake(config, "ingest").exit_code == 0
    killed_at(monkeypatch, "forget_records", "attribution_rollup", forget=Lake(lake.root, sources={"trey-research"}))
    verified = spendlake(config, "verify")
    assert verified.exit_code == 0, verified.output  # it counts nowhere: only configured sources count
    assert f"{ORPHANED} (attribution_rollup records" in verified.output
    assert "`spendlake forget trey` removes it" in verified.output
    assert spendlake(config, "forget", "trey", "--yes").exit_code == 0
    assert "orphaned" not in spendlake(config, "verify").output


def test_a_forget_killed_before_the_sources_state_cleared_is_seen_and_finished_by_the_next(lake, tmp_path,
                                                                                            monkeypatch):
    # killed after its files and records went: its record in _state/sources.json and what ingest knew
    # of its files stayed, and status, verify and forget ('the lake holds nothing of source trey') were silent
    config, lake = lake
    write_config(tmp_path, name="trey-research")
    assert spendlake(config, "ingest").exit_code == 0
    assert "trey" in lake.read_state("sources") and "trey" in lake.read_state("file_periods")
    killed_at(monkeypatch, "write_state", "file_periods", forget=Lake(lake.root, sources={"trey-research"}))
    assert not any(lake.root.glob("*/source=trey")) and not any(lake.root.glob("_ledger/*/*/source=trey"))
    assert "trey" in lake.read_state("sources")
    status = spendlake(config, "status")
    assert status.exit_code == 0 and f"{ORPHANED} (source state)" in status.output, status.output
    gone = spendlake(config, "forget", "trey", "--yes")
    assert gone.exit_code == 0 and "forgot trey: 0 cost rows" in gone.output, gone.output
    assert "trey" not in lake.read_state("sources") and "trey" not in lake.read_state("file_periods")
    assert "orphaned" not in spendlake(config, "status").output
    assert attributed_total(config) == BILLED
