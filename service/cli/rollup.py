"""`spendlake rollup`: store the attribution rollups of the current config (thin over
service.ingest.rollups)."""

from __future__ import annotations

import click


@click.command("rollup")
@click.pass_obj
def rollup_command(obj) -> None:
    """Store the attribution rollups for the current config (run after changing `attribution:`)."""
    from service.ingest.rollups import rollup

    done = rollup(obj.config)
    click.echo(f"rollups for config {obj.config.attribution.fingerprint()}: {done.built} built, "
               f"{done.stored} already stored, {done.removed} superseded removed")
