"""Read helpers handed a `Lake.query` connection leave no result pending on it: DuckDB 2
refuses a relation (`con.sql(...)`, a view created from one) on a connection whose last
`execute` was read with `fetchone()` and not to its end (ResourceInUseException)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from service.attribution.compute import RollupSession
from service.attribution.jobs import newly_ended, newly_unasked
from service.attribution.run_inputs import run_span
from service.attribution.spend_tops import WindowSums
from service.core.timewindow import Window
from tests.test_ended_jobs import B, lake_seen_running, next_snapshot
from tests.test_layout import REPO, python_files


def reusable(con) -> bool:
    """The connection takes a view built from a relation after the helper's read."""
    con.sql("SELECT 1 AS one").create_view("after_the_helper")
    return con.execute("SELECT one FROM after_the_helper").fetchall() == [(1,)]


def jobs_lake(tmp_path):
    """Job A seen running (2026-11-02 10:30) and absent from the next window (11-05): ended."""
    lake, cfg = lake_seen_running(tmp_path)
    next_snapshot(lake, [B])
    return lake, cfg


def test_a_runs_span_leaves_its_connection_free_for_the_next_view(tmp_path):
    lake, _ = jobs_lake(tmp_path)
    con = lake.query()
    assert run_span(lake, con, "b") == (datetime(2026, 11, 2, 12, tzinfo=timezone.utc),
                                        datetime(2026, 11, 2, 14, tzinfo=timezone.utc), False)
    assert reusable(con)


def test_the_jobs_a_snapshot_ends_are_counted_leaving_the_connection_free(tmp_path):
    lake, _ = jobs_lake(tmp_path)
    con = lake.query()
    assert newly_ended(con, "slurm", "2026-11-05")[:2] == (1, "p5/A")
    assert reusable(con)
    assert newly_unasked(con, "slurm", "2026-11-05")[0] == 0
    assert reusable(con)


def test_a_metric_window_with_no_spend_leaves_the_sessions_connection_free(tmp_path):
    lake, cfg = jobs_lake(tmp_path)
    session = RollupSession(lake, cfg.attribution)
    window = Window(datetime(2026, 10, 1, tzinfo=timezone.utc), datetime(2026, 11, 1, tzinfo=timezone.utc))
    with WindowSums(session, cfg, window) as sums:
        assert sums.tops(window.until, "30d") == []  # no line in October: the sum is NULL
        assert reusable(session.con)


def test_no_module_reads_one_row_of_a_result_and_leaves_the_rest_pending():
    """A one-row read is `fetchall()[0]`: `fetchone()` on an aggregate leaves the result
    unfinished until a fetch returns nothing, and the connection refuses relations till then."""
    found = [f"{path.relative_to(REPO)}:{n}" for path in python_files()
             for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\.fetchone\(", text)]
    assert not found, "read these with fetchall()[0] (or fetch to the end): " + ", ".join(found)
