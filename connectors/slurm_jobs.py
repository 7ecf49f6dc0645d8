"""slurm-jobs: Slurm accounting → `jobs`, one row per job allocation (and per attempt of a
requeued job); how records become rows: connectors/slurm_records.py.

Two origins (exactly one per source):
- `path`: a file or a directory of files written by `sacct --json` or by
  `sacct --parsable2 --format=<SACCT_FORMAT>` (told apart by their first character; `.gz`
  read as gzip). Write them with `--allusers --duplicates --starttime=...`: without
  `--duplicates` only a requeued job's last attempt is listed, and sacct's default window
  starts at midnight. A record found in several files counts once (the one that has ended,
  else the later file in name order).
- `url`: slurmrestd, `GET <url>/slurmdb/<version>/jobs?start_time=...&end_time=...` over the
  last `lookback_hours` (every attempt of a requeued job, as slurmdbd lists them only with a
  time bound). The JWT comes from the environment variable named by `token_env` (sent as
  X-SLURM-USER-TOKEN, never logged); `api_version` defaults to the newest
  /slurmdb/v*/jobs the server's OpenAPI document offers.
"""

from __future__ import annotations

import base64
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

import duckdb
from pydantic import Field, field_validator, model_validator

from connectors.http_json import get_json, under
from service.core.deadline import Deadline, DeadlinePassed
from connectors.inventory_base import FileOrApiConnector, SnapshotPart
from connectors.jobs_base import ENV_NAME, FileSource, HttpSource, said_ahead, source_files
from connectors.sacct_files import file_attempts, instant_times
from connectors.source_folder import Folder
from connectors.slurm_json import json_attempts
from connectors.slurm_records import SACCT_FORMAT, BadRecord, GpuShares, slurm_jobs, stored_attempts
from connectors.slurm_warnings import said_read, said_stale_running, said_unshared_gpus, said_warnings, slurm_errors
from service.core import json_text
from service.core.config_base import HttpUrl, exactly_one
from service.core.errors import DataError, SourceError, out_of_memory
from service.core.logs import hide
from service.core.registry import Feeds


OPENAPI_PATHS = ("/openapi/v3", "/openapi")  # 23.02+ and 22.05
_JOBS_PATH = re.compile(r"^/slurmdb/(v(\d+)\.(\d+)\.(\d+))/jobs/?$")
GRES_NAME = r"[a-z][a-z0-9_]{0,63}"  # a GRES as AllocTRES names it (gres/shard)


class SlurmJobsSource(HttpSource, FileSource):
    """Slurm accounting → jobs. Exactly one of `path` (files written by `sacct --json` or
    `sacct --parsable2 --format=...`) or `url` (slurmrestd's /slurmdb/<version>/jobs)."""

    kind: Literal["slurm-jobs"]
    url: HttpUrl | None = Field(default=None, description="slurmrestd's base URL")
    token_env: str | None = Field(default=None, pattern=ENV_NAME,
                                  description="environment variable holding the JWT (X-SLURM-USER-TOKEN)")
    user_name: str | None = Field(default=None, min_length=1, description="X-SLURM-USER-NAME, if the token needs one")
    api_version: str | None = Field(default=None, pattern=r"^v\d+\.\d+\.\d+$",
                                    description="e.g. v0.0.38; default: the newest the server offers")
    shared_gpus: dict[str, Annotated[int, Field(ge=1, le=100_000)]] = Field(
        default_factory=dict, max_length=20,
        description="a GRES sharing GPUs → its count per GPU (gres.conf): each one allocated counts as 1/count "
                    "of a GPU, e.g. {shard: 4, mps: 100}")

    @field_validator("shared_gpus")
    @classmethod
    def _gres_names(cls, shared: dict[str, int]) -> dict[str, int]:
        for name in shared:
            if name == "gpu" or not re.fullmatch(GRES_NAME, name):
                raise ValueError(f"{name!r} is not a GRES sharing GPUs as AllocTRES names it (gres/<name>), such as "
                                 "shard or mps" + (": gpu is read as whole GPUs" if name == "gpu" else ""))
        return shared

    def gpu_shares(self) -> GpuShares:
        """`shared_gpus` as the readers take it: a GRES → the share of a GPU one unit is."""
        return tuple((name, 1 / count) for name, count in sorted(self.shared_gpus.items()))

    def requests(self) -> int:
        """The jobs' request, after the OpenAPI documents that tell the version when api_version is not set."""
        return 1 + (0 if self.api_version else len(OPENAPI_PATHS))

    def question(self) -> dict[str, object]:
        """The settings that decide which jobs slurmrestd returns (a window snapshot's fingerprint,
        service/core/job_windows.py): the server and the user it shows them to (PrivateData);
        not the token, which is rotated, nor the API version, which shapes the same jobs."""
        return {"url": (self.url or "").rstrip("/"), "user_name": self.user_name}

    @model_validator(mode="after")
    def _one_origin(self) -> SlurmJobsSource:
        exactly_one(self, {"path": "path (sacct output files)", "url": "url (slurmrestd)"})
        if self.path and (self.token_env or self.user_name or self.api_version):
            raise ValueError("token_env, user_name and api_version apply to url only")
        return self


class SlurmJobsConnector(FileOrApiConnector[SlurmJobsSource]):
    kind = "slurm-jobs"
    feeds = Feeds.snapshot("jobs")

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        tables = self._from_files(con, now) if self.config.path else [self._from_slurmrestd(con, now)]
        rows = slurm_jobs(con, union(tables), self.config.run_labels)
        for table in tables:  # in the rows' own table now: DuckDB's memory for the snapshot's sort
            con.execute(f"DROP TABLE {table}").fetchall()
        return [SnapshotPart("jobs", rows)]

    # ---- files ----------------------------------------------------------------------------

    def _from_files(self, con: duckdb.DuckDBPyConnection, now: datetime) -> list[str]:
        """The files' attempts: temporary tables of `con`; those starting after `now` said per file."""
        zone = ZoneInfo(self.config.timezone)
        root = Path(self.config.path or "").expanduser()
        files = source_files(self.config.path or "", f"{self.config_path}.path")
        folder = Folder.of(self.config.path or "", f"{self.config_path}.path")
        tables = []
        for number, path in enumerate(files):
            try:
                read = file_attempts(con, path, folder, number, zone, self.config.cluster, in_directory=root.is_dir(),
                                     shares=self.config.gpu_shares())
            except BadRecord as exc:
                raise DataError(str(exc), where=str(path), hint=exc.hint or f"write it with sacct --json, or sacct "
                                                                             f"--parsable2 --format={SACCT_FORMAT}") from None
            except (MemoryError, duckdb.OutOfMemoryException) as exc:
                raise out_of_memory(exc, str(path), "free memory or raise the limit, or write the export in smaller "
                                                    "files (sacct by day)") from None
            if read is not None:
                if instants := instant_times(path, folder):  # times no zone reads: a clock is wrong, not a zone
                    said_ahead(con, path, f"SELECT * FROM {read}", now, instants=instants)
                else:
                    said_ahead(con, path, f"SELECT * FROM {read}", now, f"{self.config_path}.timezone",
                               self.config.timezone)
                tables.append(read)
        if not tables:
            raise SourceError(f"none of its {len(files)} file(s) is sacct output", where=str(root),
                              hint=f"point {self.config_path}.path at the files sacct --json or --parsable2 writes")
        said_stale_running(con, union(tables), files)
        said_unshared_gpus(con, root, union(tables), f"{self.config_path}.shared_gpus")
        return tables

    # ---- slurmrestd -----------------------------------------------------------------------

    def _from_slurmrestd(self, con: duckdb.DuckDBPyConnection, now: datetime) -> str:
        c = self.config
        base = c.url or ""
        headers = self._headers()
        deadline = c.start_deadline(self.config_path)  # over the OpenAPI documents' requests and the jobs'
        version = c.api_version or self._newest_version(base, headers, deadline)
        end = now.astimezone(timezone.utc)
        start = end - timedelta(hours=c.lookback_hours)
        # Slurm reads `2026-12-01T00:00:00` in slurmrestd's local zone; `uts<epoch>` is the same everywhere.
        params = {"start_time": f"uts{int(start.timestamp())}", "end_time": f"uts{int(end.timestamp())}"}
        url = under(base, f"/slurmdb/{version}/jobs")
        data = get_json(url, params=params, headers=headers, timeout=c.timeout_seconds, attempts=c.max_attempts,
                        hint=f"check {self.config_path}.url and that slurmrestd serves openapi/db{version}",
                        status_hints=self._refused(), config_path=self.config_path, deadline=deadline)
        _raise_slurm_errors(data, url, self.config_path, c.token_env)
        said_warnings(data, url)
        try:
            attempts = list(json_attempts(data, c.cluster, c.gpu_shares()))
        except BadRecord as exc:
            raise DataError(str(exc), where=url, hint="a slurmrestd answer this reader does not know: "
                                                      "set api_version to one it does (v0.0.38 and later)") from None
        table = said_read(con, url, stored_attempts(con, attempts))
        said_ahead(con, url, f"SELECT * FROM {table}", now)  # epoch times: a clock, not a zone
        said_unshared_gpus(con, url, f"SELECT * FROM {table}", f"{self.config_path}.shared_gpus")
        return table

    def _headers(self) -> dict[str, str]:
        c = self.config
        headers = {"Accept": "application/json"}
        if c.token_env:
            token = os.environ.get(c.token_env, "").strip()
            if not token:
                raise SourceError(f"the environment variable {c.token_env} holding slurmrestd's JWT is not set",
                                  where=f"{self.config_path}.token_env",
                                  hint=f"export {c.token_env}=$(scontrol token lifespan=... | cut -d= -f2)")
            hide(token)  # slurmrestd, or a proxy in front of it, may echo it in an error
            headers["X-SLURM-USER-TOKEN"] = token
        user = c.user_name or (_token_user(headers["X-SLURM-USER-TOKEN"]) if c.token_env else None)
        if user:
            headers["X-SLURM-USER-NAME"] = user  # Slurm 22.05 answers 401 without it
        return headers

    def _refused(self) -> dict[int, str]:
        """The next step when slurmrestd refuses the request's token (23.02 and later answer 401;
        22.05 answers 401 without one, and 200 with an error for a bad one)."""
        renew = (f"the JWT in {self.config.token_env} was refused or has expired: renew it (scontrol token "
                 f"lifespan=...) and check {self.config_path}.user_name" if self.config.token_env else
                 f"slurmrestd wants a JWT: set {self.config_path}.token_env to a variable holding one (scontrol token)")
        return {401: renew, 403: renew}

    def _newest_version(self, base: str, headers: dict[str, str], deadline: Deadline) -> str:
        errors = []
        for path in OPENAPI_PATHS:
            try:
                spec = get_json(under(base, path), headers=headers, timeout=self.config.timeout_seconds,
                                attempts=self.config.max_attempts, hint=f"check {self.config_path}.url",
                                status_hints=self._refused(), config_path=self.config_path, deadline=deadline,
                                smaller=f"set {self.config_path}.api_version (e.g. v0.0.40): slurmrestd's OpenAPI "
                                        "document, which tells the version, is then not asked for")
            except DeadlinePassed:
                raise  # the other document would be asked past it
            except SourceError as exc:
                if exc.hint in self._refused().values():
                    raise  # whichever document is asked for, the token is the answer
                errors.append(str(exc))
                continue
            versions = [m for m in map(_JOBS_PATH.match, (spec.get("paths") or {}) if isinstance(spec, dict) else ())
                        if m]
            if versions:
                return max(versions, key=lambda m: tuple(int(n) for n in m.groups()[1:])).group(1)
            errors.append(f"{under(base, path)}: lists no /slurmdb/v*/jobs")
        raise SourceError("cannot tell which /slurmdb/<version>/jobs slurmrestd serves: " + "; ".join(errors),
                          where=base, hint=f"set {self.config_path}.api_version (e.g. v0.0.38), and start slurmrestd "
                                           "with the openapi/dbv0.0.XX plugin")


def union(tables: list[str]) -> str:
    """SQL over attempts tables: a parsable2 file's has columns of its own (read as the file has them)."""
    return " UNION ALL BY NAME ".join(f"SELECT * FROM {table}" for table in tables)


def _token_user(token: str) -> str | None:
    """The user a Slurm JWT was issued for (its `sun` claim), read without checking it."""
    try:
        payload = token.split(".")[1]
        claims = json_text.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    user = claims.get("sun") if isinstance(claims, dict) else None
    return user if isinstance(user, str) and user else None


def _raise_slurm_errors(data: Any, url: str, config_path: str, token_env: str | None) -> None:
    """slurmrestd answers a refused token with HTTP 200 and an `errors` list."""
    texts = slurm_errors(data)
    if not texts:
        return
    auth = any("auth" in text.lower() for text in texts)
    raise SourceError(f"slurmrestd answered with error(s): {'; '.join(texts)}", where=url,
                      hint=(f"the JWT in {token_env or 'token_env'} was refused: renew it (scontrol token) and check "
                            f"{config_path}.user_name") if auth else f"check {config_path}")
