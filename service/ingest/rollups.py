"""The attribution rollups and metric tops, rebuilt by the writers of the lake and never by
its readers.

`refresh_rollups` runs at the end of every ingest and inventory run, inside their lock;
`rollup` is `spendlake rollup`: the same under its own hold of the lock, for after a config
change (until it runs, queries roll the periods up in memory: correct, only slower).
"""

from __future__ import annotations

import logging

import duckdb

from service.attribution import RollupBuild, build_tops, materialise
from service.core.config import Config
from service.core.errors import SpendlakeError, resource_error
from service.core.lake import Lake
from service.core.stopping import raise_if_stopped

log = logging.getLogger(__name__)


def refresh_rollups(lake: Lake, config: Config) -> list[str]:
    """Store the rollups of `config`, then the metric tops (the caller holds the ingest lock); the
    build's warnings for the CLI, its failure among them. Not fatal: a query rolls up in memory
    whatever is not stored, a scrape computes its tops."""
    log.info("building the attribution rollups and metric tops")  # bench/ingest_bench.py times the phase by it
    try:
        done = materialise(lake, config)
        build_tops(lake, config)
        return done.warnings
    except (SpendlakeError, duckdb.Error, OSError) as exc:
        raise_if_stopped()
        said = exc if isinstance(exc, SpendlakeError) else resource_error(exc) or exc  # a full disk said once
        return ["attribution rollups or metric tops not refreshed (queries and scrapes compute them from the lake "
                f"meanwhile; `spendlake rollup` retries): {said}"]


def refreshed(config: Config) -> list[str]:
    """`refresh_rollups` under the lake lock, its warnings: serve's ingest job, once after both its
    bills and its inventory (each refreshing them built a month's rollups twice when both changed)."""
    lake = Lake.of(config)
    with lake.lock("ingest"):
        return refresh_rollups(lake, config)


def rollup(config: Config) -> RollupBuild:
    """Store the current rollups and metric tops for `config` and remove superseded ones,
    under the lake lock; first, what a killed writer left staged goes (as ingest does)."""
    lake = Lake.of(config)
    with lake.lock("ingest"):
        lake.clean_staging()
        lake.settle()
        lake.restamp()  # a partition copied without its times is hashed once here, not at every read
        done = materialise(lake, config)
        build_tops(lake, config)
        return done
