"""spend-anomaly: a day's spend of one series well above what its own history expects.

A series is the direct spend of one value of a dimension × one service, daily, in one
currency (lines that a shared-cost rule splits over the dimension are left out;
service/attribution/lines.py says why):

```yaml
rules:
  spend-anomaly:
    dimension: team          # any attribution dimension
    min_impact_usd: 100      # all three must hold for a day to be anomalous
    min_impact_pct: 20       # impact as % of expected
    min_daily_cost: 50
    band_sigmas: 5           # and impact ≥ 5 × the series' noise σ (0: off)
    lookback_days: 14        # episodes that began this long before the window are still found
```

Expected spend of day D (`expected_spend`): the median of the same weekday over the four
previous weeks (weekly seasonality), moved by the trend — the median of the last 7 days
minus the median of the last 28, scaled to reach day D (a linear trend is followed
exactly) — floored at 0. The band around it: besides the three thresholds, the impact must
exceed `band_sigmas` × the series' noise σ (`noise_scale`: MAD of its week-over-week
changes over the last 21 days ÷ √2), so a noisy series needs a larger jump than a steady one
(bench/anomaly_eval.py measures the trade-off). Medians keep one earlier spike from
lifting the baseline. Days before a series' first spend count as 0 once the lake has data
for them; earlier days are unknown, and a day needs 7 known days before it.

Flags: consecutive anomalous days form one episode, one finding with a stable id from its
series and start day. It is seen while ongoing on the last full day, or while it began
inside the window; the engine resolves it once it is gone and keeps acknowledgements while it
is seen, so an acknowledged anomaly is not raised again day after day.

Category `overspend` (no `monthly_waste_usd`: the extra spend may have bought something).
`impact_usd` is the excess spend of the episode: actual minus expected, summed over its
days; 0 for an episode inside a planned run (its excess stays in `evidence.impact_usd`).
Root causes (`evidence.root_causes`): the service, resource, usage type, account and region
values with the largest impact in $ (their mean daily spend over the episode minus their
median over the 7 days before it), largest first, at most `top_causes` (5).

Ignores: credits, refunds, tax and commitment purchases (`exclude_charge_categories`, FOCUS's
charge categories in any case, and `exclude_line_item_types`, the bills' own in any case),
currencies other than `currency`, days not yet over.
Planned runs (service/planning/plans.py): spend of a plan's project/experiment (and run, for a
plan on a run: that run's jobs' spend, not the rest of its project's) inside its window, while the
plan's cumulative spend stays within its amount, is taken out of the day before testing it; an episode that is anomalous only because of it becomes an `info` finding with
`evidence.planned`, with no impact.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from statistics import median

from pydantic import Field

from rules.base import Finding, Rule, money, usd
from rules.context import DailySpend, PlannedWindow, RuleContext
from rules.counted_spend import CountedSpendConfig
from service.core.folding import folded

BASELINE_WEEKS = 4
MIN_KNOWN_DAYS = 7
# The 7- and 28-day medians sit 4 and 14.5 days back, the same-weekday median 17.5: their
# difference, scaled by (17.5 − 0) / (14.5 − 4), carries a linear trend to the day itself.
TREND_SCALE = Decimal("17.5") / Decimal("10.5")
MAD_TO_SIGMA = Decimal("1.4826")  # MAD → standard deviation of a normal distribution
CAUSE_FIELDS = ("service", "resource", "usage_type", "account", "region")


class SpendAnomalyConfig(CountedSpendConfig):
    dimension: str = Field(default="team", pattern=r"^[a-z][a-z0-9_]{0,39}$",
                           description="attribution dimension whose values × services make the series")
    min_impact_usd: Decimal = Field(default=Decimal("100"), ge=0, description="actual − expected, per day")
    min_impact_pct: Decimal = Field(default=Decimal("20"), ge=0, description="impact as % of expected")
    min_daily_cost: Decimal = Field(default=Decimal("50"), ge=0, description="actual spend of the day")
    band_sigmas: Decimal = Field(default=Decimal("5"), ge=0,
                                 description="impact must also exceed this many of the series' noise σ (0: off)")
    lookback_days: int = Field(default=14, ge=0, le=90)
    top_causes: int = Field(default=5, ge=1, le=20)


@dataclass(frozen=True)
class Thresholds:
    min_impact_usd: Decimal
    min_impact_pct: Decimal
    min_daily_cost: Decimal
    band_sigmas: Decimal = Decimal(0)

    def anomalous(self, actual: Decimal, expected: Decimal, noise: Decimal = Decimal(0)) -> bool:
        impact = actual - expected
        return (impact >= self.min_impact_usd and impact * 100 >= self.min_impact_pct * expected
                and actual >= self.min_daily_cost and impact > 0 and impact >= self.band_sigmas * noise)


@dataclass(frozen=True)
class Day:
    day: date
    actual: Decimal
    expected: Decimal
    planned: Decimal = Decimal(0)  # spend inside a plan, taken out before testing

    @property
    def impact(self) -> Decimal:
        return self.actual - self.expected


@dataclass(frozen=True)
class Episode:
    days: tuple[Day, ...]
    ongoing: bool  # still anomalous on the last day looked at
    planned_only: bool  # anomalous only with the planned spend counted

    @property
    def start(self) -> date:
        return self.days[0].day

    @property
    def impact(self) -> Decimal:
        return sum((d.impact for d in self.days), Decimal(0))


def expected_spend(series: Mapping[date, Decimal], day: date, first_known: date) -> Decimal | None:
    """Expected spend of `day` from the days before it (None: too little history)."""
    def back(n: int, step: int = 1) -> list[Decimal]:
        before = (day - timedelta(days=k * step) for k in range(1, n + 1))
        return [series.get(d, Decimal(0)) for d in before if d >= first_known]

    recent = back(7)
    if len(recent) < MIN_KNOWN_DAYS:
        return None
    same_weekday = back(BASELINE_WEEKS, step=7)
    month = back(7 * BASELINE_WEEKS)
    trend = (Decimal(median(recent)) - Decimal(median(month))) * TREND_SCALE
    return max(Decimal(median(same_weekday)) + trend, Decimal(0))


def noise_scale(series: Mapping[date, Decimal], day: date, first_known: date) -> Decimal:
    """The series' day-to-day noise (a standard deviation, robust): the MAD of its
    week-over-week changes over the 21 days before `day` ÷ √2, 0 with fewer than 7."""
    changes = [series.get(d, Decimal(0)) - series.get(d - timedelta(days=7), Decimal(0))
               for d in (day - timedelta(days=k) for k in range(1, 22)) if d - timedelta(days=7) >= first_known]
    if len(changes) < MIN_KNOWN_DAYS:
        return Decimal(0)
    center = Decimal(median(changes))
    mad = Decimal(median([abs(c - center) for c in changes]))
    return mad * MAD_TO_SIGMA / Decimal(2).sqrt()


def detect(series: Mapping[date, Decimal], days: Sequence[date], first_known: date, thresholds: Thresholds,
           planned: Mapping[date, Decimal] | None = None) -> list[Episode]:
    """Episodes of consecutive anomalous days among `days` (ascending, consecutive)."""
    planned = planned or {}
    episodes: list[Episode] = []
    run: list[Day] = []
    run_planned_only = True
    for day in days:
        expected = expected_spend(series, day, first_known)
        actual = series.get(day, Decimal(0))
        noise = noise_scale(series, day, first_known) if thresholds.band_sigmas else Decimal(0)
        hit = expected is not None and thresholds.anomalous(actual, expected, noise)
        if hit:
            unplanned = thresholds.anomalous(actual - planned.get(day, Decimal(0)), expected, noise)
            run.append(Day(day, actual, expected, planned.get(day, Decimal(0))))
            run_planned_only = run_planned_only and not unplanned
        elif run:
            episodes.append(Episode(tuple(run), False, run_planned_only))
            run, run_planned_only = [], True
    if run:
        episodes.append(Episode(tuple(run), True, run_planned_only))
    return episodes


CauseSpend = dict[str, dict[str | None, dict[date, Decimal]]]  # cause field → its value → day → spend


def cause_spend(rows: Sequence[DailySpend]) -> CauseSpend:
    """A series' daily spend by each cause field's value, summed once for all its episodes; a
    field with one value in the whole series says nothing and is left out."""
    by_field = {}
    for name in CAUSE_FIELDS:
        daily: dict[str | None, dict[date, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        for row in rows:
            daily[getattr(row, name)][row.day] += row.cost
        if len(daily) >= 2:
            by_field[name] = daily
    return by_field


def root_causes(by_field: CauseSpend, episode: Episode, top: int) -> list[dict]:
    """Values of the cause fields with the largest impact in $ over the episode."""
    before = [episode.start - timedelta(d) for d in range(1, 8)]
    during = {d.day for d in episode.days}
    causes = []
    for name, daily in by_field.items():
        for value, spend in daily.items():
            mean_during = sum((spend.get(d, Decimal(0)) for d in during), Decimal(0)) / len(during)
            impact = mean_during - Decimal(median([spend.get(d, Decimal(0)) for d in before]))
            if impact > 0:
                causes.append({"dimension": name, "value": value, "impact_usd": money(impact)})
    causes.sort(key=lambda c: (-c["impact_usd"], c["dimension"], str(c["value"])))
    return causes[:top]


SeriesKey = tuple[str, str]  # (dimension value, service)


def planned_spend(rows: Sequence[DailySpend], plans: Sequence[PlannedWindow]
                  ) -> tuple[dict[SeriesKey, dict[date, Decimal]], dict[SeriesKey, set[str]]]:
    """Per (dimension value, service) and day, the spend that a plan expects: lines of the
    plan's project/experiment (and run, for a plan on a run) inside its window while the plan's cumulative spend (over
    all series) is within its amount. A line several plans cover (two plans on one project)
    is expected once: its cost counted once, the plans named together."""
    found: dict[SeriesKey, dict[date, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    names: dict[SeriesKey, set[str]] = defaultdict(set)
    counted: set[int] = set()  # rows (by index) already in `found`
    for plan in plans:
        def covered(row: DailySpend) -> bool:
            return (folded(row.project) == folded(plan.project)
                    and (plan.experiment is None or folded(row.experiment) == folded(plan.experiment))
                    and (plan.run is None or folded(row.run) == folded(plan.run))
                    and plan.start.date() <= row.day and datetime.combine(row.day, datetime.min.time()) < plan.end)
        mine = sorted(((i, r) for i, r in enumerate(rows) if covered(r)), key=lambda pair: pair[1].day)
        spent = Decimal(0)
        for day in sorted({r.day for _, r in mine}):
            today = [(i, r) for i, r in mine if r.day == day]
            spent += sum((r.cost for _, r in today), Decimal(0))
            if spent > plan.amount:
                break
            for i, row in today:
                if i not in counted:
                    counted.add(i)
                    found[(row.value, row.service or "")][day] += row.cost
                names[(row.value, row.service or "")].add(plan.name)
    return found, names


class SpendAnomalyRule(Rule[SpendAnomalyConfig]):
    name = "spend-anomaly"
    category = "overspend"
    inputs = {"costs": ("ServiceName", "ChargeCategory", "x_line_item_type", "BilledCost")}

    def evaluate(self, ctx: RuleContext) -> list[Finding]:
        if ctx.direct_daily is None:
            return []
        cfg = self.config
        last = ctx.until.date() - timedelta(days=1)  # the last full day
        # a window from year 1 (`--since 0001-01-02`) has nothing before it: the look back overflowed
        floor = date.min + timedelta(days=cfg.lookback_days + 7 * BASELINE_WEEKS)
        scan_from = max(min(ctx.since.date(), last), floor) - timedelta(days=cfg.lookback_days)
        fetch_from = scan_from - timedelta(days=7 * BASELINE_WEEKS)
        rows = [r for r in cfg.counted(ctx.direct_daily(cfg.dimension, datetime.combine(fetch_from, datetime.min.time()),
                                                        datetime.combine(last + timedelta(days=1), datetime.min.time()),
                                                        (*CAUSE_FIELDS, "day")))
                if r.day <= last]
        if not rows:
            return []
        first_known = min(r.day for r in rows)
        by_series: dict[tuple[str, str], list[DailySpend]] = defaultdict(list)
        for row in rows:
            by_series[(row.value, row.service or "")].append(row)
        planned, plan_names = planned_spend(rows, ctx.plans)
        thresholds = Thresholds(cfg.min_impact_usd, cfg.min_impact_pct, cfg.min_daily_cost)
        scan_from = max(scan_from, first_known)  # a day before the data has no history to judge it by
        days = [scan_from + timedelta(days=n) for n in range((last - scan_from).days + 1)]
        findings = []
        for key, series_rows in sorted(by_series.items()):
            series: dict[date, Decimal] = defaultdict(Decimal)
            for row in series_rows:
                series[row.day] += row.cost
            episodes = [episode for episode in detect(series, days, first_known, thresholds, planned.get(key))
                        if episode.ongoing or episode.start >= ctx.since.date()]
            causes = cause_spend(series_rows) if episodes else {}
            findings += [self._finding(key, causes, episode, plan_names.get(key, set())) for episode in episodes]
        return findings

    def _finding(self, key: SeriesKey, causes: CauseSpend, episode: Episode, plans: set[str]) -> Finding:
        value, service = key
        cfg = self.config
        latest = episode.days[-1]
        impact = episode.impact
        planned_usd = sum((d.planned for d in episode.days), Decimal(0))
        evidence = {
            "dimension": cfg.dimension, "value": value, "service": service, "currency": cfg.currency,
            "start": episode.start, "last_day": latest.day, "ongoing": episode.ongoing, "days": len(episode.days),
            "actual_usd": money(latest.actual), "expected_usd": money(latest.expected),
            "impact_usd": money(impact),
            "daily": [{"day": d.day, "actual_usd": money(d.actual), "expected_usd": money(d.expected)}
                      for d in episode.days],
            "root_causes": root_causes(causes, episode, cfg.top_causes),
        }
        if planned_usd > 0:
            evidence["planned"] = {"planned_usd": money(planned_usd),
                                   "plans": sorted(plans)}
        where = f"{cfg.dimension} {value} on {service or 'no service'}"
        if episode.planned_only:
            summary = (f"{where} spent {usd(latest.actual)} on {latest.day} against {usd(latest.expected)} "
                       f"expected, inside a planned run ({usd(planned_usd)} planned) — expected, not an anomaly.")
            severity, excess = "info", Decimal(0)
        else:
            if episode.ongoing:
                when = f"has spent above its expected band since {episode.start} and still is"
            else:  # ended: "since 2026-11-28 until 2026-11-28" read as a span of a one-day episode
                span = f"on {episode.start}" if episode.start == latest.day else f"from {episode.start} to {latest.day}"
                when = f"spent above its expected band {span}"
            summary = (f"{where} {when}: "
                       f"{usd(latest.actual)} on {latest.day} against {usd(latest.expected)} expected, "
                       f"{usd(impact)} over in {len(episode.days)} day(s).")
            severity, excess = self.severity(impact), impact
        finding = self.finding(resource_id=f"series:{cfg.dimension}={value}|service={service}",
                               key=episode.start.isoformat(), severity=severity, impact_usd=excess,
                               summary=summary, evidence=evidence)
        if cfg.dimension in ("team", "project", "experiment"):  # the series' owner is its value
            finding = replace(finding, **{cfg.dimension: value})
        return finding
