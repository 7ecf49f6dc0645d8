"""Parameter types that say what they want in words, where click's own would print
`0 is not in the range x>=1` or `does not match the format '%Y-%m-%d'`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from service.core.errors import UsageError


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
            day = datetime.strptime(str(value).strip(), "%Y-%m-%d")
        except ValueError:
            self.fail(f"{value!r} is not a day; use YYYY-MM-DD, e.g. 2026-11-01", param, ctx)
        if not self.first <= day <= self.last:
            self.fail(f"must be from {self.first:%Y-%m-%d} to {self.last:%Y-%m-%d}, not {value}", param, ctx)
        return day


def given_once(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    """The value of an option declared `multiple` only to notice it repeated: `--where` repeats,
    so `--by team --by project` looks as if it adds a dimension, where click kept the last alone."""
    if len(values) > 1:
        name = param.opts[0]
        raise UsageError(f"given {len(values)} times ({', '.join(values)})", where=name,
                         hint=f"name the dimensions once, comma-separated: {name} {','.join(values)}")
    return values[0] if values else None
