"""The command line: thin over the Python API. Errors become one line and an exit code here
and only here (0 ok, 1 findings at --fail-on, 2 usage/config, 3 source/data)."""

from __future__ import annotations

import codecs
import importlib
import logging
import sys

import click

from service.attribution import told_by
from service.core.config import Config, load_config
from service.core.errors import AGAIN, SHORT_OF_MEMORY, ResourceError, SpendlakeError, os_error, resource_error
from service.core.lake import Lake
from service.core.lake_file_errors import damaged_lake_file
from service.core.logs import setup_logging
from service.cli.interrupt import interruptible
from service.cli.output import default_format, emit, format_option
from service.cli.params import SingleValueCommand, SingleValueGroup
from service.core.output import one_line
from service.core.lake_damage import unnamed_damage
from service.core.units import currency_text, is_tty, money_text

# the commands whose DuckDB spills to the lake's staging area (Lake.writer, the rollup build)
WRITER_COMMANDS = frozenset({"ingest", "inventory", "rollup", "demo"})
# the area commands by name: each module is imported when its command runs (or a help or an unknown
# name lists them all), so a query loads its own command's imports, not every command's (`runs`
# alone loaded the report's cluster section and the run stories: ~0.03 CPU s of each start)
AREA_COMMANDS = {
    "attribute": ("service.cli.attribute", "attribute"),
    "budgets": ("service.cli.budgets", "budgets_command"),
    "commitments": ("service.cli.commitments", "commitments_command"),
    "demo": ("service.cli.demo", "demo_command"),
    "estimate": ("service.cli.estimate", "estimate_command"),
    "export": ("service.cli.export", "export_command"),
    "findings": ("service.cli.rules", "findings_group"),
    "forget": ("service.cli.integrity", "forget_command"),
    "plans": ("service.cli.plans", "plans_command"),
    "report": ("service.cli.report", "report_command"),
    "rollup": ("service.cli.rollup", "rollup_command"),
    "rules": ("service.cli.rules", "rules_group"),
    "runs": ("service.cli.runs", "runs_command"),
    "verify": ("service.cli.integrity", "verify_command"),
}


class SpendlakeGroup(SingleValueGroup):
    group_class = SingleValueGroup

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # the root's own options (`--config a --config b`) are parsed before invoke's handler
        try:
            return super().parse_args(ctx, args)
        except SpendlakeError as exc:
            _fail(ctx, exc)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in AREA_COMMANDS and cmd_name not in self.commands:
            module, name = AREA_COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *AREA_COMMANDS})

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args and self.get_command(ctx, args[0]) is None:  # an unknown name: suggested from every command
            self.load_all(ctx)
        return super().resolve_command(ctx, args)

    def load_all(self, ctx: click.Context) -> dict[str, click.Command]:
        """Every command by name, each area command's module imported."""
        for name in AREA_COMMANDS:
            self.get_command(ctx, name)
        return self.commands

    def invoke(self, ctx: click.Context):
        try:
            with told_by(lambda note: click.echo(one_line(f"note: {note}"), err=True)):
                return super().invoke(ctx)
        except SpendlakeError as exc:
            _fail(ctx, exc)
        except BrokenPipeError:
            raise
        except UnicodeEncodeError as exc:  # a table's → or a tag's emoji under a Latin-1 locale: no traceback
            stream = _unprintable_on(exc)
            if stream is None:
                raise
            click.echo(f"error: this terminal's encoding ({stream}) cannot print {exc.object[exc.start:exc.end]!a}: "
                       "use a UTF-8 locale (LANG=C.UTF-8) or PYTHONIOENCODING=utf-8", err=True)
            ctx.exit(2)
        except OSError as exc:  # a read-only lake, a full disk: one sentence, never a traceback
            _fail(ctx, os_error(exc))
        except MemoryError:  # Python's own allocations under a memory limit (ulimit -v, a cgroup)
            _fail(ctx, ResourceError(f"out of memory: {SHORT_OF_MEMORY}",
                                     hint=f"free memory or raise the limit (ulimit -v), {AGAIN}"))
        except Exception as exc:  # DuckDB could not read one of the lake's own files, or ran out of memory
            damaged = damaged_lake_file(exc) or _unnamed_damage(ctx.obj, exc) or _short_of(ctx, exc)
            if damaged is None:
                raise
            _fail(ctx, damaged)


def _short_of(ctx: click.Context, exc: Exception) -> SpendlakeError | None:
    """DuckDB out of memory (or disk) where no step said so itself: one sentence and exit 3, not
    a traceback; a query's connection spills to the system's temporary directory, a writer's
    (ingest, inventory, rollup) to the lake's staging area (service/core/connection.py)."""
    if type(exc).__module__ not in ("duckdb", "_duckdb"):
        return None
    writer = ctx.invoked_subcommand in WRITER_COMMANDS
    opened = isinstance(ctx.obj, Context) and ctx.obj._config is not None
    return resource_error(exc, str(ctx.obj.lake.root) if opened else None, reader=not writer)


def _fail(ctx: click.Context, exc: SpendlakeError):
    click.echo(one_line(f"error: {exc}"), err=True)
    ctx.exit(exc.exit_code)


def _unprintable_on(exc: UnicodeEncodeError) -> str | None:
    """The encoding of stdout or stderr when `exc` is theirs (the locale's, not UTF-8), else None."""
    encodings = {codecs.lookup(stream.encoding).name for stream in (sys.stdout, sys.stderr)
                 if getattr(stream, "encoding", None)}
    name = codecs.lookup(exc.encoding).name
    return name if name in encodings else None


def _unnamed_damage(obj: object, exc: Exception) -> SpendlakeError | None:
    """A DuckDB error naming no file (bytes altered in a data page): the configured lake's
    damaged file found by its hash, or None."""
    if not isinstance(obj, Context) or obj._config is None:  # no lake was opened: none to blame
        return None
    return unnamed_damage(obj.lake, exc)


class Context:
    """Per-invocation state: the config is loaded lazily so `--help` never needs one."""

    def __init__(self, config_path: str | None):
        self.config_path = config_path
        self._config: Config | None = None

    @property
    def config(self) -> Config:
        """The config; none found is exit 2 naming the places looked at."""
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config

    def config_or_defaults(self) -> Config:
        """The config if there is one, else the built-in defaults (commands that need no lake)."""
        return self._config or load_config(self.config_path, required=False)

    @property
    def lake(self) -> Lake:
        return Lake.of(self.config)


pass_ctx = click.make_pass_decorator(Context)


@click.group(cls=SpendlakeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_path", envvar="SPENDLAKE_CONFIG", type=click.Path(dir_okay=False),
              help="YAML config (default: $SPENDLAKE_CONFIG, else ./spendlake.yaml).")
@click.option("-v", "--verbose", count=True, help="-v for info, -vv for debug logging (secrets are redacted).")
@click.version_option(package_name="spendlake")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, verbose: int) -> None:
    """spendlake: where the money goes when you pretrain on cloud GPUs."""
    setup_logging({0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG))
    ctx.obj = Context(config_path)


@cli.group("config")
def config_group() -> None:
    """Check the configuration."""


@config_group.command("validate")
@pass_ctx
def config_validate(obj: Context) -> None:
    """Load and validate the config; exit 0 if valid, 2 with dotted paths if not."""
    from service.findings.run import rules_for

    rules = rules_for(obj.config)
    for rule in rules:
        for key, why in rule.config.doubts():
            click.echo(f"warning: {obj.config.file}: rules.{rule.name}.{key}: {why}", err=True)
    enabled = sum(rule.config.enabled for rule in rules)
    click.echo(f"config ok: {len(obj.config.sources)} source(s), {enabled} rule(s) enabled, lake at {obj.config.lake}")


@cli.command()
@click.option("--source", "sources", multiple=True, help="Only this source (repeatable).")
@click.option("--strict", is_flag=True,
              help="Fail a delivery that repeats a line item (same id and time interval) instead of warning.")
@click.option("--accept-removed", is_flag=True,
              help="Commit a final period read again only because files of it are gone from the location.")
@pass_ctx
def ingest(obj: Context, sources: tuple[str, ...], strict: bool, accept_removed: bool) -> None:
    """Ingest billing exports into the lake: one summary line per billing period."""
    from service.ingest.billing import ingest as run_ingest

    if not obj.config.sources:  # it still builds the rollups of what the lake holds
        click.echo("no billing sources configured: add a `sources:` list to the config")
    only = tuple(dict.fromkeys(sources))  # `--source a --source a` reads a once
    with interruptible("spendlake ingest", "the periods committed above are in the lake, nothing half-written "
                       "is visible, and what it had staged is removed (the next ingest removes anything left)"):
        result = _with_progress(lambda progress: run_ingest(obj.config, only=only, progress=progress, strict=strict,
                                                            published=_print_outcomes, accept_removed=accept_removed))
    for warning in result.warnings:
        click.echo(one_line(f"warning: {warning}"), err=True)
    if result.failed:
        sys.exit(3)


def _print_outcomes(result) -> None:
    """The run's lines as soon as its deliveries are in place, before the rollups are built:
    an ingest killed during that build has told what it committed (click.echo flushes)."""
    for outcome in result.outcomes:
        for line in outcome.lines():
            click.echo(one_line(line), err=outcome.status == "failed")
        for warning in outcome.warnings:
            click.echo(one_line(f"warning: {warning}"), err=True)


@cli.command()
@click.option("--source", "sources", multiple=True, help="Only this inventory source (repeatable).")
@pass_ctx
def inventory(obj: Context, sources: tuple[str, ...]) -> None:
    """Snapshot the inventory sources (tags, S3 objects, log groups, GPU metrics) into the lake."""
    from service.ingest.inventory import run_inventory

    if not obj.config.inventory:
        click.echo("no inventory sources configured: add an `inventory:` list to the config")
        return
    with interruptible("spendlake inventory", "the snapshots committed are in the lake, nothing half-written is "
                       "visible, and what it had staged is removed (the next inventory removes anything left)"):
        warnings: list[str] = []
        outcomes = run_inventory(obj.config, only=tuple(dict.fromkeys(sources)), warn=warnings.append)
    for outcome in outcomes:
        for line in outcome.lines():
            click.echo(one_line(line), err=outcome.failed)
    for warning in warnings:
        click.echo(one_line(f"warning: {warning}"), err=True)
    if any(o.failed for o in outcomes):
        sys.exit(3)


def _with_progress(run):
    if not is_tty(sys.stderr):
        return run(None)
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        tasks: dict[str, int] = {}

        def progress(source: str, done: int, total: int) -> None:
            if source not in tasks:
                tasks[source] = bar.add_task(f"ingest {source}", total=total)
            bar.update(tasks[source], completed=done - 1, total=total)

        return run(progress)


SOURCE_COLUMNS = ["source", "kind", "state", "data_through", "hours_behind", "freshness_hours", "last_success",
                  "last_error"]


@cli.command()
@click.option("--sources", "sources_only", is_flag=True,
              help="One row per configured source: how far its data reaches and whether it is fresh.")
@format_option
@pass_ctx
def status(obj: Context, sources_only: bool, fmt: str | None) -> None:
    """What the lake holds: each source's freshness, then one row per billing period and currency
    (CSV and JSON hold one table: the partitions, or with --sources the freshness, and a row per
    line the table says of the lake's files beside it: skipped copies, derived files' damage)."""
    from service.core.timewindow import utc_now
    from service.ingest.freshness import source_freshness
    from service.ingest.status import (NOTE_COLUMNS, STATUS_COLUMNS, ahead_lines, freshness_notes, lake_notes,
                                       no_bill_note, orphan_lines, status as lake_status, with_notes)

    table = (fmt or default_format()) == "table"
    sources = source_freshness(obj.config, obj.lake, utc_now())
    notes = lake_notes(obj.lake)
    if sources_only or (table and sources):
        shown = [row.to_json() for row in sources]
        emit(shown if table else with_notes(shown, SOURCE_COLUMNS, notes),
             SOURCE_COLUMNS if table else [*SOURCE_COLUMNS, *NOTE_COLUMNS], fmt, title="sources")
    for note in [*freshness_notes(sources), *notes] if table else ():
        click.echo(note.line(), err=True)
    if sources_only:
        return
    rows = lake_status(obj.lake)
    # a lake without a bill: the table says so in a line, CSV and JSON in a row before the lake's notes
    empty = [] if rows else [no_bill_note(obj.lake, sources, bool(obj.config.sources))]
    if empty and table:
        click.echo(empty[0].text)
        _check_snapshots(obj.lake)
        return
    if table:  # a table shows cents, as the demo does; CSV and JSON keep every decimal
        shown = [{**r, **{k: money_text(r[k], of=r["currency"]) for k in ("billed_cost", "effective_cost")},
                  "currency": currency_text(r["currency"])} for r in rows]
        emit(shown, list(STATUS_COLUMNS), fmt, title="spendlake status",
             right=("rows", "billed_cost", "effective_cost"), whole=("billing_period", "currency", "billed_cost", "check"))
    else:
        emit(with_notes(rows, STATUS_COLUMNS, [*empty, *notes]), [*STATUS_COLUMNS, *NOTE_COLUMNS], fmt)
    for line in ahead_lines(obj.lake, utc_now()):
        click.echo(f"ahead: {line}", err=True)
    for line in orphan_lines(obj.lake):
        click.echo(line, err=True)
    damaged = [row for row in rows if row["check"] not in ("ok", "orphaned")]
    if damaged:
        from service.core.errors import DataError

        raise DataError(f"{len(damaged)} partition(s) do not match the ledger ("
                        + ", ".join(f"{r['source']} {r['billing_period']}: {r['check']}" for r in damaged) + ")",
                        where=str(obj.lake.root), hint="run `spendlake ingest` to restore them from their sources; a "
                        "period its source no longer holds, ingest fails saying so: restore its file from a backup or "
                        f"drop it, `spendlake forget {damaged[0]['source']} --period {damaged[0]['billing_period']}`")
    _check_snapshots(obj.lake)


def _check_snapshots(lake: Lake) -> None:
    """Exit 3 naming the inventory snapshots that do not match their record (as costs do)."""
    from service.core.snapshot_ledger import snapshot_checks, snapshot_error, sound

    bad = [check for check in sound(lake, snapshot_checks(lake)) if not check.ok]
    if bad:
        raise snapshot_error(bad)


def _check_listen(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from pydantic import ValidationError

    from service.core.config import ServiceConfig
    from service.core.validation import plain_message

    try:
        return value and ServiceConfig(listen=value).listen
    except ValidationError as exc:
        raise click.BadParameter(plain_message(exc.errors()[0])) from None


@cli.command()
@click.option("--listen", metavar="HOST:PORT", callback=_check_listen,
              help="Bind address (default: service.listen, 127.0.0.1:9464).")
@pass_ctx
def serve(obj: Context, listen: str | None) -> None:
    """Run the scheduler (ingest, rules, daily job) and the HTTP server until SIGTERM; SIGHUP
    reads the config again."""
    from service.serve.service import serve as run_service

    if logging.getLogger().level > logging.INFO:  # without -v: what the service did, not every module's detail
        logging.getLogger("service.serve").setLevel(logging.INFO)
    run_service(obj.config, listen=listen, reload=lambda: load_config(obj.config_path))


def main() -> None:
    cli(prog_name="spendlake")


if __name__ == "__main__":
    main()
