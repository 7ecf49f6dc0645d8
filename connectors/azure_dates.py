"""An Azure cost details file's dates as the FOCUS billing and charge periods, parsed once per
distinct text.

Azure writes days, `MM/DD/YYYY` or `M/D/YYYY` (always parsed with that explicit format: DuckDB's
sniffer would swap day and month) or ISO `YYYY-MM-DD` (`2024-05-01T00:00:00.0000000Z`, as the
APIs write them). Its period and charge dates are inclusive days; FOCUS ends are exclusive. MCA
leaves the billing period blank on lines not yet invoiced (servicePeriod* filled): those, like a
file without the columns, are billed in the calendar month of their day.

A month's file holds a few dozen distinct date texts over millions of lines, so each FOCUS time
is given to the stager as text with the SQL that parses it (service.core.per_value, as a FOCUS
CSV's times are: exportfile.timestamp_per_value), and parsed once per text it has not met. A
billing period falling back to the day's month reads two columns: its text is the period's own
date marked `P`, or where that is blank the day marked `D`, so the one text says which SQL
applies and the values are those of the per-line SQL.
"""

from __future__ import annotations

from connectors.exportfile import Table, ident, timestamp_per_value, timestamp_sql

DATE_FORMATS = ("%m/%d/%Y",)  # month first, always explicit; ISO dates and times read too
DAY = ("Date", "UsageDateTime")
# FOCUS time → (the Azure column it is read from, else from the day; SQL from that date; SQL from the day)
TIMES = {
    "BillingPeriodStart": ("BillingPeriodStartDate", "{}", "date_trunc('month', {})"),
    "BillingPeriodEnd": ("BillingPeriodEndDate", "{} + INTERVAL 1 DAY", "date_trunc('month', {}) + INTERVAL 1 MONTH"),
    "ChargePeriodStart": (None, "{}", "{}"),
    "ChargePeriodEnd": (None, "{} + INTERVAL 1 DAY", "{} + INTERVAL 1 DAY"),
}


def day(table: Table, sql: str | None = None, text: bool = False) -> str:
    """SQL: the line's day parsed (`sql`: a value of the day column, of its type or `text`)."""
    return own_date(table, table.name(*DAY), sql, text)


def own_date(table: Table, column: str, sql: str | None = None, text: bool = False) -> str | None:
    """SQL: the line's `column` parsed (`sql`: a value of it, of its type or `text`); None when
    the file lacks the column."""
    name = table.name(column)
    if name is None:
        return None
    return timestamp_sql(table, sql or ident(name), name, None if text else table.type_of(name), DATE_FORMATS)


def period_times(table: Table, values: dict[str, str] | None = None) -> dict[str, str]:
    """Each FOCUS time as SQL over the line's own columns, parsed on the line (`values`: SQL of
    the columns' values, by name, `day` the day's, where they are not the file's own columns)."""
    values = values or {}
    found = {}
    for focus, (column, from_own, from_day) in TIMES.items():
        own = own_date(table, column, values.get(column)) if column else None
        by_day = from_day.format(day(table, values.get("day")))
        found[focus] = f"coalesce({from_own.format(own)}, {by_day})" if own else by_day
    return found


def period_times_per_value(table: Table) -> dict[str, tuple[str, str]]:
    """FOCUS time → (its text, the SQL over a text column `value` giving the time), for the stager
    to run once per distinct text; only the times whose columns are all text (a Parquet file's
    typed dates: nothing to parse)."""
    if timestamp_per_value(table, *DAY, formats=DATE_FORMATS) is None:
        return {}
    day_column = ident(table.name(*DAY))
    found = {}
    for focus, (column, from_own, from_day) in TIMES.items():
        name = table.name(column) if column else None
        if name is None:
            found[focus] = (day_column, from_day.format(day(table, ident("value"), text=True)))
        elif str(table.type_of(name)) == "VARCHAR":
            marked = f"CASE WHEN trim({ident(name)}) <> '' THEN 'P' || {ident(name)} ELSE 'D' || {day_column} END"
            rest = "substr(value, 2)"
            own, by_day = own_date(table, column, rest, text=True), day(table, rest, text=True)
            found[focus] = (marked, f"CASE WHEN left(value, 1) = 'P' THEN {from_own.format(own)} "
                                    f"ELSE {from_day.format(by_day)} END")
    return found
