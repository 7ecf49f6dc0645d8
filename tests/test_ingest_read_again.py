"""A period read again whose files, rows and sums are those the lake held (an upgrade that names
the files' delivery otherwise or reads them otherwise, a damaged partition restored, files
touched) says so on its committed line, where it read like new data (break50 item 7)."""

from __future__ import annotations

import shutil

from connectors.focus import FocusConnector
from service.core.lake import Lake
from tests.test_lake_integrity import BILLED, SAMPLE, partition, spendlake, write_config

AGAIN = "re-stored, its sums as before: the files, rows and sums the lake held, read again"


def test_a_period_read_again_with_its_sums_unchanged_says_so(tmp_path, monkeypatch):
    (tmp_path / "export").mkdir()
    export = tmp_path / "export" / SAMPLE.name
    shutil.copy(SAMPLE, export)
    config = write_config(tmp_path)
    first = spendlake(config, "ingest")
    assert first.exit_code == 0 and "committed 1000 rows" in first.output and AGAIN not in first.output
    monkeypatch.setattr(FocusConnector, "reader_version", FocusConnector.reader_version + 1)  # an upgraded reader
    upgraded = spendlake(config, "ingest")
    assert upgraded.exit_code == 0, upgraded.output
    assert f"trey 2024-06: committed 1000 rows USD {BILLED} (estimated); {AGAIN}" in upgraded.output
    partition(Lake(tmp_path / "lake")).unlink()  # damaged: restored from its unchanged export
    assert AGAIN in spendlake(config, "ingest").output
    export.write_text("".join(export.read_text().splitlines(keepends=True)[:-1]))  # a line fewer: new figures
    changed = spendlake(config, "ingest")
    assert "committed 999 rows" in changed.output and AGAIN not in changed.output, changed.output
