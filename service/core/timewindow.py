"""Time windows from what people type: `7d`, `24h`, `2w`, `30d`, `mtd`, or ISO dates and times.

Everything is UTC. A window is half-open: [since, until). Without an explicit end, a window
ends at `end`: the end of the data (the latest `data_through` of the sources read, see
service/core/coverage.py), so the same lake gives the same window whatever the wall-clock
hour; only a lake without data falls back to `now`. A relative start (`7d`) counts back from
that end; `mtd` starts at the first instant of the month that holds the window's last instant.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, Decimal

from service.core.errors import UsageError

RELATIVE_RE = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
MONTH_TO_DATE = "mtd"
UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
EXAMPLES = "use e.g. 24h, 7d, 2w, 30d, mtd, 2026-11-01 or 2026-11-01T06:00:00Z"
UNTIL_EXAMPLES = "use e.g. 2d, 24h, now, 2026-11-01 or 2026-11-01T06:00:00Z"  # an end: a span back, no mtd
DATE_SHAPED_RE = re.compile(r"^\s*\d{4}-\d{1,2}-\d{1,2}")
DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}")  # a day as the CLI documents it, and only so
TIMED_DAY_RE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d")  # a day as documented, then a time
MONTH_RE = re.compile(r"\s*\d{4}-\d{2}\s*")  # a month (`--since 2026-11`): its first day
UTC_DESIGNATOR = re.compile(r"[zZ]$")  # RFC 3339 allows `z` as `Z`, which fromisoformat reads as neither
ISO_FORMATS = "YYYY-MM-DD (e.g. 2026-11-30) or YYYY-MM-DDTHH:MM:SSZ (e.g. 2026-11-30T06:00:00Z)"
MIN_INSTANT = datetime(1, 1, 2, tzinfo=timezone.utc)
MAX_INSTANT = datetime(9999, 12, 30, tzinfo=timezone.utc)
# How far the clocks of machines sharing a lake may differ without one being said to run ahead:
# a record stamped less than this after the wall clock (a snapshot taken just past midnight by
# a clock a minute ahead of this one) is not set aside, nor its stamp said to be ahead.
CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime

    @property
    def length(self) -> timedelta:
        return self.until - self.since

    def shown(self) -> str:
        """`YYYY-MM-DD HH:MM → YYYY-MM-DD HH:MM UTC`, as a note names the window."""
        return f"{minute_text(self.since)} → {minute_text(self.until)} UTC"

    def previous(self, length: timedelta | None = None) -> Window:
        """The window of the same length (or `length`) that ends where this one starts."""
        try:
            return Window(self.since - (length or self.length), self.since)
        except OverflowError:
            raise UsageError(f"no window of the same length before {iso_utc(self.since)} to compare with",
                             where="--compare", hint="compare a later or shorter window") from None


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def not_a_date(text: str, exc: ValueError, what: str, *, where: str, hint: str) -> UsageError:
    """`text`, shaped as a date, names none: why (day is out of range for month), unless Python's
    reason only repeats the text; an offset past a day is said as a UTC offset, not as Python's timedelta)."""
    reason = "" if str(exc).startswith("Invalid isoformat") else f" ({exc})"
    if str(exc).startswith("offset must be a timedelta"):
        reason = " (a UTC offset runs from -23:59 to +23:59)"
    return UsageError(f"{text.strip()!r} is not a valid {what}{reason}", where=where, hint=hint)


def iso_day(text: str) -> date:
    """A day written exactly YYYY-MM-DD; ValueError otherwise (date.fromisoformat alone also
    reads 20261120 and 2026-W47-5, which no option documents)."""
    if not DAY_RE.fullmatch(text.strip()):
        raise ValueError(f"Invalid isoformat string: {text!r}")
    return date.fromisoformat(text.strip())


def parse_day(text: str, *, option: str, example: str) -> date:
    """A day option's value (`report --date`, `plans --as-of`, `estimate --start`), exactly
    YYYY-MM-DD; anything else a UsageError naming `option` and saying why."""
    try:
        return iso_day(text)
    except ValueError as exc:
        if (day := _day_of_time(text)) is not None:  # a scheduler's timestamp: it names a day, give that one
            raise UsageError(f"{text.strip()!r} is a time, not a day", where=option, hint=f"use YYYY-MM-DD: {day}") \
                from None
        if DATE_SHAPED_RE.match(text):  # 2026-02-30 is written as asked: say why it is no day
            raise not_a_date(text, exc, "date", where=option, hint=f"use YYYY-MM-DD, e.g. {example}") from None
        raise UsageError(f"cannot read {text!r} as a date", where=option, hint="use YYYY-MM-DD") from None


def _day_of_time(text: str) -> str | None:
    """The UTC day a date and time names (`2026-12-05T00:00`), said as the hint gives it; else None
    (also for 20261120 or 2026-W47-5, which fromisoformat reads as midnight: no time, another form)."""
    if not TIMED_DAY_RE.match(text.strip()):
        return None
    try:
        moment = from_iso(text)
    except ValueError:
        return None
    if moment.tzinfo is None or moment.utcoffset() == timedelta(0):
        return str(moment.date())
    return f"{moment.astimezone(timezone.utc).date()} (the UTC day)"


def parse_instant(text: str, *, now: datetime | None = None, option: str = "--since",
                  examples: str = EXAMPLES) -> datetime:
    """A relative span back from `now`, or an absolute ISO date/time (naive means UTC; a month,
    `2026-11`, its first day: as an end, the window stops before it); errors name `option` and
    offer `examples` (an end's own: UNTIL_EXAMPLES)."""
    now = now or utc_now()
    match = RELATIVE_RE.match(text)
    try:
        if match:
            amount, unit = int(match.group(1)), match.group(2)
            return now - timedelta(**{UNITS[unit]: amount})
        if text.strip().lower() == "now":
            return now
        month = MONTH_RE.fullmatch(text)
        try:
            value = from_iso(f"{text.strip()}-01" if month else text)
        except ValueError as exc:
            if DATE_SHAPED_RE.match(text) or month:  # 2026-11-31: a date that does not exist, not a missing duration
                raise not_a_date(text, exc, "date or time", where=option, hint=f"use {ISO_FORMATS}") from None
            raise UsageError(f"cannot read {text!r} as a time", where=option, hint=examples) from None
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)
    except OverflowError:  # 99999999999999d, or year 1 at +14:00: before the first representable instant
        raise UsageError(f"{text!r} is out of range", where=option,
                         hint=f"times run from {MIN_INSTANT.date()} to {MAX_INSTANT.date()}; {examples}") from None


def from_iso(text: str) -> datetime:
    """An ISO 8601 / RFC 3339 date or time as written (`Z` or `z` for UTC); ValueError otherwise."""
    return datetime.fromisoformat(UTC_DESIGNATOR.sub("+00:00", text.strip()))


def month_start(moment: datetime) -> datetime:
    """The first instant of the month holding the instant just before `moment`: the start
    of the month to date of a window ending at `moment` (a whole month when it ends on the 1st)."""
    last = moment - timedelta(microseconds=1)
    return last.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def relative_window(spec: str, end: datetime) -> Window:
    """`7d`, `24h` or `mtd` ending at `end`."""
    if spec.strip().lower() == MONTH_TO_DATE:
        return Window(month_start(end), end)
    return Window(parse_instant(spec, now=end), end)


def parse_window(since: str, until: str | None = None, *, now: datetime | None = None,
                 end: datetime | None = None, naming: Callable[[str], str] = lambda name: f"--{name}") -> Window:
    """[since, until) from what was typed; errors name `since`/`until` as `naming` spells them.
    Without `until` the window ends at `end` (the data's end), else at `now`. A relative bound
    is measured back from the window's end, and a relative `until` from `end` as `since` is:
    `--since 7d --until 3d` is the 7 days before the data's last 3 (it ended 3 days before the
    wall clock, the data's end lagging it, while `--since 7d` alone ends at the data's end);
    `--until now` is the wall clock."""
    now = now or utc_now()
    stop = until_instant(until, now=now, end=end, naming=naming) if until else (end or now)
    start = since_instant(since, stop, now=now, naming=naming)
    if start >= stop:
        if not until and end is not None:  # the window ends at the data's end: only an earlier start helps
            why, hint = f"the data runs through {iso_utc(stop)}", f"give a {naming('since')} before it"
        else:  # `rules run` has no --until: it is named only where one was typed
            why, hint = f"{iso_utc(start)} is not before {iso_utc(stop)}", f"give an earlier {naming('since')}" + (
                f" or a later {naming('until')}" if until else "")
        raise UsageError(f"the window is empty: {why}", where=naming("since"), hint=f"{hint}; {EXAMPLES}")
    return Window(start, stop)


def until_instant(until: str, *, now: datetime, end: datetime | None,
                  naming: Callable[[str], str] = lambda name: f"--{name}") -> datetime:
    """A typed `until` (parse_window's): an instant or `now` as typed, a span back from the data's
    `end` (from `now` when the lake holds no data). `mtd` starts a window and ends none (as an end it
    would be the month's start, and `--since mtd --until mtd` empty): a UsageError, as any other
    unreadable end, whose examples are an end's."""
    if until.strip().lower() == MONTH_TO_DATE:
        raise UsageError(f"{until.strip()!r} starts a window (the month to date), it cannot end one",
                         where=naming("until"), hint=f"leave {naming('until')} out to end at the data's end (`"
                         f"{naming('since')} mtd` alone: the month to date), or {UNTIL_EXAMPLES}")
    return parse_instant(until, now=now if fixed_end(until) else (end or now), option=naming("until"),
                         examples=UNTIL_EXAMPLES)


def since_instant(since: str, stop: datetime, *, now: datetime,
                  naming: Callable[[str], str] = lambda name: f"--{name}") -> datetime:
    """A typed `since` (parse_window's) of a window ending at `stop`: `mtd` or a span back from
    `stop`, else an instant as typed."""
    if since.strip().lower() == MONTH_TO_DATE:
        return month_start(stop)
    return parse_instant(since, now=stop if RELATIVE_RE.match(since) else now, option=naming("since"))


def fixed_end(until: str | None) -> bool:
    """Whether `until` fixes the window's end whatever the data's end: an instant or `now`, not
    none or a span back from the data's end (`3d`)."""
    return bool(until) and not RELATIVE_RE.match(until)


def data_anchored(since: str, until: str | None, *, now: datetime | None = None,
                  naming: Callable[[str], str] = lambda name: f"--{name}") -> Callable[..., Window] | None:
    """Without `until`, or with one relative to the data's end: the typed window as a function
    of the data's end (`end=`), so a read can anchor it to the lake state it reads (an ingest
    committing between the question and the read moves the end); None when `until` fixes the end."""
    return None if fixed_end(until) else partial(parse_window, since, until, now=now or utc_now(), naming=naming)


def past_the_data(window: Window, end: datetime | None) -> str | None:
    """How much of `window` lies after the data's `end` (None: none, or no data at all)."""
    if end is None or window.until <= end:
        return None
    hours = (window.until - max(end, window.since)).total_seconds() / 3600
    return f"the window's last {hours:,.1f} h have no data yet"


def day_start(value: date) -> datetime:
    return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)


def minute_text(moment: datetime) -> str:
    """`YYYY-MM-DD HH:MM`, the year in four digits as ISO 8601 writes it (strftime's `%Y`
    writes year 1 as `1`)."""
    return moment.isoformat(sep=" ", timespec="minutes")[:16]


def day_text(moment: date) -> str:
    """`YYYY-MM-DD`, four-digit year."""
    return moment.isoformat()[:10]


def month_text(moment: date) -> str:
    """`YYYY-MM`, four-digit year (a billing period's name)."""
    return moment.isoformat()[:7]


def month_name(moment: date) -> str:
    """`November 2026`, four-digit year."""
    return f"{moment:%B} {moment.year:04d}"


def iso_utc(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


TWELVE_PLACES = Decimal("0.000000000001")


def share_in_window(amount: Decimal | None, start: datetime, end: datetime | None, since: datetime,
                    until: datetime) -> Decimal:
    """The part of `amount`, charged over [start, end), that lies in [since, until) (all naive
    UTC or all aware): in full when wholly inside (or an instant), else overlap ÷ length in
    exact decimals, rounded half-even to 12 places as attribution prorates. None counts 0."""
    if amount is None:
        return Decimal(0)
    if end is None or end <= start or (start >= since and end <= until):
        return amount
    overlap = _microseconds(min(end, until) - max(start, since))
    return (amount * overlap / _microseconds(end - start)).quantize(TWELVE_PLACES, rounding=ROUND_HALF_EVEN)


def hours_present(first: datetime | None, last: datetime | None, ends: datetime | None = None) -> Decimal | None:
    """The exact hours from `first` to `last` (where in a window something has charge periods:
    bought or expired inside it, it has them for part of it only), cut at `ends` where the bill
    states an end between them (a commitment's expiry: a daily row runs to midnight); None when
    there is no such stretch."""
    if first is None or last is None:
        return None
    if ends is not None and first < ends < last:
        last = ends
    return _microseconds(last - first) / 3_600_000_000 if last > first else None


def _microseconds(span: timedelta) -> Decimal:
    return Decimal((span.days * 86400 + span.seconds) * 10**6 + span.microseconds)
