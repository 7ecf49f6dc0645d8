"""The weights of each instance slot in the allocation (service/attribution/allocation.py):
the jobs placed on it, the pool jobs sharing its cluster's free capacity, its idle weight and
its total, as SQL over the allocation's `a_slots`, `a_place_h`, `a_pool_h` and `a_pod_w`."""

from __future__ import annotations

GPU_SHARES = 5040  # weights count 1/5040 of a GPU: 1/7 (MIG), 1/4 (A30 MIG), 1/2 .. 1/10 exact


def _overlap(start: str, end: str) -> str:
    return f"(epoch_us(least(s_end, {end})) - epoch_us(greatest(s_start, {start})))"


def weight_ctes() -> str:
    """`a_slots` (each member line cut at the clock hours, its amount spread exactly) and
    `a_weights` (per instance slot: each job's weight, the idle weight and the total)."""
    return (
        # each GPU slot once, with its first line (where an over-booked slot is counted)
        # (`a_slot` is the key; the instance, times, GPUs and cluster are the same on each of its lines)
        "a_islots AS (SELECT a_slot, any_value(a_instance) AS a_instance, any_value(s_start) AS s_start, "
        "any_value(s_end) AS s_end, any_value(a_gpus) AS a_gpus, any_value(a_cl) AS a_cl, "
        # its capacity: the GPUs of the instances its lines bill over its up time (allocation_hours.py)
        "CAST(round(any_value(a_gpus) * max(a_mult) * $a_shares) AS HUGEINT) * "
        "max(coalesce(u.up, epoch_us(s_end) - epoch_us(s_start))) AS cap, "
        "min(a_line) AS first_line FROM a_slots sl LEFT JOIN a_up u USING (a_line, s_start) WHERE a_gpus IS NOT NULL "
        "AND NOT EXISTS (SELECT 1 FROM a_pod_w pw WHERE pw.a_slot = sl.a_slot) GROUP BY a_slot), "
        # one row per job and slot: `a_place_h` has one per job, instance, time on it and hour (two
        # times of a job on an instance may share an hour: another instance took it between)
        "a_placed AS (SELECT s.a_slot, 'job' AS kind, p.record_id AS ref, "
        f"sum(p.gw * {_overlap('p.j_start', 'p.j_end')}) AS w FROM a_islots s JOIN a_place_h p "
        "ON p.a_instance = s.a_instance AND p.h = date_trunc('hour', s.s_start) "
        "WHERE p.j_start < s.s_end AND p.j_end > s.s_start GROUP BY s.a_slot, p.record_id), "
        "a_free AS (SELECT s.*, greatest(s.cap - coalesce(p.w, 0), 0) AS free, coalesce(p.w, 0) AS placed, "
        "coalesce(p.n, 0) AS placed_n FROM a_islots s LEFT JOIN (SELECT a_slot, sum(w) AS w, "
        "count(*) AS n FROM a_placed GROUP BY ALL) AS p USING (a_slot)), "
        "a_pool_free AS (SELECT lower(trim(a_cl)) AS pool, date_trunc('hour', s_start) AS h, sum(free) AS free "
        "FROM a_free WHERE a_cl IS NOT NULL GROUP BY ALL), "
        "a_pool_need AS (SELECT pool, h, record_id, sum(CAST(round(g * $a_shares) AS HUGEINT) * "
        "(epoch_us(least(h + INTERVAL 1 HOUR, j_end)) - epoch_us(greatest(h, j_start)))) AS need "
        "FROM a_pool_h GROUP BY ALL), "
        "a_pool_w AS (SELECT f.a_slot, 'job' AS kind, n.record_id AS ref, "
        "n.need * f.free // greatest(pf.free, t.need) AS w FROM a_free f "
        "JOIN a_pool_free pf ON pf.pool = lower(trim(f.a_cl)) AND pf.h = date_trunc('hour', f.s_start) "
        "JOIN a_pool_need n ON n.pool = pf.pool AND n.h = pf.h "
        "JOIN (SELECT pool, h, sum(need) AS need FROM a_pool_need GROUP BY ALL) AS t ON t.pool = n.pool AND t.h = n.h "
        "WHERE f.free > 0), "
        "a_jobs_w AS (SELECT * FROM a_placed UNION ALL SELECT * FROM a_pool_w WHERE w > 0), "
        # what the jobs hold (`a_jobs_w`): the placed jobs' sum, and the pool jobs' where they have any
        "a_gpu_total AS (SELECT f.a_slot, f.cap, f.a_cl, f.first_line, "
        "f.placed + coalesce(q.w, 0) AS held, f.placed_n + coalesce(q.n, 0) AS jobs FROM a_free f LEFT JOIN ("
        "SELECT a_slot, sum(w) AS w, count(*) AS n FROM a_pool_w WHERE w > 0 GROUP BY ALL) AS q USING (a_slot)), "
        "a_weights AS MATERIALIZED (SELECT a_slot, kind, ref, w FROM a_jobs_w UNION ALL "
        "SELECT a_slot, 'idle', a_cl, cap - held FROM a_gpu_total WHERE cap > held "
        "UNION ALL SELECT a_slot, kind, ref, w FROM a_pod_w), "
        # an over-booked slot is counted once: on its first line's part of its first weight
        "a_over_first AS (SELECT a_slot, kind AS first_kind, ref AS first_ref FROM ("
        "SELECT w.*, row_number() OVER (PARTITION BY a_slot ORDER BY w DESC, ref, kind) AS n "
        "FROM a_weights w JOIN a_gpu_total g USING (a_slot) WHERE g.held > g.cap) AS o "
        "WHERE n = 1), "
        # per slot: its total, its count of weights (the jobs' and the idle one: those of `a_weights`)
        "a_totals AS (SELECT t.*, o.first_kind, o.first_ref FROM ("
        "SELECT a_slot, greatest(cap, held) AS total, held > cap AS overbooked, false AS a_eks, "
        "first_line, jobs + CASE WHEN cap > held THEN 1 ELSE 0 END AS weights FROM a_gpu_total UNION ALL "
        "SELECT a_slot, sum(w), false, true, NULL, count(*) FROM a_pod_w GROUP BY ALL) AS t "
        "LEFT JOIN a_over_first o USING (a_slot)), "
    )
