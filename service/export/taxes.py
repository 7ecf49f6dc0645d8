"""A Tax line's ListCost and ContractedCost in a FOCUS export, derived from the lines it taxes.

FOCUS's rule for a charge calculated from other charges: a Tax line without a ListCost (aws-cur:
AWS writes a public On-Demand cost of 0 on tax) or a ContractedCost takes its BilledCost × the
ListCost (the ContractedCost) ÷ the BilledCost of the lines it taxes (TAXED), rounded half away
from zero once, to the places the tax is billed in (`decimals`), in exact money (`scaled`).
service/export/focus.py's module docstring says where it stands among the export's steps.
"""

from __future__ import annotations

from service.core.schema import MONEY

# The lines a Tax line taxes: its provider, accounts, service and currency (of its own billing
# period: the export's query reads one period at a time, `$period`).
TAXED = ("ProviderName", "BillingAccountId", "SubAccountId", "ServiceName", "BillingCurrency")


def scaled(value: str, numerator: str, denominator: str, decimals: str) -> str:
    """SQL: value × numerator ÷ denominator in exact money, rounded half away from zero once, to
    `decimals` places (SQL, 0 to 12). DuckDB divides decimals as doubles: this divides their 10^-12
    units as HUGEINTs, by long division over value's base-10^6 digits, so no product passes 2^127
    (exact for terms below 10^14 of money, as their units are); NULL when the denominator is 0 or a
    term or the result does not fit."""
    value, numerator, denominator = (f"CAST(CAST({term} AS {MONEY}) * 1000000000000 AS HUGEINT)"
                                     for term in (value, numerator, denominator))
    digits = ", ".join(f"abs({value}) // CAST('{10 ** (6 * k)}' AS HUGEINT) % 1000000" for k in range(6, -1, -1))
    carried = f"(acc.r * 1000000 + digit * abs({numerator}))"
    step = (f"lambda acc, digit: {{'q': acc.q * 1000000 + {carried} // abs({denominator}), "
            f"'r': {carried} % abs({denominator})}}")
    divided = f"list_reduce([{digits}], {step}, {{'q': CAST(0 AS HUGEINT), 'r': CAST(0 AS HUGEINT)}})"
    # The quotient's floor q (units) and remainder r: to whole units, up when 2r ≥ the denominator;
    # to a coarser unit u (an even power of 10), up when 2 (q mod u) ≥ u, as r < the denominator
    # cannot carry q's remainder to half of u: one rounding, no double rounding.
    unit = f"CAST([{', '.join(str(10 ** k) for k in range(13))}] AS HUGEINT[])[13 - ({decimals})]"
    rounded = (f"list_transform([{divided}], lambda qr: list_transform([{unit}], lambda places: CASE WHEN "
               f"places = 1 THEN qr.q + CASE WHEN 2 * qr.r >= abs({denominator}) THEN 1 ELSE 0 END "
               "ELSE (qr.q // places + CASE WHEN 2 * (qr.q % places) >= places THEN 1 ELSE 0 END) * places "
               "END)[1])[1]")
    signed = f"sign({value}) * sign({numerator}) * sign({denominator}) * {rounded}"
    return (f"try(CASE WHEN {denominator} <> 0 THEN CAST(CAST({signed} AS DECIMAL(38,0)) * "
            f"CAST(0.000000000001 AS DECIMAL(13,12)) AS {MONEY}) END)")


def decimals(cost: str, currency: str) -> str:
    """SQL: the places a cost is billed in: its currency's minor unit (ISO 4217: JPY 0, USD 2,
    BHD 3; 2 for a code not known), or the cost's own where it is written finer (0.0123: 4)."""
    from babel.numbers import get_currency_precision, list_currencies  # only an export needs the table

    other = " ".join(f"WHEN '{code}' THEN {get_currency_precision(code)}" for code in sorted(list_currencies())
                     if get_currency_precision(code) != 2)
    own = f"length(split_part(rtrim(CAST(abs(CAST({cost} AS {MONEY})) AS VARCHAR), '0'), '.', 2))"
    return f"greatest(CASE upper({currency}) {other} ELSE 2 END, {own})"


def taxes_sql(lines: str, taxed: str) -> str:
    """SELECT `lines` (a conforming step's relation) with the ListCost and ContractedCost of a Tax
    line the step left without them derived from the lines it taxes (TAXED, their sums in relation
    `taxed`), unless their cost and billed cost have opposite signs: lines netting a credit of
    -10 (a refund beside usage a Savings Plan covered, contracted at 90) are no base a tax of 5 is
    on, and their ratio would contract it at -45, against its own sign; it keeps its BilledCost."""
    same = " AND ".join(f"t.{name} IS NOT DISTINCT FROM l.{name}" for name in TAXED)
    # A part of a split Tax line: the line's derived cost up to the part's end less up to its start
    # (LINE_BILLED), rounded to the line's places; the parts add up to the line's. A line without
    # a BilledCost of its own (filled in step 2) is derived alone.
    whole, before = "coalesce(l.line_billed_cost, l.BilledCost)", "coalesce(l.line_billed_before, 0)"
    places = decimals(whole, "l.BillingCurrency")
    derived = ", ".join(
        f"coalesce(l.{name}, CASE WHEN sign(t.taxed_{short}) * sign(t.taxed_billed) >= 0 THEN "
        f"{scaled(f'{before} + l.BilledCost', f't.taxed_{short}', 't.taxed_billed', places)} - "
        f"{scaled(before, f't.taxed_{short}', 't.taxed_billed', places)} END, l.BilledCost) AS {name}"
        for name, short in (("ListCost", "list"), ("ContractedCost", "contracted")))
    return f"SELECT l.* REPLACE ({derived}) FROM {lines} AS l LEFT JOIN {taxed} AS t ON {same}"
