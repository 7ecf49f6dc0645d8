"""jobs-file's config (connectors/jobs_file.py reads with it): where the files are, the columns
a file may have and how other schemas' names, states, times and GPU counts are read as ours."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator, model_validator

from connectors.jobs_base import FileSource
from service.core.config_base import NestedValueError
from service.core.job_states import STATES, normal_state
from service.core.units import local_utc

# The columns a jobs file may have (header names compared case-insensitively). `parent_run` (the
# run an eval job serves) is kept as the job's label of that name, which it sets over `labels`' own.
FILE_REQUIRED = ("job_id", "start_time", "end_time", "gpus")
FILE_OPTIONAL = ("nodes", "instance_ids", "cluster", "state", "run_id", "user", "team", "project", "experiment",
                 "job_type", "labels", "name", "account", "partition", "qos", "namespace", "submit_time", "restarts",
                 "instances", "parent_run")
FILE_COLUMNS = FILE_REQUIRED + FILE_OPTIONAL
# time_format → the units of a second it counts (iso: text)
TIME_UNITS = {"seconds": 1, "milliseconds": 1_000, "microseconds": 1_000_000}


class JobsFileSource(FileSource):
    """A CSV or Parquet job table written by any scheduler (README: "jobs-file")."""

    kind: Literal["jobs-file"]
    path: str = Field(min_length=1, description="a CSV/Parquet file or a directory of them")
    columns: dict[str, str] = Field(default_factory=dict, max_length=100,
                                    description="the file's column name → a jobs-file column, e.g. {gpu_num: gpus}; "
                                                "several to job_id are joined with '/'")
    states: dict[str, str] = Field(default_factory=dict, max_length=100,
                                   description="the file's state value → a job state, e.g. {Pass: COMPLETED}")
    header: tuple[str, ...] | None = Field(
        default=None, min_length=1, max_length=500,
        description="the column names of CSV files without a header row (Alibaba PAI ships them in .header files)")
    time_format: Literal["iso", "seconds", "milliseconds", "microseconds"] = Field(
        default="iso", description="times as ISO 8601 text, or numbers of these units since time_origin "
                                    "(text, Parquet integers, floats or DECIMALs, read exactly)")
    time_origin: str | None = Field(
        default=None, description="the moment numeric times count from (default 1970-01-01T00:00:00Z, Unix time); "
                                  "a trace's times since its own start need it")
    gpu_unit: Literal["gpus", "percent"] = Field(
        default="gpus", description="gpus as GPUs, or as percent of one GPU (Alibaba PAI's plan_gpu: 50.0 = half)")

    @field_validator("header")
    @classmethod
    def _named_once(cls, header: tuple[str, ...] | None) -> tuple[str, ...] | None:
        seen: set[str] = set()
        for name in header or ():
            if not name.strip() or name.strip().lower() in seen:
                raise ValueError(f"{name!r}: every column needs a name of its own (compared case-insensitively)")
            seen.add(name.strip().lower())
        return header

    @model_validator(mode="after")
    def _origin_for_numbers(self) -> JobsFileSource:
        if self.time_origin is None:
            return self
        if self.time_format == "iso":
            raise NestedValueError(("time_origin",), "only numeric times count from an origin: set time_format "
                                   "(seconds, milliseconds or microseconds) too, or drop time_origin")
        try:
            origin = datetime.fromisoformat(self.time_origin.strip())
        except ValueError:
            raise NestedValueError(("time_origin",), f"{self.time_origin!r} is not an ISO 8601 time such as "
                                   "2020-07-01T00:00:00+08:00") from None
        try:
            local_utc(origin, ZoneInfo(self.timezone))
        except ValueError as exc:  # a wall time the source's zone skips
            raise NestedValueError(("time_origin",), str(exc)) from None
        return self

    @model_validator(mode="after")
    def _states_are_known(self) -> JobsFileSource:
        seen: dict[str, str] = {}
        for theirs, ours in self.states.items():
            if not theirs.strip():
                raise NestedValueError(("states",), "an empty state value (empty cells are read as no state)")
            if normal_state(ours) is None or len(ours.split()) != 1:
                raise NestedValueError(("states", theirs), f"{ours!r} is not a job state; known: "
                                       f"{', '.join(sorted(STATES))} (the file's value comes first: {{Pass: COMPLETED}})")
            if theirs.strip().lower() in seen:
                raise NestedValueError(("states", theirs), f"{theirs!r} and {seen[theirs.strip().lower()]!r} are one "
                                       "value (compared case-insensitively)")
            seen[theirs.strip().lower()] = theirs
        return self

    def renames(self) -> dict[str, str]:
        """`columns` as the reader looks names up: the file's name stripped, in lower case."""
        return {theirs.strip().lower(): ours.lower() for theirs, ours in self.columns.items()}

    def our_name(self, name: str) -> str:
        """A header's column name as ours, after `columns`' renames."""
        return self.renames().get(name.strip().lower(), name.strip().lower())

    def state_map(self) -> dict[str, str]:
        """`states` as the reader looks values up: the file's value stripped, in lower case."""
        return {theirs.strip().lower(): normal_state(ours) for theirs, ours in self.states.items()}

    @model_validator(mode="after")
    def _columns_are_ours(self) -> JobsFileSource:
        targets: dict[str, str] = {}
        for theirs, ours in self.columns.items():
            if ours.lower() not in FILE_COLUMNS and theirs.lower() in FILE_COLUMNS:  # a mapping written ours-first
                raise NestedValueError(("columns", theirs), f"{ours!r} is not a jobs-file column, {theirs!r} is: "
                                       f"the file's name comes first, ours second ({ours}: {theirs})")
            if ours.lower() not in FILE_COLUMNS:
                raise NestedValueError(("columns", theirs), f"{ours!r} is not a jobs-file column; "
                                       f"known: {', '.join(FILE_COLUMNS)}")
            if ours.lower() in targets and ours.lower() != "job_id":  # several to job_id make one id
                raise NestedValueError(("columns", theirs), f"{theirs!r} and {targets[ours.lower()]!r} "
                                       f"both become {ours!r} (only job_id may be made of several columns)")
            targets[ours.lower()] = theirs
        return self
