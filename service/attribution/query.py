"""One attribution question, read once for every front end.

`spendlake attribute` and `/api/v1/attribute` both build an `AttributionQuery` with
`AttributionQuery.parse` from what the user typed; only the way a parameter is named in an
error differs (`--since` on the command line, `since` in a URL), so a mistake reads the same
in both and is checked in one place. `attribute()` validates the same way for Python callers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Protocol, TypeVar

from service.attribution.sql import MEASURES
from service.attribution.window_sql import GRANULARITIES
from service.core.config import Config, attribution_of
from service.core.config_attribution import AttributionConfig
from service.core.config_clusters import IDLE, JOB_DIMENSIONS
from service.core.errors import UsageError
from service.core.folding import folded
from service.core.output import quoted
from service.core.timewindow import Window, data_anchored, parse_window, utc_now

Naming = Callable[[str], str]


def cli_option(name: str) -> str:
    """`since` as the command line spells it."""
    return f"--{name}"


def api_parameter(name: str) -> str:
    """`since` as a URL spells it."""
    return name


def typed(naming: Naming, name: str, value: str) -> str:
    """`--cost effective` as the command line spells an option with its value, `cost=effective` as a URL."""
    option = naming(name)
    return f"{option}{' ' if option.startswith('-') else '='}{value}"


@dataclass(frozen=True)
class AttributionQuery:
    window: Window
    by: tuple[str, ...] = ("team",)
    where: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    cost: str = "billed"
    granularity: str = "total"
    top: int | None = None
    compare: bool = False
    explain: bool = False
    # without `until`: the window at another data end (`window_at`); None when `until` fixed it
    anchored: Callable[..., Window] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, config: AttributionConfig | Config, *, since: str | None, until: str | None = None,
              by: str | None = None, where: Sequence[str] = (), cost: str | None = None,
              granularity: str | None = None, top: str | int | None = None, compare: bool = False,
              explain: bool = False, now: datetime | None = None, end: datetime | None = None,
              naming: Naming = cli_option) -> AttributionQuery:
        """The query the user typed; a UsageError names the parameter as `naming` spells it.
        Without `until` the window ends at `end`, the data's end (service.core.coverage.data_end)."""
        config = attribution_of(config)
        if not since:
            raise UsageError("the window needs a start", where=naming("since"),
                             hint=f"e.g. {naming('since')} 7d, 24h, 30d, mtd or 2026-11-01")
        now = now or utc_now()
        query = cls(parse_window(since, until, now=now, end=end, naming=naming),
                    by=listed_once((by or "team").split(","), naming("by")),
                    where=parse_where(config, where, naming), cost=cost or "billed",
                    granularity=granularity or "total", top=top_rows(top, naming("top")),
                    compare=compare, explain=explain, anchored=data_anchored(since, until, now=now, naming=naming))
        return query.validated(config, naming)

    def validated(self, config: AttributionConfig, naming: Naming = cli_option) -> AttributionQuery:
        """This query, if every part of it is one `config` can answer."""
        check_dimensions(config, self.by, naming("by"))
        check_dimensions(config, list(self.where), naming("where"))
        if not self.by:
            raise UsageError("no dimension to group by", where=naming("by"),
                             hint=f"valid dimensions: {', '.join(config.dimensions)}")
        if self.cost not in MEASURES:
            raise UsageError(f"unknown cost {self.cost!r}", where=naming("cost"), hint=f"use one of {', '.join(MEASURES)}")
        if self.granularity not in GRANULARITIES:
            raise UsageError(f"unknown granularity {self.granularity!r}", where=naming("granularity"),
                             hint=f"use one of {', '.join(GRANULARITIES)}")
        if self.compare and self.granularity != "total":
            raise UsageError(f"{naming('compare')} needs {naming('granularity')} total", where=naming("compare"),
                             hint="compare totals, or look at the periods without comparing")
        if self.top is not None and self.top < 1:
            raise UsageError(f"{naming('top')} must be at least 1", where=naming("top"))
        return self


class DataAnchored(Protocol):
    window: Window
    anchored: Callable[..., Window] | None


Q = TypeVar("Q", bound=DataAnchored)


def window_at(query: Q, data_through: Mapping[str, datetime | None] | None) -> Q:
    """`query` with its window ending at the data's end of the lake state a read sees (its
    sources' `data_through`): the end given at parse time was read before the read's
    snapshot, and an ingest committing in between would cut the new hours off the new data."""
    if query.anchored is None or data_through is None:
        return query
    end = max((moment for moment in data_through.values() if moment is not None), default=None)
    return query if end == query.window.until else replace(query, window=query.anchored(end=end))


def listed_once(names: Sequence[str], where: str) -> tuple[str, ...]:
    """The non-blank names, each once; one named twice is a UsageError (a list of dimensions
    repeating one is a mistake, and each repeat would cost a grouping)."""
    found = tuple(name.strip() for name in names if name.strip())
    for name in found:
        if found.count(name) > 1:
            raise UsageError(f"{quoted(name)} is named {found.count(name)} times", where=where,
                             hint="name each dimension once")
    return found


def check_dimensions(config: AttributionConfig, names: Sequence[str], where: str) -> None:
    for name in names:
        if name in config.dimensions:
            continue
        if name in JOB_DIMENSIONS and config.clusters is None:  # README's `--by project,job_type` without them
            raise UsageError(f"{name!r} is a dimension of shared GPU clusters: add `clusters:` under `attribution:` "
                             "(README: Shared GPU clusters)", where=where,
                             hint=f"valid dimensions now: {', '.join(config.dimensions)}")
        raise UsageError(f"unknown dimension {quoted(name)}", where=where,
                         hint=f"valid dimensions: {', '.join(config.dimensions)}")


def parse_where(config: AttributionConfig | Config, items: Sequence[str],
                naming: Naming = cli_option) -> dict[str, tuple[str, ...]]:
    """`team=nlp` (repeatable) → {dimension: values}; several values of one dimension are
    alternatives, several dimensions must all hold."""
    config = attribution_of(config)
    where: dict[str, tuple[str, ...]] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not value.strip():
            raise UsageError(f"cannot read {quoted(item)}", where=naming("where"), hint="use DIMENSION=VALUE, e.g. team=nlp")
        if name.rstrip()[-1:] in ("!", "<", ">", "~"):  # `team!=nlp`: not an unknown dimension `team!`
            raise UsageError(f"cannot read {quoted(item)}: a filter keeps the rows equal to a value", where=naming("where"),
                             hint="use DIMENSION=VALUE, repeated for several values of one dimension, e.g. team=nlp")
        check_dimensions(config, [name.strip()], naming("where"))
        where[name.strip()] = where.get(name.strip(), ()) + (value,)
    return where


def reserved_runs(config: AttributionConfig, where: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """A note per `run` filter value that shared clusters' run dimension reserves: `idle` (the
    idle parts) and the dimension's default hold that cost beside the jobs of a run of that id,
    which `runs --run` counts alone (service/attribution/run_story.py says it from that side)."""
    if config.clusters is None:
        return ()
    notes = []
    for value in (value.strip() for value in where.get("run", ())):
        if folded(value) == IDLE:
            notes.append(f"run={value} holds the shared clusters' idle (the GPU-hours no job held) beside the jobs "
                         f"of any run with that id: the idle alone is job_state=idle, a run's own jobs "
                         f"`spendlake runs --run {value}`")
        elif folded(value) == folded(config.dimensions["run"].default):
            notes.append(f"run={value} holds the run dimension's default (the cost no run claims) beside the jobs "
                         f"of any run with that id: a run's own jobs are `spendlake runs --run {value}`")
    return tuple(notes)


def top_rows(value: str | int | None, where: str) -> int | None:
    """The rows `top` keeps: a whole number of at least 1 (`-1` is a whole number too)."""
    if value is None or isinstance(value, int):
        number = value
    elif (text := value.strip()).isascii() and text.isdigit():  # '²'.isdigit() is True, int('²') is not
        number = int(text)
    else:
        raise UsageError(f"{where} must be a whole number of at least 1, not {value!r}", where=where)
    if number is not None and number < 1:
        raise UsageError(f"{where} must be at least 1", where=where)
    return number
