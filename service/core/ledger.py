"""The delivery ledger's entries: what each committed (source, billing period) came from.

The ledger itself is one JSON file in the lake (`_ledger/deliveries.json`), written only by
service.core.lake; this module is its format. Besides the committed `entries` it may hold
`pending` ones: a commit in flight writes them before it moves its files into place and
drops them when it records the entries, so a reader that finds a partition already replaced
still finds the entry that describes it (service.core.snapshot).
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, StrictStr, TypeAdapter, model_validator

from service.core import json_text
from service.core.config_base import NestedValueError
from service.core.errors import DataError
from service.core.files import is_partition_value
from service.core.state_files import Open, UtcText, shape_problem
from service.core.units import exact_text

# When an entry is `final` rather than estimated (RELIABILITY 8), per currency: "any" of its
# lines carries an invoice id (AWS: `bill/InvoiceId` is blank until the month's bill is
# finalized, then on its lines), or "every" line does (FOCUS: InvoiceId is null on each charge
# not yet on an issued or provisional invoice, so a blank line is still an estimate); "never":
# the export carries no invoice id at all (Cloud Billing, OCI), so no month of it can be told final.
FinalWhen = Literal["any", "every", "never"]


@dataclass(frozen=True)
class CurrencyTotals:
    currency: str | None
    rows: int
    billed_cost: Decimal | None
    effective_cost: Decimal | None
    # (cost column, Σ value as delivered − as stored): what the lake's 12 decimals rounded away
    # from BilledCost, EffectiveCost, ListCost; only the columns where that is not zero
    rounding: tuple[tuple[str, Decimal], ...] = ()


# Per currency, UTC day (YYYY-MM-DD) → (billed, effective) summed over the usage lines charged within
# that day, corrections (refunds) apart: what a later delivery reaching further is compared with over the days both hold, so
# a change of days already billed is told from the month growing (report/sections/bills.py).
DaySums = tuple[tuple[str | None, tuple[tuple[str, Decimal | None, Decimal | None], ...]], ...]
# How the day sums were summed: 1 (unwritten, before 2026-12-06) counted corrections in their day;
# sums of two versions are not compared (report/sections/restated.py): a refund would read as a day's change.
DAYS_VERSION = 2


@dataclass(frozen=True)
class Replaced:
    """What the committed entry of a period held when a delivery with other figures replaced it
    (a restated bill): when it was committed, how far its data reached, final or not, its totals,
    its day sums (None: recorded before 2026-12)."""

    ingested_at: str
    data_through: str | None
    final: bool
    totals: tuple[CurrencyTotals, ...]
    days: DaySums | None = None
    days_version: int = DAYS_VERSION


@dataclass(frozen=True)
class LedgerEntry:
    """One committed delivery of one (source, billing period)."""

    source: str
    billing_period: str
    delivery_id: str
    rows: int
    totals: tuple[CurrencyTotals, ...]
    final: bool
    ingested_at: str
    files: tuple[str, ...] = field(default=())  # the delivery's source files
    size: int | None = None  # bytes of the committed partition file; None in ledgers before 2026-12
    sha256: str | None = None  # hex digest of that file
    # End of the partition's latest usage charge period (max ChargePeriodEnd of its
    # ChargeCategory = 'Usage' lines, ISO UTC): how far its data reaches. None: no usage line.
    data_through: str | None = None
    data_through_recorded: bool = True  # False in ledgers before 2026-12 (service.core.coverage reads the file)
    # The distinct keys of the partition's Tags, sorted: attribution reads them here instead of
    # decoding every line's Tags map per query. None in ledgers before 2026-12 (it scans the file).
    tag_keys: tuple[str, ...] | None = None
    # The connector's reader_version that read it (connectors.base.CostConnector); 0, and not
    # written, for a reader never changed and in ledgers before 2026-12.
    reader_version: int = 0
    # The delivery of the period its latest change of figures replaced (with_replaced); None: never.
    replaced: Replaced | None = None
    # Those the changes before it replaced, newest first (at most KEPT_REPLACED - 1): a bill restated
    # twice keeps the figures of both (the invoice's among them), each change told from the one before.
    earlier: tuple[Replaced, ...] = ()
    # Its usage lines' sums per day (DaySums) and the start of its earliest usage charge period (ISO
    # UTC); None in ledgers before 2026-12, and data_from None for a delivery without usage line.
    days: DaySums | None = None
    data_from: str | None = None
    days_version: int = DAYS_VERSION

    @property
    def key(self) -> tuple[str, str]:
        return self.source, self.billing_period

    @property
    def days_outdated(self) -> bool:
        """No day sums, or sums of an earlier DAYS_VERSION: a commit replacing it reads them again."""
        return self.days is None or self.days_version < DAYS_VERSION

    def lacks(self, cost: str) -> bool:
        """True when no line of the delivery has this cost (`billed` or `effective`): an Azure
        actual-cost export has no amortized cost, an amortized one no billed cost. Queries of
        that cost count its lines as 0, which is no spend only if this is said."""
        return bool(self.totals) and all(getattr(t, f"{cost}_cost") is None for t in self.totals)

    def to_json(self) -> dict:
        data = asdict(self)
        data["totals"] = _totals_json(self.totals)
        if self.replaced is None:
            del data["replaced"]
        else:
            data["replaced"] = _replaced_json(self.replaced)
        if self.earlier:
            data["earlier"] = [_replaced_json(r) for r in self.earlier]
        else:
            del data["earlier"]
        for key in ("days", "data_from"):
            if getattr(self, key) is None:
                del data[key]
        if self.days is None:
            del data["days_version"]
        else:
            data["days"] = _days_json(self.days)
        data["files"] = list(self.files)
        del data["data_through_recorded"]
        if not self.reader_version:
            del data["reader_version"]
        if self.tag_keys is None:
            del data["tag_keys"]
        else:
            data["tag_keys"] = list(self.tag_keys)
        return data

    @classmethod
    def from_json(cls, data: dict) -> LedgerEntry:
        keys, replaced = data.get("tag_keys"), data.get("replaced")
        known = {f.name for f in fields(cls)}  # a later version's fields are left out: it can still be read
        return cls(**{**{k: v for k, v in data.items() if k in known}, "totals": _totals(data["totals"]),
                      "files": tuple(data.get("files", ())),
                      "data_through_recorded": "data_through" in data,
                      "tag_keys": None if keys is None else tuple(keys),
                      "days": _days(data.get("days")), "days_version": data.get("days_version", 1),
                      "replaced": None if replaced is None else _replaced(replaced),
                      "earlier": tuple(_replaced(r) for r in data.get("earlier", ()))})


# The deliveries of a period an entry keeps, `replaced` and `earlier`: a final bill's later changes
# (AWS's refunds, credits and support fees after the invoice) stay told from the invoice's figures;
# a month to date delivered three times a day keeps about its last day's.
KEPT_REPLACED = 4


def with_replaced(committed: Sequence[LedgerEntry], new: Sequence[LedgerEntry]) -> list[LedgerEntry]:
    """The `new` entries, each carrying what the `committed` entry of its period held when their
    billed or effective totals differ (the bill restated), before what that entry had replaced
    (at most KEPT_REPLACED deliveries), else that entry's own `replaced` and `earlier`."""
    before = {e.key: e for e in committed}

    def figures(entry: LedgerEntry) -> set[tuple]:
        return {(t.currency, t.billed_cost, t.effective_cost) for t in entry.totals}

    def kept(entry: LedgerEntry, prior: LedgerEntry) -> LedgerEntry:
        if figures(prior) == figures(entry):
            return replace(entry, replaced=prior.replaced, earlier=prior.earlier)
        older = ((prior.replaced,) if prior.replaced else ()) + prior.earlier
        return replace(entry, replaced=Replaced(prior.ingested_at, prior.data_through, prior.final, prior.totals,
                                                prior.days, prior.days_version), earlier=older[:KEPT_REPLACED - 1])
    return [entry if (prior := before.get(entry.key)) is None else kept(entry, prior) for entry in new]


def _replaced_json(old: Replaced) -> dict:
    data = {**asdict(old), "totals": _totals_json(old.totals), "days": _days_json(old.days)}
    if old.days is None:
        del data["days"], data["days_version"]
    return data


def _replaced(data: dict) -> Replaced:
    return Replaced(data["ingested_at"], data.get("data_through"), data["final"], _totals(data["totals"]),
                    _days(data.get("days")), data.get("days_version", 1))


def _totals_json(totals: tuple[CurrencyTotals, ...]) -> list[dict]:
    return [{**asdict(t), "billed_cost": exact_text(t.billed_cost), "effective_cost": exact_text(t.effective_cost),
             "rounding": {column: exact_text(value) for column, value in t.rounding}} for t in totals]


def _totals(found: list[dict]) -> tuple[CurrencyTotals, ...]:
    return tuple(CurrencyTotals(currency=t["currency"], rows=t["rows"], billed_cost=_dec(t["billed_cost"]),
                                effective_cost=_dec(t["effective_cost"]), rounding=tuple(
                                    (column, Decimal(value)) for column, value in t.get("rounding", {}).items()))
                 for t in found)


def _days_json(days: DaySums | None) -> dict | None:  # {"USD": {"2026-11-01": ["12.5", "12.5"]}}
    return None if days is None else {currency or "": {day: [exact_text(billed), exact_text(effective)]
                                                       for day, billed, effective in sums} for currency, sums in days}


def _days(found: dict | None) -> DaySums | None:
    return None if found is None else tuple(
        (currency or None, tuple((day, _dec(billed), _dec(effective)) for day, (billed, effective) in sums.items()))
        for currency, sums in found.items())


def _dec(value: str | None) -> Decimal | None:
    return None if value is None else Decimal(value)


@dataclass(frozen=True)
class LedgerState:
    """The ledger as one reader saw it: committed entries, the entries of a commit in flight,
    and `stamp`, which changes with every write of the file (each write is a new file)."""

    entries: tuple[LedgerEntry, ...] = ()
    pending: tuple[LedgerEntry, ...] = ()
    stamp: tuple[int, ...] = ()
    pending_by: str = ""  # the writer whose commit announced them: `holder()` of service/core/locks.py


def parse_ledger(text: str, where: str) -> list[LedgerEntry]:
    """The committed entries of a `_ledger/deliveries.json` read from `where`."""
    return list(parse_ledger_state(text, where).entries)


def parse_ledger_state(text: str | bytes, where: str, stamp: tuple[int, ...] = ()) -> LedgerState:
    try:  # bytes are decoded here, so a ledger that is not UTF-8 is unreadable like one that is not JSON
        data = json_text.loads(text)
        problem = shape_problem(_LEDGER_SHAPE, data)
        if problem:
            raise ValueError(problem)
        return LedgerState(tuple(LedgerEntry.from_json(e) for e in data["entries"]),
                           tuple(LedgerEntry.from_json(e) for e in data.get("pending", [])), stamp,
                           data.get("pending_by", ""))
    except ValueError as exc:
        raise DataError(f"the delivery ledger is unreadable: {exc}", where=where,
                        hint=f"correct what it names (in a copy, moved back once it reads), or restore it from a "
                             f"backup; else move it aside (mv {shlex.quote(where)} {shlex.quote(where + '.bad')}) and "
                             "run `spendlake ingest`, which reads every source again and writes a new ledger, but not "
                             "the periods the sources no longer hold (their partitions then unlisted, named by every "
                             "read) nor the restatements it kept") from None


def _decimal_text(text: str) -> str:
    try:
        Decimal(text)
    except ArithmeticError:  # decimal.InvalidOperation
        raise ValueError(f"must be a number written as text, such as '12.50', not {text!r}") from None
    return text


DecimalText = Annotated[StrictStr, AfterValidator(_decimal_text)]


class _TotalsShape(Open):
    currency: StrictStr | None
    rows: StrictInt = Field(ge=0)
    billed_cost: DecimalText | None
    effective_cost: DecimalText | None
    rounding: dict[str, DecimalText] = {}


def _day_text(text: str) -> str:  # compared as text (restated.py): a day written otherwise is another day
    try:
        if date.fromisoformat(text).isoformat() == text:
            return text
    except ValueError:
        pass
    raise ValueError("must be a day such as 2026-11-30")


DaysShape = dict[StrictStr, dict[Annotated[StrictStr, AfterValidator(_day_text)],
                                 tuple[DecimalText | None, DecimalText | None]]]


class _ReplacedShape(Open):
    ingested_at: UtcText
    data_through: UtcText | None = None
    final: StrictBool
    totals: list[_TotalsShape]
    days: DaysShape | None = None
    days_version: StrictInt = Field(default=1, ge=1)


def _partition_value(text: str) -> str:
    if not is_partition_value(text):
        raise ValueError(f"must name a lake partition's folder (letters, digits, '_', '.', ':', '-'; no '..'), "
                         f"not {text!r}")
    return text


PartitionValue = Annotated[StrictStr, AfterValidator(_partition_value)]


class _EntryShape(Open):  # LedgerEntry as to_json writes it; a later version's keys are left for it
    source: PartitionValue  # a folder of the lake: one edited to '../x' is named here, not at every read
    billing_period: PartitionValue
    delivery_id: StrictStr
    rows: StrictInt = Field(ge=0)
    totals: list[_TotalsShape]
    final: StrictBool
    ingested_at: UtcText
    files: list[StrictStr] = []
    size: StrictInt | None = Field(default=None, ge=0)
    sha256: StrictStr | None = None
    data_through: UtcText | None = None
    tag_keys: list[StrictStr] | None = None
    reader_version: StrictInt = Field(default=0, ge=0)
    replaced: _ReplacedShape | None = None
    earlier: list[_ReplacedShape] = []
    days: DaysShape | None = None
    data_from: UtcText | None = None
    days_version: StrictInt = Field(default=1, ge=1)


class _LedgerShape(Open):
    entries: list[_EntryShape]
    pending: list[_EntryShape] = []
    pending_by: StrictStr = ""

    @model_validator(mode="after")
    def _one_entry_per_period(self) -> _LedgerShape:
        seen: set[tuple[str, str]] = set()
        for index, entry in enumerate(self.entries):
            key = (entry.source, entry.billing_period)
            if key in seen:  # which of them describes the partition? (the writer keeps one per key)
                raise NestedValueError(("entries", index), f"{entry.source} {entry.billing_period} is listed twice")
            seen.add(key)
        return self


# checked once as the ledger is read: no reader of an entry meets a hand-edited type as a traceback
_LEDGER_SHAPE = TypeAdapter(_LedgerShape)


# The last parse of each ledger file, with the bytes it parsed: a command (or serve's threads) reads
# the ledger many times between writes, and parsing a large one costs far more than reading it. It
# is reused only for the same bytes (a stamp can repeat: a freed inode, a coarse clock), and shared
# as it is: a LedgerState is frozen through and through (tuples of frozen dataclasses, Decimals).
_PARSED: dict[str, tuple[bytes, LedgerState]] = {}
_PARSED_LOCK = threading.Lock()
_PARSED_FILES = 8  # lakes one process reads (tests open hundreds)


def read_ledger_state(path: Path) -> LedgerState:
    """The ledger at `path` (empty when there is none), stamped from the file it was read from."""
    try:
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            raw = handle.read()
    except FileNotFoundError:
        return LedgerState()
    stamp, key = (stat.st_ino, stat.st_mtime_ns, stat.st_size), str(path)
    with _PARSED_LOCK:
        parsed = _PARSED.get(key)
    if parsed is not None and parsed[0] == raw:
        return parsed[1] if parsed[1].stamp == stamp else replace(parsed[1], stamp=stamp)
    state = parse_ledger_state(raw, key, stamp)
    with _PARSED_LOCK:
        _PARSED.pop(key, None)
        while len(_PARSED) >= _PARSED_FILES:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = (raw, state)
    return state


def ledger_stamp(path: Path) -> tuple[int, ...]:
    """Changes with every write of the ledger (each write is a new file)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return ()
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def ledger_json(entries: list[LedgerEntry], pending: list[LedgerEntry], pending_by: str) -> dict:
    data: dict = {"entries": [e.to_json() for e in sorted(entries, key=lambda e: e.key)]}
    if pending:
        data["pending"] = [e.to_json() for e in sorted(pending, key=lambda e: e.key)]
        data["pending_by"] = pending_by
    return data


