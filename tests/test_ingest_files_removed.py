"""A period read again only because files of its last delivery are gone from a folder export (a
lifecycle rule, a partial sync), none added or changed (break54's F6: an invoiced FOCUS month fell
from USD 56,042.14 to 38,751.90, exit 0, no word): a final period keeps its delivery and fails until
the files are back or `ingest --accept-removed`; an estimate shrinks with a warning naming the files
and the figures from and to."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml

from service.core.lake import Lake
from service.report.sections.restated import restated_notes
from tests.conftest import SAMPLES
from tests.test_lake_integrity import spendlake

FOCUS = SAMPLES / "focus" / "azure_focus_1.0_trey_research_1000.csv"
AZURE = SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"


def split(sample: Path, export: Path, parts: int, **columns: str) -> list[Path]:
    """The sample's rows in `parts` files under `export`, with `columns` set on every row."""
    with sample.open(encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    export.mkdir()
    files = []
    for number in range(parts):
        path = export / f"part-{number}.csv"
        with path.open("w", newline="") as out:
            writer = csv.DictWriter(out, [*rows[0], *(c for c in columns if c not in rows[0])])
            writer.writeheader()
            writer.writerows({**row, **columns} for row in rows[number::parts])
        files.append(path)
    return files


def configured(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(tmp_path / "lake"),
                                    "sources": [{"name": "t", "kind": kind, "location": str(tmp_path / "export")}]}))
    return path


def held(tmp_path: Path) -> tuple[int, str]:
    entry = Lake(tmp_path / "lake").ledger()[0]
    return entry.rows, str(entry.totals[0].billed_cost)


def test_a_final_focus_period_missing_a_file_keeps_its_delivery_and_fails_until_accepted(tmp_path):
    files = split(FOCUS, tmp_path / "export", 4, InvoiceId="INV-2024-06")
    config = configured(tmp_path, "focus")
    first = spendlake(config, "ingest")
    assert first.exit_code == 0 and "committed 1000 rows USD 193.807689048914 (final)" in first.output, first.output
    files[0].rename(tmp_path / "gone.csv")  # a lifecycle rule expired the month's first file
    for _ in range(2):  # the next run too: the gone file is still known as part of the delivery
        refused = spendlake(config, "ingest")
        assert refused.exit_code == 3, refused.output
        assert f"t 2024-06: FAILED: {files[0]}: 1 file(s) of the period's final (invoiced) delivery are gone" \
               in refused.output
        assert "`spendlake ingest --accept-removed`" in refused.output
        assert held(tmp_path) == (1000, "193.807689048914")
    status = spendlake(config, "status", "--format", "table")
    assert f"failing: source t: {files[0]}: 1 file(s)" in status.output, status.output
    accepted = spendlake(config, "ingest", "--accept-removed")
    assert accepted.exit_code == 0, accepted.output
    rows, billed = held(tmp_path)
    assert rows == 750 and billed != "193.807689048914"
    assert (f"warning: t 2024-06: 1 file(s) of its last delivery are gone from the location ({files[0]}), none "
            f"added or changed: the period shrinks from 1000 rows USD 193.807689048914 to 750 rows USD {billed}"
            ) in accepted.output
    assert spendlake(config, "ingest").exit_code == 0  # the smaller bill is now the lake's


def test_a_final_period_whose_file_comes_back_commits_its_whole_bill(tmp_path):
    files = split(FOCUS, tmp_path / "export", 2, InvoiceId="INV-2024-06")
    config = configured(tmp_path, "focus")
    assert spendlake(config, "ingest").exit_code == 0
    files[1].rename(tmp_path / "gone.csv")
    assert spendlake(config, "ingest").exit_code == 3
    (tmp_path / "gone.csv").rename(files[1])
    back = spendlake(config, "ingest")
    assert back.exit_code == 0 and "t 2024-06: committed 1000 rows USD 193.807689048914 (final)" in back.output
    assert "gone" not in back.output, back.output


def test_an_azure_cost_estimate_missing_a_file_shrinks_with_a_warning(tmp_path):
    files = split(AZURE, tmp_path / "export", 2)
    config = configured(tmp_path, "azure-cost")
    assert spendlake(config, "ingest").exit_code == 0
    rows, effective = (lambda e: (e.rows, str(e.totals[0].effective_cost)))(Lake(tmp_path / "lake").ledger()[0])
    files[1].unlink()
    shrunk = spendlake(config, "ingest")
    assert shrunk.exit_code == 0, shrunk.output
    entry = Lake(tmp_path / "lake").ledger()[0]
    assert entry.rows < rows
    assert (f"t 2023-09: 1 file(s) of its last delivery are gone from the location ({files[1]}), none added or "
            f"changed: the period shrinks from {rows} rows USD {effective} effective to {entry.rows} rows USD "
            f"{entry.totals[0].effective_cost} effective") in shrunk.output, shrunk.output
    status = spendlake(config, "status", "--format", "table")
    assert (f"removed: source t 2023-09: read again at {entry.ingested_at} only because files of its last delivery "
            f"were gone from the location (no delivery of the cloud): it shrank from {rows} rows USD {effective} "
            "effective") in status.output, status.output
    note = restated_notes([entry])[0]  # the report's note under its Bills table
    assert note.startswith("Bill 2023-09 / t / USD restated: files removed from the location, the rest read again at ")
    assert "delivered again" not in note


def test_a_file_gone_while_another_is_added_is_a_new_delivery_without_the_warning(tmp_path):
    files = split(FOCUS, tmp_path / "export", 2, InvoiceId="INV-2024-06")
    config = configured(tmp_path, "focus")
    assert spendlake(config, "ingest").exit_code == 0
    files[1].rename(tmp_path / "export" / "part-1-renamed.csv")  # the export re-delivered under other names
    again = spendlake(config, "ingest")
    assert again.exit_code == 0 and "committed 1000 rows" in again.output and "gone" not in again.output, again.output
    assert json.loads(spendlake(config, "status", "--format", "json").output)[0]["rows"] == 1000
