"""Pydantic's validation errors in plain words: the one place they are translated.

Every model that reads what a person wrote (the config, rule settings, estimate plans, CLI
values checked by a config model) reports its errors through `plain_errors`: one sentence
per problem with its dotted path (`sources[0].name: must be lowercase letters, digits and
hyphens, e.g. cur-main, not 'Cur!'`), never pydantic's own wording ("Input should be a
valid tuple", "String should match pattern ..."). A pattern a field declares needs words
in PATTERNS; a test walks every model so none is left without.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from service.core.suggest import suggestion

PATTERNS = {
    r"^[a-z0-9-]+$": "lowercase letters, digits and hyphens, e.g. cur-main",
    r"^[a-z0-9][a-z0-9-]*$": "lowercase letters, digits and hyphens, e.g. pretrain-monthly",
    r"^[A-Z]{3}$": "a three-letter currency code in capitals, e.g. USD",
    r"^([01]\d|2[0-3]):[0-5]\d$": "a time of day as HH:MM from 00:00 to 23:59 (UTC), e.g. 06:00",
    r"^https?://\S+$": "a URL starting with http:// or https://, without spaces",
    r"^[a-zA-Z_][a-zA-Z0-9_]*$": "a label name: letters, digits and _, not starting with a digit",
    r"^[a-z][a-z0-9_]{0,39}$": "a dimension name: lowercase letters, digits and _, starting with a letter, "
                               "at most 40 characters",
    r"\S": "not blank",
    r"^[^/*?]+$": "one folder name, without /, * or ?",
    r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$": "a kind in kebab-case, e.g. aws-cur2",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable's name: letters, digits and _, not starting with a digit",
    r"^v\d+\.\d+\.\d+$": "an API version such as v0.0.40",
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a Kubernetes namespace: lowercase letters, digits and inner hyphens",
    r"^[a-z]{2}(-[a-z]+)+-\d+$": "an AWS region such as us-east-1",
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$": "a plan name: letters, digits, '.', '_' or '-', at most 64 characters",
}
SECRET_SETTINGS = frozenset({"api_token"})  # an error about one says what kind of value it got, never the value
# A URL value's `user:password@` (to its last `@`: a password may hold a raw `/`), taken out before the value is
# shown or cut short: errors' own redaction ends a URL at a space or a quote, and a cut could
# leave a password without the `@` that marks it.
URL_USERINFO = re.compile(r"(?i)^([a-z][a-z0-9+.-]*://).*@")


def dotted_path(loc: tuple[Any, ...]) -> str:
    """('sources', 2, 'location') → 'sources[2].location'."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def plain_errors(exc: ValidationError, data: Any = None, *, prefix: tuple[Any, ...] = (),
                 unknown_key: str = "unknown key; check its spelling against the documented settings",
                 model: Any = None) -> list[tuple[str, str]]:
    """(dotted path, plain sentence) per error. `data` is what was validated (it tells a
    discriminated union's tag from a key); `prefix` goes before every path. With `model` (what
    validated `data`), an unknown key is told with the closest keys taken there."""
    problems = []
    for error in exc.errors():
        if _short_of_failed_items(error):
            continue
        loc = _path(tuple(error["loc"]), data)
        if loc and loc[-1] in SECRET_SETTINGS:
            error = {**error, "input": Secret(error.get("input"))}
        cause = (error.get("ctx") or {}).get("error")
        loc += tuple(getattr(cause, "subpath", ()))  # a NestedValueError names a child of its section
        if error["type"] != "extra_forbidden":
            message = plain_message(error)
        elif loc and (keys := keys_at(model, loc[:-1])):
            message = f"unknown key; {suggestion(str(loc[-1]), keys, 'keys')}"
        else:
            message = unknown_key
        problems.append((dotted_path(prefix + loc), message))
    return problems


def _short_of_failed_items(error: Mapping[str, Any]) -> bool:
    """A list pydantic calls too short only because items of it failed (it counts the items that
    passed: `states: [FAILD]` "needs at least 1 item" beside the item's own error, said apart)."""
    value, least = error.get("input"), (error.get("ctx") or {}).get("min_length")
    return (error["type"] == "too_short" and isinstance(least, int) and isinstance(value, (list, tuple))
            and len(value) >= least)


def keys_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys the pydantic model `model` takes at `loc` (through nested models, a tuple's or
    list's index, a dict's key, an optional or union's models); [] when `loc` leads to none."""
    current = model
    for part in loc:
        current = next((inner for option in _options(current) if (inner := _step(option, part)) is not None), None)
        if current is None:
            return []
    return next((list(option.model_fields) for option in _options(current) if _is_model(option)), [])


def _options(annotation: Any) -> list[Any]:
    """An annotation's alternatives: a Union's (or Optional's) members, Annotated's type, or itself."""
    if get_origin(annotation) is Annotated:
        return _options(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return [option for arg in get_args(annotation) for option in _options(arg)]
    return [annotation]


def _step(annotation: Any, part: Any) -> Any:
    if _is_model(annotation):
        field = annotation.model_fields.get(part) if isinstance(part, str) else None
        return None if field is None else field.annotation
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (tuple, list) and isinstance(part, int) and args:
        return args[0]
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return args[1]
    return None


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def plain_message(error: Mapping[str, Any]) -> str:
    """One error of `ValidationError.errors()` as a sentence without its path."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind in ("value_error", "assertion_error"):
        return re.sub(r"^(Value error|Assertion failed), ", "", error["msg"])
    if kind in MESSAGES:
        return MESSAGES[kind](ctx, value)
    return _reworded(error["msg"])


class Secret:
    """A secret setting's value in an error: shown as its kind only (`a number`)."""

    def __init__(self, value: Any):
        number = isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)
        self.kind = ("a text (not shown)" if isinstance(value, str) else "a number (not shown)" if number
                     else _got(value))


def _got(value: Any) -> str:
    """What was given, in words: `'abc'`, `the number 1.5`, `a list`, `a mapping`, `nothing`."""
    if isinstance(value, Secret):
        return value.kind
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float, Decimal)):
        return f"the number {_number(value)}"
    if isinstance(value, str):
        value = URL_USERINFO.sub(r"\1<redacted>@", value)
        shown = value if len(value) <= 60 else value[:57] + "..."
        return repr(shown) if value.strip() else "a blank text"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "a list"
    return f"a {type(value).__name__}"


def _number(value: Any) -> Any:
    """100.0 → 100: a bound or a value as a person would write it."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _choices(expected: str) -> str:
    """pydantic's "'a', 'b' or 'c'" → "a, b or c"."""
    return re.sub(r"'([^']*)'", r"\1", expected)


def _list(ctx: dict, value: Any) -> str:
    if isinstance(value, str):
        return f"must be a list, not the single value {_got(value)} (a list of one is written [{value}])"
    return f"must be a list, e.g. [a, b], not {_got(value)}"


def _pattern(ctx: dict, value: Any) -> str:
    words = PATTERNS.get(str(ctx.get("pattern")))
    if words is None:  # an installed package's setting: its own documentation says the form
        return f"{_got(value)} is not in the form this setting takes (see its documentation)"
    return f"must be {words}, not {_got(value)}"


def _too_short_text(ctx: dict, value: Any) -> str:  # never echoes the value: it may be a token
    size = ctx.get("min_length", 1)
    return "must not be empty" if size == 1 else f"must be at least {size} characters long"


def _one_of(ctx: dict, value: Any) -> str:
    return f"must be one of {_choices(str(ctx.get('expected')))}, not {_got(value)}"


def _must_be(what: str):
    """The message of a value of the wrong kind: "must be <what>, not <the value>"."""
    return lambda ctx, value: f"must be {what}, not {_got(value)}"


INSTANCES = {"Decimal": "a decimal number"}
MESSAGES = {
    "missing": lambda ctx, value: "is required but missing",
    "string_type": _must_be("text"),
    "string_pattern_mismatch": _pattern,
    "string_too_short": _too_short_text,
    "string_too_long": lambda ctx, value: f"must be at most {ctx.get('max_length')} characters long",
    "literal_error": _one_of,
    "enum": _one_of,
    "int_type": _must_be("a whole number"),
    "int_parsing": _must_be("a whole number"),
    "int_from_float": _must_be("a whole number"),
    "int_parsing_size": lambda ctx, value: "is too large a number",
    "float_type": _must_be("a number"),
    "float_parsing": _must_be("a number"),
    "decimal_type": _must_be("a number"),
    "is_instance_of": lambda ctx, value: f"must be {INSTANCES.get(ctx.get('class'), 'a ' + str(ctx.get('class')))}, "
                                         f"not {_got(value)}",  # a strict model's Decimal
    "decimal_parsing": _must_be("a number"),
    "decimal_max_digits": lambda ctx, value: f"must have at most {ctx.get('max_digits')} digits",
    "decimal_max_places": lambda ctx, value: f"must have at most {ctx.get('decimal_places')} decimals",
    "decimal_whole_digits": lambda ctx, value: f"must have at most {ctx.get('whole_digits')} digits before the point",
    "finite_number": lambda ctx, value: "must be a finite number",
    "bool_type": _must_be("true or false"),
    "bool_parsing": _must_be("true or false"),
    "greater_than": lambda ctx, value: f"must be greater than {_number(ctx.get('gt'))}, not {_number(value)}",
    "greater_than_equal": lambda ctx, value: f"must be at least {_number(ctx.get('ge'))}, not {_number(value)}",
    "less_than": lambda ctx, value: f"must be less than {_number(ctx.get('lt'))}, not {_number(value)}",
    "less_than_equal": lambda ctx, value: f"must be at most {_number(ctx.get('le'))}, not {_number(value)}",
    "multiple_of": lambda ctx, value: f"must be a multiple of {ctx.get('multiple_of')}",
    "list_type": _list,
    "tuple_type": _list,
    "set_type": _list,
    "frozen_set_type": _list,
    "iterable_type": _list,
    "too_short": lambda ctx, value: f"needs at least {ctx.get('min_length')} item(s)",
    "too_long": lambda ctx, value: f"takes at most {ctx.get('max_length')} item(s)",
    "dict_type": _must_be("a mapping of key: value"),
    "mapping_type": _must_be("a mapping of key: value"),
    "model_type": _must_be("a mapping of settings"),
    "model_attributes_type": _must_be("a mapping of settings"),
    "dataclass_type": _must_be("a mapping of settings"),
    "union_tag_invalid": lambda ctx, value: (f"{_choices(str(ctx.get('discriminator')))} {ctx.get('tag')!r} is not "
                                             f"known; use one of {_choices(str(ctx.get('expected_tags')))}"),
    "union_tag_not_found": lambda ctx, value: f"needs a {_choices(str(ctx.get('discriminator')))} to say what it is",
    "date_type": _must_be("a date as YYYY-MM-DD"),
    "date_parsing": _must_be("a date as YYYY-MM-DD"),
    "date_from_datetime_parsing": _must_be("a date as YYYY-MM-DD"),
    "date_from_datetime_inexact": _must_be("a date without a time of day"),
    "datetime_type": _must_be("a date and time, e.g. 2026-11-01T06:00:00Z"),
    "datetime_parsing": _must_be("a date and time, e.g. 2026-11-01T06:00:00Z"),
    "datetime_from_date_parsing": _must_be("a date and time, e.g. 2026-11-01T06:00:00Z"),
    "path_type": _must_be("a path"),
    "invalid_key": lambda ctx, value: "has a key that is not text (quote it, e.g. 'on':)",
    "none_required": lambda ctx, value: "must be left out",
    "frozen_instance": lambda ctx, value: "cannot be changed",
    "frozen_field": lambda ctx, value: "cannot be changed",
}


def _reworded(message: str) -> str:
    """The last resort for an error type this module does not know: pydantic's sentence
    with its "Input should be" turned into "must be"."""
    message = re.sub(r"^(Input|String|Value|List|Tuple|Dictionary|Decimal)( input)? should( have)?\b", "must",
                     message)
    return message[:1].lower() + message[1:]


def _path(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """The location without pydantic's own steps: validator functions (`function-after[...]`)
    and the tag of a discriminated union (`inventory[0].aws-tags.regions` is
    `inventory[0].regions`), found by walking what was validated."""
    kept: list[Any] = []
    current = data
    for part in loc:
        if isinstance(part, str) and (part.startswith("function-") or part.startswith("tagged-union[")
                                      or part == "[key]"):  # a mapping's key: the step before names it
            continue
        if isinstance(current, Mapping) and isinstance(part, str) and part not in current \
                and current.get("kind") == part:
            continue  # the union's tag: the entry's `kind`, not a key of it
        kept.append(part)
        if isinstance(current, Mapping):
            current = current.get(part)
        elif isinstance(current, (list, tuple)) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
        else:
            current = None
    return tuple(kept)
