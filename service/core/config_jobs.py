"""Config of the job sources (inventory kinds that feed `jobs`: connectors/slurm_jobs.py,
jobs_file.py).

Their connectors declare these models; the keys are documented in README.md ("Job sources").
"""

from __future__ import annotations

import zoneinfo
from typing import Literal

from pydantic import Field, field_validator, model_validator

from service.core.config_base import NestedValueError, Strict

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

# The columns a jobs file may have (header names compared case-insensitively).
FILE_REQUIRED = ("job_id", "start_time", "end_time", "gpus")
FILE_OPTIONAL = ("nodes", "instance_ids", "cluster", "state", "run_id", "user", "team", "project", "experiment",
                 "job_type", "labels", "name", "account", "partition", "qos", "namespace", "submit_time", "restarts")
FILE_COLUMNS = FILE_REQUIRED + FILE_OPTIONAL


class JobSource(Strict):
    """Settings every job source shares (an inventory source without the AWS keys)."""

    name: str = Field(pattern=r"^[a-z0-9-]+$", max_length=64)
    path: str | None = Field(default=None, min_length=1, description="a local file or directory")
    cluster: str | None = Field(default=None, min_length=1, max_length=200,
                                description="the cluster of records that do not name one")


class ZonedTimes(JobSource):
    timezone: str = Field(default="UTC", description="IANA zone of times written without an offset")

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{name!r} is not an IANA time zone (e.g. UTC, Europe/Paris)") from None
        return name


class HttpSource(JobSource):
    max_attempts: int = Field(default=5, ge=1, le=20, description="HTTP attempts in all (the first and its retries)")
    timeout_seconds: float = Field(default=30, gt=0, le=600, description="per HTTP request")
    lookback_hours: int = Field(default=48, ge=1, le=24 * 400, description="jobs active in this many past hours")
    run_labels: tuple[str, ...] = Field(
        default=("run", "run_id"), max_length=20,
        description="label keys naming a job's run, tried in order (case and -._/ separators ignored)")


class SlurmJobsSource(HttpSource, ZonedTimes):
    """Slurm accounting → jobs. Exactly one of `path` (files written by `sacct --json` or
    `sacct --parsable2 --format=...`) or `url` (slurmrestd's /slurmdb/<version>/jobs)."""

    kind: Literal["slurm-jobs"]
    url: str | None = Field(default=None, pattern=r"^https?://\S+$", description="slurmrestd's base URL")
    token_env: str | None = Field(default=None, pattern=ENV_NAME,
                                  description="environment variable holding the JWT (X-SLURM-USER-TOKEN)")
    user_name: str | None = Field(default=None, min_length=1, description="X-SLURM-USER-NAME, if the token needs one")
    api_version: str | None = Field(default=None, pattern=r"^v\d+\.\d+\.\d+$",
                                    description="e.g. v0.0.38; default: the newest the server offers")

    @model_validator(mode="after")
    def _one_origin(self) -> SlurmJobsSource:
        if bool(self.path) == bool(self.url):
            raise ValueError("set exactly one of path (sacct output files) or url (slurmrestd)")
        if self.path and (self.token_env or self.user_name or self.api_version):
            raise ValueError("token_env, user_name and api_version apply to url only")
        return self


class JobsFileSource(ZonedTimes):
    """A CSV or Parquet job table written by any scheduler (README: "jobs-file")."""

    kind: Literal["jobs-file"]
    columns: dict[str, str] = Field(default_factory=dict, max_length=100,
                                    description="the file's column name → a jobs-file column, e.g. {gpu_num: gpus}")

    @model_validator(mode="after")
    def _path_and_columns(self) -> JobsFileSource:
        if not self.path:
            raise ValueError("path is required: a CSV/Parquet file or a directory of them")
        targets: dict[str, str] = {}
        for theirs, ours in self.columns.items():
            if ours.lower() not in FILE_COLUMNS:
                raise NestedValueError(("columns", theirs), f"{ours!r} is not a jobs-file column; "
                                       f"known: {', '.join(FILE_COLUMNS)}")
            if ours.lower() in targets:
                raise NestedValueError(("columns", theirs), f"{theirs!r} and {targets[ours.lower()]!r} "
                                       f"both become {ours!r}")
            targets[ours.lower()] = theirs
        return self
