"""Job snapshots written by a clock that ran ahead, set aside by the inventory run that finds them
(service/ingest/inventory.py): dated after its day and stamped after the wall clock."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path

from service.core.coverage import data_end, parse_utc
from service.core.errors import DataError
from service.core.lake import DATA_FILE, Lake
from service.core.snapshot_ledger import SET_ASIDE, read_record
from service.core.snapshot_set_aside import set_aside_files
from service.core.timewindow import CLOCK_SKEW, iso_utc

log = logging.getLogger("service.ingest.inventory")  # said as the run's own lines, as before

# The longest a usage line of an hourly or daily export spans: a bill whose usage reaches
# further past this machine's clock was read by a clock ahead of it (data_end).
BILL_SPAN = timedelta(days=1)


def set_aside_jobs_ahead(lake: Lake, source: str, now: datetime, wall: datetime) -> None:
    """The source's job snapshots dated after this run's day and stamped after the wall clock
    (written by a clock that ran ahead): a job one saw running would outrank every record taken
    since as the newest and run on until the calendar passed its date, then keep those weeks.
    History is not replaced as a state is (`_snapshot_day`): set aside, kept for a look; the
    snapshots taken before and after it hold the jobs. A snapshot without a stamp stays.

    "That clock ran ahead" and "this clock is behind" look alike by the lake's own stamps (a
    service that ran ahead stamped its deliveries ahead too); the bill is the one clock from
    outside: usage it holds past this clock by more than a line spans (BILL_SPAN) has not
    happened by this clock, so this clock is behind. Then nothing is moved: the source fails
    naming both times. `wall`: the wall clock, which stamps the records' written_at."""
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
    for check in set_aside_files(lake, "jobs", source, ahead, "written by a clock that ran ahead"):
        log.warning("inventory source %s: %s (its date is after this run's %s, its stamp after now): its running jobs "
                    "would outrank every record taken since, so it was moved under %s", source, check.sentence(),
                    today, lake.root / SET_ASIDE / check.key)


def written_after(lake: Lake, file: Path, wall: datetime) -> bool | None:
    """True when the snapshot `file`'s record is stamped after the wall clock `wall` (the clock
    that stamps records' written_at) by more than CLOCK_SKEW; None: it holds no stamp."""
    stamp = (read_record(lake.root, file) or {}).get("written_at")
    return None if stamp is None else parse_utc(stamp) > wall + CLOCK_SKEW
