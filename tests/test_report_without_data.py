"""`spendlake report` on a lake without a bill: a clear message and no files, never an all-zero
report that looks like days without spend."""

from __future__ import annotations

import yaml
from click.testing import CliRunner

from service.cli.main import cli


def test_an_empty_lake_writes_no_report_and_says_to_ingest(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake")}))
    out = tmp_path / "reports"
    for args in ([], ["--date", "2026-11-01"]):
        result = CliRunner().invoke(cli, ["--config", str(config), "report", *args, "--out", str(out)])
        assert result.exit_code == 3, result.output  # main: 0, an all-zero report written
        assert f"the lake at {(tmp_path / 'lake').resolve()} is empty: no report written — run `spendlake ingest`" \
            in result.output
        assert not out.exists()
