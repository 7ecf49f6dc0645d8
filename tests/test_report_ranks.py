"""The report's top experiments and unallocated shares are ranked in DuckDB (issue 14, "Metrics
at high cardinality"): only the top N and one row per currency reach Python, and the numbers
are those of the full attribution to the last decimal (window edges prorated, shared costs split)."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

import pytest

from report_fixtures import FOCUS_HEADER
from service.attribution import attribute
from service.attribution.compute import RollupSession
from service.core.config import parse_config
from service.core.lake import Lake
from service.ingest.billing import ingest
from service.report.sections.spend import SpendReport

DAY = date(2026, 11, 20)
EXPERIMENTS = 300
TOP = 5


def _lines():
    """Daily lines over November's first 20 days, one experiment each (spelled two ways), a
    USD and a EUR currency, untagged lines, monthly lines the report's day cuts, and a tax line."""
    for number in range(EXPERIMENTS * 2):
        day = date(2026, 11, 1) + timedelta(days=number % 20)
        experiment = f"exp-{number % EXPERIMENTS}" if number % 3 else f"EXP-{number % EXPERIMENTS}"
        tags = {"team": f"team-{number % 7}", "project": f"p-{number % 11}", "experiment": experiment}
        yield day, day + timedelta(days=1), f"{(number * 7919) % 1000}.{number % 97:02d}", tags, "Usage", "USD"
    for number in range(40):
        tags = {"team": f"team-{number % 3}", "experiment": f"exp-{number}"} if number % 4 else {}
        yield date(2026, 11, number % 20 + 1), date(2026, 11, number % 20 + 2), "7.5", tags, "Usage", "EUR"
        if number < 3:  # the only groups that reach Python whole: cut by the window's end, prorated there
            yield date(2026, 11, 1), date(2026, 12, 1), f"{1000 + number}.333333", tags, "Usage", "USD"
    yield date(2026, 11, 3), date(2026, 11, 4), "123.456789", {}, "Tax", "USD"


def _lake(tmp_path, extra: dict):
    export = tmp_path / "export"
    export.mkdir()
    with open(export / "focus.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FOCUS_HEADER)
        for number, (start, end, cost, tags, category, currency) in enumerate(_lines()):
            writer.writerow([cost, cost, currency, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z",
                             f"{start}T00:00:00Z", f"{end}T00:00:00Z", category, "Amazon EC2", f"i-{number:06d}",
                             "111122223333", "AWS", json.dumps(tags)])
    config = parse_config({"lake": str(tmp_path / "lake"), "report": {"top": TOP},
                           "sources": [{"name": "focus", "kind": "focus", "location": str(export)}], **extra})
    assert not ingest(config).failed
    return config, Lake(config.lake)


class CountingConnection:
    """The session's DuckDB connection, counting the rows each fetch brings into Python."""

    def __init__(self, con, fetched: list[int]):
        self._con, self._fetched = con, fetched

    def execute(self, *args, **kwargs):
        self._con.execute(*args, **kwargs)
        return self

    def fetchall(self):
        rows = self._con.fetchall()
        self._fetched.append(len(rows))
        return rows

    def __getattr__(self, name):
        return getattr(self._con, name)


def _expected_experiments(config, lake, report: SpendReport) -> list[dict]:
    """The section as computed from the full attribution, one row per experiment in Python."""
    result = attribute(lake, config, report.w["mtd"], by=("experiment", "team", "project"))
    totals = {currency: cost for currency, cost, _ in result.totals}
    grouped: dict[tuple, dict] = {}
    for r in result.rows:
        row = grouped.setdefault((r.values["experiment"], r.currency), {"cost": Decimal(0), "teams": set(),
                                                                         "projects": set()})
        row["cost"] += r.cost
        row["teams"].add(r.values["team"])
        row["projects"].add(r.values["project"])
    rows = [{"experiment": experiment, "currency": currency, "mtd_cost": g["cost"],
             "team": next(iter(g["teams"])) if len(g["teams"]) == 1 else "several",
             "project": next(iter(g["projects"])) if len(g["projects"]) == 1 else "several",
             "share_pct": (g["cost"] * 100 / totals[currency]).quantize(Decimal("0.1"))}
            for (experiment, currency), g in grouped.items()]
    rows.sort(key=lambda r: (-r["mtd_cost"], r["experiment"], r["currency"]))
    return rows[:TOP]


def _expected_unallocated(config, lake, report: SpendReport) -> list[dict]:
    rows = []
    for dim, settings in config.attribution.dimensions.items():
        result = attribute(lake, config, report.w["mtd"], by=(dim,))
        for currency, total, _ in result.totals:
            missing = sum((r.cost for r in result.rows if r.currency == currency and r.values[dim] == settings.default),
                          Decimal(0))
            rows.append({"dimension": dim, "currency": currency, "unallocated_cost": missing, "total_cost": total,
                         "share_pct": (missing * 100 / total).quantize(Decimal("0.1"))})
    return rows


@pytest.mark.parametrize("extra", [{}, {"attribution": {"shared": [
    {"match": {"charge_category": "Tax"}, "split": "proportional", "by": "team"}]}}], ids=["direct", "shared"])
def test_top_experiments_bring_only_the_top_into_python_and_equal_the_full_attribution(tmp_path, monkeypatch, extra):
    config, lake = _lake(tmp_path, extra)
    report = SpendReport(config, lake, DAY)
    expected_experiments = _expected_experiments(config, lake, report)
    expected_unallocated = _expected_unallocated(config, lake, report)
    assert len({r["experiment"].lower() for r in expected_experiments}) == TOP  # distinct costs at the top
    assert any(r["experiment"].startswith("EXP-") for r in expected_experiments)  # spelled as most lines spell it

    fetched: list[int] = []
    opened = RollupSession.__init__

    def counting(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        self.con = CountingConnection(self.con, fetched)

    monkeypatch.setattr(RollupSession, "__init__", counting)
    (table,) = report.experiments_section().tables
    unallocated = report.unallocated_table()

    assert table.rows == expected_experiments
    assert unallocated.rows == expected_unallocated
    assert {r["currency"] for r in unallocated.rows} == {"USD", "EUR"}
    assert all(r["unallocated_cost"] for r in unallocated.rows if r["dimension"] == "team")
    if not extra:  # shared costs are split in Python, as `attribute` splits them
        assert fetched and max(fetched) <= TOP + 2, fetched


def test_a_summary_table_whose_title_names_its_value_column_is_not_headed_with_it_twice():
    # summary.md read "*Top 10 runs, month to date* — month to date"
    from datetime import date

    from service.report.model import Column, Report, Section, Table
    from service.report.render import render_markdown

    runs = Table("top_runs", "Top 10 runs, month to date", [Column("run", "run"),
                 Column("cost", "month to date", "money")], rows=[{"run": "r1", "cost": 5, "currency": "USD"}],
                 markdown=(("run",), "cost"))
    jobs = Table("unfinished_jobs", "Unfinished jobs, month to date", [Column("state", "state"),
                 Column("cost", "cost", "money")], rows=[{"state": "FAILED", "cost": 2, "currency": "USD"}],
                 markdown=(("state",), "cost"))
    summary = render_markdown(Report(date(2026, 12, 4), date(2026, 12, 1), [], [Section("c", "C", [runs, jobs])]))
    assert "\n*Top 10 runs, month to date*\n- r1: $5.00" in summary, summary
    assert "*Unfinished jobs, month to date* — cost\n" in summary, summary


def test_a_summary_listing_the_first_5_of_a_top_10_heads_them_top_5_as_the_page_heads_its_10():
    # summary.md headed 5 rows "*Top 10 runs, month to date*" (walk46); the page lists the 10
    from datetime import date

    from service.report.model import Column, Report, Section, Table
    from service.report.render import render_html, render_markdown

    def runs(count: int) -> Table:
        return Table.top("top_runs", 10, "runs, month to date", [Column("run", "run"),
                         Column("cost", "month to date", "money")], markdown=(("run",), "cost"),
                         rows=[{"run": f"r{i}", "cost": 100 - i, "currency": "USD"} for i in range(count)])

    def report(table: Table) -> Report:
        return Report(date(2026, 12, 4), date(2026, 12, 1), [], [Section("c", "C", [table])])

    ten = runs(10)
    summary = render_markdown(report(ten))
    assert summary.endswith("\n*Top 5 runs, month to date*\n" + "".join(f"- r{i}: ${100 - i}.00\n" for i in range(5))), \
        summary
    assert "Top 10" not in summary and ten.title == "Top 10 runs, month to date" in render_html(report(ten))
    # a ranking of 3 is listed whole: titled as on the page
    assert "\n*Top 10 runs, month to date*\n- r0: $100.00\n- r1: $99.00\n- r2: $98.00\n" in render_markdown(
        report(runs(3)))
