"""`spendlake rollup`: store the attribution rollups of the current config (thin over
service.ingest.rollups)."""

from __future__ import annotations

import click

from service.cli.interrupt import interruptible


@click.command("rollup")
@click.pass_obj
def rollup_command(obj) -> None:
    """Store the attribution rollups for the current config (run after changing `attribution:`)."""
    from service.ingest.rollups import rollup

    with interruptible("spendlake rollup", "the rollups stored before are in the lake, nothing half-written is "
                       "visible, and what it had staged is removed (queries roll up in memory meanwhile; run "
                       "spendlake rollup again)"):
        done = rollup(obj.config)
    for warning in done.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"rollups for config {obj.config.attribution.fingerprint()}: {done.built} built, "
               f"{done.stored} already stored, {done.removed} superseded removed")
