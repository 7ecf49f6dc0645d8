"""Render a Report as files: report.html, report.json, summary.md and one CSV per table.

HTML comes from a Jinja2 template with autoescaping on; its Content-Security-Policy
allows no network and only our one inline script (by hash), so even a value that escaped
escaping could not run. CSV cells that start with = + - @ are neutralised (service.core.output).
The same Report always renders to the same bytes: nothing here reads the clock.
"""

from __future__ import annotations

import base64
import hashlib
import re
from decimal import Decimal
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from service.core.output import for_html, printable, to_csv, to_json
from service.core.units import percent_change_text, shown_money
from service.report.charts import render as render_chart
from service.report.model import Column, Headline, Report, Table, ranked_title

# Runs last; marks the page when the DOM it expects is there (the browser test reads it).
SCRIPT = ('document.documentElement.setAttribute("data-report-ok", '
          'String(document.querySelectorAll("svg").length + ":" + document.querySelectorAll("table").length));')
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
MD_SPECIAL = set("\\`*_[]|~")  # inline syntax; our values never start a line ("(" is inert without "]")
MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}  # as Markdown and chat tools (Slack) both expect
RUN = 32  # characters without a space after which a table cell may wrap (an identifier, not a word)
VALUE_LIMIT = 200  # characters of a value shown in a cell or summary line (an ARN fits); the CSVs keep it whole


money = shown_money  # the template's name for it


def change(value: Decimal | None) -> str:
    return percent_change_text(value) or "—"


def change_class(value: Decimal | None) -> str:
    return "" if value is None or value == 0 else "up" if value > 0 else "down"


def display(value: Any, column: Column, row: dict[str, Any]) -> str:
    if column.kind == "money":
        currency = row.get("currency", "USD")  # tables without a currency column are USD
        high = row.get(column.to, value) if column.to else value
        return money(value, currency) + ("" if high == value else f" to {money(high, currency)}")
    if column.kind == "money_change":  # a rise signed as a fall is: +$4,676.19 beside −$34,845.21
        return ("+" if value and value > 0 else "") + money(value, row.get("currency", "USD"))
    if column.kind == "change":
        return change(value)
    if column.kind == "percent":
        return "—" if value is None else f"{Decimal(value).quantize(Decimal('0.1'))}%"
    if column.kind == "count":
        return "—" if value is None else f"{int(value):,}"
    if column.kind == "time" and isinstance(value, str) and len(value) == 20:  # 2026-11-28T06:00:00Z
        return f"{value[:10]} {value[11:16]}"  # UTC, as the page says
    return "" if value is None else str(value)


def cut(text: str) -> str:
    """`text` up to VALUE_LIMIT characters, the rest as `…`: a 200,000-character tag value would
    fill a chat message or a page's table (its CSV and report.json hold it whole)."""
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 1] + "…"


def breakable(text: str) -> Markup:
    """`text` escaped, with a break opportunity (`<wbr>`) every RUN characters of a run without
    spaces: one long run id or invoice id wraps in its cell instead of widening its table past the
    page (words stay whole; copied text is unchanged)."""
    return Markup("").join(Markup("<wbr>").join(escape(token[i:i + RUN]) for i in range(0, len(token), RUN))
                           for token in re.split(r"(\s+)", text))


def kinds(column: Column) -> list[str]:
    """A column's classes: `num` right-aligns a number; `currency` is the column a narrow window
    hides, each amount already naming its currency ($, EUR 12.00)."""
    return ([] if column.kind == "text" else ["num"]) + (["currency"] if column.key == "currency" else [])


def header(column: Column) -> Markup:
    classes = kinds(column)
    attr = f' class="{" ".join(classes)}"' if classes else ""
    return Markup(f"<th{attr}>") + escape(column.label) + Markup("</th>")


def cell(row: dict[str, Any], column: Column) -> Markup:
    value = row.get(column.key)
    classes = kinds(column) + ([column.css] if column.css else [])
    if column.kind in ("change", "money_change", "time"):
        classes.append("time" if column.kind == "time" else change_class(value))
    if column.to:  # a crowded table wraps a range's high end under its low, never inside an amount
        classes.append("range")
    attr = f' class="{" ".join(c for c in classes if c)}"' if classes else ""
    shown = display(value, column, row)
    if column.kind == "text":
        return Markup(f"<td{attr}>{breakable(cut(shown))}</td>")
    if column.kind == "time":  # a crowded table wraps the time under its date, never inside the date
        return Markup(f"<td{attr}>") + Markup(" ").join(
            Markup("<span>{}</span>").format(part) for part in shown.split(" ")) + Markup("</td>")
    if column.to:
        low, _, high = shown.partition(" to ")
        return Markup(f"<td{attr}><span>{{}}</span>{{}}</td>").format(
            low, Markup(" <span>to {}</span>").format(high) if high else "")
    return Markup(f"<td{attr}>{escape(shown)}</td>")


def _environment() -> Environment:
    env = Environment(loader=PackageLoader("service.report", "templates"), autoescape=True, undefined=StrictUndefined,
                      keep_trailing_newline=True)
    env.filters.update(money=money, change=change, change_class=change_class, svg=render_chart)
    env.globals.update(cell=cell, header=header, headline=headline)
    return env


def render_html(report: Report) -> str:
    template = _environment().get_template("report.html.j2")
    # the template holds no control character, so any on the page came from a value (a tag, a job name)
    return for_html(template.render(report=report, script=Markup(SCRIPT), script_hash=SCRIPT_HASH))


def render_csvs(report: Report) -> dict[str, str]:
    return {f"{table.key}.csv": to_csv(table.rows, [c.key for c in table.columns]) for table in report.tables}


def md(text: Any) -> str:
    """A user-controlled string made inert for Markdown, chat and a terminal showing the file (no
    links, no HTML, no emphasis, control characters as escapes)."""
    return "".join(MD_ENTITIES.get(ch) or ("\\" + ch if ch in MD_SPECIAL else ch)
                   for ch in printable(str(text).replace("\n", " ")))


def headline(h: Headline) -> str:
    if h.kind == "percent":
        return display(h.value, Column("", "", "percent"), {})
    return money(h.value, h.currency)


def render_markdown(report: Report, rows: int = 5) -> str:
    """A short summary for chat: the headlines, then the first rows of the key tables (every row
    of the bills and invoices, so finance ties out from it too)."""
    lines = [f"**spendlake daily report — {report.day.isoformat()}**", ""]
    lines += [f"_{md(note)}_" for note in report.notes] + ([""] if report.notes else [])
    for h in report.headlines:
        versus = f" ({change(h.change_pct)} vs {money(h.previous, h.currency)})" if h.previous is not None else ""
        lines.append(f"- {h.label}: {headline(h)}{versus}")
    if not report.headlines:
        lines += [f"- {md(s.note)}" for s in report.sections if s.key == "spend" and s.note]
    for section in report.sections:
        if not section.available:
            lines.append(f"- {section.title}: {section.note}")
        # a section listed whole (the bills finance ties out) says what it counts, as on the page:
        # the bill differs from the month to date above by the lines billed in another month
        elif section.note and any(t.markdown_whole and t.rows for t in section.tables):
            lines += ["", f"_{md(section.note)}_"]
        for table in section.tables:
            if table.markdown and table.rows:
                labels, value = table.markdown
                # rows of findings a past day's report lists are the last rules run's: said above them as on the page
                lines += ["", f"_{md(table.summary_note)}_"] if table.summary_note else []
                column = next(c for c in table.columns if c.key == value)
                shown = table.rows if table.markdown_whole else table.rows[:rows]
                # the page's "Top 10 runs" over its first 5 rows: "Top 5 runs"
                title = ranked_title(len(shown), table.ranked) if table.ranked and len(shown) < len(table.rows) \
                    else table.title
                named = title.lower().endswith(column.label.lower())  # "Top 10 runs, month to date"
                lines += ["", f"*{title}*" + ("" if named else f" — {column.label}")]
                # a label ending in a sentence's full stop would read "day(s).: $28,027.49"
                lines += [f"- {' / '.join(md(cut(str(row.get(k)))) for k in labels if row.get(k) is not None).rstrip('.')}: "
                          f"{_summary_value(table, column, row)}" for row in shown]
                # of every row: said when all are, or of the shares listed (why one is —)
                for note in table.notes if table.markdown_whole or column.kind == "percent" else []:
                    lines += ["", f"_{md(note)}_"]  # a paragraph of its own: under a list item it would continue it
        # what a chart leaves out (another currency's spend), said under it on the page: here with its title
        lines += [line for title, note in section.chart_notes() for line in ("", f"_{md(title)}: {md(note)}_")]
    return "\n".join(lines).rstrip() + "\n"


def _summary_value(table: Table, column: Column, row: dict[str, Any]) -> str:
    """The row's value in the summary; a share that is none (— on the page, a credit's) gives the
    row's amount beside it instead, as the page shows it in its own column: '—' alone says nothing."""
    shown = display(row.get(column.key), column, row)
    if not column.part or row.get(column.key) is not None:
        return shown
    amount = next(c for c in table.columns if c.key == column.part)
    return f"{display(row.get(amount.key), amount, row)} {amount.label} (no share)"


def render_files(report: Report) -> dict[str, bytes]:
    """Every output file of one report, by name."""
    files = {"report.html": render_html(report), "report.json": to_json(report.to_json()) + "\n",
             "summary.md": render_markdown(report), **render_csvs(report)}
    return {name: text.encode("utf-8") for name, text in sorted(files.items())}
