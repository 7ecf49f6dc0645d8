"""A team or project with no cost in a comparison window that holds cost spent $0 there: the
spend tables said "—" for it (as for a window the lake has no cost in at all) while the top
movers beside them said $0.00 for the same day."""

from __future__ import annotations

import json

from test_report_bills import report, spendlake
from test_report_unallocated_headline import HEADER, line


def test_a_team_without_cost_the_day_before_spent_nothing_then_not_an_unknown(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "june.csv").write_text(
        HEADER + line("100", 2, "Usage", '{""team"": ""pretrain""}') + line("80", 3, "Usage", '{""team"": ""pretrain""}')
        + line("40", 3, "Usage", '{""team"": ""infra""}'))
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: open, kind: focus, location: '{tmp_path / 'open'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    folder = report(tmp_path, config, "2026-06-03")
    data = json.loads((folder / "report.json").read_text())
    tables = {t["key"]: t for s in data["sections"] for t in s["tables"]}
    teams = {row["team"]: row for row in tables["spend_by_team"]["rows"]}
    assert (teams["infra"]["day_previous"], teams["infra"]["day_change_pct"]) == ("0", None)
    assert teams["pretrain"]["day_previous"] == "100.000000000000"
    [mover] = [row for row in tables["top_movers"]["rows"] if row["team"] == "infra"]
    assert mover["previous_cost"] == "0"  # as the movers had it
    page = (folder / "report.html").read_text().split('data-table="spend_by_team"')[1].split("</table>")[0]
    assert "<td>infra</td><td class=\"currency\">EUR</td><td class=\"num\">EUR 0.00</td>" in page
    # no cost at all the day before (the first day of the lake's data): unknown, not $0
    first = json.loads((report(tmp_path, config, "2026-06-02") / "report.json").read_text())
    [by_team] = [t for s in first["sections"] for t in s["tables"] if t["key"] == "spend_by_team"]
    assert [row["day_previous"] for row in by_team["rows"]] == [None]
