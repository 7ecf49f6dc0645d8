"""The report's budgets section: month-to-date actual and month-end forecast per configured
budget (service.findings.budgets, the numbers `spendlake budgets` shows), with the warning lines;
in the first days of a month, also how the month before ended; a budget's scope's spend in other
currencies than its own (never converted, never counted) in a `left_out` column and the note.

The report day D is judged as of D's end (the next midnight UTC), the instant `spendlake
budgets` uses when the bill runs through D. That instant closes D's month (as `--since mtd`
reads it, service/core/timewindow.py): the report of a month's last day shows how that month
came out (its forecast is its actual), not a new month without spend.
The actual is the month's window to D's end attributed at once, so it equals `spendlake attribute
--cost C` over that window, C the budget's `cost:`, and for a billed budget (the default) the
team's month to date in the spend table.
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

from service.core.config import Config
from service.core.lake import Lake
from service.core.timewindow import day_start, minute_text, month_name
from service.findings.budgets import budget_statuses, early_in_month, no_data_note
from service.findings.forecast import history_start, month_bounds
from service.report.model import Chart, Column, Section, Table

CENT, TENTH = Decimal("0.01"), Decimal("0.1")  # forecasts are estimates: cents and tenths of a percent


def budgets_section(config: Config, lake: Lake, day: date) -> Section:
    if not config.budgets:
        return Section("budgets", "Budgets", note="No budgets configured (`budgets:` in the config).")
    until = (day_start(day) + timedelta(days=1)).replace(tzinfo=None)  # naive UTC, as service.findings.budgets takes it
    since = history_start(until)
    statuses = budget_statuses(lake, config, since, until, until)
    title = f"Budgets, {month_name(month_bounds(until)[0])} as of {minute_text(until)}: actual, forecast and warning lines"
    table = Table("budgets", title, [
        Column("budget", "budget"), Column("dimension", "dimension"), Column("value", "value"),
        Column("currency", "currency"), Column("amount", "budget", "money"), Column("actual", "actual", "money"),
        Column("used_pct", "used", "percent"), Column("forecast", "forecast", "money"),
        Column("forecast_low", "forecast low", "money", in_html=False),
        Column("forecast_high", "forecast high", "money", in_html=False),
        Column("forecast_pct", "forecast used", "percent"), Column("lines", "lines", in_html=False),
        Column("status", "status"),
        *([Column("last_month", "last month")] if early_in_month(until) else []),
        *([Column("left_out", "left out (other currencies)")] if any(s.left_out for s in statuses) else []),
        Column("cost", "cost"),  # added last (budgets.csv's columns before it keep their places)
    ], markdown=(("budget", "value"), "status"))
    for status in statuses:
        budget, outlook = status.budget, status.outlook
        table.rows.append({
            "budget": budget.name, "dimension": budget.dimension, "value": budget.value, "cost": budget.cost,
            "currency": budget.currency, "amount": budget.amount, "actual": outlook.actual,
            "used_pct": (status.used_ratio * 100).quantize(TENTH), "forecast": outlook.forecast.quantize(CENT),
            "forecast_low": outlook.low.quantize(CENT), "forecast_high": outlook.high.quantize(CENT),
            "forecast_pct": (status.forecast_ratio * 100).quantize(TENTH),
            "lines": ", ".join(f"{line * 100:.0f}%" for line in budget.lines), "status": status.status,
            "last_month": (f"{status.last_month.month}: {(status.last_month.used_ratio * 100).quantize(TENTH)}% "
                           f"{status.last_month.status}") if status.last_month else "",
            "left_out": status.left_out_text,
        })
    names = [s.budget.name for s in statuses]
    series: dict[str, list] = {"actual": [s.used_ratio * 100 for s in statuses],
                               "forecast": [s.forecast_ratio * 100 for s in statuses],
                               "forecast low": [s.outlook.low / s.budget.amount * 100 for s in statuses],
                               "forecast high": [s.outlook.high / s.budget.amount * 100 for s in statuses]}
    for line in sorted({line for s in statuses for line in s.budget.lines}):
        series[f"line {line * 100:.0f}%"] = [line * 100 if line in s.budget.lines else None for s in statuses]
    chart = Chart("budget", "Budgets: % used (bar), month-end forecast (outline, band) and warning lines",
                  names, series, "%")
    said = [no_data_note(statuses, until)] + [note for status in statuses for note in (
        status.unmatched_warning, status.no_spend_note, status.lacking_note, status.left_out_note)]
    notes = [f"{note[0].upper()}{note[1:]}." for note in said if note]
    return Section("budgets", "Budgets", tables=[table], charts=[chart], note=" ".join(notes) or None)
