"""A sacct --json document is read job by job (connectors/sacct_json.py): a month of a big
cluster (200k jobs, 826 MB, one document) took 5.5 GB read whole, and died under a memory
limit in a bare MemoryError traceback that named no file and stopped the other sources."""

from __future__ import annotations

import json
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pytest
from click.testing import CliRunner

import connectors.sacct_files as sacct_files
import connectors.sacct_json as sacct_json
import connectors.slurm_records as slurm_records
from connectors.sacct_files import file_attempts
from connectors.source_folder import Folder
from service.cli.main import cli
from tests.inventory_support import traced_peak

SLURM = Path(__file__).parent / "data" / "slurm"
READ = "SELECT * EXCLUDE (_file) FROM {} ORDER BY _row"


def p5_attempts(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """The attempts of a sacct file of cluster p5 in UTC, read as slurm-jobs reads a file source."""
    return file_attempts(con, path, Folder.of(str(path), "inventory[0].path"), 0, ZoneInfo("UTC"), "p5",
                         in_directory=False)


def attempts(path: Path) -> list[tuple]:
    with duckdb.connect() as con:
        return con.sql(READ.format(p5_attempts(con, path))).fetchall()


def test_a_document_read_in_small_pieces_reads_as_read_whole(tmp_path, monkeypatch):
    # pieces that end inside numbers, strings, keys and a character of two or three bytes
    document = json.loads(SLURM.joinpath("sacct-formats.json").read_text())
    document["jobs"][0]["name"] = "café € 训练"
    path = tmp_path / "sacct.json"
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
    whole = attempts(path)
    assert sum("café € 训练" in row for row in whole) == 1, whole
    for piece in (61, 509, 4096):
        monkeypatch.setattr(sacct_json, "PIECE", piece)
        assert attempts(path) == whole, piece


def test_a_document_of_many_jobs_is_read_without_holding_them(tmp_path, monkeypatch):
    document = json.loads(SLURM.joinpath("sacct.json").read_text())
    jobs = document.pop("jobs")
    path = tmp_path / "sacct.json"
    with path.open("w") as out:  # 1,000 jobs, 3.9 MB, on one line: read whole, 24 MB of Python objects
        out.write('{"jobs": [')
        out.write(",".join(json.dumps({**job, "job_id": copy * 100 + job["job_id"] % 100})
                           for copy in range(100) for job in jobs))
        out.write(f"], {json.dumps(document)[1:]}")
    monkeypatch.setattr(slurm_records, "BATCH_ROWS", 200)
    with duckdb.connect() as con:
        one = p5_attempts(con, SLURM / "sacct.json")  # the imports
        [(each,)] = con.sql(f"SELECT count(*) FROM {one}").fetchall()
        table, peak = traced_peak(lambda: p5_attempts(con, path))
        assert con.sql(f"SELECT count(*) FROM {table}").fetchall() == [(100 * each,)]
    assert peak < 6 << 20, f"{peak / 2**20:.1f} MB of Python objects at once"


def big_and_small(tmp_path, big):
    """`spendlake inventory` of two slurm-jobs sources, `big` (read from the file `big`) and `small`; it fails (exit 3)."""
    (tmp_path / "spendlake.yaml").write_text(json.dumps({"lake": str(tmp_path / "lake"), "inventory": [
        {"name": "big", "kind": "slurm-jobs", "path": str(big)},
        {"name": "small", "kind": "slurm-jobs", "path": str(SLURM / "sacct-parsable2.txt")}]}))
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "spendlake.yaml"), "inventory"])
    assert result.exit_code == 3, result.output
    return result


def test_memory_running_short_fails_that_file_naming_it_and_the_other_sources_run(tmp_path, monkeypatch):
    def short(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(sacct_files, "json_members", short)
    result = big_and_small(tmp_path, SLURM / "sacct.json")
    assert (f"big (slurm-jobs): FAILED: {SLURM / 'sacct.json'}: out of memory while reading it: the machine's "
            "memory (or the process's limit) ran short, the file is not at fault — free memory or raise the limit, "
            "or write the export in smaller files (sacct by day)") in result.output, result.output
    assert "small (slurm-jobs) jobs snapshot_date=" in result.output, result.output


def test_memory_running_short_in_any_source_fails_that_source_and_the_others_run(tmp_path, monkeypatch):
    import service.ingest.inventory as inventory

    real = inventory._read_and_commit

    def short(lake, con, connector, source, *args):
        if source.name == "big":
            raise MemoryError
        return real(lake, con, connector, source, *args)

    monkeypatch.setattr(inventory, "_read_and_commit", short)
    result = big_and_small(tmp_path, SLURM / "sacct-parsable2.txt")
    assert "big (slurm-jobs): FAILED: inventory[0]: out of memory while reading it" in result.output, result.output
    assert "small (slurm-jobs) jobs snapshot_date=" in result.output, result.output


def test_a_document_broken_early_is_not_read_to_its_end_to_say_so(tmp_path, monkeypatch):
    jobs = json.loads(SLURM.joinpath("sacct.json").read_text())["jobs"]
    text = json.dumps({"jobs": jobs * 50})  # 4 MB
    at = text.index("}, {", 100_000)
    path = tmp_path / "sacct.json"
    path.write_text(text[:at + 1] + "#" + text[at + 2:])
    read = []
    pieces = sacct_json.text_pieces
    monkeypatch.setattr(sacct_json, "PIECE", 4096)
    monkeypatch.setattr(sacct_json, "LONGEST", 50_000)
    monkeypatch.setattr(sacct_files, "text_pieces", lambda *args: (read.append(p) or p for p in pieces(*args)))
    with duckdb.connect() as con:
        with pytest.raises(slurm_records.BadRecord, match=f"not JSON: Expecting ',' delimiter: character {at + 1}$"):
            p5_attempts(con, path)
    assert len(read) < (at + 50_000) // 4096 + 3, f"{len(read)} pieces of {len(text) // 4096} read"
