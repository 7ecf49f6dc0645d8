"""The attribution rollups, rebuilt by the writers of the lake and never by its readers.

`refresh_rollups` runs at the end of every ingest and inventory run, inside their lock;
`rollup` is `spendlake rollup`: the same under its own hold of the lock, for after a config
change (until it runs, queries roll the periods up in memory: correct, only slower).
"""

from __future__ import annotations

import logging

import duckdb

from service.attribution import RollupBuild, materialise
from service.core.config import Config
from service.core.errors import SpendlakeError
from service.core.lake import Lake

log = logging.getLogger(__name__)


def refresh_rollups(lake: Lake, config: Config) -> None:
    """Store the rollups of `config` (the caller holds the ingest lock). Not fatal: a query
    rolls up in memory whatever is not stored."""
    try:
        materialise(lake, config)
    except (SpendlakeError, duckdb.Error, OSError) as exc:
        log.warning("attribution rollups not refreshed (queries roll up from the raw lines meanwhile; "
                    "`spendlake rollup` retries): %s", exc)


def rollup(config: Config) -> RollupBuild:
    """Store the current rollups for `config` and remove superseded ones, under the lake lock."""
    lake = Lake.of(config)
    with lake.lock("ingest"):
        lake.settle()
        return materialise(lake, config)
