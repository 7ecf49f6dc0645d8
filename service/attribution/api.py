"""Attribution: every dollar of the lake on one value per dimension (team, project, experiment
and any declared), exactly once.

Python API (the CLI, rules engine, metrics, report and HTTP API call these):

    attribute(lake, config, window, by=("team",), where={}, cost="billed",
              granularity="total", top=None, compare=False, explain=False, engine=None) -> AttributionResult
        AttributionResult.to_json() is the `spendlake attribute --format json` contract:
        {since, until, cost, by, rows: [{<dim>..., currency, cost, period?}], totals: [{currency, cost}],
         data_through, sources: [{source, data_through}]}
        (data_through: how far the billing sources' usage data reaches, service/core/coverage.py;
        a window that ends later than it covers less than its length)
    attribute_query(lake, config, query, engine=None) -> AttributionResult
        the same for an `AttributionQuery` (service/attribution/query.py), which the CLI and the
        HTTP API parse from what the user typed
    materialise(lake, config) -> RollupBuild  store the current per-period rollups for `config`
        and remove superseded ones (ingest and `spendlake rollup` call it, holding the lake lock)
    reconcile(lake, config, engine=None) -> list[Reconciliation]      Σ attributed vs Σ source, per
        (source, billing period, currency, cost measure); `spendlake attribute --check`
    `engine` (an EngineConfig; default the config's `engine:` when given the whole Config,
        else DuckDB): `kind="spark"` runs the same SQL on Apache
        Spark (service/attribution/spark/session.py) and returns the same results
    attribute_resources(lake, config, resource_ids) -> {resource id: {dimension: value}}
        for findings: each dimension's value on the resource's latest cost line

`config` is the `AttributionConfig` (or the whole `Config`). How a line gets its value, per
dimension: the configured tag keys in order (keys compare case- and separator-insensitively:
`Team`, `owner_team`, `user:team`, `resource_tags_user_team`; empty values are absent),
then the same keys among the inventory tags of the line's resource (`resource_tags`, the
latest snapshot of each aws-tags source, matched on the ARN or its resource part such as
`i-0abc`; for tags not activated as cost allocation tags, or added after the fact), then
the virtual-tag rules (first match wins), else the default (`unallocated`). Values
compare trimmed and case-insensitively and are shown in their most common spelling.

Shared costs (lines matching a `shared` rule, first match wins) are nobody's direct spend:
per currency they are split over the values of the rule's `by` dimension — `even` over the
values with positive direct spend in the window, `proportional` to that direct spend,
`fixed` by the configured weights. The default value (`unallocated`) takes no share; with
nothing to split over, the cost stays on the default. Every split is exact: each part is
amount × weight rounded to 12 decimals (half-even) and the remainder goes to the largest
share (ties: the first value in byte order), so the parts sum to the amount to the last
decimal. Other dimensions of a shared line keep the line's own values.

Windows are half-open [since, until), in UTC. A line belongs to a window by its charge
period [ChargePeriodStart, ChargePeriodEnd) (hourly, daily or monthly): wholly inside, it
counts in full; cut by the window's edge, it counts the fraction of its charge period that
lies inside (overlap ÷ length, in microseconds), computed in exact decimal arithmetic and
rounded half-even to 12 decimals (DECIMAL(38,12)) once per charge period and attribution.
A line with no charge end is an instant at its start. In `--granularity day|week|month`
a line falls in the period where its (window-clipped) charge period starts; weeks start
on Monday.

Speed: queries read the per-period rollups of service/attribution/rollup.py, never the raw
cost lines; a period whose rollup is not stored (yet) for this config and delivery is rolled
up from its raw lines in memory. Queries write nothing, and each answer comes from one
state of the lake (service/core/snapshot.py); see bench/attribute_bench.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import TypeVar

from service.attribution.compute import RollupSession, attributed_sums
from service.attribution.needs import Needs, loosely
from service.attribution.query import AttributionQuery, window_at
from service.attribution.result import AttributionResult, AttributionRow, Contribution, previous_window
from service.attribution.rollup_build import ROLLUP_GRACE, RollupBuild, build_rollups
from service.attribution.rollup_versions import cost_partitions, inventory_keys, recorded_tag_keys
from service.attribution.sql import MEASURES, resources_sql
from service.attribution.tag_keys import all_tag_keys_sql
from service.core.config import Config, EngineConfig
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded, folded_forms
from service.core.lake import Lake
from service.core.snapshot import read_consistently
from service.core.suggest import near_miss, suggestion
from service.core.timewindow import Window
from service.core.units import OTHER

NO_PARTS: Mapping = MappingProxyType({})  # a row's contributions when nothing is explained

T = TypeVar("T")


def _attribution(config: AttributionConfig | Config) -> AttributionConfig:
    return config.attribution if isinstance(config, Config) else config


def _engine(config: AttributionConfig | Config) -> EngineConfig | None:
    """The configured engine: what `engine:` says in a whole Config; DuckDB otherwise."""
    return config.engine if isinstance(config, Config) else None


def sql_dims(config: AttributionConfig, by: Sequence[str], where: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    needed = list(by) + [d for d in where if d not in by] + [r.by for r in config.shared]
    return tuple(dict.fromkeys(needed))


def _how_label(config: AttributionConfig, dim: str, how: str) -> str:
    kind, _, rest = how.partition(":")
    if kind == "tag":
        return f"tag {rest}"
    if kind in ("inventory-tag", "job", "idle"):  # a job's or a cluster's idle part: job:<id>, idle:<cluster>
        return how
    if kind == "rule":
        rule = config.dimensions[dim].rules[int(rest)]
        return f"rule {rest} ({', '.join(f'{k}={v}' for k, v in rule.match.items())})"
    if kind == "shared":
        index, _, nobasis = rest.partition(":")
        rule = config.shared[int(index)]
        match = ", ".join(f"{k}={v}" for k, v in rule.match.items())
        if nobasis:
            return f"shared {index} ({match}; no direct spend to split by, kept on the default)"
        return f"shared {index} ({match}; {rule.split} by {rule.by})"
    return "default"


def read_sessions(lake: Lake, config: AttributionConfig, engine: EngineConfig | None,
                  answer: Callable[[RollupSession | None], T], needs: Needs = Needs()) -> T:
    """`answer(session)` with the rollups on the engine that runs the SQL: DuckDB (default),
    on one consistent snapshot of the lake, or Spark, same SQL; the session is None when the
    lake that engine reads holds no cost partition. `needs`: what `answer` reads (default
    all; see RollupSession)."""
    if engine is None or engine.kind == "duckdb":
        return read_consistently(lake, lambda snapshot: _answer_on(lake, config, snapshot, answer, needs))
    from service.attribution.spark.session import SparkRollupSession

    session = SparkRollupSession(lake, config, engine)
    return answer(session if session.partitions else None)


def _answer_on(lake: Lake, config: AttributionConfig, snapshot, answer: Callable[[RollupSession | None], T],
               needs: Needs = Needs()) -> T:
    if not snapshot.checks:
        return answer(None)
    session = RollupSession(lake, config, snapshot, needs)
    try:
        return answer(session)
    finally:
        session.con.close()


def attribute(lake: Lake, config: AttributionConfig | Config, window: Window, *, by: Sequence[str] = ("team",),
              where: Mapping[str, Sequence[str]] | None = None, cost: str = "billed", granularity: str = "total",
              top: int | None = None, compare: bool = False, explain: bool = False,
              engine: EngineConfig | None = None) -> AttributionResult:
    """Attributed cost of `window`, one row per (period, currency, values of `by`). The engine
    is `engine`, else the config's `engine:` when `config` is the whole Config, else DuckDB."""
    query = AttributionQuery(window, tuple(by), {d: tuple(v) for d, v in (where or {}).items()}, cost,
                             granularity, top, compare, explain)
    return attribute_query(lake, config, query.validated(_attribution(config), naming=lambda name: name),
                           engine=engine)


def attribute_query(lake: Lake, config: AttributionConfig | Config, query: AttributionQuery,
                    engine: EngineConfig | None = None) -> AttributionResult:
    """The answer to a validated query (`AttributionQuery.parse`), as `attribute` gives it."""
    engine = engine or _engine(config)
    config = _attribution(config)
    by, where, cost, granularity = query.by, query.where, query.cost, query.granularity
    top, compare, explain = query.top, query.compare, query.explain

    def answer(session: RollupSession | None) -> AttributionResult | None:
        window = window_at(query, session and session.data_through()).window
        return _attribute(session, config, window, by, where, cost, granularity, top, compare, explain)
    needs = Needs(sql_dims(config, by, where), (cost,), hows=explain, where=tuple(where.items()))
    # A period without a stored rollup is rolled up from the lines `where` can match; when that
    # cannot show the answer as every line would (a suggestion, a spelling), from every line.
    result = read_sessions(lake, config, engine, answer, needs)
    return result if result is not None else read_sessions(lake, config, engine, answer, replace(needs, where=()))


def _attribute(session: RollupSession | None, config: AttributionConfig, window: Window, by: tuple[str, ...],
               where: Mapping[str, Sequence[str]], cost: str, granularity: str, top: int | None, compare: bool,
               explain: bool) -> AttributionResult | None:
    """The answer; None when the session's rollup is narrowed to the lines `where` can match
    and that would show it otherwise than every line: a value nothing matches (its suggestions
    come from every value), or a constant spelling of a shown value the lines left out carry."""
    if session is None:
        return AttributionResult(window, cost, by, granularity, (), (), compare, explain, lake_empty=True)
    unmatched, typos = _unmatched(session, where)
    if unmatched and session.narrowed:
        return None
    sources = tuple(session.data_through().items())
    dims = sql_dims(config, by, where)
    wanted = {d: {form for v in values for form in folded_forms(v)} for d, values in where.items()}
    index = {d: i for i, d in enumerate(dims)}

    spent_in: set[str] = set()  # the billing sources of the window's lines `where` keeps

    def rows_of(win: Window, seen: set[str]) -> dict[tuple, tuple[Decimal, Mapping]]:
        # per partition: SQL sums stay within a period, which ingest keeps inside DECIMAL(38,12)
        sums = attributed_sums(session.con, config, dims, cost, granularity, win, explain, per_partition=True)
        grouped: dict[tuple, tuple[Decimal, Mapping]] = {}
        while sums:  # emptied as it is read, and no parts without explain: a million groups are held once
            (period, currency, (source, _), values, hows), amount = sums.popitem()
            if any(values[index[d]] not in ok for d, ok in wanted.items()):
                continue
            seen.add(source)
            key = (period, currency, tuple(values[index[d]] for d in by))
            total, parts = grouped.get(key, (Decimal(0), defaultdict(Decimal) if explain else NO_PARTS))
            for d in (by if explain else ()):
                parts[(d, hows[index[d]])] += amount
            grouped[key] = (total + amount, parts)
        return grouped

    current = rows_of(window, spent_in)
    ends = max((m for _, m in sources if m), default=None)
    previous = rows_of(previous_window(window, ends), set()) if compare else {}
    keep = _top_values(current, top) if top else None
    shown_groups = _fold(current, keep, len(by))
    shown_previous = _fold(previous, keep, len(by))
    spell = session.spellings(by)
    if session.narrowed and _respelled(config, by, where, [*shown_groups, *shown_previous], spell):
        return None
    rows = []
    for key in [*shown_groups, *(k for k in shown_previous if k not in shown_groups)]:
        period, currency, values = key
        amount, parts = shown_groups.get(key, (Decimal(0), {}))
        prev = shown_previous.get(key, (Decimal(0), {}))[0] if compare else None
        shown = {d: (OTHER if v == OTHER and keep is not None else spell.get((d, v), v)) for d, v in zip(by, values)}
        contributions = tuple(Contribution(d, _how_label(config, d, h), c)
                              for (d, h), c in sorted(parts.items(),
                                                      key=lambda item: (item[0][0], -abs(item[1]), item[0][1])))
        rows.append(AttributionRow(shown, currency, amount, period, prev, contributions))
    rows.sort(key=lambda r: (r.period or date.min, r.currency or "", -r.cost, tuple(r.values.values())))
    totals = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for row in rows:
        totals[row.currency][0] += row.cost
        totals[row.currency][1] += row.previous_cost or 0
    total_rows = tuple((cur, t[0], t[1] if compare else None)
                       for cur, t in sorted(totals.items(), key=lambda item: item[0] or ""))
    overbooked = session.overbooked(window) if config.clusters is not None else 0
    return AttributionResult(window, cost, by, granularity, tuple(rows), total_rows, compare, explain,
                             sources=sources, overbooked=overbooked, unmatched=unmatched, typos=typos,
                             spent_in=frozenset(spent_in))


def _respelled(config: AttributionConfig, by: tuple[str, ...], where: Mapping[str, Sequence[str]],
               keys: Sequence[tuple], spell: Mapping[tuple[str, str], str]) -> bool:
    """Whether a line a narrowed rollup left out could change how a shown value is spelled:
    such a line carries in each other dimension a rule's value or the default
    (rollup.py `narrowed_to`), which counts for its spelling when it names a shown value."""
    for at, dim in enumerate(by):
        if dim in where:
            continue
        definition = config.dimensions[dim]
        constants: dict[str, set[str]] = defaultdict(set)  # by `loosely`: SQL's lower() may differ from Python's
        for value in (definition.default, *(r.value for r in definition.rules)):
            constants[loosely(value)].add(value.strip())
        for shown in {values[at] for _, _, values in keys}:  # lowercased by SQL; ASCII: as loosely
            if any(spell.get((dim, shown), shown) != c for c in constants.get(shown if shown.isascii()
                                                                                else loosely(shown), ())):
                return True
    return False


def _unmatched(session, where: Mapping[str, Sequence[str]]
               ) -> tuple[tuple[tuple[str, str, str], ...], frozenset[tuple[str, str]]]:
    """Each filter value that no line of the lake carries (a typo, most often), with the
    dimension's closest known values; and those of them a known value nearly spells."""
    if not where:
        return (), frozenset()
    known: dict[str, list[str]] = defaultdict(list)
    for (dim, _), spelling in session.spellings(list(where)).items():
        known[dim].append(spelling)
    unmatched = tuple((dim, value, suggestion(value, known[dim], f"{dim} values"))
                      for dim, values in where.items() for value in values
                      if folded(value) not in {folded(k) for k in known[dim]})
    return unmatched, frozenset((dim, value) for dim, value, _ in unmatched if near_miss(value, known[dim]))


def _top_values(grouped: Mapping[tuple, tuple[Decimal, dict]], top: int) -> set[tuple]:
    """The `top` combinations of values with the most cost in the window, per currency."""
    per_currency: dict = defaultdict(lambda: defaultdict(Decimal))
    for (_, currency, values), (amount, _) in grouped.items():
        per_currency[currency][values] += amount
    keep = set()
    for currency, sums in per_currency.items():
        ranked = sorted(sums, key=lambda v: (-sums[v], v))
        keep |= {(currency, v) for v in ranked[:top]}
    return keep


def _fold(grouped: Mapping[tuple, tuple[Decimal, dict]], keep: set | None, width: int) -> Mapping:
    if keep is None:
        return grouped  # read, never changed: no copy of a million groups
    merged_rows: dict[tuple, tuple[Decimal, dict]] = {}
    for (period, currency, values), (amount, parts) in grouped.items():
        if (currency, values) not in keep:
            values = (OTHER,) * width
        key = (period, currency, values)
        total, merged = merged_rows.get(key, (Decimal(0), defaultdict(Decimal)))
        for part, value in parts.items():
            merged[part] += value
        merged_rows[key] = (total + amount, merged)
    return merged_rows


def materialise(lake: Lake, config: AttributionConfig | Config, *, grace: timedelta = ROLLUP_GRACE,
                now: datetime | None = None) -> RollupBuild:
    """Store the current rollup of every period for `config` and remove versions superseded
    for `grace` (service/attribution/rollup_build.py). Call only while holding the ingest lock."""
    return build_rollups(lake, _attribution(config), grace=grace, now=now)


# ---- reconciliation and resources ---------------------------------------------------------------

@dataclass(frozen=True)
class Reconciliation:
    source: str
    billing_period: str
    currency: str | None
    cost: str
    source_total: Decimal
    attributed_total: Decimal
    # Σ (source value as delivered − as the lake stores it, at 12 decimals): the delivery's
    # own total is source_total + rounding
    rounding: Decimal = Decimal(0)

    @property
    def difference(self) -> Decimal:
        return self.attributed_total - self.source_total

    @property
    def ok(self) -> bool:
        return self.difference == 0


def reconcile(lake: Lake, config: AttributionConfig | Config,
              engine: EngineConfig | None = None) -> list[Reconciliation]:
    """Σ attributed (unallocated included) against Σ source cost, per source, billing
    period, currency and cost measure, over the whole lake."""
    engine = engine or _engine(config)
    config = _attribution(config)
    return read_sessions(lake, config, engine, lambda session: _reconcile(session, config),
                         Needs(sql_dims(config, (), {})))


def _reconcile(session: RollupSession | None, config: AttributionConfig) -> list[Reconciliation]:
    if session is None:
        return []
    dims = sql_dims(config, (), {})
    results = []
    for measure, column in MEASURES.items():
        source: dict[tuple, Decimal] = {}
        for src, period, currency, total in session.con.execute(
                f"SELECT source, billing_period, BillingCurrency, coalesce(sum({column}), 0) FROM costs "
                "GROUP BY source, billing_period, BillingCurrency").fetchall():
            source[(src, period, currency)] = total
        attributed: dict[tuple, Decimal] = defaultdict(Decimal)
        for (_, currency, partition, _, _), amount in attributed_sums(
                session.con, config, dims, measure, "total", None, False, per_partition=True).items():
            attributed[(*partition, currency)] += amount
        rounded = {(e.source, e.billing_period, t.currency): dict(t.rounding).get(column, Decimal(0))
                   for e in session.ledger_entries() for t in e.totals}
        for key in sorted(set(source) | set(attributed), key=lambda k: (k[0], k[1], k[2] or "")):
            results.append(Reconciliation(key[0], key[1], key[2], measure, source.get(key, Decimal(0)),
                                          attributed.get(key, Decimal(0)), rounded.get(key, Decimal(0))))
    return results


def attribute_resources(lake: Lake, config: AttributionConfig | Config,
                        resource_ids: Sequence[str] = ()) -> dict[str, dict[str, str]]:
    """Resource id → {dimension: value} from the resource's latest cost line (all resources
    with a cost line when `resource_ids` is empty). Resources without cost lines are absent."""
    config = _attribution(config)
    return read_consistently(lake, lambda snapshot: _resources(lake, config, resource_ids, snapshot))


def _resources(lake: Lake, config: AttributionConfig, resource_ids: Sequence[str], snapshot) -> dict:
    if not snapshot.checks:
        return {}
    # the keys ingest recorded: decoding every line's tags for them took most of the commitment tops
    tag_keys = recorded_tag_keys(cost_partitions(lake, snapshot))
    with lake.query(snapshot) as con:
        if tag_keys is None:  # a partition from before the ledger recorded them
            keys_sql = all_tag_keys_sql()
            tag_keys = [row[0] for row in con.execute(keys_sql.text, keys_sql.params).fetchall()]
        sql = resources_sql(config, tag_keys, list(resource_ids), inventory_keys(lake, con))
        rows = con.execute(sql.text, sql.params).fetchall()
    order = config.dimension_order()
    # Shown in each value's most common spelling, as `attribute` shows it (`Eval` → `eval`).
    # the spellings count lines alone: a period rolled up in memory for them sums no measure, keeps no hows
    spell = _answer_on(lake, config, snapshot, lambda session: session.spellings(order),
                       Needs(order, (), hows=False)) if rows else {}
    return {row[0]: {d: spell.get((d, folded(v)), v) if v else v for d, v in zip(order, row[1:])}
            for row in rows}
