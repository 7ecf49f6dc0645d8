"""How every attribution question reads the rollups: on the engine that runs the SQL
(`read_sessions`: DuckDB on one consistent snapshot of the lake, or Spark), through a
RollupSession that rolls up only what the question needs (service/attribution/compute.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TypeVar

from service.attribution.compute import RollupSession
from service.attribution.needs import Needs
from service.attribution.rollup_versions import HELD_TABLES
from service.core.config import Config, EngineConfig
from service.core.config_attribution import AttributionConfig
from service.core.lake import Lake
from service.core.snapshot import Snapshot, read_within

T = TypeVar("T")


def engine_of(config: AttributionConfig | Config) -> EngineConfig | None:
    """The configured engine: what `engine:` says in a whole Config; DuckDB otherwise."""
    return config.engine if isinstance(config, Config) else None


def sql_dims(config: AttributionConfig, by: Sequence[str], where: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    needed = list(by) + [d for d in where if d not in by] + [r.by for r in config.shared]
    return tuple(dict.fromkeys(needed))


def read_sessions(lake: Lake, config: AttributionConfig, engine: EngineConfig | None,
                  answer: Callable[[RollupSession | None], T], needs: Needs = Needs(),
                  snapshot: Snapshot | None = None) -> T:
    """`answer(session)` with the rollups on the engine that runs the SQL: DuckDB (default),
    on one consistent snapshot of the lake, or Spark, same SQL; the session is None when the
    lake that engine reads holds no cost partition. `needs`: what `answer` reads (default
    all; see RollupSession). The job records and tags it reads are those of the costs' state
    (Snapshot.tables), however their sources are read again meanwhile; in `snapshot` (a command's,
    taken with HELD_TABLES) when it gives one (DuckDB: Spark reads the lake as it finds it)."""
    if engine is None or engine.kind == "duckdb":
        return held_sessions(lake, config, lambda _, session: answer(session), needs, snapshot)
    from service.attribution.spark.session import SparkRollupSession

    session = SparkRollupSession(lake, config, engine)
    return answer(session if session.partitions else None)


def held_sessions(lake: Lake, config: AttributionConfig, answer: Callable[[Snapshot, RollupSession | None], T],
                  needs: Needs = Needs(), snapshot: Snapshot | None = None) -> T:
    """`answer(snapshot, session)` on DuckDB, as read_sessions gives it the session, with the
    snapshot the session reads (`snapshot`, else one of its own: read_within): what `answer`
    reads beside the rollups (job records of a lake without a bill, a run's span) is of the same
    lake state."""
    return read_within(lake, snapshot, lambda held: answer_on(lake, config, held, partial(answer, held), needs),
                       HELD_TABLES)


def answer_on(lake: Lake, config: AttributionConfig, snapshot, answer: Callable[[RollupSession | None], T],
               needs: Needs = Needs()) -> T:
    if not snapshot.checks:
        return answer(None)
    session = RollupSession(lake, config, snapshot, needs)
    try:
        return answer(session)
    finally:
        session.con.close()
