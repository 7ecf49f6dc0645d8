"""Every run's attempts with their cost, what the failed-reruns rule reads (rules/context.py `RunCosts`),
and the part of each instance-hour's cost jobs held, what the idle-gpu rule leaves out (`HeldHours`).

    run_costs_lookup(lake, config) -> run_costs(window, cost_column) | None (no shared clusters)
    held_hours_lookup(lake, config) -> held_hours(window, cost_column) | None

Each run with a part of the shared GPU clusters in the window, with the team, project and
experiment its jobs' parts share (`several` where they differ) and its attempts as `spendlake
runs --run` shows them (service/attribution/run_story.py: the newest snapshot of each job record,
its cost the parts allocation placed on it, to the cent). Nothing is read until a rule asks,
and nothing is kept once it has its answer.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal

from rules.context import HeldHours, Owner, RunCost, RunCosts
from service.attribution.clusters import JobCost, usage_dims, usage_in
from service.attribution.compute import RollupSession
from service.attribution.needs import Needs
from service.attribution.rollup_versions import HELD_TABLES, READ_TABLES
from service.attribution.run_inputs import SEVERAL, placed_parts
from service.attribution.run_figures import job_attempt
from service.attribution.run_story import run_jobs, run_records
from service.attribution.sql import MEASURES
from service.core.config import Config
from service.core.config_attribution import AttributionConfig
from service.core.folding import folded
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.snapshot import Snapshot, read_within
from service.core.timewindow import Window

OWNER = ("team", "project", "experiment")
MEASURE_OF = {column: measure for measure, column in MEASURES.items()}


def run_costs_lookup(lake: Lake, config: Config, snapshot: Snapshot | None = None) -> RunCosts | None:
    """`run_costs(window, cost_column)`, read in `snapshot` (a command's, taken with HELD_TABLES), else in its own."""
    attribution = config.attribution
    if attribution.clusters is None:
        return None

    # not kept: one rule reads it, and a month's attempts (200k jobs: ~560 MB at 10M lines) held
    # to the end of `rules run` were the floor under the attributions of the rules after it
    def run_costs(window: Window, cost_column: str) -> list[RunCost]:
        measure = MEASURE_OF[cost_column]
        return read_within(lake, snapshot, lambda held: _run_costs(lake, held, attribution, window, measure),
                           HELD_TABLES)

    return run_costs


def held_hours_lookup(lake: Lake, config: Config, snapshot: Snapshot | None = None) -> HeldHours | None:
    """`held_hours(window, cost_column)`, read in `snapshot` (a command's, taken with HELD_TABLES), else in its own."""
    attribution = config.attribution
    if attribution.clusters is None:
        return None

    def held_hours(window: Window, cost_column: str) -> dict[tuple[str, datetime], Decimal]:
        measure = MEASURE_OF[cost_column]

        # placed on the window's lines alone: no session, whose rollup of every period (in memory
        # where none is stored) this would not read
        # of the lines idle-gpu bills (USD usage): a Savings Plan's negation line on the instance
        # (a Credit, split alike) would net the jobs' part of a covered hour to nothing
        def on(held: Snapshot) -> dict[tuple[str, datetime], Decimal]:
            if not held.checks:  # no bill: nothing was allocated
                return {}
            # the periods' stored placed parts (placed.py), else a full allocation of the window's
            # lines, as the rules' daily-spend lookup does (lines.py): beyond a reader's limit
            # DuckDB spills; placed_parts drops its stage
            with lake.query(held, memory_limit=READER_MEMORY_LIMIT, tables=READ_TABLES) as con:
                return {(resource, hour): part for resource, hour, part in placed_parts(
                    lake, con, held, attribution, window, measure,
                    "SELECT resource, hour, sum(amount) FROM parts WHERE kind = 'job' AND "
                    "coalesce(category, 'Usage') = 'Usage' AND coalesce(currency, 'USD') = 'USD' "
                    "GROUP BY resource, hour")}

        return read_within(lake, snapshot, on, HELD_TABLES)

    return held_hours


def _run_costs(lake: Lake, snapshot: Snapshot, config: AttributionConfig, window: Window,
               measure: str) -> list[RunCost]:
    if not snapshot.checks:  # no bill: nothing was allocated
        return []
    parts: dict[str, list[JobCost]] = defaultdict(list)
    session = RollupSession(lake, config, snapshot, Needs(usage_dims(config), (measure,)))
    try:
        for part in usage_in(session, config, window, measure).jobs:
            parts[folded(part.values["run"])].append(part)
    finally:
        session.con.close()
    # the job records come into Python once the session's DuckDB (the window allocated, a period
    # rolled up in memory) is given back: beside it, failed-reruns peaked at 1,043 MB at 10M lines
    records = defaultdict(list)
    with lake.query(snapshot, memory_limit=READER_MEMORY_LIMIT, tables=READ_TABLES) as con:
        for record in run_records(lake, con, config, window, None):
            records[record.run].append(record)
    return [RunCost(own[0].values["run"], _owner(own), tuple(job_attempt(j) for j in run_jobs(records[run], own)))
            for run, own in sorted(parts.items())]


def _owner(parts: list[JobCost]) -> Owner:
    """The team, project and experiment the run's parts share, `several` where they differ."""
    return Owner(*(parts[0].values[d] if len({p.values[d] for p in parts}) == 1 else SEVERAL for d in OWNER))
