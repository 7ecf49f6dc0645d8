"""What one query reads of the attribution rollups, so a period rolled up in memory for it
computes no more: its dimensions (with those their rules and the shared rules read) and its
cost measures (service/attribution/rollup.py `rollup_view`, service/attribution/sql.py)."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from service.core.config_attribution import AttributionConfig


@dataclass(frozen=True)
class Needs:
    """What a query reads of a rollup rolled up in memory for it: these dimensions (and what
    their rules need: `needed_dimensions`) and cost measures (`MEASURES` keys); None: all,
    as stored rollups hold them. The others are not computed (their columns are NULL)."""

    dims: tuple[str, ...] | None = None
    measures: tuple[str, ...] | None = None
    # whether it reads how each value was decided (`p_<dim>`: explain, cluster placements);
    # without, those columns are NULL and a period's lines group by their values alone
    hows: bool = True
    # the query's `--where` (dimension, values): a period rolled up in memory may keep only the
    # lines that can match it (service/attribution/rollup.py `narrowed_to`)
    where: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # whether the query allocates cluster lines itself on the session's connection, beside the
    # rollups (`runs`' placed parts, an export's lines): a reader's limit over stored rollups too
    allocates: bool = False


def needed_dimensions(config: AttributionConfig, dims: Iterable[str] | None) -> tuple[str, ...]:
    """`dims`, the shared rules' dimensions and every dimension their rules read, in
    `dimension_order()`: what a query over `dims` needs computed (None: every dimension)."""
    if dims is None:
        return config.dimension_order()
    wanted = {*dims, *(rule.by for rule in config.shared),
              *(key for rule in config.shared for key in rule.match if key in config.dimensions)}
    while True:
        more = {key for name in wanted for rule in config.dimensions[name].rules for key in rule.match
                if key in config.dimensions} - wanted
        if not more:
            return tuple(name for name in config.dimension_order() if name in wanted)
        wanted |= more


def loosely(value: str) -> str:
    """`value` as its letters compare however it is lowercased: DuckDB's lower() and Python's
    differ on a few (`İ` → `i` or `i̇`, a final `Σ` → `σ` or `ς`), and a query's filter lowercases
    in SQL, so what decides which lines a narrowed rollup may leave out compares this way."""
    decomposed = unicodedata.normalize("NFKD", value.strip())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()
