"""A run's `gpus` is the most GPUs its jobs held at once (service/attribution/run_inputs.py
`peak_gpus`), not the most one job held (break48 #3). Figures by hand, the window 2026-11-02:

- het: components 200+0 (8 GPUs) and 200+1 (4), both 10:00-11:00: 12;
- array: 64 one-GPU tasks 300_0 .. 300_63, 10:00-10:30: 64;
- requeue: attempt 1 (8 GPUs, 10:00-10:30, FAILED), attempt 2 (8, 10:30-11:00): 8, one after the other;
- staggered: a (4, 10:00-10:40), b (4, 10:20-11:00), c (8, 10:50-11:10): 8 from 10:20, 12 from 10:50;
- running: a (2, running since 10:00) and b (3, 12:00-13:00): 5.

A run id that is not ASCII is summed in Python, record by record: the same figures.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from service.attribution import runs
from tests.test_clusters_allocation import gpu_line, job, setup
from tests.test_runs import query

D = Decimal
T = "2026-11-02T{}:00"


def jobs_of(suffix: str) -> list[dict]:
    def one(name, gpus, start, end, run, **fields):
        row = job(f"{name}{suffix}", gpus, T.format(start), end and T.format(end), run_id=run + suffix, **fields)
        return row | {"record_id": f"{row['record_id']}@{start}"}  # a requeue's attempts: one job id, two records

    return [one("200+0", 8, "10:00", "11:00", "het"), one("200+1", 4, "10:00", "11:00", "het"),
            *(one(f"300_{task}", 1, "10:00", "10:30", "array") for task in range(64)),
            one("400", 8, "10:00", "10:30", "requeue", state="FAILED"), one("400", 8, "10:30", "11:00", "requeue"),
            one("a", 4, "10:00", "10:40", "staggered"), one("b", 4, "10:20", "11:00", "staggered"),
            one("c", 8, "10:50", "11:10", "staggered"),
            one("d", 2, "10:00", None, "running", state="RUNNING"), one("e", 3, "12:00", "13:00", "running")]


@pytest.mark.parametrize("suffix", ["", "\u00e9"])  # SQL's sums, and Python's for a run id not ASCII
def test_a_runs_gpus_are_the_most_its_jobs_held_at_once(tmp_path, suffix):
    lake, cfg = setup(tmp_path, [gpu_line("i-a")], jobs_of(suffix))
    result = runs(lake, cfg, query())
    assert {row.run: (row.jobs, row.gpus, row.to_json()["gpus"]) for row in result.rows} == {
        f"het{suffix}": (2, D(12), "12"), f"array{suffix}": (64, D(64), "64"), f"requeue{suffix}": (2, D(8), "8"),
        f"staggered{suffix}": (3, D(12), "12"), f"running{suffix}": (2, D(5), "5")}


def test_peak_gpus_counts_a_job_without_length_at_its_start_and_fractions_exactly():
    from service.attribution.run_inputs import peak_gpus

    at = datetime(2026, 11, 2, 10)
    assert peak_gpus([(at, at, D(8))]) == D(8)  # an end before its start (clock skew) made its end its start
    assert peak_gpus([(at, None, D("0.42857142857142855")), (at, None, D("0.42857142857142855"))]) == D(
        "0.85714285714285710")
    assert peak_gpus([]) == D(0)
