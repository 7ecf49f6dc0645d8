"""`spendlake export --format focus`: the lake as a FOCUS Cost and Usage dataset.

    export_focus(config, ExportOptions(out, version="1.2", since=None, until=None, sources=(),
                 attribution=False, csv=False)) -> ExportResult

Which lines: those of the configured sources (or `sources`) whose charge period starts in
[since, until) (either bound may be open), each exactly once, so consecutive windows never
share a line. How they are written: one folder per billing period (the lake's partition,
`YYYY-MM`), holding `cost_and_usage.parquet` (or `.csv`) and `metadata.json`, plus the
dataset's `metadata/` (service/export/metadata.py); the columns conform as
service/export/focus.py says. With `attribution`, each line also carries its value of every
attribution dimension (`x_<dimension>`), shared costs are split and shared GPU clusters'
instance lines become their job and idle parts (service/export/allocation.py).

How it stays safe: the lake is read through its verified partitions, on one consistent
snapshot (a damaged partition is a DataError, exit 3), with the query connection's sandbox:
nothing is written inside the lake (an `--out` inside it is refused). Every file is staged
first — beside the target folder for a local `--out`, in a private temporary folder for
S3 — and published only once every period is staged: each file renamed into place (a
period's `metadata.json` last) or PUT to S3 (its `metadata.json` last), so a reader that
finds a period's metadata finds its data.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from connectors.aws_client import attempt_timeout, ends_by, make_client
from service.core.config import Config
from service.core.config_paths import check_outside_lake
from service.core.deadline import Deadline
from service.core.errors import UsageError, duckdb_error, naming, resource_error
from service.core.lake import Lake
from service.core.publish import (publish_staged, removed_if_failed, split_s3_url, staging_folder, upload_s3,
                                  write_error)
from service.core.schema import JSON_COLUMNS, TAG_MAP, COST_TYPES
from service.core.snapshot import Snapshot, read_consistently
from service.export import metadata
from service.export.files import WrittenFile, file_name, write_rows
from service.export.focus import EXTENSIONS, INVOICING_ENTITY, SOURCE_COLUMN, VERSIONS, conform_sql, taxed_sql
from service.export.lookups import joined_lines

METADATA_DIR = "metadata"
LIMITS = "--timeout-seconds"  # what to raise when the S3 endpoint does not answer in time (publish.unanswered_hint)


@dataclass(frozen=True)
class ExportOptions:
    out: str
    version: str = "1.2"
    since: datetime | None = None
    until: datetime | None = None
    sources: tuple[str, ...] = ()
    attribution: bool = False
    csv: bool = False
    # to S3: each attempt's connect and each read, and all of the export's uploads (their attempts and backoffs)
    timeout_seconds: float = 30
    deadline_seconds: float = 3600


@dataclass(frozen=True)
class ExportedPeriod:
    period: str
    rows: int
    bytes: int
    location: str  # the folder or s3:// prefix of the period


@dataclass(frozen=True)
class ExportResult:
    location: str
    version: str
    schema_id: str | None
    periods: tuple[ExportedPeriod, ...] = field(default_factory=tuple)


def export_focus(config: Config, options: ExportOptions, *, now: datetime | None = None) -> ExportResult:
    """Write the FOCUS dataset `options` describe; see the module docstring."""
    lake = Lake.of(config)
    sources = _check(config, lake, options)
    created = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    s3 = options.out.startswith("s3://")
    with nullcontext() if s3 else removed_if_failed(Path(options.out).resolve()):
        staging = Path(tempfile.mkdtemp(prefix="spendlake-export-")) if s3 else _local_staging(Path(options.out))
        try:
            try:
                staged = read_consistently(lake, lambda snapshot: _stage(config, lake, snapshot, options, sources,
                                                                         staging, created))
            except duckdb.Error as exc:
                raise duckdb_error(exc, "could not read the lake for the export", where=str(lake.root),
                                   reader=True) from None
            except OSError as exc:
                limit = resource_error(exc, exc.filename or str(staging)) if s3 else None
                if limit is not None:  # staged on this machine before the upload: its disk is full, not the bucket
                    limit.hint = (f"free space in the temporary directory the export is staged in before its "
                                  f"upload ({tempfile.gettempdir()}), or set TMPDIR to a folder with room, then run "
                                  "the command again; nothing was uploaded")
                    raise limit from None
                raise write_error(exc, options.out, "the export") from None
            if s3:
                return _upload(staging, staged, options)
            return _publish(staging, staged, options)
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def _check(config: Config, lake: Lake, options: ExportOptions) -> tuple[str, ...]:
    if options.version not in VERSIONS:
        raise UsageError(f"unknown FOCUS version {options.version!r}", where="--focus-version",
                         hint=f"use one of {', '.join(VERSIONS)}")
    if options.since and options.until and options.since >= options.until:
        raise UsageError("the window is empty", where="--since", hint="--since must come before --until")
    known = [s.name for s in config.sources]
    unknown = [name for name in options.sources if name not in known]
    if unknown:
        raise UsageError(f"no billing source named {', '.join(map(repr, unknown))}", where="--source",
                         hint=f"configured sources: {', '.join(known) or 'none'}")
    if options.attribution:
        taken = {*EXTENSIONS, SOURCE_COLUMN, INVOICING_ENTITY}
        for dimension in config.attribution.dimension_order():
            if f"x_{dimension}" in taken:
                raise UsageError(f"dimension {dimension!r} would be exported as x_{dimension}, a column the export "
                                 "already writes", where=f"attribution.dimensions.{dimension}",
                                 hint="rename the dimension to export it with --with-attribution")
    check_outside_lake(config, options.out, "the export", where="--out")
    return tuple(options.sources) or tuple(known)


def _local_staging(out: Path) -> Path:
    try:
        return staging_folder(out / "export")
    except OSError as exc:
        raise write_error(exc, out, "the export") from None


@dataclass(frozen=True)
class _Staged:
    schema: dict | None
    periods: tuple[tuple[str, WrittenFile], ...]


def _stage(config: Config, lake: Lake, snapshot: Snapshot, options: ExportOptions, sources: Sequence[str],
           staging: Path, created: datetime) -> _Staged:
    """Every period's file and metadata under `staging` (emptied first: a read may run again)."""
    for old in staging.iterdir():
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    if not snapshot.checks:
        return _Staged(None, ())
    with _lines(config, lake, snapshot, options, sources) as (con, relation, extra):
        periods, lines = joined_lines(con, relation)
        sql = conform_sql(lines, options.version, (SOURCE_COLUMN, *extra), taxed="export_taxed")
        written = []
        # a full disk names the file: where it goes, or for an upload where it is staged (the temporary directory)
        shown = staging if options.out.startswith("s3://") else Path(options.out)
        for period in periods:
            folder = staging / period
            folder.mkdir()
            # the sums Tax lines are derived from, read first: a second read of the lines in the same
            # query would hold them all in memory
            con.register("export_taxed", con.sql(taxed_sql(lines), params={"period": period}).to_arrow_table())
            with naming(shown / period / file_name(options.csv)):
                written.append((period, write_rows(con, sql, {"period": period}, folder / file_name(options.csv),
                                                   options.csv)))
    if not written:
        return _Staged(None, ())
    json_columns = [*JSON_COLUMNS, *(name for name, kind in COST_TYPES.items() if kind == TAG_MAP),
                    *(name for name in extra if name.endswith(("MethodDetails", "Tags")))]
    schema = metadata.schema_object(options.version, metadata.column_definitions(written[0][1].schema, json_columns),
                                    created)
    for period, data in written:
        document = metadata.period_metadata(schema, period, data.name, data.rows, data.bytes, sources=sources,
                                            since=options.since, until=options.until,
                                            attribution=options.attribution, created=created)
        _write_document(staging, shown, f"{period}/{metadata.METADATA_FILE}", document)
    (staging / METADATA_DIR / "schemas").mkdir(parents=True)
    _write_document(staging, shown, f"{METADATA_DIR}/data_generator.json", metadata.data_generator())
    _write_document(staging, shown, f"{METADATA_DIR}/schemas/schema-{schema['SchemaId']}.json", schema)
    return _Staged(schema, tuple(written))


def _write_document(staging: Path, shown: Path, name: str, document: dict) -> None:
    """`document` as JSON at `name` under `staging`; a full disk names the file as `shown` (a
    write() names none)."""
    with naming(shown / name):
        (staging / name).write_bytes(metadata.to_bytes(document))


def _lines(config: Config, lake: Lake, snapshot: Snapshot, options: ExportOptions, sources: Sequence[str]):
    """(connection, relation of the lines to export, extra columns) as a context manager."""
    from service.export.allocation import plain_lines

    if options.attribution:
        from service.export.allocation import attributed_lines
        return attributed_lines(config, lake, snapshot, options.since, options.until, sources,
                                allocated_prefix="" if options.version == "1.3" else "x_")
    return plain_lines(lake, snapshot, options.since, options.until, sources)


def _publish(staging: Path, staged: _Staged, options: ExportOptions) -> ExportResult:
    out = Path(options.out).resolve()
    data_names = {file_name(False), file_name(True)}
    periods = []
    try:
        if staged.schema is not None:
            publish_staged(staging / METADATA_DIR / "schemas", out / METADATA_DIR / "schemas")
            publish_staged(staging / METADATA_DIR, out / METADATA_DIR)
        for period, data in staged.periods:
            folder = publish_staged(staging / period, out / period, last=metadata.METADATA_FILE,
                                    stale=lambda path: path.name in data_names)
            periods.append(ExportedPeriod(period, data.rows, data.bytes, str(folder)))
    except OSError as exc:
        raise write_error(exc, out, "the export") from None
    return ExportResult(str(out), options.version, staged.schema and staged.schema["SchemaId"], tuple(periods))


def _upload(staging: Path, staged: _Staged, options: ExportOptions) -> ExportResult:
    """PUT the staged files with the AWS SDK's settings from the environment (README: Export), each
    attempt's connect and reads ending by --timeout-seconds and all of them by --deadline-seconds, where
    a bare client waited 60 s a read, five attempts, for each file."""
    bucket, prefix = split_s3_url(options.out)
    deadline = Deadline.after(options.deadline_seconds, "--deadline-seconds", "the export's S3 calls")
    attempt = attempt_timeout(options.timeout_seconds, deadline)
    client = make_client("s3", config_path="export", timeout=attempt, profile_set_by="AWS_PROFILE")  # no export: key
    client = ends_by(client, deadline, options.out, "check that the S3 endpoint answers")
    join = lambda *parts: "/".join(p for p in parts if p)  # noqa: E731
    if staged.schema is not None:
        files = {path.relative_to(staging / METADATA_DIR).as_posix(): path
                 for path in sorted((staging / METADATA_DIR).rglob("*.json"))}
        upload_s3(files, client, bucket, join(prefix, METADATA_DIR), what="the export's metadata", limits=LIMITS)
    periods = []
    for period, data in staged.periods:
        files = {path.name: path for path in sorted((staging / period).iterdir())}
        location = upload_s3(files, client, bucket, join(prefix, period), last=metadata.METADATA_FILE,
                             what=f"the export of {period}", limits=LIMITS)
        periods.append(ExportedPeriod(period, data.rows, data.bytes, location))
    location = f"s3://{bucket}/{prefix}/" if prefix else f"s3://{bucket}/"
    return ExportResult(location, options.version, staged.schema and staged.schema["SchemaId"], tuple(periods))
