"""The delivery ledger's file (`_ledger/deliveries.json`) as JSON: how its entries are written and
read back, the shape each read checks first (a hand-edited type is named, never a traceback), and
the read itself, parsed once per state of the file. The entries are service.core.ledger's.
"""

from __future__ import annotations

import os
import shlex
import threading
from dataclasses import asdict, fields, replace
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, StrictStr, TypeAdapter, model_validator

from service.core import json_text
from service.core.config_base import NestedValueError
from service.core.errors import DataError
from service.core.files import is_partition_value
from service.core.ledger import AccountTotals, CurrencyTotals, DaySums, LedgerEntry, LedgerState, Replaced
from service.core.state_files import Open, UtcText, shape_problem
from service.core.units import exact_text


def entry_json(entry: LedgerEntry) -> dict:
    """The entry as the ledger file holds it (what entry_from_json reads back)."""
    data = asdict(entry)
    data["totals"] = _totals_json(entry.totals)
    if entry.replaced is None:
        del data["replaced"]
    else:
        data["replaced"] = _replaced_json(entry.replaced)
    if entry.earlier:
        data["earlier"] = [_replaced_json(r) for r in entry.earlier]
    else:
        del data["earlier"]
    if entry.accounts is not None:
        data["accounts"] = [_account_json(a) for a in entry.accounts]
    for key in ("days", "data_from", "mtime_ns", "accounts", "delivered_at", "delivered_by"):
        if getattr(entry, key) is None:
            del data[key]
    if entry.days is None:
        del data["days_version"]
    else:
        data["days"] = _days_json(entry.days)
    data["files"] = list(entry.files)
    del data["data_through_recorded"]
    if not entry.reader_version:
        del data["reader_version"]
    if entry.tag_keys is None:
        del data["tag_keys"]
    else:
        data["tag_keys"] = list(entry.tag_keys)
    return data


def entry_from_json(data: dict) -> LedgerEntry:
    """The entry a ledger file's JSON describes (checked against _LEDGER_SHAPE first)."""
    keys, replaced, accounts = data.get("tag_keys"), data.get("replaced"), data.get("accounts")
    known = {f.name for f in fields(LedgerEntry)}  # a later version's fields are left out: it can still be read
    return LedgerEntry(**{**{k: v for k, v in data.items() if k in known}, "totals": _totals(data["totals"]),
                       "files": tuple(data.get("files", ())),
                       "data_through_recorded": "data_through" in data,
                       "data_through_bounded": data.get("data_through_bounded", False),
                       "tag_keys": None if keys is None else tuple(keys),
                       "days": _days(data.get("days")), "days_version": data.get("days_version", 1),
                       "replaced": None if replaced is None else _replaced(replaced),
                       "earlier": tuple(_replaced(r) for r in data.get("earlier", ())),
                       "accounts": None if accounts is None else tuple(
                           AccountTotals(a["provider"], a["account"], a["currency"], _dec(a["billed_cost"]),
                                         _dec(a["effective_cost"]), None if a.get("sub_accounts") is None
                                         else tuple(a["sub_accounts"])) for a in accounts)})


def _account_json(account: AccountTotals) -> dict:
    data = {**asdict(account), "billed_cost": exact_text(account.billed_cost),
            "effective_cost": exact_text(account.effective_cost)}
    if account.sub_accounts is None:
        del data["sub_accounts"]
    else:
        data["sub_accounts"] = list(account.sub_accounts)
    return data


def _replaced_json(old: Replaced) -> dict:
    data = {**asdict(old), "totals": _totals_json(old.totals), "days": _days_json(old.days)}
    if old.days is None:
        del data["days"], data["days_version"]
    for key in ("delivered_at", "delivered_by", "delivery_id"):
        if data[key] is None:
            del data[key]
    return data


def _replaced(data: dict) -> Replaced:
    return Replaced(data["ingested_at"], data.get("data_through"), data["final"], _totals(data["totals"]),
                    _days(data.get("days")), data.get("days_version", 1), data.get("data_through_bounded", False),
                    data.get("delivered_at"), data.get("delivered_by"), data.get("delivery_id"))


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


def parse_ledger(text: str, where: str) -> list[LedgerEntry]:
    """The committed entries of a `_ledger/deliveries.json` read from `where`."""
    return list(parse_ledger_state(text, where).entries)


def parse_ledger_state(text: str | bytes, where: str, stamp: tuple[int, ...] = ()) -> LedgerState:
    try:  # bytes are decoded here, so a ledger that is not UTF-8 is unreadable like one that is not JSON
        data = json_text.loads(text)
        problem = shape_problem(_LEDGER_SHAPE, data)
        if problem:
            raise ValueError(problem)
        return LedgerState(tuple(entry_from_json(e) for e in data["entries"]),
                           tuple(entry_from_json(e) for e in data.get("pending", [])), stamp,
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


class _AccountShape(Open):
    provider: StrictStr | None
    account: StrictStr | None
    currency: StrictStr | None
    billed_cost: DecimalText | None
    effective_cost: DecimalText | None
    sub_accounts: list[StrictStr] | None = None


class _ReplacedShape(Open):
    ingested_at: UtcText
    data_through: UtcText | None = None
    final: StrictBool
    totals: list[_TotalsShape]
    days: DaysShape | None = None
    days_version: StrictInt = Field(default=1, ge=1)
    data_through_bounded: StrictBool = False
    delivered_at: UtcText | None = None
    delivered_by: Literal["execution id", "files", "files removed"] | None = None  # DELIVERED_BY
    delivery_id: StrictStr | None = None


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
    mtime_ns: StrictInt | None = Field(default=None, ge=0)
    data_through: UtcText | None = None
    data_through_bounded: StrictBool = False
    tag_keys: list[StrictStr] | None = None
    reader_version: StrictInt = Field(default=0, ge=0)
    replaced: _ReplacedShape | None = None
    earlier: list[_ReplacedShape] = []
    days: DaysShape | None = None
    data_from: UtcText | None = None
    days_version: StrictInt = Field(default=1, ge=1)
    accounts: list[_AccountShape] | None = None
    delivered_at: UtcText | None = None
    delivered_by: Literal["execution id", "files", "files removed"] | None = None  # DELIVERED_BY


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
    data: dict = {"entries": [entry_json(e) for e in sorted(entries, key=lambda e: e.key)]}
    if pending:
        data["pending"] = [entry_json(e) for e in sorted(pending, key=lambda e: e.key)]
        data["pending_by"] = pending_by
    return data
