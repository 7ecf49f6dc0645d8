"""The attribution computation over the per-period rollups: window sums, exact proration of
charge periods cut by the window, and exact shared-cost splits (rules in service/attribution/api.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

from service.attribution.needs import Needs
from service.attribution.rollup import rollup_split, rollup_view
from service.attribution.rollup_versions import READ_TABLES
from service.attribution.sql import dim_col
from service.attribution.window_sql import spellings_sql, window_sql
from service.core.config_attribution import AttributionConfig
from service.core.coverage import snapshot_data_through
from service.core.folding import folded
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.ledger import LedgerEntry
from service.core.snapshot import Snapshot
from service.core.timewindow import Window

QUANTUM = Decimal("1e-12")
BATCH = 50_000  # rows of a window's sums read at once
ROLLUP_VIEW = "attribution_rollups"


def _quantize(value: Decimal, quantum: Decimal = QUANTUM) -> Decimal:
    return value.quantize(quantum, rounding=ROUND_HALF_EVEN)


def _bucket(moment: datetime, granularity: str) -> date | None:
    day = moment.date()
    if granularity == "total":
        return None
    if granularity == "day":
        return day
    if granularity == "week":
        return day - timedelta(days=day.weekday())
    return day.replace(day=1)


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def _next_bucket(start: datetime, granularity: str) -> datetime:
    if granularity == "day":
        return start + timedelta(days=1)
    if granularity == "week":
        return start + timedelta(days=7)
    return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)


def period_span(moment: datetime, granularity: str) -> tuple[datetime, datetime]:
    """[start, end) of the day, week (from Monday) or month holding `moment` (naive UTC)."""
    start = datetime.combine(_bucket(moment, granularity), datetime.min.time())
    return start, _next_bucket(start, granularity)


def _micros(span: timedelta) -> Decimal:
    return Decimal(span // timedelta(microseconds=1))


def prorate(amount: Decimal, edge_start: datetime, edge_end: datetime, start: datetime, end: datetime,
            granularity: str) -> list[tuple[date | None, Decimal]]:
    """The part of a charge period [edge_start, edge_end) of `amount` that lies in [start, end)
    (overlap ÷ length, rounded to 12 decimals), per output period: each period gets its own
    overlap's share, computed from `amount` alone, so a day has the same value in every
    window holding it; the rounding remainder goes to the period with the largest overlap
    (ties: the first), so the periods sum to the window's part exactly."""
    length = _micros(edge_end - edge_start)
    with localcontext() as ctx:
        ctx.prec = 80
        whole = _quantize(amount * _micros(end - start) / length)
        if granularity == "total":
            return [(None, whole)]
        overlaps: dict[date, Decimal] = {}
        bucket = datetime.combine(_bucket(start, granularity), datetime.min.time())
        while bucket < end:
            following = _next_bucket(bucket, granularity)
            overlaps[bucket.date()] = _micros(min(following, end) - max(bucket, start))
            bucket = following
        parts = {period: _quantize(amount * overlap / length) for period, overlap in overlaps.items()}
    largest = min(overlaps, key=lambda period: (-overlaps[period], period))
    parts[largest] += whole - sum(parts.values(), Decimal(0))
    return list(parts.items())


def window_parts(con, config: AttributionConfig, dims: tuple[str, ...], measure: str, granularity: str,
                  window: Window | None, explain: bool, per_partition: bool, placement: bool = False,
                  whole_runs: Sequence[str] = ()):
    """(shared rule, period, currency, partition, values, hows, amount) for the window, with
    the charge periods cut by the window, or spanning several output periods, prorated.
    `placement`: hows as their kind only, but those of `whole_runs`' rows (window_sql)."""
    since = _naive(window.since) if window else None
    until = _naive(window.until) if window else None
    sql = window_sql(ROLLUP_VIEW, dims, measure, granularity, since, until,
                     explain=explain, per_partition=per_partition, placement=placement, whole_runs=whole_runs)
    n = len(dims)
    # DuckDB gives each row its own copy of every text: a month's 200k jobs' rows repeat a few
    # hundred values and partitions, and name their job once per dimension's how. Read in
    # batches, equal texts kept once (the rows of usage_in at 10M: 381 -> 220 MB at the peak)
    same: dict[str, str] = {}
    result = con.execute(sql.text, sql.params)
    for row in (row for batch in iter(lambda: result.fetchmany(BATCH), []) for row in batch):
        period, edge_start, edge_end, currency, shared = row[:5]
        amount = row[-1]
        if amount is None:
            continue
        currency = same.setdefault(currency, currency) if currency else currency
        values = tuple(same.setdefault(v, v) if v else v for v in row[5:5 + n])
        hows = tuple(same.setdefault(h, h) if h else h for h in row[5 + n:5 + 2 * n]) if explain else ()
        partition = tuple(same.setdefault(p, p) for p in row[-3:-1]) if per_partition else ()
        if edge_start is not None:
            start = max(edge_start, since) if since else edge_start
            end = min(edge_end, until) if until else edge_end
            for period, part in prorate(amount, edge_start, edge_end, start, end, granularity):
                yield shared, period, currency, partition, values, hows, part
            continue
        if period is not None:
            period = period.date() if isinstance(period, datetime) else period
        yield shared, period, currency, partition, values, hows, amount


def split_exactly(amount: Decimal, weights: Mapping[str, Decimal], quantum: Decimal = QUANTUM) -> dict[str, Decimal]:
    """amount × weight / Σ weights per key, rounded to `quantum` (12 decimals); the remainder
    goes to the largest weight (ties: first key in byte order), so the parts sum to `amount`."""
    total = sum(weights.values(), Decimal(0))
    with localcontext() as ctx:
        ctx.prec = 80
        parts = {key: _quantize(amount * w / total, quantum) for key, w in weights.items()}
    largest = min(weights, key=lambda k: (-weights[k], k))
    parts[largest] += amount - sum(parts.values(), Decimal(0))
    return parts


def split_weights(config: AttributionConfig, rule_index: int, currency, period,
                  direct: Mapping) -> dict[str, Decimal] | None:
    """What shared rule `rule_index` splits by in `currency` and output `period`: its fixed
    weights, or the values of its dimension with positive direct spend
    (`direct[(dimension, currency, period)]`, the default value left out): 1 each (even) or
    that spend (proportional); None: nothing to split over."""
    rule = config.shared[rule_index]
    if rule.split == "fixed":
        return {folded(k): w for k, w in rule.weights.items()}
    default = folded(config.dimensions[rule.by].default)
    spend = {k: v for k, v in direct.get((rule.by, currency, period), {}).items() if v > 0 and k != default}
    if not spend:
        return None
    return {k: Decimal(1) for k in spend} if rule.split == "even" else spend


def attributed_sums(con, config: AttributionConfig, dims: tuple[str, ...], measure: str, granularity: str,
                window: Window | None, explain: bool, per_partition: bool,
                placement: bool = False, whole_runs: Sequence[str] = ()) -> dict[tuple, Decimal]:
    """(period, currency, partition, values, hows) → amount, after shared splits. A shared
    line is split by the direct spend of its own output period (the whole window in
    `total`), so each period is attributed as that period alone would be. `placement`: hows
    as their kind only, but those of `whole_runs`' rows (window_sql.window_sql)."""
    out: dict[tuple, Decimal] = defaultdict(Decimal)
    shared_parts = []
    direct: dict[tuple, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for shared, period, currency, partition, values, hows, amount in window_parts(
            con, config, dims, measure, granularity, window, explain, per_partition, placement, whole_runs):
        if shared is None:
            out[(period, currency, partition, values, hows)] += amount
            for dim, value in zip(dims, values):
                direct[(dim, currency, period)][value] += amount
        else:
            shared_parts.append((shared, period, currency, partition, values, hows, amount))
    weights_cache: dict[tuple, dict[str, Decimal] | None] = {}
    for shared, period, currency, partition, values, hows, amount in shared_parts:
        rule = config.shared[shared]
        at = dims.index(rule.by)
        key = (shared, currency, period)
        if key not in weights_cache:
            weights_cache[key] = split_weights(config, shared, currency, period, direct)
        weights = weights_cache[key]
        how = f"shared:{shared}"
        if weights is None:
            weights = {folded(config.dimensions[rule.by].default): Decimal(1)}
            how = f"shared:{shared}:nobasis"
        for value, part in split_exactly(amount, weights).items():
            new_values = values[:at] + (value,) + values[at + 1:]
            new_hows = hows[:at] + (how,) + hows[at + 1:] if explain else ()
            out[(period, currency, partition, new_values, new_hows)] += part
    return out


class RollupSession:
    """A query connection on one snapshot of the lake, with the rollup view over every period
    (stored rollups, or rolled up in memory where none is stored: service/attribution/rollup.py)."""

    local = True  # the connection is this process's DuckDB (a Spark session's is not)
    narrowed = False  # a period rolled up in memory holds only the lines the query's `--where` can match
    inventory: dict[str, str] | None = None  # the inventory and job snapshots its stored rollups are of

    def __init__(self, lake: Lake, config: AttributionConfig, snapshot: Snapshot | None = None,
                 needs: Needs = Needs(), memory_limit: str | None = None):
        """`needs`: the dimensions and measures the session's queries read (default all); a
        period rolled up in memory computes only those. `memory_limit`: DuckDB's where the
        session rolls up or allocates lines (default READER_MEMORY_LIMIT)."""
        self.config, self.lake = config, lake
        self.snapshot = snapshot = snapshot or lake.snapshot()
        split = rollup_split(lake, config, snapshot)
        self.inventory = split.inventory  # the placed parts it reads are of the same (placed.stored_placed)
        # A period rolled up in memory holds all its groups (a month of 1M experiments: 9M,
        # 2.6 GB) until the session ends: it spills beyond the reader's limit, as the build
        # does beyond the writer's, and so does an allocation of the window's lines. Over stored
        # rollups alone the limit only costs (DuckDB then held more, not less).
        limited = split.missing or needs.allocates
        self.con = lake.query(snapshot, memory_limit=(memory_limit or READER_MEMORY_LIMIT) if limited else None,
                              tables=READ_TABLES)
        self.files, self.narrowed = rollup_view(lake, config, self.con, snapshot, ROLLUP_VIEW, needs, split)

    def data_through(self) -> dict[str, datetime | None]:
        """Each billing source read → how far its usage data reaches (service.core.coverage),
        from the ledger entries of the partitions this snapshot reads."""
        return snapshot_data_through(self.lake, self.snapshot)

    def ledger_entries(self) -> list[LedgerEntry]:
        """The ledger entries of the partitions this snapshot reads."""
        return [c.entry for c in self.snapshot.checks if c.entry]

    def overbooked(self, window: Window) -> int:
        """Instance-hours starting in `window` whose jobs held more GPU-seconds than the
        instance had (shared GPU clusters: service/attribution/allocation.py); 0 without."""
        columns = {row[0] for row in self.con.execute(f"DESCRIBE {ROLLUP_VIEW}").fetchall()}
        if "overbooked" not in columns:
            return 0
        return int(self.con.execute(
            f"SELECT coalesce(sum(overbooked), 0) FROM {ROLLUP_VIEW} WHERE cp_start >= $since AND cp_start < $until",
            {"since": _naive(window.since), "until": _naive(window.until)}).fetchall()[0][0])

    def spellings(self, dims: Sequence[str]) -> dict[tuple[str, str], str]:
        """(dimension, lowercase value) → most common original spelling (ties: byte order)."""
        best: dict[tuple[str, str], tuple[int, str]] = {}
        sql = spellings_sql(ROLLUP_VIEW, dims)
        for dim, key, spelling, lines in self.con.execute(sql.text, sql.params).fetchall():
            rank = (-int(lines), spelling)
            if (dim, key) not in best or rank < best[(dim, key)]:
                best[(dim, key)] = rank
        spelling = {k: v[1] for k, v in best.items()}
        for rule in self.config.shared:  # fixed-weight values may have no line of their own
            for value in rule.weights or {}:
                spelling.setdefault((rule.by, folded(value)), value.strip())
        return spelling

    def spellings_of(self, dim: str, keys: Sequence[str]) -> dict[str, str]:
        """Lowercase value → most common spelling, as `spellings` gives it, for `keys` of
        `dim` only (a million values need not reach Python to spell the top ten)."""
        column = dim_col(dim)
        spelling = dict(self.con.execute(
            "SELECT key, first(spelling ORDER BY lines DESC, spelling) FROM ("
            f"SELECT lower({column}) AS key, {column} AS spelling, sum(lines) AS lines FROM {ROLLUP_VIEW} "
            f"WHERE list_contains($1, lower({column})) GROUP BY ALL) GROUP BY key", [list(keys)]).fetchall())
        wanted = set(keys)
        for rule in self.config.shared:
            for value in rule.weights or {}:
                if rule.by == dim and folded(value) in wanted:
                    spelling.setdefault(folded(value), value.strip())
        return spelling
