"""Lines a third party invoices (InvoiceIssuerName not the provider nor one of its own companies)
that bill a cost anyway: FOCUS bills 0 on a charge a third party collects (BilledCost-C-005-C).
Ingest keeps them and says so once per delivery; the export stays valid, every cost the lake's
(service/core/invoice_issuers.py)."""

from __future__ import annotations

from decimal import Decimal

import duckdb
import pytest
from billing_helpers import failures, ingest_files

from service.core.config import parse_config
from service.export import ExportOptions, export_focus
from tests.focus_validator import executable, validate

HEADER = ("BilledCost,EffectiveCost,BillingCurrency,BillingPeriodStart,BillingPeriodEnd,ChargePeriodStart,"
          "ChargePeriodEnd,ProviderName,InvoiceIssuerName,ChargeCategory,ServiceName,ResourceId")
DAY = "2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,2026-11-02T00:00:00Z,2026-11-02T01:00:00Z"
LINES = [
    f"12.50,12.50,USD,{DAY},Microsoft,Contoso Reseller Ltd,Usage,Virtual Machines,vm-1",  # a third party, billed
    f"0.75,0.75,USD,{DAY},Microsoft,Contoso Reseller Ltd,Usage,Virtual Machines,vm-2",  # another of its lines
    f"0,3.00,USD,{DAY},Microsoft,Fabrikam Marketplace,Purchase,Fabrikam SaaS,saas-1",  # billed 0: as FOCUS wants
    f"4.00,4.00,USD,{DAY},Microsoft,Microsoft Ireland Operations Ltd,Usage,Storage,disk-1",  # the provider's own
    f"2.00,2.00,USD,{DAY},Microsoft,,Usage,Storage,disk-2",  # no issuer
    f"1.00,1.00,EUR,{DAY},Google Cloud,Acme Partner GmbH,Usage,Compute Engine,gce-1",  # a third party, billed
]


def lake_of(tmp_path, lines=LINES):
    path = tmp_path / "bill.csv"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    lake, result = ingest_files(tmp_path, ("bill", "focus", path))
    assert failures(result) == []
    return path, lake, result


def test_lines_a_third_party_invoices_that_bill_a_cost_are_said_once_per_delivery_and_kept(tmp_path):
    """Such lines passed ingest silently. The warning names the file, the lines' count, their billed
    cost per currency and the issuers; the lines stay as the bill says (its total counts them)."""
    path, lake, result = lake_of(tmp_path)
    said = [w for o in result.outcomes for w in o.warnings if "invoiced by a company other than their provider" in w]
    assert said == [
        f"{path}: 3 line(s) invoiced by a company other than their provider ('Contoso Reseller Ltd' for "
        "'Microsoft', 'Acme Partner GmbH' for 'Google Cloud') bill EUR 1.00, USD 13.25 (BilledCost), where FOCUS "
        "bills 0 on a charge a third party collects (a marketplace's seller, a reseller: its own invoice bills it); "
        "they are kept and counted in the bill's total: check they are not billed again on the third party's "
        "invoice (`spendlake export` writes their InvoiceIssuerName as the provider, the company in "
        "x_InvoicingEntity)"]
    assert lake.query().execute("SELECT BillingCurrency, sum(BilledCost) FROM costs GROUP BY ALL ORDER BY ALL"
                                ).fetchall() == [("EUR", Decimal(1)), ("USD", Decimal("19.25"))]


def test_a_delivery_without_such_lines_says_nothing(tmp_path):
    _, _, result = lake_of(tmp_path, [line for line in LINES if "Reseller" not in line and "Acme" not in line])
    assert not [w for o in result.outcomes for w in o.warnings if "invoiced by a company other than" in w]


def exported(tmp_path, lake, csv=False):
    config = parse_config({"lake": str(lake.root), "sources": [
        {"name": "bill", "kind": "focus", "location": str(tmp_path / "bill.csv")}]})
    out = tmp_path / ("csv" if csv else "parquet")
    export_focus(config, ExportOptions(str(out), csv=csv))
    return out / "2026-11" / ("cost_and_usage.csv" if csv else "cost_and_usage.parquet")


def test_the_export_names_the_provider_as_issuer_of_a_billed_third_party_line_and_keeps_every_cost(tmp_path):
    """BilledCost-C-005-C: the validator fails a line whose issuer is not its provider and whose
    BilledCost is not 0. The export writes the provider as the issuer of a line billing a cost (the
    company stays in x_InvoicingEntity); a third party's line billing 0 keeps its issuer."""
    _, lake, _ = lake_of(tmp_path)
    rows = duckdb.sql(f"SELECT ResourceId, BilledCost, ProviderName, InvoiceIssuerName, x_InvoicingEntity "
                      f"FROM '{exported(tmp_path, lake)}' ORDER BY ResourceId").fetchall()
    assert rows == [
        ("disk-1", Decimal(4), "Microsoft", "Microsoft", "Microsoft Ireland Operations Ltd"),
        ("disk-2", Decimal(2), "Microsoft", "Microsoft", None),
        ("gce-1", Decimal(1), "Google Cloud", "Google Cloud", "Acme Partner GmbH"),
        ("saas-1", Decimal(0), "Microsoft", "Fabrikam Marketplace", "Fabrikam Marketplace"),
        ("vm-1", Decimal("12.5"), "Microsoft", "Microsoft", "Contoso Reseller Ltd"),
        ("vm-2", Decimal("0.75"), "Microsoft", "Microsoft", "Contoso Reseller Ltd"),
    ]


@pytest.mark.slow
def test_the_validator_passes_billed_cost_c_005_c_on_the_export(tmp_path):
    """The rule the lines failed, judged by focus-validator itself (skips without it, fails under CI)."""
    executable()
    _, lake, _ = lake_of(tmp_path)
    for csv in (False, True):
        report = validate(exported(tmp_path, lake, csv))
        assert report.rules["BilledCost-C-005-C"].status == "PASS", report.rules["BilledCost-C-005-C"]
