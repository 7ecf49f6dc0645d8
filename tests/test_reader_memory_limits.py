"""Reads of a month's lines or jobs outside attribution's sessions keep to a reader's DuckDB memory
(READER_MEMORY_LIMIT) and spill beyond, as the sessions and the rules' lookups do: without a limit
DuckDB may take 80% of RAM (18.8 GiB on the test machine), beside whatever the process holds."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from service.attribution import attribute_resources, commitments, idle_job_rules, shared_nodes
from service.core.timewindow import Window
from service.findings.owners import owner_lookup
from service.report.data import charges_dated_after, gross_of_credits_notes
from service.report.sections.bills import after_day_notes, categories_table, invoices_table, moved_notes
from tests.attribution_helpers import add_jobs, config, query_memory_limits, readers_memory_limit
from tests.test_clusters_allocation import gpu_line, job, setup

NOVEMBER = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 12, 1, tzinfo=timezone.utc))
READS = {
    "commitments": lambda lake, cfg: commitments(lake, cfg, NOVEMBER).rows,
    "resources": lambda lake, cfg: attribute_resources(lake, cfg, ["i-a"]),
    "finding owners": lambda lake, cfg: owner_lookup(lake, cfg)(["i-a"]),
    "idle job rules": lambda lake, cfg: idle_job_rules(lake, cfg.attribution, NOVEMBER),
    "shared nodes": lambda lake, cfg: shared_nodes(lake, NOVEMBER),
    "report: charges after the data": lambda lake, cfg: charges_dated_after(
        lake, datetime(2026, 11, 2, 10, tzinfo=timezone.utc), date(2026, 11, 2)),
    "report: credits": lambda lake, cfg: gross_of_credits_notes(lake, date(2026, 11, 2), frozenset({"cur"})),
    "report: bills by category": lambda lake, cfg: categories_table(lake, ("2026-11", "2026-11"), set()),
    "report: invoices": lambda lake, cfg: invoices_table(lake, ("2026-11", "2026-11"), {}),
    "report: usage billed in another period": lambda lake, cfg: moved_notes(lake, date(2026, 11, 2)),
    "report: the bill after the day": lambda lake, cfg: after_day_notes(lake, date(2026, 11, 2)),
}


@pytest.mark.parametrize("read", READS)
def test_a_months_read_outside_the_sessions_keeps_to_a_readers_memory(tmp_path, monkeypatch, read):
    lake, _ = setup(tmp_path, [gpu_line("i-a")], [])
    add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], name="eval")])
    cfg = config({"clusters": {}, "dimensions": {"job_type": {"rules": [
        {"match": {"job_name": "^pretrain"}, "value": "pretrain"}]}}}, lake)
    limits = query_memory_limits(monkeypatch)
    READS[read](lake, cfg)
    assert limits and set(limits) == {readers_memory_limit()}


@pytest.mark.parametrize("command", [["attribute", "--since", "2026-11-01", "--until", "2026-12-01"],
                                     ["runs", "--since", "2026-11-01", "--until", "2026-12-01"]])
def test_a_query_duckdb_runs_out_of_memory_in_says_so_and_where_it_spills_exit_3_no_traceback(
        tmp_path, monkeypatch, command):
    """A query's DuckDB that runs short beyond its spill (a 10M month's attributed export did, 2 of 5)
    left a traceback where no step turned it into our error."""
    import duckdb
    from click.testing import CliRunner

    from service.attribution import compute
    from service.cli.main import cli
    from tests.test_runs import write_config

    lake, _ = setup(tmp_path, [gpu_line("i-a")], [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00",
                                                       instance_ids=["i-a"])])
    path = write_config(tmp_path, lake)

    def short(*args, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of size 256.0 KiB "
                                          "(381.4 MiB/381.4 MiB used)")

    monkeypatch.setattr(compute.RollupSession, "__init__", short)
    shown = CliRunner().invoke(cli, ["--config", path, *command])
    assert shown.exit_code == 3 and isinstance(shown.exception, SystemExit), shown.output
    assert "out of memory" in shown.output and "temporary directory" in shown.output, shown.output
    assert "_staging" not in shown.output and "Traceback" not in shown.output
