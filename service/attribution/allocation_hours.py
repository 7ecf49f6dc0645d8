"""A cost line's instance-hours in the allocation (service/attribution/allocation.py): how its
cost is spread over its clock hours and how much capacity each hour holds.

A line's quantity in hours (ConsumedQuantity in an hour unit, else PricingQuantity in one: AWS
`Hrs`, FOCUS and Azure `Hours`) says how many instance-hours it bills, Q; its charge period
lasts L hours. Most lines bill Q = L (an hourly line of one instance): the cost goes by time,
each hour's capacity the instance's GPUs. Otherwise:
- Q < L (a daily line of a node up 3 hours, a launch's or a Spot reclaim's part-hour): the
  instance was up Q hours somewhere in the period. They are placed on the time its jobs held
  it first (the placed jobs and its cluster's pool jobs, H: the union of their times), the
  rest (Q - H) spread over the period's other time by its length; each hour's share of the
  cost is its up time's, and its capacity the GPUs over that up time. Jobs holding it longer
  than Q (H > Q) make H the up time. An hour with no up time carries none of the line.
- Q > L (a scale set's line of its instances' summed hours): the line is Q / L instances of
  the type, each hour's capacity that many times the type's GPUs.
A line without a quantity in hours (none, a unit of other things, Azure's `10 Hours` blocks,
whose quantity may count blocks) goes by time, as one instance.
"""

from __future__ import annotations

from service.attribution.allocation_placement import pool_job
from service.core.config_clusters import ClustersConfig

US_PER_HOUR = 3_600_000_000
# units a quantity of instance-hours is written in (lower case, trimmed); not `10 Hours` blocks
HOUR_UNITS = ("hrs", "hr", "hour", "hours", "1 hour", "1 hours")
LINE_HOURS_COLUMN = "a_hours_us"


def _in_hours(quantity: str, unit: str) -> str:
    units = ", ".join(f"'{u}'" for u in HOUR_UNITS)
    return f"lower(trim({unit})) IN ({units}) AND {quantity} > 0"


# SQL over a cost line: its instance-hours in microseconds (BIGINT), NULL without a quantity in hours.
LINE_HOURS = (f"CAST(CASE WHEN x_instance_type IS NULL THEN NULL "
              f"WHEN {_in_hours('ConsumedQuantity', 'ConsumedUnit')} THEN round(ConsumedQuantity * {US_PER_HOUR}) "
              f"WHEN {_in_hours('PricingQuantity', 'PricingUnit')} THEN round(PricingQuantity * {US_PER_HOUR}) "
              "END AS BIGINT)")

# over `a_cut0` (a member line's clock-hour slots: the line's µs `a_ll`)
# the instances a line bills: Q / L where above 1
INSTANCES = f"CASE WHEN {LINE_HOURS_COLUMN} > a_ll THEN CAST({LINE_HOURS_COLUMN} AS DOUBLE) / a_ll ELSE 1 END"


def _held_intervals(jobs: str, start: str, end: str, meet: str) -> str:
    return (f"SELECT c.a_line, c.s_start, greatest(c.s_start, q.{start}) AS b, least(c.s_end, q.{end}) AS e "
            f"FROM a_short c JOIN {jobs} q ON {meet} WHERE q.{start} < c.s_end AND q.{end} > c.s_start")


def cut_ctes(clusters: ClustersConfig, members: str) -> str:
    """`a_short` (the slots of the instance lines of `a_lines` below their period's hours, their
    instance's cluster from `members`: `Stage.members`) and `a_cut`: the slots of `a_cut0` with
    each one's weight of its line (`a_w`, the up time in µs) and the line's total (`a_len`), a
    short line's slots weighed by their up time (those without any left out), for the lines of
    more than one slot (a line's only slot is its whole: read from `a_cut0`); `a_up`: a short
    line's slots' up time (their capacity's, allocation_weights.py). The short lines' slots are
    cut again from `a_lines` (few, narrow): `a_cut0`, read twice, stays a projection DuckDB does
    not keep (a join in it made DuckDB keep every slot: the bench's allocation +9% peak RSS)."""
    # the time left over (U - H, U = max(H, Q)) spread over the slots' time not held, exactly:
    # each slot takes the difference of the rounded-down shares of the free time up to it and before it
    left = "CAST(greatest(hh, a_q) - hh AS HUGEINT)"
    up = (f"held + CASE WHEN greatest(hh, a_q) <= hh THEN 0 ELSE {left} * free_to // (a_ll - hh) "
          f"- {left} * (free_to - (a_sw - held)) // (a_ll - hh) END")
    length = "epoch_us(cp_end) - epoch_us(cp_start)"
    return (
        f"a_short AS (SELECT l.*, epoch_us(s_end) - epoch_us(s_start) AS a_sw, m.a_cl FROM (SELECT a_line, a_instance, "
        f"{LINE_HOURS_COLUMN} AS a_q, {length} AS a_ll, greatest(h, cp_start) AS s_start, "
        "least(h + INTERVAL 1 HOUR, cp_end) AS s_end FROM (SELECT *, unnest(generate_series(date_trunc('hour', "
        "cp_start), cp_end - INTERVAL 1 MICROSECOND, INTERVAL 1 HOUR)) AS h FROM a_lines "
        f"WHERE {LINE_HOURS_COLUMN} < {length}) AS hours) AS l JOIN {members} m USING (a_instance)), "
        # the jobs' times on a short line's slots: placed on its instance, or its cluster's pool jobs
        # (read from `a_place` and `a_jobs`: `a_place_h` and `a_pool_h`, read once, are not kept whole)
        f"a_held_iv AS ({_held_intervals('a_place', 't_start', 't_end', 'q.a_instance = c.a_instance')} UNION ALL "
        f"{_held_intervals('a_jobs', 'j_start', 'j_end', f'{pool_job(clusters)} AND lower(trim(q.cluster)) = lower(trim(c.a_cl))')}), "
        # their union's length per slot: each interval counts beyond the latest end before it
        "a_held AS (SELECT a_line, s_start, sum(greatest(epoch_us(e) - epoch_us(greatest(b, coalesce(before, b))), 0)) "
        "AS held FROM (SELECT *, max(e) OVER (PARTITION BY a_line, s_start ORDER BY b, e ROWS BETWEEN UNBOUNDED "
        "PRECEDING AND 1 PRECEDING) AS before FROM a_held_iv) AS iv GROUP BY ALL), "
        "a_held_line AS (SELECT a_line, sum(held) AS hh FROM a_held GROUP BY a_line), "
        f"a_up AS (SELECT a_line, s_start, CAST({up} AS BIGINT) AS up FROM (SELECT *, sum(a_sw - held) OVER (PARTITION BY "
        "a_line ORDER BY s_start ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS free_to FROM (SELECT c.a_line, "
        "c.s_start, c.a_sw, c.a_ll, c.a_q, coalesce(h.held, 0) AS held, coalesce(l.hh, 0) AS hh "
        "FROM a_short c LEFT JOIN a_held h USING (a_line, s_start) LEFT JOIN a_held_line l USING (a_line)) AS s) AS f), "
        "a_up_line AS (SELECT a_line, sum(up) AS total FROM a_up GROUP BY a_line), "
        "a_cut AS (SELECT c.*, coalesce(u.up, c.a_sw) AS a_w, coalesce(t.total, c.a_ll) AS a_len "
        "FROM a_cut0 c LEFT JOIN a_up u USING (a_line, s_start) LEFT JOIN a_up_line t USING (a_line) "
        "WHERE NOT c.a_alone AND coalesce(u.up, 1) > 0), "
    )
