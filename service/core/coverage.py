"""How far the lake's data reaches: each source's `data_through`, and windows anchored to it.

- A billing source's `data_through` is the end of its latest usage charge period: the
  largest ChargePeriodEnd of its `ChargeCategory = 'Usage'` lines (a line without a
  category counts as usage, as the rules read it). Ingest records it per
  committed partition in the delivery ledger (service/core/commit.py), so reading it is a
  ledger read. Usage only: a monthly fee, tax or Savings Plan fee line runs to the month's
  end whatever the data says. A ledger written before 2026-12 lacks it; such partitions are
  read from their file, as are those whose end lies past the bound a commit now gives it
  (service/core/usage_end.py), recorded before it did.
- An inventory source's is recorded by its ingest in the source state
  (`_state/sources.json`, key `data_through`): a snapshot (tags, S3 objects, log groups)
  holds data through the time it was taken, GPU utilisation through the end of its latest
  sampled hour.
- `data_end(lake)`: the latest `data_through` of the billing sources (the ones attribution,
  metrics, the report and the rules read), where a window without an explicit end stops
  (`anchored_window`, service/core/timewindow.py).
- `data_begins(lake, snapshot)`: where the billing sources' usage lines begin (the earliest
  ChargePeriodStart, usage only, as data_through).
- `last_whole_day(lake)`: the day a report or plan is taken to by default.
- `empty_lake(lake)`: what to say when the lake holds no bill of the configured sources
  (`empty_lake_line`: as one line; `empty_lake_error`: as the error of a command that needs one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from service.core.errors import DataError
from service.core.timewindow import CLOCK_SKEW, Window, fixed_end, iso_utc, month_text, parse_window
from service.core.usage_end import USAGE_BEGINS, capped_through, ledger_bound, read_again, usage_through

if TYPE_CHECKING:
    from service.core.lake import Lake
    from service.core.ledger import LedgerEntry
    from service.core.snapshot import Snapshot

STATE_KEY = "data_through"  # in each source's record of the `sources` state


def parse_utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def stamped_ahead(entries: Sequence[LedgerEntry], now: datetime) -> list[str]:
    """A sentence per entry stamped as committed after the clock `now` (beyond CLOCK_SKEW): the
    clock that committed it ran ahead, or this one is behind; from inside the lake the two look
    alike. The stamp stays as written (it is that clock's word, and only the period delivered
    again replaces it), so a reader showing it says so rather than show a time not yet come."""
    return [f"{e.source} {e.billing_period} is stamped as committed at {e.ingested_at}, after this machine's clock "
            f"({iso_utc(now.replace(microsecond=0))}): the clock that committed it ran ahead, or this one is behind "
            "(check `date -u` against a time server); the stamp stays until that period is delivered again"
            for e in entries if parse_utc(e.ingested_at) > now + CLOCK_SKEW]


def billing_data_through(lake: Lake) -> dict[str, datetime | None]:
    """Each configured billing source in the ledger → its data_through (None: no usage line)."""
    return partitions_data_through(lake, [
        (e, lake.partition_file("costs", [("source", e.source), ("billing_period", e.billing_period)]))
        for e in lake.ledger() if lake.counts(e.source)])


def partitions_data_through(lake: Lake, parts: Sequence[tuple[LedgerEntry, Path]]) -> dict[str, datetime | None]:
    """Source → the latest data_through of its partitions (ledger entry, file): the recorded
    one, or read from the file (bounded as a commit bounds it: service/core/usage_end.py) for an
    entry from before it was recorded, and for one recorded before it was bounded whose end lies
    past its own bound (usage_end.ledger_bound: a 2024-09 line's 2099 kept the data's end in 2099
    until the period was delivered again; an entry a commit bounded, by its file's BillingPeriodEnd,
    is taken as recorded: a provider's month in local time reaches past the UTC month's bound). An
    unrecorded entry whose file is gone (`status` says missing) reaches at least its billing
    period's start: leaving it out put the data's end, and the month the metrics and budgets sum,
    in an earlier period; an unbounded one, its bound. The next ingest records what was read
    (service/core/ledger_upkeep.py): a file is read so until then."""
    entries = [entry for entry, _ in parts if not read_again(entry)]
    unread = {str(path): entry for entry, path in parts if read_again(entry)}
    present = [path for path in unread if Path(path).exists()]
    found: dict[str, str] = {}
    if present:
        con = lake.connect()
        try:
            found = usage_through(con, present, {path: unread[path].ingested_at for path in present})
        finally:
            con.close()
    entries += [replace(entry, data_through_bounded=True, data_through=found.get(path) if path in present
                        else ledger_bound(entry.billing_period, entry.ingested_at) if entry.data_through_recorded
                        else f"{entry.billing_period}-01T00:00:00Z") for path, entry in unread.items()]
    return entries_data_through(entries)


def entries_data_through(entries: Sequence[LedgerEntry]) -> dict[str, datetime | None]:
    """Source → the latest data_through its ledger entries record (None: no usage line), one recorded
    before commits bounded it no later than its bound (usage_end.capped_through: Spark's session reads
    no file for it)."""
    through: dict[str, str | None] = {e.source: None for e in entries}
    for entry in entries:
        end = capped_through(entry.data_through, entry.billing_period, entry.ingested_at, entry.data_through_bounded)
        if end and (through[entry.source] is None or end > through[entry.source]):
            through[entry.source] = end
    return {source: parse_utc(text) if text else None for source, text in sorted(through.items())}


def inventory_data_through(lake: Lake, names: Sequence[str]) -> dict[str, datetime | None]:
    """Each named inventory source → the data_through its last ingest recorded (None: none yet)."""
    state = lake.read_state("sources")
    return {name: parse_utc(state[name][STATE_KEY]) if state.get(name, {}).get(STATE_KEY) else None
            for name in names}


def billing_periods(lake: Lake) -> list[str]:
    """The billing periods (YYYY-MM) the lake holds of the configured sources, in order."""
    return sorted({e.billing_period for e in lake.ledger() if lake.counts(e.source)})


def usage_begins(lake: Lake) -> datetime | None:
    """Where the lake's usage begins, as the ledger recorded it (`data_from` of its first billing
    period's entries, no file read); None when an entry of that period was recorded before
    2026-12 (it kept no start) or none holds usage."""
    entries = [e for e in lake.ledger() if lake.counts(e.source) and e.rows]
    first = [e for e in entries if e.billing_period == min((e.billing_period for e in entries), default=None)]
    if not first or any(e.days is None for e in first):
        return None
    return min((parse_utc(e.data_from) for e in first if e.data_from), default=None)


def periods_text(periods: Sequence[str]) -> str:
    """`2026-10 to 2026-11` (`none`): what a note on a window without cost says the lake holds."""
    return f"{periods[0]} to {periods[-1]}" if periods else "none"


def months_touched(start: datetime, end: datetime) -> set[str]:
    """The billing periods (YYYY-MM) that [start, end) touches; start's own for an empty span."""
    months, month = set(), start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    while True:
        months.add(month_text(month))
        month = (month + timedelta(days=32)).replace(day=1)
        if month >= end:
            return months


def data_end(lake: Lake) -> datetime | None:
    """The latest data_through of the configured billing sources; None when none has usage data."""
    known = [moment for moment in billing_data_through(lake).values() if moment is not None]
    return max(known, default=None)


def last_whole_day(lake: Lake) -> date | None:
    """The day before the one the data ends in (that day's figures are not all in), or that day
    itself where no usage begins before it (the first hours of a new export's first day: the day
    before holds no bill); None when the lake has no usage data."""
    end = data_end(lake)
    if end is None:
        return None
    midnight = datetime.combine(end.date(), datetime.min.time(), timezone.utc)
    if end > midnight:
        begins = data_begins(lake, lake.snapshot())
        if begins is not None and begins >= midnight:
            return end.date()
    return end.date() - timedelta(days=1)


def snapshot_data_through(lake: Lake, snapshot: Snapshot) -> dict[str, datetime | None]:
    """Each billing source → its data_through in the lake state `snapshot` saw."""
    return partitions_data_through(lake, [(check.entry, check.path) for check in snapshot.checks if check.entry])


def snapshot_data_end(lake: Lake, snapshot: Snapshot) -> datetime | None:
    """`data_end` of the lake state `snapshot` saw, for a read whose window and data must
    come from the same state (a commit between two ledger reads would mix them)."""
    known = [moment for moment in snapshot_data_through(lake, snapshot).values() if moment is not None]
    return max(known, default=None)


def data_begins(lake: Lake, snapshot: Snapshot) -> datetime | None:
    """The earliest usage charge period start of the billing sources in the lake state
    `snapshot` saw: a question reaching back before it has no bill to answer from. Each
    source's earliest billing period holds its first line: only those files are read."""
    first: dict[str, Path] = {}
    for check in sorted(snapshot.checks, key=lambda check: check.period, reverse=True):
        if check.entry and check.entry.rows:
            first[check.source] = check.path
    if not first:
        return None
    con = lake.connect()
    try:
        (begins,) = con.execute(f"SELECT {USAGE_BEGINS} FROM read_parquet(?)", [[str(p) for p in first.values()]]
                                ).fetchall()[0]
    finally:
        con.close()
    return begins and begins.replace(tzinfo=timezone.utc)


def anchored_window(lake: Lake, since: str, until: str | None = None, *, now: datetime | None = None,
                    snapshot: Snapshot | None = None, naming: Callable[[str], str] = lambda name: f"--{name}") -> Window:
    """The window [since, until) of a question about `lake`: without `until` (or with a relative
    one, measured back from it), it ends at the data's end (`data_end`; of the state `snapshot`
    saw when given, for a read of that snapshot), so the answer does not change with the
    wall-clock hour. Errors name `since` and `until` as `naming` spells them
    (service.core.timewindow.parse_window)."""
    if fixed_end(until):
        return parse_window(since, until, now=now, naming=naming)
    end = data_end(lake) if snapshot is None else snapshot_data_end(lake, snapshot)
    return parse_window(since, until, now=now, end=end, naming=naming)


def empty_lake(lake: Lake, shown: object = None, nothing: str = "") -> tuple[str, str]:
    """A lake without a bill of the configured sources: what it lacks (`shown`: where it is, as
    the user named it; `nothing`: what the command therefore cannot do), and the next step. A
    lake holding only the bills of sources the config no longer names (a source renamed) says
    so rather than "empty"."""
    orphans = billed_orphans(lake)
    where = shown or lake.root
    if orphans:
        what = (f"the lake at {where} holds no bill of the configured sources, only of {', '.join(orphans)}, which "
                "the config no longer names")
        step = ("run `spendlake ingest` to read the configured ones (a renamed source is read again under its new "
                f"name), and `spendlake forget {orphans[0]}` to remove the old")
    else:
        what, step = f"the lake at {where} is empty", "run `spendlake ingest`"
    return (f"{what}: {nothing}" if nothing else what), step


def billed_orphans(lake: Lake) -> list[str]:
    """The sources whose bills the lake holds though the config no longer names them."""
    return [source for source, tables in lake.orphans().items() if "costs" in tables]


def empty_lake_line(lake: Lake, shown: object = None, nothing: str = "") -> str:
    """`empty_lake` as one line: what the lake lacks (and what the command therefore cannot
    do), then the next step."""
    what, step = empty_lake(lake, shown, nothing)
    return f"{what}; {step}" if nothing else f"{what}: {step}"


def empty_lake_error(lake: Lake, nothing: str, shown: object = None) -> DataError:
    """`empty_lake` as the error of a command that cannot do `nothing` without a bill."""
    what, step = empty_lake(lake, shown, nothing)
    return DataError(what, hint=step)
