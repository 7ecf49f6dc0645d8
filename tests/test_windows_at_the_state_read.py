"""A window without `--until` ends at the data's end of the lake state the read sees
(RELIABILITY 43): an ingest committing between the question and its read must not cut the
new hours off the new data, nor mix two states in one answer. Each test commits a later
hour exactly when the read takes its snapshot."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from service.core.lake import Lake
from service.core.timewindow import Window
from tests.servicekit import commit, make_config

FIRST = [("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "4", {"team": "nlp"}),
         ("2026-11-26 05:00:00", "2026-11-26 06:00:00", "USD", "10", {"team": "vision"})]
LATER = ("2026-11-27 06:00:00", "2026-11-27 07:00:00", "USD", "500", {"team": "nlp"})
OLD_END, NEW_END = datetime(2026, 11, 27, 6, tzinfo=timezone.utc), datetime(2026, 11, 27, 7, tzinfo=timezone.utc)


@contextmanager
def committing_at_first_snapshot(monkeypatch, lake: Lake, committed: list):
    """Commit the later hour when the read under test takes its first snapshot."""
    from service.core import lake as lake_module
    from service.core import snapshot as snapshot_module

    take_snapshot = snapshot_module.take_snapshot

    def commit_first(of, *tables):
        if not committed:
            committed.append(commit(lake, "cur", [*FIRST, LATER], delivery_id="d2"))
        return take_snapshot(of, *tables)

    with monkeypatch.context() as patch:
        patch.setattr(snapshot_module, "take_snapshot", commit_first)
        patch.setattr(lake_module, "take_snapshot", commit_first)
        yield


@pytest.fixture
def lake_and_config(tmp_path):
    config = make_config(tmp_path)
    lake = Lake(config.lake)
    commit(lake, "cur", FIRST)
    return lake, config


def test_43_a_window_without_until_ends_at_the_data_end_of_the_state_it_reads(lake_and_config, monkeypatch):
    """`attribute --since 24h` while an ingest commits a later hour: the window's end is read
    before the query's snapshot; the answer re-anchors it to the state it read, so it holds
    the new hour (not the new data cut at the old end)."""
    from service.attribution import AttributionQuery, attribute_query
    from service.core.coverage import data_end

    lake, config = lake_and_config
    query = AttributionQuery.parse(config, since="24h", end=data_end(lake))
    assert query.window.until == OLD_END
    committed: list = []
    with committing_at_first_snapshot(monkeypatch, lake, committed):
        result = attribute_query(lake, config, query)
    assert committed
    assert result.window.until == NEW_END
    assert {row.values["team"]: row.cost for row in result.rows} == {"nlp": Decimal("504")}
    fixed = AttributionQuery.parse(config, since="2026-11-27T00:00:00Z", until="2026-11-27T06:00:00Z")
    assert attribute_query(lake, config, fixed).window == fixed.window  # an explicit end stays


def test_43_runs_take_the_same_re_anchoring():
    from service.attribution import RunsQuery
    from service.attribution.query import window_at

    query = RunsQuery.parse(since="24h", end=OLD_END)
    moved = window_at(query, {"cur": NEW_END, "other": None})
    assert moved.window == Window(NEW_END - timedelta(hours=24), NEW_END)
    assert window_at(query, {"cur": OLD_END}) is query
    fixed = RunsQuery.parse(since="24h", until="2026-11-27T06:00:00Z")
    assert window_at(fixed, {"cur": NEW_END}) is fixed


def test_43_commitments_window_ends_at_the_data_end_of_the_state_it_reads(lake_and_config, monkeypatch):
    from service.attribution import commitments
    from service.core.coverage import anchored_window
    from service.core.timewindow import data_anchored

    lake, config = lake_and_config
    window = anchored_window(lake, "24h")
    assert window.until == OLD_END
    committed: list = []
    with committing_at_first_snapshot(monkeypatch, lake, committed):
        result = commitments(lake, config, window, anchored=data_anchored("24h", None))
    assert committed and result.window == Window(NEW_END - timedelta(hours=24), NEW_END)
    assert result.to_json()["until"] == "2026-11-27T07:00:00Z"
    fixed = anchored_window(lake, "24h", "2026-11-27T06:00:00Z")
    assert commitments(lake, config, fixed, anchored=data_anchored("24h", "2026-11-27T06:00:00Z")).window == fixed


def test_43_rules_read_the_window_of_the_state_they_read(lake_and_config, monkeypatch):
    from service.findings import run as run_module

    lake, config = lake_and_config
    seen: list[Window] = []
    context = run_module.rule_context

    def seeing(lake, config, window, con, snapshot=None):
        seen.append(window)
        [(hours,)] = con.execute("SELECT count(*) FROM costs WHERE ChargePeriodStart >= ?",
                                 [window.since.replace(tzinfo=None)]).fetchall()
        seen.append(hours)
        return context(lake, config, window, con, snapshot)

    committed: list = []
    monkeypatch.setattr(run_module, "rule_context", seeing)
    with committing_at_first_snapshot(monkeypatch, lake, committed):
        run_module.run_rules(config, since="24h", dry_run=True)
    assert committed
    assert seen == [Window(NEW_END - timedelta(hours=24), NEW_END), 2]  # the new hour, in a window holding it


def test_43_a_report_is_gathered_again_when_an_ingest_commits_under_it(lake_and_config, monkeypatch):
    from service.core.errors import DataError
    from service.report import write

    lake, config = lake_and_config
    gathered: list[int] = []
    gather = write.gather

    def committing(config, lake, day):
        report = gather(config, lake, day)
        gathered.append(len(gathered))
        if len(gathered) == 1:  # an ingest commits while the first gather reads
            commit(lake, "cur", [*FIRST, LATER], delivery_id="d2")
        return report

    monkeypatch.setattr(write, "gather", committing)
    day = OLD_END.date()
    report = write.gather_consistently(config, lake, day)
    assert gathered == [0, 1]
    assert report == gather(config, lake, day)  # the second gather: the state that stands

    def always_committing(config, lake, day):
        commit(lake, "cur", FIRST, delivery_id=f"d{len(gathered) + 3}")
        gathered.append(len(gathered))
        return gather(config, lake, day)

    monkeypatch.setattr(write, "gather", always_committing)
    with pytest.raises(DataError, match="changed under the report 3 times"):
        write.gather_consistently(config, lake, day)


def test_43_rules_are_evaluated_again_when_a_commit_changes_the_lake_under_them(lake_and_config, monkeypatch):
    """An ingest (or a `forget` from another config) committing while the rules read: the
    rules judge the state that stands, not half of each (nor fail on a replaced file)."""
    from service.findings import run as run_module

    lake, config = lake_and_config
    seen: list[Window] = []
    context = run_module.rule_context

    def committing(lake, config, window, con, snapshot=None):
        seen.append(window)
        if len(seen) == 1:
            commit(lake, "cur", [*FIRST, LATER], delivery_id="d2")
        return context(lake, config, window, con, snapshot)

    monkeypatch.setattr(run_module, "rule_context", committing)
    run_module.run_rules(config, since="24h")
    assert seen == [Window(OLD_END - timedelta(hours=24), OLD_END), Window(NEW_END - timedelta(hours=24), NEW_END)]
