"""Job snapshots written by a clock that ran ahead, set aside by the inventory run that finds them
(service/ingest/inventory.py): dated after its day and stamped after the wall clock.

A window source's (slurm-jobs reading slurmrestd, k8s-pods: the jobs active in the last
lookback_hours) ended records that only such a snapshot held are kept in the run's own snapshot
first (`hold_ended`, `with_ended`): a clock set back a day took the real day's snapshot for one a
clock ahead wrote, and the jobs that ended before the next window began were in no snapshot any
more. An ended record is history whatever clock took it; a running one is what the setting aside
is for (it would outrank every record taken since), and is not kept. A source of files reads its
jobs again from them and keeps nothing of it, as before."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from service.core.coverage import data_end, parse_utc
from service.core.errors import DataError
from service.core.job_windows import POD_UID, not_held
from service.core.lake import DATA_FILE, Lake
from service.core.snapshot_ledger import SET_ASIDE, read_record
from service.core.snapshot_set_aside import set_aside_files
from service.core.timewindow import CLOCK_SKEW, iso_utc

log = logging.getLogger("service.ingest.inventory")  # said as the run's own lines, as before

# The longest a usage line of an hourly or daily export spans: a bill whose usage reaches
# further past this machine's clock was read by a clock ahead of it (data_end).
BILL_SPAN = timedelta(days=1)


HELD = "ahead_ended"  # the writer connection's table of the ended records the snapshots set aside hold


def jobs_ahead(lake: Lake, source: str, now: datetime, wall: datetime) -> list[Path]:
    """The source's job snapshots dated after this run's day and stamped after the wall clock
    (written by a clock that ran ahead): a job one saw running would outrank every record taken
    since as the newest and run on until the calendar passed its date, then keep those weeks.
    History is not replaced as a state is (`_snapshot_day`): set aside, kept for a look; the
    snapshots taken before and after it hold the jobs. A snapshot without a stamp stays.

    "That clock ran ahead" and "this clock is behind" look alike by the lake's own stamps (a
    service that ran ahead stamped its deliveries ahead too); the bill is the one clock from
    outside: usage it holds past this clock by more than a line spans (BILL_SPAN) has not
    happened by this clock, so this clock is behind. Then nothing is moved: the source fails
    naming both times. `wall`: the wall clock, which stamps the records' written_at. Returns them,
    to be set aside by `set_aside_ahead` once the run read the source."""
    today = now.strftime("%Y-%m-%d")
    ahead = sorted(folder / DATA_FILE for folder in lake.table_dir("jobs").glob(f"source={source}/snapshot_date=*")
                   if folder.name.split("=", 1)[1] > today and written_after(lake, folder / DATA_FILE, wall))
    usage = data_end(lake) if ahead else None
    if usage and usage > wall + BILL_SPAN:
        raise DataError(
            f"the jobs snapshot {ahead[0].parent.name} of source {source} is dated after this run's day {today} and "
            f"stamped after this machine's clock ({iso_utc(wall.replace(microsecond=0))}), and the bill's usage "
            f"reaches {iso_utc(usage)}, over a day past this clock too: this clock is behind (unless an export's usage "
            f"lines span a month); nothing was moved",
            where=str(ahead[0]), hint=f"set the clock right (`date -u` against a time server); if it is right, a clock "
                                      f"ran ahead when the snapshot was written: move the folder {ahead[0].parent} out "
                                      f"of the lake (e.g. under {lake.root / SET_ASIDE}) and run inventory again")
    return ahead


def hold_ended(con: duckdb.DuckDBPyConnection, ahead: Sequence[Path]) -> str | None:
    """The ended job records of the snapshots `ahead` (jobs_ahead's), each record's from the newest
    snapshot holding it (a pod's by its uid: job_windows.POD_UID), as the table HELD of `con` (the
    run's writer), read before they are set aside; None when there is none."""
    if not ahead:
        return None
    con.execute(f"CREATE OR REPLACE TEMP TABLE {HELD} AS SELECT * EXCLUDE (filename) FROM read_parquet($files, "
                "hive_partitioning = false, filename = true) WHERE end_time IS NOT NULL "
                f"QUALIFY row_number() OVER (PARTITION BY coalesce({POD_UID}, record_id) ORDER BY filename DESC) = 1",
                {"files": [str(file) for file in ahead]})
    return HELD


def with_ended(con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, source: str,
               held: str | None) -> duckdb.DuckDBPyRelation:
    """The job snapshot `relation` with the records of `held` (hold_ended's) it does not hold, by record or a
    pod by its uid (job_windows.not_held, as a day's snapshot taken again keeps the earlier's): a pod read
    again under its source's `cluster` renamed since was kept twice, its hours charged twice."""
    if held is None:
        return relation
    relation.create_view("read_now")
    only = not_held(held, "read_now")
    [(kept,)] = con.execute(f"SELECT count(*) FROM ({only})").fetchall()
    if not kept:  # the relation as it is: the same records give the same bytes
        return relation
    log.warning("inventory source %s: kept %d ended job record(s) only the snapshots set aside held (this run's "
                "window no longer reaches them)", source, kept)
    return con.sql(f"SELECT * FROM read_now UNION ALL BY NAME {only}")


def set_aside_ahead(lake: Lake, source: str, ahead: Sequence[Path], now: datetime) -> None:
    """`ahead` (jobs_ahead's) set aside under _damaged/, each said in a warning."""
    today = now.strftime("%Y-%m-%d")
    for check in set_aside_files(lake, "jobs", source, ahead, "written by a clock that ran ahead"):
        log.warning("inventory source %s: %s (its date is after this run's %s, its stamp after now): its running jobs "
                    "would outrank every record taken since, so it was moved under %s", source, check.sentence(),
                    today, lake.root / SET_ASIDE / check.key)


def written_after(lake: Lake, file: Path, wall: datetime) -> bool | None:
    """True when the snapshot `file`'s record is stamped after the wall clock `wall` (the clock
    that stamps records' written_at) by more than CLOCK_SKEW; None: it holds no stamp."""
    stamp = (read_record(lake.root, file) or {}).get("written_at")
    return None if stamp is None else parse_utc(stamp) > wall + CLOCK_SKEW
