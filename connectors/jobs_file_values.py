"""The values of a jobs-file's cells (connectors/jobs_file.py): each parser takes a cell as
the file holds it (text, or a Parquet value) and returns the `jobs` value, or raises BadValue
saying why; the reader adds file, row and column."""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

from connectors.hostlist import hosts
from connectors.jobs_file_read import shown
from service.core.errors import spreadsheet_hint, spreadsheet_time
from service.core.job_states import STATES, normal_state
from service.core.units import local_utc

NOT_YET = frozenset({"unknown", "none", "n/a", "0", "null", "nat"})  # a time not set, as schedulers write it
SKEW = timedelta(minutes=5)  # an end this much before the start is clock skew; more is a wrong value
UNIX_EPOCH = datetime(1970, 1, 1)
EARLIEST = datetime(2000, 1, 1)  # a numeric time from the Unix epoch before this is in another unit or origin
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


ID_CONTROLS = re.compile("[\x00-\x1f\x7f]")  # C0 controls and DEL: what no job id holds (parse_job_id)


class BadValue(ValueError):
    """A value that cannot be read; the reader adds file, row and column."""


def present(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip()) and not (
        isinstance(value, float) and math.isnan(value))


def parse_time(value: Any, zone: ZoneInfo, fold: int = 0) -> datetime | None:
    """ISO 8601 text or a Parquet timestamp/date → naive UTC; empty, or a word a scheduler
    writes for "not yet" (Slurm's `Unknown`, `None`, `0`; `null`, `NaT`) → None. `fold`: which
    pass of an hour `zone`'s clocks go through twice a time without an offset is (0: the first);
    a time without an offset that `zone`'s clocks skip (spring forward) is a BadValue."""
    if not present(value) or (isinstance(value, str) and value.strip().lower() in NOT_YET):
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        if _NUMBER.fullmatch(value.strip()):  # fromisoformat reads epoch milliseconds 1796032800000 as 1796-03-28
            raise BadValue(f"{shown(value)} is a number, not an ISO 8601 time such as 2026-11-30T14:00:00Z{_A_NUMBER}")
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            saved = f"; {spreadsheet_hint(value.strip())}" if spreadsheet_time(value) else ""
            raise BadValue(f"{shown(value)} is not an ISO 8601 time such as 2026-11-30T14:00:00Z{saved}") from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        raise BadValue(f"{shown(value)} is not a time (want ISO 8601 text or a timestamp){_A_NUMBER}")
    else:
        raise BadValue(f"{shown(value)} is not a time (want ISO 8601 text or a timestamp)")
    try:
        return local_utc(moment, zone, fold)
    except ValueError as exc:
        raise BadValue(str(exc)) from None


def not_before_2000(value: Any, moment: datetime | None) -> datetime | None:
    """`moment`, the time the cell `value` holds, unless it is before EARLIEST: no GPU job ran then, as
    a numeric time from the Unix epoch must not be either (parse_count_time)."""
    if moment is not None and moment < EARLIEST:
        raise BadValue(f"{shown(value)} is {moment.isoformat()} UTC, before 2000: no GPU job ran then (a wrong year, "
                       "or not this column's time?)")
    return moment


_A_NUMBER = ("; a number counts time from an origin: set the source's time_format (seconds, milliseconds or "
             "microseconds), and time_origin when it is not Unix time")


def parse_count_time(value: Any, unit: str, per_second: int, origin: datetime | None) -> datetime | None:
    """A number of `unit`s (`per_second` to a second) since `origin` (naive UTC; None: the Unix
    epoch) → naive UTC, exact to the microsecond; empty, a "not yet" word or 0 → None (0 is
    what PAI's and Slurm's tables write for a time not set)."""
    if not present(value) or (isinstance(value, str) and value.strip().lower() in NOT_YET):
        return None
    try:
        # a Parquet DECIMAL is exact as it comes (its repr is "Decimal('...')"); a float's repr is its shortest spelling
        number = value if isinstance(value, Decimal) else Decimal(value.strip() if isinstance(value, str)
                                                                  else repr(value))
        if isinstance(value, bool) or not number.is_finite():
            raise InvalidOperation
    except (InvalidOperation, ValueError, TypeError):
        raise BadValue(f"{shown(value)} is not a number of {unit} (time_format: {unit}; ISO 8601 text is read "
                       "with time_format: iso)") from None
    if not number:
        return None
    start = origin or UNIX_EPOCH
    try:
        moment = start + timedelta(microseconds=int((number * 1_000_000 / per_second).to_integral_value()))
    except OverflowError:
        raise BadValue(f"{shown(value)} {unit} is past the year 9999: is the file in another unit? (set "
                       "time_format: seconds, milliseconds or microseconds)") from None
    if origin is None and moment < EARLIEST:
        raise BadValue(f"{shown(value)} {unit} since 1970 is {moment.isoformat()}, before 2000: another unit (set "
                       "time_format: seconds, milliseconds or microseconds), or times since the trace's start (set "
                       "time_origin to that moment)?")
    return moment


def origin_utc(text: str | None, zone: ZoneInfo) -> datetime | None:
    """time_origin as naive UTC (an offset honoured, else in `zone`); None: the Unix epoch."""
    return None if text is None else local_utc(datetime.fromisoformat(text.strip()), zone)


def parse_gpus(value: Any) -> float:
    if not present(value):
        raise BadValue("empty (read row by row as no GPU)")  # the row reader says it, with the count
    try:
        gpus = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadValue(f"{shown(value)} is not a number") from None
    if not math.isfinite(gpus) or gpus < 0:
        raise BadValue(f"{shown(value)} is not a number >= 0")
    return gpus


def parse_labels(value: Any) -> dict[str, str] | None:
    if not present(value):
        return None
    try:
        return _labels(value)
    except RecursionError:  # `{"a": [[[[...` thousands deep: Python's JSON parser (or writer) gives up
        raise BadValue("JSON nested too deep for labels") from None


def _labels(value: Any) -> dict[str, str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise BadValue(f"{shown(value)} is not JSON") from None
    elif isinstance(value, list):  # a Parquet map reads as [(key, value), ...]
        value = dict(value)
    if not isinstance(value, dict):
        raise BadValue('not a JSON object such as {"team": "nlp"}')
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items() if v is not None}


PARENT_RUN = "parent_run"  # a jobs file's column kept as the label of the same name


def with_parent_run(labels: dict[str, str] | None, parent: str | None) -> dict[str, str] | None:
    """A row's labels with its `parent_run` column's value as that label, over theirs."""
    return labels if parent is None else {**(labels or {}), PARENT_RUN: parent}


def parse_restarts(value: Any) -> int | None:
    if not present(value):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise BadValue(f"{shown(value)} is not a whole number") from None
    if not number.is_integer() or not 0 <= number < 2**31:
        raise BadValue(f"{shown(value)} is not a whole number >= 0")
    return int(number)


def parse_gpu_percent(value: Any) -> float:
    """gpus in percent of one GPU (gpu_unit: percent): 50.0 → 0.5."""
    return float(Decimal(repr(parse_gpus(value))) / 100)


def parse_instances(value: Any) -> int | None:
    """The instances (replicas) a row's job ran, each holding its `gpus`; empty: one."""
    try:
        return parse_restarts(value)
    except BadValue:
        raise BadValue(f"{shown(value)} is not a whole number of instances >= 0") from None


def parse_text(value: Any) -> str | None:
    if not present(value):
        return None
    return value.strip() if isinstance(value, str) else str(value)


def parse_job_id(value: Any) -> str | None:
    """parse_text for a job id, which holds no control character: allocation places a job's part
    as `job:<id>`, its record after a control character (service/attribution/job_how.py), so an id
    holding one would be cut there, its job read as another's."""
    text = parse_text(value)
    if text and ID_CONTROLS.search(text):
        raise BadValue(f"{shown(text)} holds a control character, which no job id may (a file's bytes misread?)")
    return text


def parse_shared_text(value: Any) -> str | None:
    """parse_text, one copy of a text a million rows repeat (cluster, user, project)."""
    text = parse_text(value)
    return sys.intern(text) if text else text


def parse_state(value: Any, states: Mapping[str, str] | None = None, config: str = "states") -> str | None:
    """A Slurm state (or a synonym, connectors/jobs_base.py); `states`: the source's own values
    (stripped, lower case) → a state, looked up first; `config`: its config path, for errors."""
    if not present(value):
        return None
    text = str(value).strip()
    found = states.get(text.lower()) if states else None
    found = found or normal_state(text)
    if found is None:
        raise BadValue(unknown_states(Counter({text: 1}), config))
    return found


SHOWN_STATES = 20  # of a file's values that are no job state, those an error names


def unknown_states(rows: Counter[str], config: str) -> str:
    """What is wrong with a file's state values that are no job state (`rows`: each, stripped,
    → its rows): the SHOWN_STATES with most rows, each with its count, the rest counted, and the
    `states:` entry (`config`) mapping those shown, a placeholder for each state to fill in
    (copied as it stands, a hint must not mark pending jobs completed: the config refuses it)."""
    listed = rows.most_common(SHOWN_STATES)
    said = ", ".join(f"{shown(value)} ({count:,} row{'' if count == 1 else 's'})" for value, count in listed)
    if len(rows) > len(listed):
        rest = sum(rows.values()) - sum(count for _, count in listed)
        said += f" and {len(rows) - len(listed):,} more value(s) ({rest:,} rows)"
    entries = ", ".join(f"{yaml_key(value)}: <the one of those it means>" for value, _ in listed)
    return (f"{said} {'is not a job state' if len(rows) == 1 else 'are not job states'} (one of "
            f"{', '.join(sorted(STATES))}); map a trace's own states with {config}: {{{entries}}}")


def yaml_key(text: str) -> str:
    """`text` as a key of a YAML flow mapping that reads back as `text`, the whole value `states`
    looks up (`Not Started`, not its first word): as it is where YAML reads it so, else
    double-quoted (`"No"`, a YAML 1.1 boolean; `"Killed: OOM"`)."""
    import yaml  # an error's hint only

    try:
        plain = yaml.safe_load(f"{{{text}: x}}") == {text: "x"}
    except yaml.YAMLError:
        plain = False
    return text if plain else json.dumps(text, ensure_ascii=False)


def parse_nodes(value: Any) -> list[str] | None:
    if not present(value):
        return None
    try:
        return list(hosts(str(value))) or None
    except ValueError as exc:
        raise BadValue(str(exc)) from None


def parse_instance_ids(value: Any) -> list[str] | None:
    ids = [part.strip() for part in str(value).split(";") if part.strip()] if present(value) else []
    return ids or None
