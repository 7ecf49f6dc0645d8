"""`spendlake verify` and `spendlake forget`: the lake proves its partitions, and lets go of
the sources the config no longer declares, or of periods their sources no longer hold. Thin over service.core.lake."""

from __future__ import annotations

import errno

import click

from service.cli.output import confirmed, default_format, emit, format_option
from service.cli.params import SingleValueCommand

# table and partition last: the cost columns came first, and scripts read them by position
VERIFY_COLUMNS = ["source", "billing_period", "check", "detail", "table", "partition"]


@click.command("verify", cls=SingleValueCommand)
@format_option
@click.pass_obj
def verify_command(obj, fmt: str | None) -> None:
    """Re-hash every cost partition, inventory snapshot and derived file (rollups, metric tops)
    against its record; exit 3 if one differs. The sources the config no longer declares are
    named as `status` names them (they count nowhere, so they leave the exit code alone)."""
    from service.core import derived_records, derived_sweep, snapshot_ledger, snapshot_verify
    from service.core.errors import NOT_WRITABLE, os_error
    from service.core.integrity import partition_error
    from service.core.snapshot import stray_files
    from service.ingest.status import orphan_lines

    lake = obj.lake
    checks = lake.verify(record=False)
    strays = stray_files(lake)  # listed, not recorded: no read uses them
    snapshots = snapshot_verify.verify_snapshots(lake, record=False)
    derived = derived_sweep.verify_derived(lake, record=False)
    unrecorded = None  # a full disk: the results are shown, then the error
    try:
        lake.record_verify(checks)
        snapshot_verify.record_verify(lake, snapshots)
        derived_records.record_verify(lake, derived)
    except OSError as exc:  # a reader without write access still gets its answer
        if exc.errno not in NOT_WRITABLE:
            unrecorded = os_error(exc)
        else:
            fix = "mount the lake read-write" if exc.errno == errno.EROFS else "run verify as the lake's owner"
            click.echo(f"warning: {lake.state_file('verify')}: not recorded ({os_error(exc).message}); the next "
                       f"ingest learns of damaged partitions only from a recorded verify — {fix}", err=True)
    rows = [{"source": c.source, "billing_period": c.period, "check": c.state, "detail": c.detail,
             "table": "costs", "partition": f"billing_period={c.period}"} for c in checks]
    rows += [{"source": c.source, "billing_period": c.period, "check": c.state, "detail": c.detail, "table": "costs",
              "partition": f"billing_period={c.period}/{c.path.name}"} for c in strays]
    rows += [{"source": c.source, "billing_period": None, "check": c.state, "detail": c.detail, "table": c.table,
              "partition": c.partition} for c in snapshots]
    rows += [{"source": c.source, "billing_period": _period(c.partition), "check": c.state, "detail": c.detail,
              "table": c.table, "partition": c.partition} for c in derived]
    fmt = fmt or default_format()  # JSON when piped: the same contract as --format json
    if not rows and fmt == "table":
        click.echo(f"the lake at {lake.root} holds no cost partition or inventory snapshot of the configured sources")
    else:
        emit(rows, VERIFY_COLUMNS, fmt, title=f"{len(checks)} partition(s) against the ledger, "
                                              f"{len(snapshots)} inventory snapshot(s) and {len(derived)} derived "
                                              "file(s) against their records")
    for line in orphan_lines(lake):  # not checked, and counted nowhere: said as status says them, exit 0
        click.echo(line, err=True)
    if unrecorded is not None:
        raise type(unrecorded)(f"{unrecorded.message}; the checks above were not recorded", where=unrecorded.where,
                               hint=unrecorded.hint)
    bad = [c for c in checks if not c.ok]
    if bad:
        raise partition_error(bad)
    damaged = [c for c in snapshots if not c.ok]
    if damaged:
        raise snapshot_ledger.snapshot_error(damaged)
    altered = [c for c in derived if c.failed]
    if altered:
        raise derived_sweep.derived_error(altered)


def _period(partition: str) -> str | None:
    """The billing period of a rollup's `billing_period=<p>/<version>.parquet`; None for metric tops."""
    key, _, rest = partition.partition("=")
    return rest.split("/", 1)[0] if key == "billing_period" else None


@click.command("forget", cls=SingleValueCommand)
@click.argument("source")
@click.option("--period", "periods", multiple=True, metavar="P",
              help="Remove only this billing period of SOURCE (repeatable), one the source no longer holds.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def forget_command(obj, source: str, periods: tuple[str, ...], yes: bool) -> None:
    """Remove every partition and ledger row of SOURCE, a source no longer in the config; with
    --period, only those periods' partitions, ledger rows and rollups (of any source)."""
    from service.core.claims import forget_declaring_none, other_configs
    from service.core.errors import UsageError
    from service.core.serving import refuse_served

    lake = obj.lake
    if periods:
        _forget_periods(lake, source, periods, yes)
        return
    if lake.sources is None:  # a config declaring none reads every source: none is an orphan to it
        raise forget_declaring_none(lake, source)
    if lake.counts(source):
        raise UsageError(f"source {source!r} is in the config", where="SOURCE",
                         hint="remove it from the config first; forget removes what the config no longer names "
                              "(`--period P` removes one period of it)")
    tables = lake.orphans().get(source)
    if not tables:
        known = ", ".join(lake.orphans()) or "none"
        raise UsageError(f"the lake holds nothing of source {source!r}", where="SOURCE",
                         hint=f"orphaned sources: {known}")
    refuse_served(lake, source)
    rows = sum(e.rows for e in lake.ledger() if e.source == source)
    other = other_configs(lake).get(source)
    shared = f"; {other}, another config on this lake, still declares it and reads it" if other else ""
    if not yes and not confirmed(f"remove source {source} ({rows:,} cost rows; tables {', '.join(tables)}) from "
                                  f"the lake at {lake.root}{shared}?"):
        raise UsageError("not confirmed: nothing was removed", where="forget",
                         hint=f"answer y, or run `spendlake forget {source} --yes` (where no one can answer)")
    lake.forget(source)
    click.echo(f"forgot {source}: {rows:,} cost rows and its partitions in {', '.join(tables)}")
    if other:
        click.echo(f"warning: {other} still declares {source}: its next `spendlake ingest` reads it again from the "
                   "source's exports", err=True)


def _forget_periods(lake, source: str, periods: tuple[str, ...], yes: bool) -> None:
    """`forget SOURCE --period P`: the way out for a damaged partition of a period the source no
    longer holds (retention, a re-created export), which ingest cannot restore."""
    from service.core.errors import UsageError

    held = {e.billing_period: e for e in lake.ledger() if e.source == source}
    unknown = [p for p in dict.fromkeys(periods) if p not in held]
    if unknown:
        raise UsageError(f"the lake holds no period {', '.join(unknown)} of source {source!r}", where="--period",
                         hint=f"periods it holds: {', '.join(sorted(held)) or 'none'}")
    periods = tuple(dict.fromkeys(periods))
    rows = sum(held[p].rows for p in periods)
    named = ", ".join(periods)
    if not yes and not confirmed(f"remove {source} {named} ({rows:,} cost rows, their ledger rows and rollups) "
                                  f"from the lake at {lake.root}?"):
        raise UsageError("not confirmed: nothing was removed", where="forget",
                         hint=f"answer y, or run `spendlake forget {source} --period {' --period '.join(periods)} "
                              "--yes` (where no one can answer)")
    lake.forget(source, periods)
    click.echo(f"forgot {source} {named}: {rows:,} cost rows, their partitions and rollups; a source that still "
               "holds them reads them again at its next `spendlake ingest`")
