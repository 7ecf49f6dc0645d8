"""Parameter types that say what they want in words, where click's own would print
`0 is not in the range x>=1` or `does not match the format '%Y-%m-%d'`."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, time
from typing import Any

import click

from service.core.errors import UsageError
from service.core.locks import set_command
from service.core.timewindow import day_text, iso_day


class WholeNumber(click.IntRange):
    """A whole number between `min` and `max` (either may be None)."""

    name = "whole number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        number = click.INT.convert(value, param, ctx)
        if (self.min is not None and number < self.min) or (self.max is not None and number > self.max):
            self.fail(f"must be {self._describe_range()}, not {number}", param, ctx)
        return number

    def _describe_range(self) -> str:
        if self.max is None:
            return f"at least {self.min}"
        if self.min is None:
            return f"at most {self.max}"
        return f"from {self.min} to {self.max}"


class Day(click.ParamType):
    """A calendar day written YYYY-MM-DD, as a datetime at midnight, from `first` to `last`."""

    name = "YYYY-MM-DD"

    def __init__(self, first: datetime = datetime.min, last: datetime = datetime.max) -> None:
        self.first, self.last = first, last

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            day = datetime.combine(iso_day(str(value)), time())  # strptime took 2026-1-5 too
        except ValueError:
            self.fail(f"{value!r} is not a day; use YYYY-MM-DD, e.g. 2026-11-01", param, ctx)
        if not self.first <= day <= self.last:
            self.fail(f"must be from {day_text(self.first)} to {day_text(self.last)}, not {value}", param, ctx)
        return day


def given_once(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    """The value of an option declared `multiple` only to notice it repeated: `--where` repeats,
    so `--by team --by project` looks as if it adds a dimension, where click kept the last alone."""
    if len(values) > 1:
        name = param.opts[0]
        raise UsageError(f"given {len(values)} times ({', '.join(values)})", where=name,
                         hint=f"name the dimensions once, comma-separated: {name} {','.join(values)}")
    return values[0] if values else None


TIME_OPTIONS = frozenset({"--date", "--as-of", "--since", "--until", "--start"})


class SingleValueCommand(click.Command):
    """A command whose single-value options given twice (`--since 7d --since 30d`) are exit 2
    naming the option, where click kept the last silently (click has no setting for it)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:  # shell completion parses half-typed lines
            values, _, order = self.make_parser(ctx).parse_args(args=list(args))
            helped = self.get_help_option(ctx)
            if helped is not None and values.get(helped.name):
                return super().parse_args(ctx, args)  # eager: the help, whatever else the line holds
            for param, times in Counter(order).items():
                if isinstance(param, click.Option) and times > 1 and not (param.multiple or param.count or param.is_flag):
                    name = max(param.opts, key=len)
                    raise UsageError(f"given {times} times", where=name, hint=f"give {name} once")
                # `--date "$DAY"` with DAY unset: an empty day read as none gave the default's report
                if (name := next((opt for opt in param.opts if opt in TIME_OPTIONS), None)) \
                        and isinstance(value := values.get(param.name), str) and not value.strip():
                    raise UsageError("is empty, naming no day or time", where=name,
                                     hint=f"leave {name} out for its default")
        return super().parse_args(ctx, args)


class SingleValueGroup(SingleValueCommand, click.Group):
    """A group of SingleValueCommands (its own options checked the same way)."""

    command_class = SingleValueCommand
    group_class = type

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        if name:  # written in the locks it takes, so a refused writer names this one: the names, no argument
            groups = [c.info_name for c in _chain(ctx)[1:]]  # the root's is the program's (`cli` in tests)
            set_command(" ".join(["spendlake", *groups, name]))
        return name, command, rest


def _chain(ctx: click.Context) -> list[click.Context]:
    """`ctx` and its parents, the root first."""
    return [*_chain(ctx.parent), ctx] if ctx.parent else [ctx]
