"""Small helpers every floor shares, written once: money, shares, UTC instants, top-N folding.

Money is `Decimal`: `cents()` rounds half-up to the cent (what a person reads), `exact_text()`
keeps every decimal (what JSON and CSV carry), `money_text()` and `usd()` format for tables.
The lake stores naive TIMESTAMPs that mean UTC: `naive_utc()` and `aware_utc()` convert,
`local_utc()` reads a file's time in a zone.

Decimal arithmetic is exact at the lake's sizes: Python's default context keeps 28
significant digits and rounds every sum silently beyond them, but a DECIMAL(38,12) cost
near 1e19 has 32. `use_exact_decimals()` (run once when the `service` package is imported)
gives this thread and every thread started later MONEY_DIGITS: a product of two 38-digit
numbers (a share of a cost) is exact, and so is any sum of them.
"""

from __future__ import annotations

import decimal
import sys
from collections.abc import Container, Iterable, Mapping
from datetime import datetime, timedelta, timezone, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TextIO, TypeVar

MONEY_DIGITS = 76
CENT = Decimal("0.01")
OTHER = "other"  # the label that top-N folding gives to everything past the top
NO_CURRENCY = "(no currency)"  # rows without BillingCurrency, which the lake keeps (a null in JSON)

K = TypeVar("K")


def use_exact_decimals() -> None:
    """MONEY_DIGITS for this thread's decimal context and for threads started from now on."""
    decimal.DefaultContext.prec = MONEY_DIGITS
    decimal.getcontext().prec = MONEY_DIGITS


def cents(value: Decimal | int | float | str | None, currency: str | None = None) -> Decimal:
    """Rounded half-up to the cent, or to the currency's minor unit as its invoices show it
    (JPY whole yen, BHD fils); a float only ever comes from a ratio, never a bill."""
    unit = CENT if currency is None else Decimal(1).scaleb(-minor_units(currency))
    return Decimal(str(value or 0)).quantize(unit, rounding=ROUND_HALF_UP)


def minor_units(currency: str | None) -> int:
    """Decimals of the currency's minor unit (ISO 4217, from CLDR through Babel: JPY 0, EUR 2,
    KWD 3); 2 for no currency or a code it does not know."""
    if not currency:
        return 2
    from babel.numbers import get_currency_precision  # only tables and reports need it

    return get_currency_precision(currency)


def exact_text(value: Decimal | None) -> str | None:
    """Every decimal, no exponent: `Decimal('1E+2')` → `'100'`; None stays None."""
    return None if value is None else format(value, "f")


def plain_number(quantity: Decimal) -> str:
    """3.0000000000000000 → '3'; 2.5000 → '2.5' (no exponent)."""
    text = format(quantity, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def currency_text(currency: str | None) -> str:
    """The currency as a person reads it: a null one is named rather than printed as `None`."""
    return NO_CURRENCY if currency is None else currency


def titled(label: str, currency: str | None) -> str:
    """`Day (USD)`; `Day (no currency)` for lines the bill gave none."""
    return f"{label} ({currency or NO_CURRENCY.strip('()')})"


def money_text(value: Any, currency: str | None = None, *, empty: str = "", of: str | None = None) -> str:
    """`1,234.57` (or `USD 1,234.57` with a currency); None gives `empty`. Decimals are those of
    the minor unit of `of` (a table's currency column), else of `currency`: JPY 1,235."""
    if value is None or value == "":
        return empty
    unit = of or currency
    text = f"{cents(Decimal(value), unit):,.{minor_units(unit)}f}"
    return f"{currency} {text}" if currency else text


def shown_money(value: Any, currency: str | None = "USD", *, of: str | None = None) -> str:
    """An amount as the report's pages write it, in tables and notes alike: `$1,234.57`, `−$1.00`,
    `EUR 12.00`, `−EUR 2.13` (the sign before the symbol), in the minor unit of `of` (a table's
    currency column), else of `currency`: JPY 1,235; None gives `—`."""
    if value is None:
        return "—"
    return signed(cents(Decimal(value), of or currency), currency)  # JPY in whole yen, as its invoice shows it


def signed(amount: Decimal, currency: str | None, exact: bool = False) -> str:
    """`amount` written as shown_money writes it, rounded already (or `exact`: every decimal kept)."""
    sign = "−" if amount < 0 else ""
    symbol = "$" if currency == "USD" else f"{currency or NO_CURRENCY} "  # "" or None: lines the bill gave none
    return f"{sign}{symbol}{abs(amount).normalize():,f}" if exact else f"{sign}{symbol}{abs(amount):,}"


def amounts_text(amounts: Iterable[tuple[str | None, Any]]) -> str:
    """`EUR 250.00, GBP 12.00`: amounts in several currencies, by currency, never added up."""
    return ", ".join(money_text(value, currency_text(currency))
                     for currency, value in sorted(amounts, key=lambda pair: currency_text(pair[0])))


def usd(value: Any) -> str:
    """`$1,234.57`, `−$1.00`: a USD amount as the report's tables write it."""
    return shown_money(Decimal(value))


def naive_utc(value: datetime | None) -> datetime | None:
    """An aware instant as the lake's naive UTC; naive values are taken to be UTC already."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def local_utc(moment: datetime, zone: tzinfo, fold: int = 0) -> datetime:
    """A time read from a file as the lake's naive UTC: an aware one converted, a naive one
    taken as `zone`'s wall clock (`fold`: which pass of an hour the clocks go through twice).
    ValueError for a wall time `zone`'s clocks skip (spring forward): no clock in that zone
    shows it, so the file's times are in another zone; shifting it would move a job by an hour."""
    if moment.tzinfo is not None:
        return naive_utc(moment)
    utc = moment.replace(tzinfo=zone, fold=fold).astimezone(timezone.utc)
    if utc.astimezone(zone).replace(tzinfo=None) != moment:
        before, after = (moment - timedelta(hours=3)).replace(tzinfo=zone), (moment + timedelta(hours=3)).replace(
            tzinfo=zone)
        raise ValueError(f"{moment.isoformat()} does not exist in {zone}: its clocks spring forward over it "
                         f"({_offset(before)} to {_offset(after)}); are the times in another zone? (set the "
                         "source's timezone to it)")
    return utc.replace(tzinfo=None)


def _offset(moment: datetime) -> str:
    return moment.strftime("UTC%z").replace("UTC+0000", "UTC")


def aware_utc(value: datetime | None) -> datetime | None:
    """A naive UTC instant (the lake's) as an aware one; aware values are converted to UTC."""
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def share_of(part: Decimal | None, total: Decimal | None, quantum: Decimal) -> Decimal | None:
    """`part` / `total` to `quantum`, or None when it is no share of it: a bill's credits make a
    total net, and a part below 0 or above a positive total (or any part of a total <= 0) is not a
    fraction anyone can read (service/report/shares.py says how the report shows it)."""
    if part is None or not total or total < 0 or not 0 <= part <= total:
        return None
    return (part / total).quantize(quantum)


def percent_change_text(value: Decimal | None) -> str | None:
    """+2.4%, −12.7%, ±0.0%: a change in percent to a tenth, rounded half-up as money is and signed
    with the tables' minus; None when there is nothing to compare with."""
    if value is None:
        return None
    shown = value.quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return f"{'+' if shown > 0 else '−' if shown < 0 else '±'}{abs(shown)}%"


def top_keys(values: Mapping[K, Decimal], n: int) -> list[K]:
    """The `n` keys with the largest values; ties break on the key, so the same data always
    gives the same top."""
    return [key for key, _ in sorted(values.items(), key=lambda item: (-item[1], item[0]))[:n]]


def fold_top(values: Mapping[tuple[str, ...], Decimal], n: int) -> dict[tuple[str, ...], Decimal]:
    """The `n` largest label tuples by value and the rest summed, each key ending in its `folded`
    flag (`folded_key`)."""
    kept = set(top_keys(values, n))
    folded: dict[tuple[str, ...], Decimal] = {}
    for key, value in values.items():
        label = folded_key(key, kept)
        folded[label] = folded[label] + value if label in folded else value  # a ranked value as it is
    return folded


def folded_key(key: tuple[str, ...], kept: Container[tuple[str, ...]]) -> tuple[str, ...]:
    """A metric's labels for `key`: itself and folded "" when it ranks (`kept`), else the rest's,
    `other` in each label and folded "true", so a value itself named `other` is not summed in it."""
    return (*key, "") if key in kept else (*(OTHER,) * len(key), "true")


def is_tty(stream: TextIO | None = None) -> bool:
    """True when `stream` (default stdout) is a terminal: tables for people, JSON for pipes."""
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream is not a terminal
        return False


def utc_now_iso() -> str:
    return utc_iso_seconds(datetime.now(timezone.utc))


def utc_iso_seconds(at: datetime) -> str:
    """`at` as the lake stores a time (`utc_now_iso`'s): UTC to the second, `Z`."""
    return at.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def iso_seconds(text: str) -> float:
    """Seconds since the epoch of a stored UTC time (`utc_now_iso`'s text)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
