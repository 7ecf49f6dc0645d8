"""The ended records only snapshots set aside (a clock ahead wrote them) held, kept in the run's own
snapshot (service/ingest/jobs_ahead.py): a pod is its uid there as in a day's snapshot taken again
(job_windows.kept_earlier), whatever its source's `cluster` was named when each was read."""

from __future__ import annotations

from datetime import datetime

import duckdb

from service.ingest.jobs_ahead import hold_ended, with_ended

COLUMNS = "record_id, scheduler, cluster, job_id, start_time, end_time"
ENDED = datetime(2026, 12, 1, 2)


def pods(con: duckdb.DuckDBPyConnection, *rows: tuple) -> duckdb.DuckDBPyRelation:
    values = ", ".join("(?, 'kubernetes', ?, 'train/w0', TIMESTAMP '2026-12-01 00:00:00', ?)" for _ in rows)
    return con.sql(f"SELECT * FROM (VALUES {values}) AS t({COLUMNS})", params=[v for row in rows for v in row])


def test_a_held_pod_read_again_under_a_renamed_cluster_is_kept_once_and_another_pod_of_its_name_is_kept():
    """Two pods named train/w0 (uids u1, u2), both ended, held by a snapshot set aside when the source's
    cluster was `old`; the run, its cluster renamed `new`, reads u1 again (new/u1): u1 was kept twice (old/u1
    matched by record only), its hours charged twice; u2, which only the set-aside snapshot holds, is kept."""
    con = duckdb.connect()
    pods(con, ("old/u1", "old", ENDED), ("old/u2", "old", datetime(2026, 12, 1, 5))).create("held")
    kept = with_ended(con, pods(con, ("new/u1", "new", ENDED)), "k8s", "held")
    assert sorted(kept.project("record_id, end_time").fetchall()) == [
        ("new/u1", ENDED), ("old/u2", datetime(2026, 12, 1, 5))]


def test_a_pod_two_set_aside_snapshots_hold_under_two_cluster_names_is_held_once_from_the_newer(tmp_path):
    con = duckdb.connect()
    older, newer = tmp_path / "snapshot_date=2027-01-01.parquet", tmp_path / "snapshot_date=2027-01-02.parquet"
    pods(con, ("old/u1", "old", datetime(2026, 12, 1, 1))).write_parquet(str(older))
    pods(con, ("new/u1", "new", ENDED)).write_parquet(str(newer))
    held = hold_ended(con, [older, newer])
    assert con.sql(f"SELECT record_id, end_time FROM {held}").fetchall() == [("new/u1", ENDED)]
