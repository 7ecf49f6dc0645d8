"""The headline "Unallocated, team, month to date" is a share finance can read: 0 to 100% of the
month's spend, else (credits on no team, or untagged charges against tagged credits) the amount."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from service.report.data import unallocated_headline
from test_report_bills import report, spendlake

HEADER = ("BilledCost,EffectiveCost,BillingCurrency,BillingAccountId,InvoiceId,BillingPeriodStart,BillingPeriodEnd,"
          "ChargePeriodStart,ChargePeriodEnd,ChargeCategory,Tags\n")


def line(cost: str, day: int, category: str, tags: str) -> str:
    return (f'{cost},{cost},EUR,ba-1,,2026-06-01,2026-07-01,2026-06-0{day},2026-06-0{day + 1},{category},'
            f'"{tags}"\n')


def test_a_month_whose_only_unallocated_spend_is_a_credit_shows_the_credit_not_a_negative_share(tmp_path):
    """An untagged EUR -2.125 credit against EUR 1,000.25 of the team's usage: the headline read
    "-0.2%" (of EUR 998.125); it now reads the credit, as the bill shows it."""
    (tmp_path / "open").mkdir()
    (tmp_path / "open" / "june.csv").write_text(
        HEADER + line("1000.25", 2, "Usage", '{""team"": ""pretrain""}') + line("-2.125", 4, "Credit", ""))
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: ./lake\nsources:\n  - {{name: open, kind: focus, location: '{tmp_path / 'open'}'}}\n")
    assert spendlake(config, "ingest").exit_code == 0
    folder = report(tmp_path, config, "2026-06-04")
    [headline] = [h for h in json.loads((folder / "report.json").read_text())["headlines"]
                  if h["label"].startswith("Unallocated")]
    assert (headline["label"], headline["kind"], Decimal(headline["value"])) == (
        "Unallocated, team, month to date, a net credit (EUR)", "money", Decimal("-2.125"))
    assert "- Unallocated, team, month to date, a net credit (EUR): −EUR 2.13\n" in (folder / "summary.md").read_text()


def row(unallocated: str, total: str) -> dict:
    return {"dimension": "team", "currency": "EUR", "unallocated_cost": Decimal(unallocated),
            "total_cost": Decimal(total), "share_pct": (Decimal(unallocated) * 100 / Decimal(total)).quantize(
                Decimal("0.1"))}


@pytest.mark.parametrize(("unallocated", "total", "shown"), [
    ("25", "100", ("Unallocated, team, month to date (EUR)", "percent", Decimal("25.0"))),
    ("0", "100", ("Unallocated, team, month to date (EUR)", "percent", Decimal("0.0"))),
    ("100", "100", ("Unallocated, team, month to date (EUR)", "percent", Decimal("100.0"))),
    # untagged charges, tagged credits larger than the tagged charges: 200% of the month
    ("100", "50", ("Unallocated, team, month to date (EUR)", "money", Decimal("100"))),
    ("-5", "95", ("Unallocated, team, month to date, a net credit (EUR)", "money", Decimal("-5"))),
    ("-5", "-5", ("Unallocated, team, month to date, a net credit (EUR)", "money", Decimal("-5"))),
])
def test_the_headline_is_a_share_only_between_none_and_all_of_the_month(unallocated, total, shown):
    headline = unallocated_headline(row(unallocated, total))
    assert (headline.label, headline.kind, headline.value) == shown
