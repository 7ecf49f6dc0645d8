"""What a daily report holds: sections of tables (and the charts drawn from them).

One model feeds every output (HTML, CSV, JSON, Markdown), so they always show the same
numbers. Values stay exact (Decimal money, ISO times); only the HTML rounds for display.
A section whose data source is missing says so in `note` and carries no rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Literal

ColumnKind = Literal["text", "money", "money_change", "change", "percent", "count", "time"]  # change: in %


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    kind: ColumnKind = "text"
    in_html: bool = True  # False: in CSV and JSON only (e.g. what a chart beside the table shows)
    css: str = ""  # an HTML class for the column's cells (e.g. `finding`: a sentence kept readable)
    part: str = ""  # a share's money column it is the share of: the summary shows it where the share is none
    # a range's low end: the key of its high end (a column of CSV and JSON only), which the page shows with it
    # as one figure where they agree, else `low to high` (as `spendlake plans` shows a plan's)
    to: str = ""


def ranked_title(top: int, what: str) -> str:
    return f"Top {top} {what}"


@dataclass
class Table:
    key: str  # also the CSV file name: <key>.csv
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    in_html: bool = True  # False: too long for the page; the chart shows it, CSV and JSON hold it
    # In the Markdown summary: (label columns, value column) of the first few rows; None: left out.
    markdown: tuple[tuple[str, ...], str] | None = None
    markdown_whole: bool = False  # every row in the summary, not the first few: a bill ties out only whole
    # A total row under the table (HTML and JSON; CSVs keep only data rows): column → value.
    total: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)  # said under the table (HTML, summary, JSON), e.g. rounding
    # said in summary.md above its rows: what findings are as of when not the report's day
    summary_note: str | None = None
    # a ranked table's title after "Top N " (`Table.top`): summary.md, listing fewer rows than the
    # page, heads them "Top 5 runs, month to date", not the page's "Top 10 ..."
    ranked: str | None = None

    @classmethod
    def top(cls, key: str, top: int, what: str, columns: list[Column], **fields: Any) -> Table:
        """The table of the first `top` rows of a ranking, titled `Top 10 runs, month to date` (`what`: the rest)."""
        return cls(key, ranked_title(top, what), columns, ranked=what, **fields)

    def to_json(self) -> dict[str, Any]:
        data = {"key": self.key, "title": self.title, "columns": [c.key for c in self.columns],
                "rows": [{c.key: row.get(c.key) for c in self.columns} for row in self.rows]}
        if self.total is not None:
            data["total"] = {c.key: self.total.get(c.key) for c in self.columns}
        if self.notes:
            data["notes"] = self.notes
        return data


@dataclass(frozen=True)
class Chart:
    """A stacked bar chart (one stack per category), lines (one per series), or plain
    horizontal bars (`series` of one)."""

    kind: Literal["stacked", "lines", "bars", "budget"]
    title: str
    categories: list[str]
    series: dict[str, list[Decimal | None]]  # label → one value per category (None: no point, lines only)
    currency: str
    note: str | None = None  # a sentence under it: what it leaves out (other currencies)


@dataclass
class Section:
    key: str
    title: str
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    note: str | None = None  # e.g. why there is no data
    available: bool = True

    def to_json(self) -> dict[str, Any]:
        data = {"key": self.key, "title": self.title, "available": self.available, "note": self.note,
                "tables": [t.to_json() for t in self.tables]}
        if notes := self.chart_notes():  # the page says them under each chart; JSON beside the tables, as theirs
            data["chart_notes"] = [{"chart": title, "note": note} for title, note in notes]
        return data

    def chart_notes(self) -> list[tuple[str, str]]:
        """(title, note) of each chart with a note under it (what it leaves out): the page, report.json and
        summary.md say the same."""
        return [(chart.title, chart.note) for chart in self.charts if chart.note]


@dataclass
class Headline:
    label: str
    currency: str
    value: Decimal
    previous: Decimal | None
    change_pct: Decimal | None
    kind: Literal["money", "percent"] = "money"


@dataclass
class Report:
    day: date
    month_start: date
    headlines: list[Headline]
    sections: list[Section]
    notes: list[str] = field(default_factory=list)  # said under the title (e.g. a month still estimated)

    @property
    def tables(self) -> list[Table]:
        return [t for s in self.sections for t in s.tables]

    def to_json(self) -> dict[str, Any]:
        return {
            "date": self.day, "month_start": self.month_start, "notes": self.notes,
            "headlines": [vars(h) for h in self.headlines],
            "sections": [s.to_json() for s in self.sections],
        }


def unavailable(key: str, title: str, why: str) -> Section:
    return Section(key=key, title=title, note=f"Not available yet: {why}.", available=False)


def change_pct(current: Decimal, previous: Decimal | None) -> Decimal | None:
    """Percentage change, None when there is nothing to compare with."""
    if previous is None or previous == 0:
        return None
    return ((current - previous) / abs(previous) * 100).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
