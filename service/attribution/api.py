"""Attribution: every dollar of the lake on one value per dimension (team, project, experiment
and any declared), exactly once.

Python API (the CLI, rules engine, metrics, report and HTTP API call these):

    attribute(lake, config, window, by=("team",), where={}, cost="billed",
              granularity="total", top=None, compare=False, explain=False, engine=None,
              snapshot=None) -> AttributionResult
        AttributionResult.to_json() is the `spendlake attribute --format json` contract:
        {since, until, cost, by, rows: [{<dim>..., currency, cost, period?}], totals: [{currency, cost}],
         data_through, sources: [{source, data_through}]}
        (data_through: how far the billing sources' usage data reaches, service/core/coverage.py;
        a window that ends later than it covers less than its length)
    attribute_query(lake, config, query, engine=None, job_rules=False, snapshot=None) -> AttributionResult
        the same for an `AttributionQuery` (service/attribution/query.py), which the CLI and the
        HTTP API parse from what the user typed
    attribute_queries(lake, config, queries, engine=None) -> [AttributionResult]
        several at once, from one read (budgets)
    materialise(lake, config) -> RollupBuild  store the current per-period rollups for `config`
        and remove superseded ones (ingest and `spendlake rollup` call it, holding the lake lock)
    reconcile(lake, config, engine=None) -> list[Reconciliation]      Σ attributed vs Σ source, per
        (source, billing period, currency, cost measure); `spendlake attribute --check` (reconciliation.py)
    `engine` (an EngineConfig; default the config's `engine:` when given the whole Config,
        else DuckDB): `kind="spark"` runs the same SQL on Apache
        Spark (service/attribution/spark/session.py) and returns the same results
    attribute_resources(lake, config, resource_ids) -> {resource id: {dimension: value}}
        for findings: each dimension's value on the resource's latest cost line (resources.py)

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
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType

from service.attribution.compute import RollupSession, attributed_sums
from service.attribution.instance_checks import instance_warnings
from service.attribution.job_how import job_how
from service.attribution.job_rules import idle_job_rules
from service.attribution.jobs import JOBS_TABLE
from service.attribution.needs import Needs, loosely
from service.attribution.query import AttributionQuery, Naming, cli_option, reserved_runs, window_at
from service.attribution.result import AttributionResult, AttributionRow, Contribution, previous_window
from service.attribution.run_cost_notes import asks_effective, run_cost_notes
from service.attribution.rollup_build import ROLLUP_GRACE, RollupBuild, build_rollups
from service.attribution.sessions import engine_of, read_sessions, sql_dims
from service.core.config import Config, EngineConfig, attribution_of
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded, folded_forms
from service.core.lake import Lake
from service.core.snapshot import Snapshot
from service.core.suggest import near_miss, ranked, suggestion
from service.core.timewindow import Window
from service.core.units import OTHER

NO_PARTS: Mapping = MappingProxyType({})  # a row's contributions when nothing is explained
# What tells apart the parts of one `job:<id>` in --explain: two sources' same id (their clusters),
# a requeued job's attempts (their states, and their records: job_how)
JOB_PART = ("cluster", "job_state")


def _dims(config: AttributionConfig, by: Sequence[str], where: Mapping[str, Sequence[str]],
          explain: bool) -> tuple[str, ...]:
    """The dimensions an answer reads (sql_dims), with JOB_PART's when it explains shared clusters' parts."""
    return tuple(dict.fromkeys([*sql_dims(config, by, where), *(JOB_PART if explain and config.clusters else ())]))


def _how_label(config: AttributionConfig, dim: str, how: str) -> str:
    """How `--explain` names one way a dimension was decided, one spelling for the table, CSV,
    JSON and /api/v1/attribute: the placement as the SQL records it, `<kind>:<what>` (`tag:<key>`,
    `inventory-tag:<key>`, `job:<id>`, `idle:<cluster>`, `rule:<i>`, `shared:<i>`) or `default`,
    a rule's or a shared split's match in parentheses after it (`rule:0 (account=1111)`)."""
    kind, _, rest = how.partition(":")
    if kind == "rule":
        return f"{how} ({_match_text(config.dimensions[dim].rules[int(rest)].match)})"
    if kind == "shared":
        index, _, nobasis = rest.partition(":")
        rule = config.shared[int(index)]
        split = "no direct spend to split by, kept on the default" if nobasis else f"{rule.split} by {rule.by}"
        return f"shared:{index} ({_match_text(rule.match)}; {split})"
    return how


def _match_text(match: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in match.items())


def attribute(lake: Lake, config: AttributionConfig | Config, window: Window, *, by: Sequence[str] = ("team",),
              where: Mapping[str, Sequence[str]] | None = None, cost: str = "billed", granularity: str = "total",
              top: int | None = None, compare: bool = False, explain: bool = False,
              engine: EngineConfig | None = None, snapshot: Snapshot | None = None) -> AttributionResult:
    """Attributed cost of `window`, one row per (period, currency, values of `by`). The engine
    is `engine`, else the config's `engine:` when `config` is the whole Config, else DuckDB;
    `snapshot`: a command's (taken with HELD_TABLES), whose other reads this one joins."""
    query = AttributionQuery(window, tuple(by), {d: tuple(v) for d, v in (where or {}).items()}, cost,
                             granularity, top, compare, explain)
    return attribute_query(lake, config, query.validated(attribution_of(config), naming=lambda name: name),
                           engine=engine, snapshot=snapshot)


def attribute_query(lake: Lake, config: AttributionConfig | Config, query: AttributionQuery,
                    engine: EngineConfig | None = None, job_rules: bool = False,
                    snapshot: Snapshot | None = None, naming: Naming = cli_option) -> AttributionResult:
    """The answer to a validated query (`AttributionQuery.parse`), as `attribute` gives it.
    `job_rules`: with the job-field rules of `query.by` no job record meets and what the allocation
    assumes of the window's instances (instance_checks.py), checked on the answer's own connection
    (AttributionResult.idle_rules, instance_warnings; DuckDB's), for with_notes to warn of, and, by
    run, why its runs may read $0 (run_cost_notes.py, options spelt as `naming` spells them);
    `snapshot`: as `attribute`'s."""
    engine = engine or engine_of(config)
    config = attribution_of(config)
    # by run, its note reads the cluster of each part and, of a billed answer, its effective cost
    noted = job_rules and "run" in query.by and config.clusters is not None
    dims = _dims(config, query.by, query.where, query.explain)
    needs = Needs(tuple(dict.fromkeys([*dims, "cluster"])) if noted else dims,
                  (query.cost, "effective") if noted and asks_effective(config, query.cost) else (query.cost,),
                  hows=query.explain,
                  where=tuple(query.where.items()))

    def answer(session: RollupSession | None) -> AttributionResult | None:
        result = _answer(session, config, query)
        if result is None or not job_rules or session is None or not session.local:
            return result
        has_jobs = lake.has_table(JOBS_TABLE)
        return replace(result, idle_rules=tuple(idle_job_rules(lake, config, result.window, query.by, con=session.con,
                                                               snapshot=session.snapshot)),
                       instance_warnings=instance_warnings(session.con, config.clusters, has_jobs, result.window,
                                                           query.cost, result.data_through, session.snapshot),
                       run_notes=run_cost_notes(session, config, result.window, query.cost, naming)[0] if noted else ())

    # A period without a stored rollup is rolled up from the lines `where` can match; when that
    # cannot show the answer as every line would (a suggestion, a spelling), from every line.
    result = read_sessions(lake, config, engine, answer, needs, snapshot)
    return result if result is not None else read_sessions(lake, config, engine, answer, replace(needs, where=()),
                                                           snapshot)


def attribute_queries(lake: Lake, config: AttributionConfig | Config, queries: Sequence[AttributionQuery],
                      engine: EngineConfig | None = None, snapshot: Snapshot | None = None) -> list[AttributionResult]:
    """The answers to several validated queries, as `attribute_query` gives each, from one read
    of the lake: one snapshot, and each period without a stored rollup rolled up from its raw
    lines once for all of them, not once per query (budgets: two per dimension; a 10M-line
    month ~11 CPU s each). `snapshot`: a command's (sessions.read_sessions), else one of its own."""
    engine = engine or engine_of(config)
    config = attribution_of(config)
    needs = Needs(tuple(dict.fromkeys(d for q in queries for d in _dims(config, q.by, q.where, q.explain))),
                  tuple(dict.fromkeys(q.cost for q in queries)), hows=any(q.explain for q in queries))
    # not narrowed to any query's `where`: every answer is as every line shows it, never None
    return read_sessions(lake, config, engine, lambda session: [_answer(session, config, q) for q in queries], needs,
                         snapshot)


def _answer(session: RollupSession | None, config: AttributionConfig, query: AttributionQuery
            ) -> AttributionResult | None:
    window = window_at(query, session and session.data_through()).window
    return _attribute(session, config, window, query.by, query.where, query.cost, query.granularity, query.top,
                      query.compare, query.explain)


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
    dims = _dims(config, by, where, explain)
    wanted = {d: {form for v in values for form in folded_forms(v)} for d, values in where.items()}
    index = {d: i for i, d in enumerate(dims)}
    of_job = [index[d] for d in JOB_PART if d in index] if explain and config.clusters else []

    spent_in: set[str] = set()  # the billing sources of the window's lines `where` keeps

    def rows_of(win: Window, seen: set[str]) -> dict[tuple, tuple[Decimal, Mapping]]:
        # per partition: SQL sums stay within a period, which ingest keeps inside DECIMAL(38,12)
        sums = attributed_sums(session.con, config, dims, cost, granularity, win, explain, per_partition=True)
        held.append(bool(sums))  # before `where` keeps its rows (all the lines unless narrowed)
        grouped: dict[tuple, tuple[Decimal, Mapping]] = {}
        while sums:  # emptied as it is read, and no parts without explain: a million groups are held once
            (period, currency, (source, _), values, hows), amount = sums.popitem()
            if any(values[index[d]] not in ok for d, ok in wanted.items()):
                continue
            seen.add(source)
            key = (period, currency, tuple(values[index[d]] for d in by))
            total, parts = grouped.get(key, (Decimal(0), defaultdict(Decimal) if explain else NO_PARTS))
            for d in (by if explain else ()):
                how = hows[index[d]]
                if how and how.startswith("job:"):
                    how, record = job_how(how)
                    parts[(d, how, tuple(values[i] for i in of_job), record)] += amount
                else:
                    parts[(d, how, (), None)] += amount
            grouped[key] = (total + amount, parts)
        return grouped

    held: list[bool] = []
    current = rows_of(window, spent_in)
    ends = max((m for _, m in sources if m), default=None)
    previous = rows_of(previous_window(window, ends), set()) if compare else {}
    keep = _top_values(current, top) if top else None
    shown_groups = _fold(current, keep, len(by))
    shown_previous = _fold(previous, keep, len(by))
    spell = session.spellings(tuple(dict.fromkeys([*by, *(JOB_PART if of_job else ())])))
    if session.narrowed and _respelled(config, by, where, [*shown_groups, *shown_previous], spell):
        return None
    rows = []
    for key in [*shown_groups, *(k for k in shown_previous if k not in shown_groups)]:
        period, currency, values = key
        amount, parts = shown_groups.get(key, (Decimal(0), {}))
        prev = shown_previous.get(key, (Decimal(0), {}))[0] if compare else None
        shown = {d: (OTHER if v == OTHER and keep is not None else spell.get((d, v), v)) for d, v in zip(by, values)}
        contributions = tuple(Contribution(d, _how_label(config, d, h), c,
                                           *(spell.get((dim, v), v) for dim, v in zip(JOB_PART, job)), record=record)
                              for (d, h, job, record), c in sorted(parts.items(), key=lambda item: (
                                  item[0][0], -abs(item[1]), item[0][1], tuple(v or "" for v in item[0][2]),
                                  item[0][3] or "")))
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
                             spent_in=frozenset(spent_in), reserved=reserved_runs(config, where),
                             window_cost=None if session.narrowed else held[0],
                             read_in=session.snapshot if session.local else None)  # Spark: no local snapshot


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
    dimension's closest known values (none close: the known ones, the likeliest first, `ranked`:
    a plan's renamed run r1 names r1-renamed first); and those of them a known value nearly spells."""
    if not where:
        return (), frozenset()
    known: dict[str, list[str]] = defaultdict(list)
    for (dim, _), spelling in session.spellings(list(where)).items():
        known[dim].append(spelling)
    unmatched = tuple((dim, value, suggestion(value, known[dim], f"{dim} values",
                                                  first=ranked(value, known[dim])))
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
    return build_rollups(lake, attribution_of(config), grace=grace, now=now)
