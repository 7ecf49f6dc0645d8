"""A SIGTERM or SIGINT that reaches `spendlake ingest` or `inventory` while DuckDB runs Python
code for a query (a UDF, a stream from Python) arrives as DuckDB's own error: before, that was
the source's failure, counted in its state (`spendlake_source_failures_total`), and the other
sources ran before the run exited 143. A stop ends the whole run, counting nothing (RELIABILITY 12:
the stopped run's staging goes too). In-process: the signal is sent from inside the query, so it
lands there every time."""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from connectors.focus import FocusConnector
from connectors.jobs_file import JobsFileConnector
from service.cli.main import cli
from service.core.lake import WRITER_MEMORY_LIMIT, Lake
from tests.test_inventory_integrity import HEADER
from tests.test_one_pass_faults import generated, month


def stopping_in_the_query(con, relation, signum: int):
    """`relation` with a UDF that sends `signum` to this process as DuckDB calls it."""
    def stop(value: int) -> bool:
        os.kill(os.getpid(), signum)
        return True

    con.create_function("stop_here", stop, ["BIGINT"], "BOOLEAN", side_effects=True)
    return relation.filter("stop_here(1)")


def run(config: Path, command: str, monkeypatch):
    """The command in this process, its writer on one thread: the UDF runs in the main thread,
    where Python runs the handler, which raises inside the UDF (DuckDB answers with its own
    error; in a worker thread, DuckDB's check for signals would raise a RuntimeError instead)."""
    assert threading.current_thread() is threading.main_thread()  # the handler is there, not the default's kill
    monkeypatch.setattr(Lake, "writer", lambda self, extra_paths=(): self.connect(
        extra_paths=extra_paths, threads=1, memory_limit=WRITER_MEMORY_LIMIT, writer=True))
    return CliRunner().invoke(cli, ["--config", str(config), command])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_12_an_inventory_stopped_in_a_query_counts_no_failure_and_runs_no_other_source(tmp_path, monkeypatch, signum):
    for name in ("first", "second"):
        (tmp_path / f"{name}.csv").write_text(HEADER + "1,2026-11-02T10:00:00Z,2026-11-02T12:00:00Z,8,p5,COMPLETED,u,t\n")
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "attribution": {"clusters": {}}, "inventory": [
        {"name": name, "kind": "jobs-file", "path": str(tmp_path / f"{name}.csv")} for name in ("first", "second")]}))
    snapshot = JobsFileConnector.snapshot

    def stopped(self, con, scratch, now):
        parts = snapshot(self, con, scratch, now)
        if self.config.name != "first":
            return parts
        return [replace(part, relation=stopping_in_the_query(con, part.relation, signum)) for part in parts]

    monkeypatch.setattr(JobsFileConnector, "snapshot", stopped)
    result = run(config, "inventory", monkeypatch)
    assert result.exit_code == 128 + signum, result.output
    assert result.output == (f"error: spendlake inventory interrupted by {signal.Signals(signum).name}: the snapshots "
                             "committed are in the lake, nothing half-written is visible, and what it had staged is "
                             "removed (the next inventory removes anything left)\n")
    lake = Lake(tmp_path / "lake")
    assert lake.read_state("sources") == {}  # no failure counted for `first`; `second` not read
    assert not list(lake.table_dir("jobs").glob("source=*/*/*.parquet"))
    assert sorted(p.name for p in lake.staging.iterdir()) == []


def test_12_an_ingest_stopped_in_a_query_counts_no_failure_and_runs_no_other_source(tmp_path, monkeypatch):
    sources = []
    for number, name in enumerate(("first", "second")):
        (tmp_path / name).mkdir()
        generated(tmp_path / name / f"cost-{month(number)}.csv", month(number), 100)
        sources.append({"name": name, "kind": "focus", "location": str(tmp_path / name)})
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"), "sources": sources}))
    read = FocusConnector.read

    def stopped(self, delivery, con, scratch):
        relations = read(self, delivery, con, scratch)  # one per file
        if self.config.name != "first":
            return relations
        return [stopping_in_the_query(con, relation, signal.SIGTERM) for relation in relations]

    monkeypatch.setattr(FocusConnector, "read", stopped)
    result = run(config, "ingest", monkeypatch)
    assert result.exit_code == 143, result.output
    assert result.output.startswith("error: spendlake ingest interrupted by SIGTERM: "), result.output
    lake = Lake(tmp_path / "lake")
    assert lake.read_state("sources") == {} and lake.ledger() == []
    assert sorted(p.name for p in lake.staging.iterdir()) == []
