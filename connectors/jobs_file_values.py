"""The values of a jobs-file's cells (connectors/jobs_file.py): each parser takes a cell as
the file holds it (text, or a Parquet value) and returns the `jobs` value, or raises BadValue
saying why; the reader adds file, row and column."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from connectors.hostlist import hosts
from connectors.jobs_base import STATES, normal_state
from connectors.jobs_file_read import shown
from service.core.units import local_utc

NOT_YET = frozenset({"unknown", "none", "n/a", "0", "null", "nat"})  # a time not set, as schedulers write it
SKEW = timedelta(minutes=5)  # an end this much before the start is clock skew; more is a wrong value


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
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise BadValue(f"{shown(value)} is not an ISO 8601 time such as 2026-11-30T14:00:00Z") from None
    else:
        raise BadValue(f"{shown(value)} is not a time (want ISO 8601 text or a timestamp)")
    try:
        return local_utc(moment, zone, fold)
    except ValueError as exc:
        raise BadValue(str(exc)) from None


def parse_gpus(value: Any) -> float:
    if not present(value):
        raise BadValue("empty; gpus is required (0 for a job without GPUs)")
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


def parse_text(value: Any) -> str | None:
    if not present(value):
        return None
    return value.strip() if isinstance(value, str) else str(value)


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
        raise BadValue(f"{shown(value)} is not a job state (one of {', '.join(sorted(STATES))}; map a trace's own "
                       f"states with {config}, e.g. {{{text.split()[0]}: COMPLETED}})")
    return found


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
