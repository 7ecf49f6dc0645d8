"""Memory running short in Python's own allocations during a billing ingest (a CSV header read,
under `ulimit -v` or a cgroup) fails that source in one sentence, exit 3, and the other sources
still commit: it was a bare `MemoryError` traceback (exit 1) that named no file and stopped
every source after it (seen with `ulimit -v 1000000` on a 1M-line FOCUS CSV)."""

from __future__ import annotations

import json
from decimal import Decimal

from click.testing import CliRunner
from layout_exports import focus, lake_sums

import connectors.csvfile as csvfile
from service.cli.main import cli
from service.core.lake import Lake


def two_sources(tmp_path):
    for name, cost in (("big", "5.25"), ("small", "1.50")):
        (tmp_path / name).mkdir()
        focus(tmp_path / name / "costs.csv", [("2026-10", "USD", cost)])
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [
        {"name": name, "kind": "focus", "location": str(tmp_path / name)} for name in ("big", "small")]}))
    return config


def test_python_running_out_of_memory_fails_that_source_naming_its_file_and_the_others_commit(tmp_path, monkeypatch):
    config = two_sources(tmp_path)
    real = csvfile.csv_header

    def short(path, where):
        if "big" in str(path):
            raise MemoryError
        return real(path, where)

    monkeypatch.setattr(csvfile, "csv_header", short)
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 3, result.output
    assert (f"FAILED: {tmp_path / 'big' / 'costs.csv'}: out of memory while reading it: the machine's memory (or the "
            "process's limit) ran short, the file is not at fault — free memory or raise the process's limit "
            "(ulimit -v)") in result.output, result.output
    assert "Traceback" not in result.output
    assert lake_sums(Lake(tmp_path / "lake")) == {("2026-10", "USD"): Decimal("1.50")}  # small's, committed

    monkeypatch.setattr(csvfile, "csv_header", real)  # memory back: the failed source ingests, nothing lost
    result = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert result.exit_code == 0, result.output
    assert lake_sums(Lake(tmp_path / "lake")) == {("2026-10", "USD"): Decimal("6.75")}


def test_python_running_out_of_memory_outside_a_source_is_one_sentence_not_a_traceback(tmp_path, monkeypatch):
    import service.attribution as attribution

    config = two_sources(tmp_path)
    assert CliRunner().invoke(cli, ["--config", str(config), "ingest"]).exit_code == 0

    def short(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(attribution, "attribute_query", short)
    result = CliRunner().invoke(cli, ["--config", str(config), "attribute", "--since", "2026-10-01",
                                      "--until", "2026-10-31"])
    assert result.exit_code == 3, result.output
    assert ("error: out of memory: the machine's memory (or the process's limit) ran short — free memory or raise "
            "the limit (ulimit -v), then run the command again; the previous data is intact") in result.output
