"""Every share shown (the report's tables and summary, `spendlake attribute`'s table) is one: 0 to
100% of a positive total. A bill's credits make the total net, and a credit or a part above that
net total shows — with a note saying why; CSV and JSON keep their fields, null where — shows."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from service.report.shares import share_notes, share_pct
from test_report_bills import report, spendlake
from test_report_unallocated_headline import HEADER, line

NOTE = ("A share is shown only between 0 and 100% of its total: credits make the total net (EUR 948.13), so a "
        "credit, or a part larger than that net total, is no share of it and shows — (the amount stands).")


@pytest.mark.parametrize(("part", "total", "share"), [
    ("25", "100", Decimal("25.0")), ("0", "100", Decimal("0.0")), ("100", "100", Decimal("100.0")),
    ("-2.125", "998.125", None),  # an untagged credit: was -0.2%
    ("1000.25", "998.125", None),  # a part above a total credits lowered: was 100.2%
    ("-5", "-5", None), ("5", "-5", None), ("0", "0", None), ("1", None, None),
])
def test_a_share_is_one_only_between_none_and_all_of_a_positive_total(part, total, share):
    assert share_pct(Decimal(part), None if total is None else Decimal(total)) == share


def test_a_table_whose_shares_all_show_has_no_note():
    rows = [{"currency": "EUR", "cost": Decimal("60")}, {"currency": "EUR", "cost": Decimal("40")}]
    assert share_notes(rows, "cost", lambda row: Decimal("100")) == []
    assert share_notes([{"currency": "EUR", "cost": Decimal(0)}], "cost", lambda row: Decimal(0)) == []


def test_credits_that_cancel_the_charges_are_said_too():
    """EUR 100 of usage and a -100 credit: a total of 0, of which neither row is a share."""
    rows = [{"currency": "EUR", "cost": Decimal("100")}, {"currency": "EUR", "cost": Decimal("-100")}]
    [note] = share_notes(rows, "cost", lambda row: Decimal(0))
    assert "credits make the total net (EUR 0.00)" in note


@pytest.fixture
def credits_lake(tmp_path):
    """EUR 1,000.25 of e1 (pretrain), 400 of e2 and a -450 credit of e3 (infra), an untagged
    -2.125 credit: EUR 948.125 in all."""
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "june.csv").write_text(
        HEADER + line("1000.25", 2, "Usage", '{""team"": ""pretrain"", ""experiment"": ""e1""}')
        + line("400", 2, "Usage", '{""team"": ""infra"", ""experiment"": ""e2""}')
        + line("-450", 3, "Credit", '{""team"": ""infra"", ""experiment"": ""e3""}') + line("-2.125", 4, "Credit", ""))
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: open, kind: focus, location: '{tmp_path / 'open'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    return tmp_path, config


def table(data: dict, key: str) -> dict:
    return next(t for s in data["sections"] for t in s["tables"] if t["key"] == key)


def test_the_reports_shares_of_a_bill_with_credits_are_shares_or_none_with_a_note(credits_lake):
    """The unallocated table read team -0.2% and the top experiments e1 105.5%, e3 -47.5%."""
    folder = report(*credits_lake, "2026-06-04")
    data = json.loads((folder / "report.json").read_text())
    unallocated = table(data, "unallocated")
    assert [(r["dimension"], r["share_pct"]) for r in unallocated["rows"]] == [
        ("team", None), ("project", "100.0"), ("experiment", None)]
    assert unallocated["notes"] == [NOTE]
    experiments = table(data, "top_experiments")
    assert [(r["experiment"], r["share_pct"]) for r in experiments["rows"]] == [
        ("e1", None), ("e2", "42.2"), ("unallocated", None), ("e3", None)]
    assert experiments["notes"] == [NOTE]
    assert "team,EUR,-2.125000000000,948.125000000000,\n" in (folder / "unallocated.csv").read_text()
    summary = (folder / "summary.md").read_text()
    # where a share is none the summary gives the amount, as the page does beside the —
    assert ("- team / EUR: −EUR 2.13 unallocated (no share)\n- project / EUR: 100.0%\n"
            "- experiment / EUR: −EUR 2.13 unallocated (no share)\n\n_" + NOTE + "_\n") in summary
    assert "-0.2%" not in summary
    page = (folder / "report.html").read_text()
    assert page.count(NOTE) == 2 and "-0.2%" not in page and "105.5%" not in page


def test_attributes_table_shows_shares_that_are_one_and_says_why_the_others_are_not(credits_lake):
    _, config = credits_lake
    window = ("--since", "2026-06-01", "--until", "2026-06-05", "--by", "experiment")
    out = spendlake(config, "attribute", *window, "--format", "table").output
    rows = {cells[0]: cells[-1] for cells in ([c.strip() for c in row.split("│")[1:-1]] for row in out.splitlines()
                                              if row.startswith("│ e") or row.startswith("│ unallocated"))}
    assert rows == {"e1": "—", "e2": "42.2%", "unallocated": "—", "e3": "—"}
    assert "note: a share is shown only between 0 and 100% of its total: credits make the total net (EUR 948.13)" in out
    assert "share" not in spendlake(config, "attribute", *window, "--format", "csv").output.splitlines()[0]
    assert not any("share" in row for row in json.loads(
        spendlake(config, "attribute", *window, "--format", "json").output)["rows"])
