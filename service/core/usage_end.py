"""The end of a cost file's latest usage charge period: what a commit records as its ledger
entry's `data_through` (service/core/commit.py, in its one read of the staged file), and what
service/core/coverage.py reads from the files of entries recorded before it was kept (usage
only: see coverage's docstring).

A line's usage counts as ending no later than a day (LINE_SPAN) after its billing period ends
(USAGE_LINE_END), and a file's no later than a day after its commit (`through_at`): one line of
a 2024-09 bill whose ChargePeriodEnd said 2099-01-01 moved the lake's data end to 2099, so
`status` called the source fresh for ever and `--since 7d` asked for 2098's last week. The day
is the longest a usage line of a right export runs past either: a provider's month in local
time runs past midnight UTC, and a daily line of today ends at tomorrow's midnight (the bill
reaching a day past the real time, which service/ingest/jobs_ahead.py's BILL_SPAN allows too),
so such exports are neither cut nor warned of. The billing period's bound is read from the file
alone (verify, and a ledger from before data_through was kept, find the same end); the commit's
bounds a billing period itself dated ahead. The commit warns of the lines beyond (FUTURE_LINES)
and keeps them as they are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from service.core.timewindow import iso_utc

if TYPE_CHECKING:
    from service.core.ledger import LedgerEntry

USAGE_LINE = "coalesce(ChargeCategory, 'Usage') = 'Usage'"  # a line no category names is usage
USAGE_ONLY = f"FILTER (WHERE {USAGE_LINE})"
LINE_SPAN = timedelta(days=1)
USAGE_LINE_END = "least(ChargePeriodEnd, BillingPeriodEnd + INTERVAL 1 DAY)"  # NULL BillingPeriodEnd: the line's own
USAGE_END = f"max({USAGE_LINE_END}) {USAGE_ONLY}"
# usage lines ending over a day after their billing period's end, or after `?` (bound_at: a day after the commit)
FUTURE_LINES = f"count(*) FILTER (WHERE {USAGE_LINE} AND ChargePeriodEnd > least(BillingPeriodEnd + INTERVAL 1 DAY, ?))"
LATEST_END = f"max(ChargePeriodEnd) {USAGE_ONLY}"  # as the lines say it, for the warning
USAGE_BEGINS = f"min(ChargePeriodStart) {USAGE_ONLY}"  # the ledger's data_from, coverage.data_begins


def usage_through(con: duckdb.DuckDBPyConnection, paths: Sequence[Path | str],
                  committed: Mapping[str, str] | None = None) -> dict[str, str]:
    """File → the end of its latest usage charge period (ISO UTC), for the files with usage lines;
    no later than a day after the file's commit time in `committed` (file → ISO UTC), where given."""
    rows = con.execute(f"SELECT filename, {USAGE_END} FROM read_parquet(?, filename = true) GROUP BY filename",
                       [[str(p) for p in paths]]).fetchall()
    return {name: through_at(end, (committed or {}).get(name)) for name, end in rows if end is not None}


def usage_end_text(end: datetime) -> str:
    """A USAGE_END value as the ledger keeps it (ISO UTC; the lake's times are UTC without a zone)."""
    return iso_utc(end.replace(tzinfo=timezone.utc))


def through_at(end: datetime, committed: str | None) -> str:
    """USAGE_END `end` as the ledger keeps it, no later than a day after `committed` (an ISO UTC
    commit time)."""
    return usage_end_text(end if committed is None else min(end, bound_at(committed)))


def bound_at(committed: str) -> datetime:
    """The latest a file committed at `committed` (ISO UTC) can reach, as the lake's times are
    kept (UTC without a zone)."""
    return _utc(committed) + LINE_SPAN


def _utc(text: str) -> datetime:
    """An ISO UTC text as the lake's times are kept (UTC without a zone)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc).replace(tzinfo=None)


def ledger_bound(billing_period: str, committed: str) -> str:
    """The latest end a ledger entry of `billing_period` (YYYY-MM) committed at `committed` (ISO
    UTC) can hold by its own facts: a day after its month (UTC) and after its commit. A ledger
    written before the end was bounded (2026-12-06; its entries not `data_through_bounded`) may
    hold a later one (a line's 2099 as it was written): service/core/coverage.py reads such a
    file's end again, bounded as a commit bounds it (a provider's month in local time, ending after
    the UTC month, is read again too, to the same end); an entry a commit bounded is not: it was
    bounded by its lines' own BillingPeriodEnd, which the ledger does not keep."""
    year, month = (int(part) for part in billing_period.split("-"))
    after_the_month = datetime(year + month // 12, month % 12 + 1, 1) + LINE_SPAN
    return usage_end_text(min(after_the_month, bound_at(committed)))


def capped_through(data_through: str | None, billing_period: str, committed: str, bounded: bool) -> str | None:
    """A ledger entry's (or a delivery it replaced: ledger.Replaced) recorded data_through as a reader
    takes it without its file: a commit's bounded end as it is, an earlier one no later than its
    ledger_bound (where service/core/coverage.py reads the file again, Spark's session and the
    report's restated bills, whose replaced file is gone, cap it)."""
    if data_through is None or bounded:
        return data_through
    bound = ledger_bound(billing_period, committed)
    return bound if _utc(data_through) > _utc(bound) else data_through


def read_again(entry: LedgerEntry) -> bool:
    """Whether a reader reads a ledger entry's end again from its file (service/core/coverage.py)
    rather than take it as recorded: an entry with rows whose end was not recorded (before 2026-12)
    or was recorded before commits bounded it and lies past its ledger_bound. The next ingest
    records what that read finds (service/core/ledger_upkeep.py), so it is read once."""
    return bool(entry.rows) and (not entry.data_through_recorded or capped_through(
        entry.data_through, entry.billing_period, entry.ingested_at, entry.data_through_bounded) != entry.data_through)
