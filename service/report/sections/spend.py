"""Report sections drawn from attribution: spend by team and project, top movers, the 30-day
trend, top experiments, and unallocated share.

Every number comes from `service.attribution.attribute` (billed cost, the default of
`spendlake attribute`), so the report's totals equal the CLI's for the same window; each
section's note or title says billed. Currencies are never added together: each row carries its
currency, and the trend chart draws one, chosen as service/report/chart_currency.py says (never
by comparing amounts across currencies), the others named under it with their totals.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from decimal import Decimal

from service.attribution import AttributionResult, attribute, default_shares, top_groups
from service.core.config import Config
from service.core.config_clusters import JOB_DIMENSIONS
from service.core.lake import Lake
from service.core.timewindow import Window, day_start, iso_utc
from service.core.units import OTHER, currency_text, titled
from service.report.chart_currency import chart_currency, left_out_note
from service.report.model import Chart, Column, Headline, Section, Table, change_pct
from service.report.rounding import gaps
from service.report.shares import share_notes, share_pct

ZERO = Decimal(0)
TREND_DAYS = 30
CHART_SERIES = 8  # teams drawn in the stacked chart; the rest is "other"
MONEY = {"day_previous": "day before", "day_cost": "day", "mtd_cost": "month to date",
         "mtd_previous": "same days last month"}  # the money columns of spend by team and by project


def windows(day: date) -> dict[str, Window]:
    """The report's windows: the day and the month to date, each with what it is compared with,
    the last 7 days (`attribute --since 7d` when the day is the data's last whole day) and the trend."""
    start, until = day_start(day), day_start(day) + timedelta(days=1)
    month = day_start(day.replace(day=1))
    previous_month = day_start((day.replace(day=1) - timedelta(days=1)).replace(day=1))
    return {
        "day": Window(start, until), "previous_day": Window(start - timedelta(days=1), start),
        "mtd": Window(month, until),
        "previous_mtd": Window(previous_month, min(previous_month + (until - month), month)),
        "7d": Window(until - timedelta(days=7), until),
        "trend": Window(until - timedelta(days=TREND_DAYS), until),
    }


def rounding_notes(rows: list[dict]) -> list[str]:
    """Per currency, the money columns whose rows (every value, the rest folded into `other`), each
    shown rounded, add up to other than the whole the Totals table holds, rounded."""
    return [f"{currency_text(currency)}: the rows, each shown rounded, do not add up to the whole (the Totals "
            "table's) by rounding: " + "; ".join(
                f"{MONEY[gap.column]} {gap.shown(gap.rounded)} against {gap.shown(gap.whole)} "
                f"({gap.shown_exact} exact)" for gap in missed) + "."
            for (currency,), missed in gaps(rows, ("currency",), tuple(MONEY)).items()]


class SpendReport:
    """Runs the attribution queries of one report day and turns them into sections."""

    def __init__(self, config: Config, lake: Lake, day: date):
        self.config, self.lake, self.top = config, lake, config.report.top
        self.w = windows(day)
        self._results: dict[tuple, AttributionResult] = {}

    def query(self, window: str, by: tuple[str, ...], **options) -> AttributionResult:
        """Attribution of one of the report's windows; each distinct query runs once."""
        key = (window, by, tuple(sorted(options.items())))
        if key not in self._results:
            self._results[key] = attribute(self.lake, self.config, self.w[window], by=by, **options)
        return self._results[key]

    @property
    def past_the_data(self) -> bool:
        """The report's day runs past the data's end (`--date` after the last bill day): its and
        the month's figures are not all in, so a change against earlier days is no change in
        spend and is not shown (None: "—" on the page, empty in CSV, null in JSON)."""
        end = self.query("day", ("team",)).data_through
        return end is not None and self.w["day"].until > end

    def change(self, current: Decimal, previous: Decimal | None) -> Decimal | None:
        return None if self.past_the_data else change_pct(current, previous)

    # ---- headlines and totals ---------------------------------------------------------

    def totals(self) -> tuple[list[Headline], Table]:
        table = Table("totals", "Totals (equal to `spendlake attribute` for the same windows)", [
            Column("window", "window"), Column("since", "since", "time"), Column("until", "until", "time"),
            Column("currency", "currency"), Column("cost", "cost", "money")])
        sums: dict[str, dict[str | None, Decimal]] = {}
        for name in ("day", "previous_day", "mtd", "previous_mtd", "7d"):
            result = self.query(name, ("team",))
            sums[name] = {currency: cost for currency, cost, _ in result.totals}
            for currency, cost, _ in result.totals:
                table.rows.append({"window": name, "since": iso_utc(self.w[name].since),
                                   "until": iso_utc(self.w[name].until), "currency": currency, "cost": cost})
        headlines = []  # billed cost, what the invoice shows; the label says so (the amortized view differs)
        for label, now, before in (("Day, billed", "day", "previous_day"),
                                   ("Month to date, billed", "mtd", "previous_mtd")):
            for currency in sorted(set(sums[now]) | set(sums[before]), key=str):
                value, previous = sums[now].get(currency, ZERO), sums[before].get(currency)
                headlines.append(Headline(titled(label, currency), currency or "", value, previous,
                                          self.change(value, previous)))
        return headlines, table

    # ---- spend by team and project ------------------------------------------------------

    def by_dimension(self, dim: str) -> Table:
        """One row per value: the day and the month to date, each against its comparison window."""
        cells: dict[tuple[str, str | None], dict[str, Decimal | None]] = defaultdict(dict)
        for name in ("day", "previous_day", "mtd", "previous_mtd"):
            for row in self.query(name, (dim,)).rows:
                cells[(row.values[dim], row.currency)][name] = row.cost
        ranked = sorted(cells, key=lambda k: (str(k[1]), -cells[k].get("mtd", ZERO), k[0]))
        kept: dict[tuple[str, str | None], dict[str, Decimal | None]] = {}
        for value, currency in ranked:  # the top N values per currency; the rest folded into "other"
            if sum(key[1] == currency for key in kept) < self.top:
                kept[(value, currency)] = cells[(value, currency)]
                continue
            folded = kept.setdefault((OTHER, currency), {})
            for name, cost in cells[(value, currency)].items():
                folded[name] = (folded.get(name) or ZERO) + (cost or ZERO)
        # a value with no cost in a comparison window that holds cost spent $0 there (as the top
        # movers say); "—" is for a window without any cost, one the lake may not cover
        none = {name: ZERO if self.query(name, (dim,)).rows else None for name in ("previous_day", "previous_mtd")}
        rows = []
        for (value, currency), c in kept.items():
            day, mtd = c.get("day", ZERO), c.get("mtd", ZERO)
            day_previous, mtd_previous = (c.get(name, none[name]) for name in ("previous_day", "previous_mtd"))
            rows.append({dim: value, "currency": currency, "day_cost": day, "day_previous": day_previous,
                         "day_change_pct": self.change(day, day_previous), "mtd_cost": mtd,
                         "mtd_previous": mtd_previous, "mtd_change_pct": self.change(mtd, mtd_previous)})
        return Table(f"spend_by_{dim}", f"Spend by {dim}", [
            Column(dim, dim), Column("currency", "currency"), Column("day_previous", MONEY["day_previous"], "money"),
            Column("day_cost", MONEY["day_cost"], "money"), Column("day_change_pct", "change", "change"),
            Column("mtd_cost", MONEY["mtd_cost"], "money"), Column("mtd_previous", MONEY["mtd_previous"], "money"),
            Column("mtd_change_pct", "vs last month", "change"),
        ], rows=rows, markdown=((dim,), "mtd_cost"), notes=rounding_notes(rows))

    def movers(self) -> Table:
        result = self.query("day", ("team", "project"), compare=True)
        rows = [{"team": r.values["team"], "project": r.values["project"], "currency": r.currency,
                 "day_cost": r.cost, "previous_cost": r.previous_cost,
                 "change": r.cost - (r.previous_cost or ZERO), "change_pct": change_pct(r.cost, r.previous_cost)}
                for r in result.rows]
        rows = [r for r in rows if r["change"] != 0 and not self.past_the_data]  # a drop to no data moves nothing
        rows.sort(key=lambda r: (-abs(r["change"]), r["team"], r["project"]))
        return Table("top_movers", "Top movers: team and project, day over day", [
            Column("team", "team"), Column("project", "project"), Column("currency", "currency"),
            Column("previous_cost", "day before", "money"), Column("day_cost", "day", "money"),
            Column("change", "change", "money_change"), Column("change_pct", "change %", "change"),
        ], rows=rows[:self.top], markdown=(("team", "project"), "change"))

    def spend_section(self) -> tuple[list[Headline], Section]:
        headlines, totals = self.totals()
        tables = [self.by_dimension("team"), self.by_dimension("project"), self.movers(), totals]
        note = "Billed cost, attributed as `spendlake attribute` does." if totals.rows else \
            "No spend in the lake for this day or month." if self.lake.ledger() else \
            "No spend in the lake for this day or month: run `spendlake ingest`."
        return headlines, Section("spend", "Spend by team and project", tables=tables, note=note)

    # ---- trend and experiments -----------------------------------------------------------

    def trend_section(self) -> Section:
        result = self.query("trend", ("team",), granularity="day")
        table = Table("daily_spend_by_team", f"Spend by team per day, last {TREND_DAYS} days", [
            Column("period", "day"), Column("team", "team"), Column("currency", "currency"),
            Column("cost", "cost", "money")], in_html=False)
        table.rows = sorted(({"period": r.period.isoformat(), "team": r.values["team"], "currency": r.currency,
                              "cost": r.cost} for r in result.rows),
                            key=lambda r: (r["period"], str(r["currency"]), r["team"]))
        cells = [(row["currency"], row["cost"]) for row in table.rows]
        currency, why = chart_currency(self.config, cells)
        if currency is None:
            return Section("trend", "Spend by team, last 30 days", note="No spend in the last 30 days.")
        days = [(self.w["trend"].since + timedelta(days=i)).date().isoformat() for i in range(TREND_DAYS)]
        per_team: dict[str, dict[str, Decimal]] = defaultdict(dict)
        for row in table.rows:
            if row["currency"] == currency:
                per_team[row["team"]][row["period"]] = row["cost"]
        ranked = sorted(per_team, key=lambda t: (-sum(per_team[t].values()), t))
        series = {team: [per_team[team].get(d, ZERO) for d in days] for team in ranked[:CHART_SERIES]}
        if len(ranked) > CHART_SERIES:
            series["other"] = [sum((per_team[t].get(d, ZERO) for t in ranked[CHART_SERIES:]), ZERO) for d in days]
        chart = Chart("stacked", titled("Daily spend by team, billed", currency), days, series, currency,
                      note=left_out_note(currency, why, cells, table.key))
        return Section("trend", "Spend by team, last 30 days", tables=[table], charts=[chart],
                       note="Billed cost per day, as `spendlake attribute --by team --granularity day` shows it.")

    def experiments_section(self) -> Section:
        """The top experiments of the month to date (`unallocated` once), each with its team
        and project when it has one of each, else `several`. DuckDB sums and ranks them: a
        million experiments never reach Python, only the top and the totals."""
        found = top_groups(self.lake, self.config, self.w["mtd"], ("experiment",), ("team", "project"), self.top)
        rows = [{"experiment": g.values["experiment"], "team": _one_or_several(g.details["team"]),
                 "project": _one_or_several(g.details["project"]), "currency": g.currency, "mtd_cost": g.cost,
                 "share_pct": share_pct(g.cost, found.totals.get(g.currency))} for g in found.top]
        return Section("experiments", "Top experiments", note="Billed cost, as `spendlake attribute --by experiment` "
                       "shows it.", tables=[Table.top(
            "top_experiments", self.top, "experiments, month to date", [
                Column("experiment", "experiment"), Column("team", "team"), Column("project", "project"),
                Column("currency", "currency"), Column("mtd_cost", "month to date", "money"),
                Column("share_pct", "share", "percent")], rows=rows,
            markdown=(("experiment", "team"), "mtd_cost"),
            notes=share_notes(rows, "mtd_cost", lambda row: found.totals.get(row["currency"])))])

    # ---- unallocated ----------------------------------------------------------------------

    def unallocated_table(self) -> Table:
        table = Table("unallocated", "Unallocated share, month to date, billed", [
            Column("dimension", "dimension"), Column("currency", "currency"),
            Column("unallocated_cost", "unallocated", "money"), Column("total_cost", "total", "money"),
            Column("share_pct", "share", "percent", part="unallocated_cost")],
            markdown=(("dimension", "currency"), "share_pct"))
        clusters = self.config.attribution.clusters is not None
        # who owns spend; a job dimension's default means "not on a cluster"
        dims = [dim for dim in self.config.attribution.dimensions if not (clusters and dim in JOB_DIMENSIONS)]
        for dim, shares in default_shares(self.lake, self.config, self.w["mtd"], dims).items():
            for share in shares:
                table.rows.append({"dimension": dim, "currency": share.currency, "unallocated_cost": share.default_cost,
                                   "total_cost": share.total, "share_pct": share_pct(share.default_cost, share.total)})
        table.notes = share_notes(table.rows, "unallocated_cost", lambda row: row["total_cost"])
        return table


def _one_or_several(value: str | None) -> str:
    return "several" if value is None else value

