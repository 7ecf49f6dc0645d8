"""Where one `spendlake ingest` spends its CPU: the run in this process, its phases wrapped.

    python bench/ingest_phases.py --config C [spendlake's own arguments after --]

Prints, per phase, wall seconds and CPU seconds of every thread (`getrusage`): the staging
(`stage_parts`: DuckDB's scan, canonical SELECT and Arrow export, and the writer thread), the
ledger entry (its sums and SHA-256), the rollups and metric tops, and the whole; and, inside
the staging, the writer thread's own CPU (`time.thread_time`) and how long the reading thread
waited for it. Use a fresh lake (C's) each run: an unchanged delivery is not staged again. A copy
check's staging (service.ingest.row_copies, on look-alike files only) is not among the phases.
The ingest_bench.py export of a layout, with its config, is the usual input.

    python bench/ingest_phases.py --floor FILE.csv

instead reads one CSV with DuckDB alone, no SQL of ours: its scan as text (`count(*)`), then the
scan with its Arrow export (`SELECT *` drained in batches of the stager's size): what staging pays
before its canonical SELECT and the Parquet writer.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import resource
import sys
import time
from collections import defaultdict

STARTED = time.perf_counter()

import service.cli.main as cli_main  # noqa: E402 (timed from STARTED: the imports are a phase)
import service.core.commit as commit  # noqa: E402
import service.core.staging as staging  # noqa: E402
import service.ingest.billing as billing  # noqa: E402

IMPORTED = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
PHASES = [(commit, "stage_parts"), (commit, "ledger_entry"), (billing, "refresh_rollups")]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


spent: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # phase → [wall, CPU]


def timed(module: object, name: str) -> None:
    """Replace module.name by a wrapper adding its wall and CPU seconds to `spent`."""
    original = getattr(module, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        wall, cpu = time.perf_counter(), cpu_seconds()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name][0] += time.perf_counter() - wall
            spent[name][1] += cpu_seconds() - cpu
    setattr(module, name, wrapper)


def timed_writer() -> None:
    """The staging writer thread's own CPU, and the reading thread's waits for it."""
    submit, wait = staging._OneBehind.submit, staging._OneBehind.wait

    def timed_submit(self, work, *args):
        def on_thread(*work_args):
            cpu = time.thread_time()
            try:
                return work(*work_args)
            finally:
                spent["  writer thread (CPU)"][1] += time.thread_time() - cpu
        return submit(self, on_thread, *args)

    def timed_wait(self):
        wall = time.perf_counter()
        try:
            return wait(self)
        finally:
            spent["  reader waiting for it"][0] += time.perf_counter() - wall
    staging._OneBehind.submit, staging._OneBehind.wait = timed_submit, timed_wait


def report() -> None:
    at, usage = IMPORTED
    print(f"{'imports':24} {at - STARTED:7.2f} s wall {usage.ru_utime + usage.ru_stime:7.2f} CPU s", file=sys.stderr)
    order = ["stage_parts", "  writer thread (CPU)", "  reader waiting for it", "ledger_entry", "refresh_rollups"]
    for name, (wall, cpu) in sorted(spent.items(), key=lambda item: order.index(item[0])):
        print(f"{name:24} {wall:7.2f} s wall {cpu:7.2f} CPU s", file=sys.stderr)
    print(f"{'whole':24} {time.perf_counter() - STARTED:7.2f} s wall {cpu_seconds():7.2f} CPU s", file=sys.stderr)


def floor(path: str) -> None:
    """DuckDB's own text scan of `path`, then the scan with its Arrow export, CPU s each."""
    import duckdb

    for what, drain in (("scan as text, count(*)", lambda rel: rel.aggregate("count(*)").fetchall()),
                        ("scan and Arrow export", lambda rel: sum(b.num_rows for b in rel.to_arrow_reader(
                            staging.BATCH_ROWS)))):
        con = duckdb.connect()
        con.execute("SET preserve_insertion_order = false")
        wall, cpu = time.perf_counter(), cpu_seconds()
        drain(con.read_csv(path, all_varchar=True))
        print(f"{what:24} {time.perf_counter() - wall:7.2f} s wall {cpu_seconds() - cpu:7.2f} CPU s", file=sys.stderr)
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config")
    parser.add_argument("--floor", metavar="CSV", help="DuckDB alone over one CSV: the scan, then with its Arrow export")
    parser.add_argument("rest", nargs="*", help="spendlake's ingest arguments (after --)")
    args = parser.parse_args()
    if args.floor:
        return floor(args.floor)
    if not args.config:
        parser.error("--config or --floor is needed")
    for module, name in PHASES:
        timed(module, name)
    timed_writer()
    atexit.register(report)
    sys.argv = ["spendlake", "--config", args.config, "ingest", *args.rest]
    cli_main.main()


if __name__ == "__main__":
    main()
