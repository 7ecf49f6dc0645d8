"""Azure cost details: EA (both header generations) and MCA, actual and amortized, bad input."""

from __future__ import annotations

import codecs
import gzip
import json
from datetime import date, datetime
from decimal import Decimal

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from billing_helpers import failures, ingest_files, sums
from click.testing import CliRunner
from conftest import DATA, SAMPLES

from connectors import azure_cost
from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError
from service.ingest.billing import ingest
from tests.attribution_helpers import declared_sources

# Older EA header: Cost / BillingCurrency / Product; UTF-8 BOM; MM/DD/YYYY; LF.
OLD_EA = ("\ufeffBillingAccountId,BillingPeriodStartDate,BillingPeriodEndDate,SubscriptionId,Date,Product,MeterCategory,"
          "Quantity,Cost,BillingCurrency,ResourceId,Tags,ChargeType,PricingModel,AdditionalInfo\n"
          '8611537,09/01/2023,09/30/2023,sub-1,09/02/2023,NDasrA100 v4,Virtual Machines,1,27.197,USD,/subscriptions/sub-1/vm1,'
          '"""team"": ""pretrain"",""experiment"": ""run-7"",""n"": 3",Usage,OnDemand,'
          '"{""ServiceType"":""Standard_ND96asr_v4"",""VCPUs"":96}"\n'
          "8611537,09/01/2023,09/30/2023,sub-1,09/30/2023,Storage,Storage,2,0.1,USD,,,Usage,OnDemand,\n")

# Newer EA header: CostInBillingCurrency / BillingCurrencyCode / ProductName / benefitId; CRLF; M/D/YYYY.
NEW_EA = ("InvoiceSectionName,SubscriptionId,Date,ProductName,MeterCategory,Quantity,CostInBillingCurrency,"
          "BillingCurrencyCode,BillingPeriodStartDate,BillingPeriodEndDate,Tags,ChargeType,PricingModel,benefitId\r\n"
          'Lorem,sub-2,9/2/2023,Peering,Virtual Network,1,0.000305367,CAD,9/1/2023,9/30/2023,"""a"": ""b""",Usage,OnDemand,\r\n'
          "Lorem,sub-2,10/12/2023,Queues,Storage,1,5.64902E-05,CAD,10/1/2023,10/31/2023,,Usage,Spot,\r\n")

# MCA: camelCase, invoice id present, tags with braces.
MCA = ("billingAccountId,billingProfileId,invoiceId,date,productName,meterCategory,quantity,costInBillingCurrency,"
       "billingCurrency,billingPeriodStartDate,billingPeriodEndDate,tags,chargeType,pricingModel\n"
       'acct:1,bp-1,G012345678,11/03/2023,Premium SSD,Storage,1,1.5,EUR,11/01/2023,11/30/2023,"{""team"": ""data""}",Usage,OnDemand\n'
       "acct:1,bp-1,G012345678,11/04/2023,Refund,Storage,1,-0.5,EUR,11/01/2023,11/30/2023,,Refund,OnDemand\n")


def write(tmp_path, name: str, content: str | bytes):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def rows(lake, columns: str) -> list[tuple]:
    return lake.query().execute(f"SELECT {columns} FROM costs ORDER BY ChargePeriodStart").fetchall()


def test_older_ea_header_bom_dates_tags_without_braces(tmp_path):
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "ea.csv", OLD_EA)))
    assert failures(result) == []
    got = rows(lake, "ChargePeriodStart, ChargePeriodEnd, BillingPeriodStart, BillingPeriodEnd, BilledCost, "
                     "EffectiveCost, BillingCurrency, ChargeDescription, SubAccountId, Tags, x_instance_type, "
                     "PricingCategory, ProviderName")
    assert got[0] == (datetime(2023, 9, 2), datetime(2023, 9, 3), datetime(2023, 9, 1), datetime(2023, 10, 1),
                      Decimal("27.197"), None, "USD", "NDasrA100 v4", "sub-1",
                      {"team": "pretrain", "experiment": "run-7", "n": "3"}, "Standard_ND96asr_v4", "Standard",
                      "Microsoft")
    assert got[1][0] == datetime(2023, 9, 30) and got[1][9] is None and got[1][10] is None


def test_newer_ea_header_crlf_and_unpadded_dates_are_month_first(tmp_path):
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "ea.csv", NEW_EA)))
    assert failures(result) == []
    got = rows(lake, "ChargePeriodStart, billing_period, BilledCost, BillingCurrency, ChargeDescription, Tags, "
                     "PricingCategory")
    assert got == [(datetime(2023, 9, 2), "2023-09", Decimal("0.000305367"), "CAD", "Peering", {"a": "b"}, "Standard"),
                   (datetime(2023, 10, 12), "2023-10", Decimal("0.0000564902"), "CAD", "Queues", None, "Dynamic")]


def test_parquet_export_with_typed_and_iso_dates(tmp_path):
    table = pa.table({
        "Date": pa.array([date(2024, 3, 31), date(2024, 3, 1)], pa.date32()),
        "BillingPeriodStartDate": ["2024-03-01", "2024-03-01"],
        "CostInBillingCurrency": pa.array([0.1, 0.2], pa.float64()),
        "BillingCurrency": ["USD", "USD"],
        "Tags": ['"team": "eval"', None],
    })
    pq.write_table(table, tmp_path / "part_0.parquet")
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "part_0.parquet"))
    assert failures(result) == []
    assert rows(lake, "ChargePeriodStart, BillingPeriodStart, BilledCost, Tags") == [
        (datetime(2024, 3, 1), datetime(2024, 3, 1), Decimal("0.2"), None),
        (datetime(2024, 3, 31), datetime(2024, 3, 1), Decimal("0.1"), {"team": "eval"})]


def test_iso_date_times_as_the_apis_write_them_are_read(tmp_path):
    # Cost details from the Consumption and Cost Details APIs (and tools that save them as CSV)
    # write '2024-05-02T00:00:00.0000000Z'; month-first dates beside them stay month-first.
    iso = NEW_EA.replace("9/2/2023", "2023-09-02T00:00:00.0000000Z").replace("9/1/2023", "2023-09-01T00:00:00Z")
    iso = iso.replace("9/30/2023", "2023-09-30T00:00:00.0000000Z")
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "api.csv", iso)))
    assert failures(result) == []
    assert rows(lake, "ChargePeriodStart, ChargePeriodEnd, BillingPeriodStart, BillingPeriodEnd, BilledCost") == [
        (datetime(2023, 9, 2), datetime(2023, 9, 3), datetime(2023, 9, 1), datetime(2023, 10, 1),
         Decimal("0.000305367")),
        (datetime(2023, 10, 12), datetime(2023, 10, 13), datetime(2023, 10, 1), datetime(2023, 11, 1),
         Decimal("0.0000564902"))]


# Red Hat's nise (koku-nise 5.4.4, `nise report azure`) writes an untagged line's Tags as `""`,
# a JSON empty string; its header and two of its lines (one tagged), columns cut after PricingModel.
NISE = ("InvoiceSectionName,SubscriptionId,ResourceGroupName,Date,MeterCategory,Quantity,CostInBillingCurrency,"
        "ResourceId,Tags,AdditionalInfo,ChargeType,Frequency,PricingModel,BillingCurrency,BillingPeriodStartDate,"
        "BillingPeriodEndDate\n"
        'IT Services,1242310300374,RG2,2026-10-01,Virtual Machine Licenses,0.9440761848818126,0.2969025193834812,'
        'subscriptions/1242310300374/resourceGroups/RG2/providers/Microsoft.Compute/virtualMachine/mysa1,"""""",'
        '"{""ServiceType"": ""Standard_B1ls"", ""VCPUs"": 1}",Usage,UsageBased,,USD,2026-10-01,2026-10-31\n'
        'IT Services,1242310300374,costmgmt,2026-10-01,Bandwidth,0.24761560195104138,0.06996874064330576,'
        'subscriptions/1242310300374/resourceGroups/costmgmt/providers/Microsoft.Compute/virtualMachine/mysa1,'
        '"{""environment"": ""dev"", ""project"": ""p2""}",,Usage,UsageBased,,USD,2026-10-01,2026-10-31\n')


def test_an_untagged_line_written_as_a_json_empty_string_has_no_tags(tmp_path):
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "costreport_1.csv", NISE)))
    assert failures(result) == []
    assert sorted(rows(lake, "ServiceName, BilledCost, Tags"), key=str) == [
        ("Bandwidth", Decimal("0.069968740643"), {"environment": "dev", "project": "p2"}),
        ("Virtual Machine Licenses", Decimal("0.296902519383"), None)]
    bad = NISE.replace('"""""",', '"""a"",",')  # any other text that is no object still fails
    _, result = ingest_files(tmp_path / "bad", ("azure", "azure-cost", write(tmp_path, "bad.csv", bad)))
    assert "column Tags: not a JSON object" in " ".join(failures(result))


def test_mca_camel_case_with_invoice_id_is_final(tmp_path):
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "mca.csv", MCA)))
    assert failures(result) == []
    assert rows(lake, "ChargeCategory, ChargeClass, BilledCost, Tags, InvoiceId") == [
        ("Usage", None, Decimal("1.5"), {"team": "data"}, "G012345678"),
        ("Purchase", "Correction", Decimal("-0.5"), None, "G012345678")]
    [entry] = lake.ledger()
    assert entry.final and entry.billing_period == "2023-11"


def test_actual_fills_billed_and_amortized_fills_effective_the_other_stays_null(tmp_path):
    lake, result = ingest_files(
        tmp_path,
        ("actual", "azure-cost", SAMPLES / "azure" / "ea_actual_trey_research_small.csv"),
        ("amortized", "azure-cost", SAMPLES / "azure" / "ea_amortized_trey_research_small.csv"))
    assert failures(result) == []
    assert sums(lake, "source") == [("actual", 11, Decimal("8.545007786742"), None),
                                    ("amortized", 28, None, Decimal("16.296932136637"))]
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(lake.root), "sources": declared_sources(lake)}))
    run = CliRunner().invoke(cli, ["--config", str(config), "status", "--format", "json"])
    assert run.exit_code == 0, run.output
    status = {e["source"]: (e["billed_cost"], e["effective_cost"]) for e in json.loads(run.output)}
    assert status == {"actual": ("8.545007786742", None), "amortized": (None, "16.296932136637")}


def test_ingest_summary_names_the_effective_cost_of_an_amortized_export(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "amortized", "kind": "azure-cost",
         "location": str(SAMPLES / "azure" / "ea_amortized_trey_research_small.csv")}]}))
    run = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert run.exit_code == 0, run.output
    assert "amortized 2023-09: committed 28 rows USD 16.296932136637 effective (estimated)" in run.output


def test_cost_type_option_overrides_detection_and_is_azure_only(tmp_path):
    source = {"name": "az", "kind": "azure-cost", "location": str(SAMPLES / "azure" / "ea_actual_anonymous_sample.csv"),
              "cost_type": "amortized"}
    lake, result = ingest_files(tmp_path, source)
    assert failures(result) == []
    assert sums(lake) == [("Microsoft", "CAD", 27, None, Decimal("1.261369265057"))]
    with pytest.raises(ConfigError, match=r"sources\[0\]\.cost_type: kind focus takes no such key"):
        parse_config({"sources": [{"name": "f", "kind": "focus", "location": "x", "cost_type": "actual"}]})


def test_two_currencies_in_one_period_are_kept_apart(tmp_path):
    content = NEW_EA.replace("Queues,Storage,1,5.64902E-05,CAD,10/1/2023,10/31/2023",
                             "Queues,Storage,1,5.64902E-05,USD,9/1/2023,9/30/2023")
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "ea.csv", content)))
    assert failures(result) == []
    [entry] = lake.ledger()
    assert [(t.currency, t.rows, t.billed_cost) for t in entry.totals] == [
        ("CAD", 1, Decimal("0.000305367")), ("USD", 1, Decimal("0.0000564902"))]


@pytest.mark.parametrize("name", ["le.csv", "be.csv.gz"])
def test_a_utf16_export_reads_as_its_utf8_text(tmp_path, name):
    """A UTF-16 CSV (byte order mark, either byte order, plain or gzip'ed) is the same export
    as its UTF-8 text: DuckDB reads UTF-8 only, so it is read from a UTF-8 copy in scratch."""
    plain, _ = ingest_files(tmp_path / "utf8", ("azure", "azure-cost", write(tmp_path, "new.csv", NEW_EA)))
    encoded = (codecs.BOM_UTF16_LE + NEW_EA.encode("utf-16-le") if name == "le.csv"
               else gzip.compress(codecs.BOM_UTF16_BE + NEW_EA.encode("utf-16-be")))
    lake, result = ingest_files(tmp_path / "utf16", ("azure", "azure-cost", write(tmp_path, name, encoded)))
    assert failures(result) == []
    columns = "ChargePeriodStart, BilledCost, BillingCurrency, ChargeDescription, Tags"
    assert rows(lake, columns) == rows(plain, columns) and len(rows(lake, columns)) == 2


def test_a_localized_header_reads_by_the_names_in_parentheses(tmp_path):
    """A portal download in German names columns `<Übersetzung> (<Name>)`; opencost's German
    header set (pkg/cloud/azure/resources/billingexports/headersets/German.csv, Apache-2.0) is
    pay-as-you-go's cost details (PreTaxCost), read as the English one is."""
    german = {"Date": "Datum (Date)", "CostInBillingCurrency": "Kosten (CostInBillingCurrency)",
              "BillingCurrencyCode": "Abrechnungswährung (BillingCurrencyCode)", "Tags": "Tags (Tags)"}
    header, rest = NEW_EA.split("\r\n", 1)
    localized = ",".join(german.get(field, field) for field in header.split(",")) + "\r\n" + rest
    plain, _ = ingest_files(tmp_path / "plain", ("azure", "azure-cost", write(tmp_path, "new.csv", NEW_EA)))
    lake, result = ingest_files(tmp_path / "de", ("azure", "azure-cost", write(tmp_path, "de.csv", localized)))
    assert failures(result) == []
    columns = "ChargePeriodStart, BilledCost, BillingCurrency, Tags"
    assert rows(lake, columns) == rows(plain, columns) and len(rows(lake, columns)) == 2

    payg = write(tmp_path, "German.csv", "Abonnement-GUID (SubscriptionGuid),UsageDateTime (UsageDateTime),"
                 "Kategorie der Verbrauchseinheit (MeterCategory),UsageQuantity (UsageQuantity),"
                 "PreTaxCost (PreTaxCost),Currency\n"
                 "11111111-12ab-34dc-56ef-123456abcdef,2021-02-02,Load Balancer,3,0.075,USD\n")
    lake, result = ingest_files(tmp_path / "payg", ("azure", "azure-cost", payg))
    assert failures(result) == []
    assert rows(lake, "ChargePeriodStart, BilledCost, BillingCurrency, ServiceName, ConsumedQuantity") == [
        (datetime(2021, 2, 2), Decimal("0.075"), "USD", "Load Balancer", Decimal(3))]


# Pay-as-you-go (MOSA) cost details, dataset 2019-11-01: still the latest Microsoft documents for
# MOSA ("Cost and Usage Details (Usage Only)"); koku's costreport_a243c6f2-….csv (Apache-2.0),
# its three lines as the code index stores them.
MOSA = ("SubscriptionGuid,ResourceGroup,ResourceLocation,UsageDateTime,MeterCategory,MeterSubcategory,MeterId,"
        "MeterName,MeterRegion,UsageQuantity,ResourceRate,PreTaxCost,ConsumedService,ResourceType,InstanceId,Tags,"
        "OfferId,AdditionalInfo,ServiceInfo1,ServiceInfo2,ServiceName,ServiceTier,Currency,UnitOfMeasure\n"
        "0039de71-ca37-4a17-a104-17665a50e7fc,COSTMGMT,US East 2,2019-07-29 00:00:00,Bandwidth,,"
        "0fc067a1-65d2-46da-b24b-7a9cbe2c69bd,Data Transfer Out - Free,,0.000004,0,0,Microsoft.Compute,"
        "Microsoft.Compute/virtualMachines,/subscriptions/2639de71-ca37-4a17-a104-17665a50e7fc/resourceGroups/COSTMGMT/"
        'providers/Microsoft.Compute/virtualMachines/test-vm-1,"{""project"":""p1""}",,'
        '"{  ""UsageType"": ""DataTrOut"",  ""ImageType"": null,  ""ServiceType"": null,  ""VMName"": null,'
        '  ""VMProperties"": null,  ""VCPUs"": ""0"",  ""ConsumptionMeter"": ""9995d93a-7d35-4d3f-9c69-7a7fea447ef4""}",,,Bandwidth,Bandwidth,USD,\n'
        "0039de71-ca37-4a17-a104-17665a50e7fc,costmgmt,US East 2,2019-07-28 00:00:00,Storage,Standard Page Blob,"
        "0fc067a1-65d2-46da-b24b-7a9cbe2c69bd,Disk Read Operations,,0.288,0.00036,0.00010368,Microsoft.Storage,"
        "Microsoft.Storage/storageAccounts,/subscriptions/2639de71-ca37-4a17-a104-17665a50e7fc/resourceGroups/costmgmt/"
        'providers/Microsoft.Storage/storageAccounts/costmgmtdiag,"{""project"":""p1""}",,,,,Storage,'
        "Standard Page Blob,USD,\n"
        "0039de71-ca37-4a17-a104-17665a50e7fc,costmgmt,US East 2,2019-07-28 00:00:00,Storage,Tables,"
        "0fc067a1-65d2-46da-b24b-7a9cbe2c69bd,LRS Data Stored,,0.000144,0.045,0.00000648,Microsoft.Storage,"
        "Microsoft.Storage/storageAccounts,/subscriptions/2639de71-ca37-4a17-a104-17665a50e7fc/resourceGroups/costmgmt/"
        'providers/Microsoft.Storage/storageAccounts/costmgmtdiag,"{""project"":""p1""}",,,,,Storage,Tables,USD,\n')


def test_pay_as_you_go_cost_details_are_read(tmp_path):
    """A MOSA subscription's cost details export failed as 'the retired pay-as-you-go v1 format':
    it is that contract's current dataset. By hand: 0 + 0.00010368 + 0.00000648 = 0.00011016 USD
    in 2019-07, usage only (no ChargeType), actual cost."""
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, "costreport_a243c6f2.csv", MOSA)))
    assert failures(result) == []
    assert sums(lake, "billing_period, BillingCurrency") == [("2019-07", "USD", 3, Decimal("0.00011016"), None)]
    assert rows(lake, "ChargePeriodStart, ChargeCategory, SubAccountId, SkuMeter, ConsumedQuantity, "
                      "ContractedUnitPrice, Tags")[0] == (
        datetime(2019, 7, 28), "Usage", "0039de71-ca37-4a17-a104-17665a50e7fc", "Disk Read Operations",
        Decimal("0.288"), Decimal("0.00036"), {"project": "p1"})
    assert rows(lake, "ResourceId")[-1] == ("/subscriptions/2639de71-ca37-4a17-a104-17665a50e7fc/resourceGroups/"
                                            "COSTMGMT/providers/Microsoft.Compute/virtualMachines/test-vm-1",)


# EA usage details, dataset 2019-10-01: Microsoft's schema (dataset-schema/cost-usage-details-ea,
# "Version 2019-10-01", as koku's English header test has it) lists 27 columns and no currency.
EA_2019 = ("DepartmentName,AccountName,AccountOwnerId,SubscriptionGuid,SubscriptionName,ResourceGroup,"
           "ResourceLocation,UsageDateTime,ProductName,MeterCategory,MeterSubcategory,MeterId,MeterName,MeterRegion,"
           "UnitOfMeasure,UsageQuantity,ResourceRate,PreTaxCost,CostCenter,ConsumedService,ResourceType,InstanceId,"
           "Tags,OfferId,AdditionalInfo,ServiceInfo1,ServiceInfo2\n"
           "Research,ml-platform,owner@example.com,0039de71-ca37-4a17-a104-17665a50e7fc,gpu-prod,TRAIN,US East,"
           "2019-10-02T00:00:00.0000000Z,NDasrA100 v4,Virtual Machines,NDasrA100 v4 Series,"
           "7e7e8b3a-1111-4c6e-9d2b-0d2f1b7c2a11,ND96asr A100 v4,US East,1 Hour,24,27.197,652.728,cc-42,"
           "Microsoft.Compute,Microsoft.Compute/virtualMachines,/subscriptions/0039de71-ca37-4a17-a104-17665a50e7fc/"
           'resourceGroups/TRAIN/providers/Microsoft.Compute/virtualMachines/a100-1,"""team"": ""pretrain""",'
           'MS-AZR-0017P,"{""ServiceType"":""Standard_ND96asr_v4"",""VCPUs"":96}",,\n'
           "Research,ml-platform,owner@example.com,0039de71-ca37-4a17-a104-17665a50e7fc,gpu-prod,TRAIN,US East,"
           "2019-10-31T00:00:00.0000000Z,Premium SSD Managed Disks - P30 - Disks,Storage,Premium SSD Managed Disks,"
           "8f8f8b3a-2222-4c6e-9d2b-0d2f1b7c2a22,P30 Disks,US East,1/Month,0.0322581,135.17,4.36032,cc-42,"
           "Microsoft.Compute,Microsoft.Compute/disks,/subscriptions/0039de71-ca37-4a17-a104-17665a50e7fc/"
           "resourceGroups/TRAIN/providers/Microsoft.Compute/disks/a100-1-os,,MS-AZR-0017P,,,\n")


def test_ea_2019_usage_details_take_the_currency_the_source_names(tmp_path):
    """EA's 2019-10-01 dataset failed as a file missing a currency column, naming nothing to do:
    without `currency:` it still fails (a guessed currency would be a wrong bill) but names the
    key; with it, both lines are read in it. By hand: 652.728 + 4.36032 = 657.08832 EUR in 2019-10."""
    export = write(tmp_path, "ea-usage-2019.csv", EA_2019)
    _, result = ingest_files(tmp_path / "bare", ("azure", "azure-cost", export))
    [message] = failures(result)
    assert "required column 'BillingCurrencyCode' or 'BillingCurrency' or 'Currency' is missing" in message
    assert "set sources[0].currency to the enrollment's billing currency" in message
    lake, result = ingest_files(tmp_path / "eur", {"name": "azure", "kind": "azure-cost", "location": str(export),
                                                   "currency": "EUR"})
    assert failures(result) == []
    assert sums(lake, "billing_period, BillingCurrency") == [("2019-10", "EUR", 2, Decimal("657.08832"), None)]
    assert rows(lake, "ChargeDescription, SubAccountId, SubAccountName, ContractedUnitPrice, x_instance_type, "
                      "Tags")[0] == ("NDasrA100 v4", "0039de71-ca37-4a17-a104-17665a50e7fc", "gpu-prod",
                                     Decimal("27.197"), "Standard_ND96asr_v4", {"team": "pretrain"})


def test_a_files_own_currency_column_wins_over_the_sources_currency(tmp_path):
    lake, result = ingest_files(tmp_path, {"name": "azure", "kind": "azure-cost", "currency": "EUR",
                                           "location": str(write(tmp_path, "new.csv", NEW_EA))})
    assert failures(result) == [] and {c for (c,) in rows(lake, "BillingCurrency")} == {"CAD"}
    with pytest.raises(ConfigError, match="currency"):
        parse_config({"lake": str(tmp_path / "l2"), "sources": [
            {"name": "azure", "kind": "azure-cost", "location": str(tmp_path), "currency": "euro"}]})


# MCA cost details, dataset 2019-10-01: Microsoft's schema (dataset-schema/cost-usage-details-mca,
# "Version 2019-10-01"), its 60 columns in their order; the retail price is `MarketPrice`.
MCA_2019_HEADER = (
    "InvoiceID,PreviousInvoiceId,BillingAccountId,BillingAccountName,BillingProfileId,BillingProfileName,"
    "InvoiceSectionId,InvoiceSectionName,ResellerName,ResellerMPNId,CostCenter,BillingPeriodEndDate,"
    "BillingPeriodStartDate,ServicePeriodEndDate,ServicePeriodStartDate,Date,ServiceFamily,ProductOrderId,"
    "ProductOrderName,ConsumedService,MeterId,MeterName,MeterCategory,MeterSubcategory,MeterRegion,ProductId,Product,"
    "SubscriptionGuid,SubscriptionName,PublisherType,PublisherId,PublisherName,ResourceGroup,InstanceName,"
    "ResourceLocation,Location,EffectivePrice,Quantity,UnitOfMeasure,ChargeType,BillingCurrencyCode,"
    "PricingCurrencyCode,CostInBillingCurrency,CostInPricingCurrency,CostInUSD,PaygCostInBillingCurrency,"
    "PaygCostInUSD,ExchangeRate,ExchangeRateDate,IsAzureCreditEligible,ServiceInfo1,ServiceInfo2,AdditionalInfo,"
    "Tags,MarketPrice,Frequency,Term,ReservationId,ReservationName,UnitPrice")


def test_mca_2019_market_price_is_the_list_unit_price(tmp_path):
    """MCA's 2019-10-01 dataset names the retail price MarketPrice, not PayGPrice: ListUnitPrice was
    null, so the FOCUS export's ListCost fell back to the contracted cost. By hand: 24 h at a
    retail 32.77 and a negotiated 27.197: list 786.48, billed 652.728."""
    values = {"InvoiceID": "G012345678", "BillingAccountId": "acct:1", "BillingPeriodStartDate": "10/01/2019",
              "BillingPeriodEndDate": "10/31/2019", "Date": "10/02/2019", "Product": "NDasrA100 v4",
              "SubscriptionGuid": "sub-1", "InstanceName": "/subscriptions/sub-1/vm1", "MeterCategory": "Virtual Machines",
              "Quantity": "24", "UnitOfMeasure": "1 Hour", "ChargeType": "Usage", "BillingCurrencyCode": "USD",
              "CostInBillingCurrency": "652.728", "MarketPrice": "32.77", "UnitPrice": "27.197",
              "Frequency": "UsageBased", "PublisherType": "Azure"}
    header = MCA_2019_HEADER.split(",")
    assert len(header) == 60
    export = write(tmp_path, "mca-2019.csv", MCA_2019_HEADER + "\n" + ",".join(values.get(c, "") for c in header) + "\n")
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    assert failures(result) == []
    assert rows(lake, "BilledCost, ListUnitPrice, ContractedUnitPrice, PricingQuantity, ChargeDescription, ResourceId") == [
        (Decimal("652.728"), Decimal("32.77"), Decimal("27.197"), Decimal(24), "NDasrA100 v4", "/subscriptions/sub-1/vm1")]


def test_cost_details_without_charge_type_an_older_reading_left_uncategorised_are_read_again(tmp_path, monkeypatch):
    """Before pay-as-you-go's dataset was read (268944a), a file without ChargeType committed with
    ChargeCategory NULL; it is Usage now, so those periods are read again (reader_version)."""
    export = write(tmp_path, "ea.csv", OLD_EA.replace(",ChargeType", "").replace(",Usage,", ","))
    real_lookup = azure_cost.lookup
    monkeypatch.setattr(azure_cost, "lookup",
                        lambda value, *args: "NULL" if value is None else real_lookup(value, *args))
    monkeypatch.setattr(azure_cost.AzureCostConnector, "reader_version", 0)  # the reading before that fix
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    assert failures(result) == [] and {c for (c,) in rows(lake, "ChargeCategory")} == {None}
    monkeypatch.undo()
    result = ingest(lake_config := parse_config({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "azure", "kind": "azure-cost", "location": str(export)}]}))
    assert [o.status for o in result.outcomes] == ["committed"]
    assert [o.status for o in ingest(lake_config).outcomes] == ["unchanged"]
    assert {c for (c,) in rows(lake, "ChargeCategory")} == {"Usage"}


def test_mca_lines_not_yet_invoiced_bill_in_their_days_month(tmp_path):
    """koku's real-shaped MCA export (tests/data/azure-mca): blank billingPeriodStartDate and
    EndDate (not yet invoiced) failed the file as lines without a billing period; they are
    billed in the calendar month of their day, as a file without those columns is."""
    export = DATA / "azure-mca" / "koku_mca_camel_v2.csv"
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", export))
    assert failures(result) == []
    [(total,)] = duckdb.sql("SELECT sum(CAST(costInBillingCurrency AS DECIMAL(38,12))) FROM read_csv(?, "
                            "all_varchar = true)", params=[str(export)]).fetchall()
    assert total == Decimal("0.0000262412")
    assert lake.query().execute(
        "SELECT billing_period, BillingPeriodStart, BillingPeriodEnd, InvoiceId, count(*), sum(BilledCost) "
        "FROM costs GROUP BY ALL").fetchall() == [
        ("2023-08", datetime(2023, 8, 1), datetime(2023, 9, 1), None, 4, total)]


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("nocost.csv", NEW_EA.replace("CostInBillingCurrency", "CostInUsd"),
     ["nocost.csv", "required column 'CostInBillingCurrency' or 'Cost' or 'PreTaxCost' is missing"]),
    ("badcost.csv", NEW_EA.replace("5.64902E-05", "5,64902"), ["badcost.csv"]),
    ("badcost2.csv", NEW_EA.replace("5.64902E-05", "n/a"),
     ["badcost2.csv", "line 3, column CostInBillingCurrency: could not convert 'n/a'"]),
    ("dotdate.csv", NEW_EA.replace("9/2/2023", "02.09.2023"),
     ["dotdate.csv", "column Date: not a date (%m/%d/%Y, or ISO 8601): 02.09.2023"]),
    ("dayfirst.csv", NEW_EA.replace("10/12/2023", "13/10/2023"), ["dayfirst.csv", "column Date", "13/10/2023"]),
    ("badtags.csv", NEW_EA.replace('"""a"": ""b"""', '"""a"": b"'), ["badtags.csv", "column Tags: not a JSON object"]),
    ("latin1.csv", NEW_EA.replace("Lorem", "Société").encode("latin-1"), ["latin1.csv", "not utf-8"]),
    ("empty.csv", b"", ["empty.csv", "the file is empty"]),
    # a spreadsheet's saves: UTF-16 'Unicode text' (tab-separated) or a European locale's ';' and decimal comma
    ("utf16.csv", OLD_EA.replace(",", "\t").encode("utf-16"), ["utf16.csv", "separated by tab", "spreadsheet"]),
    ("cut16.csv", NEW_EA.encode("utf-16")[:-1], ["cut16.csv", "cannot read the UTF-16 file", "truncated"]),
    ("semicolon.csv", NEW_EA.replace(",", ";").replace("0.000305367", "0,000305367"),
     ["semicolon.csv", "the header row is one field: its columns are separated by ';', not ','", "CSV UTF-8"]),
    ("tabs.csv", NEW_EA.replace(",", "\t"), ["tabs.csv", "separated by tab"]),
    ("truncated.csv.gz", gzip.compress(NEW_EA.encode() * 300)[:-100], ["truncated.csv.gz"]),
])
def test_bad_input_fails_the_delivery_naming_file_and_problem(tmp_path, name, content, expected):
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", write(tmp_path, name, content)))
    [message] = failures(result)
    for part in expected:
        assert part in message
    assert lake.ledger() == []


def write_run(root, *, export: str, date_range: str, run_id: str, submitted: str, parts: dict[str, str],
              cost_type: str = "ActualCost", listed: tuple[str, ...] | None = None) -> None:
    """One Azure export run: its part files and the manifest.json that lists them."""
    folder = root / export / date_range / run_id
    folder.mkdir(parents=True)
    for name, content in parts.items():
        (folder / name).write_text(content, encoding="utf-8")
    start, end = date_range.split("-")
    manifest = {
        "manifestVersion": "2024-04-01", "blobCount": len(parts),
        "exportConfig": {"exportName": export, "type": cost_type, "timeFrame": "MonthToDate"},
        "runInfo": {"executionType": "Scheduled", "submittedTime": submitted, "runId": run_id,
                    "startDate": f"{start[:4]}-{start[4:6]}-{start[6:]}T00:00:00",
                    "endDate": f"{end[:4]}-{end[4:6]}-{end[6:]}T00:00:00"},
        "blobs": [{"blobName": f"exports/{export}/{date_range}/{run_id}/{name}", "byteCount": 1}
                  for name in (listed if listed is not None else parts)],
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def ea_rows(*lines: str) -> str:
    return "\n".join([NEW_EA.split("\r\n")[0]] + list(lines)) + "\n"


SEPT = "Lorem,sub-2,9/{day}/2023,Peering,Virtual Network,1,{cost},USD,9/1/2023,9/30/2023,,Usage,OnDemand,"


def test_export_runs_only_the_newest_run_of_a_month_counts_and_reingest_does_not_flap(tmp_path):
    root = tmp_path / "exports"
    write_run(root, export="daily", date_range="20230901-20230930", run_id="f1e2d3c4-0000-4000-8000-000000000002",
              submitted="2023-09-20T06:01:02.1234567Z",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="1")),
                     "part_1_0002.csv": ea_rows(SEPT.format(day=19, cost="2"))})
    write_run(root, export="daily", date_range="20230901-20230930", run_id="0a1b2c3d-0000-4000-8000-000000000001",
              submitted="2023-09-10T06:01:02.1234567Z", parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="1"))})
    write_run(root, export="daily", date_range="20231001-20231031", run_id="9a8b7c6d-0000-4000-8000-000000000003",
              submitted="2023-10-02T06:00:00Z", cost_type="AmortizedCost",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="4").replace("9/", "10/"))})
    (root / "daily" / "loose.csv").write_text(ea_rows(SEPT.format(day=3, cost="100")))  # not in any run: ignored
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", root))
    assert failures(result) == []
    assert sums(lake, "billing_period") == [("2023-09", 2, Decimal("3"), None), ("2023-10", 1, None, Decimal("4"))]
    assert {e.billing_period: e.delivery_id for e in lake.ledger()} == {
        "2023-09": "f1e2d3c4-0000-4000-8000-000000000002", "2023-10": "9a8b7c6d-0000-4000-8000-000000000003"}
    _, again = ingest_files(tmp_path, ("azure", "azure-cost", root))
    assert [o.status for o in again.outcomes] == ["unchanged", "unchanged"]


def test_export_run_whose_manifest_lists_a_missing_part_fails_alone(tmp_path):
    root = tmp_path / "exports"
    write_run(root, export="daily", date_range="20230901-20230930", run_id="run-sep", submitted="2023-09-20T06:00:00Z",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="1"))},
              listed=("part_1_0001.csv", "part_1_0002.csv"))
    write_run(root, export="daily", date_range="20231001-20231031", run_id="run-oct", submitted="2023-10-02T06:00:00Z",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="4").replace("9/", "10/"))})
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", root))
    [message] = failures(result)
    assert "manifest.json" in message and "part_1_0002.csv" in message
    assert sums(lake, "billing_period") == [("2023-10", 1, Decimal("4"), None)]


def test_two_exports_of_one_month_fail_instead_of_replacing_each_other(tmp_path):
    """An actual and an amortized export (or two subscriptions' exports) in one container both
    deliver September: kept apart by nothing, each ingest would replace the other's month, so
    both runs fail naming the two exports and nothing is committed."""
    root = tmp_path / "exports"
    write_run(root, export="actual", date_range="20230901-20230930", run_id="a-1", submitted="2023-09-20T06:00:00Z",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="1"))})
    write_run(root, export="amortized", date_range="20230901-20230930", run_id="b-1",
              submitted="2023-09-20T07:00:00Z", cost_type="AmortizedCost",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="5"))})
    write_run(root, export="actual", date_range="20231001-20231031", run_id="a-2", submitted="2023-10-02T06:00:00Z",
              parts={"part_1_0001.csv": ea_rows(SEPT.format(day=2, cost="4").replace("9/", "10/"))})
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", root))
    assert sorted(o.status for o in result.outcomes) == ["committed", "failed", "failed"]
    for error in failures(result):
        assert "2 exports deliver 2023-09 under this location: actual (ActualCost), amortized (AmortizedCost)" in error
        assert "give each export its own source" in error
    assert sums(lake, "billing_period") == [("2023-10", 1, Decimal("4"), None)]


def test_exports_without_manifests_count_only_the_newest_file_of_a_date_range_folder(tmp_path):
    """Exports made before run manifests write each run as `<export>_<guid>.csv` into the date
    range's folder, beside the earlier runs: each is a month-to-date snapshot, so only the
    newest counts (adding them up would count September 2 twice)."""
    import os
    folder = tmp_path / "exports" / "daily" / "20230901-20230930"
    folder.mkdir(parents=True)
    older = folder / "daily_0a1b2c3d-0000-4000-8000-000000000001.csv"
    newer = folder / "daily_f1e2d3c4-0000-4000-8000-000000000002.csv"
    older.write_text(ea_rows(SEPT.format(day=2, cost="1")))
    newer.write_text(ea_rows(SEPT.format(day=2, cost="1"), SEPT.format(day=19, cost="2")))
    os.utime(older, (1_695_000_000, 1_695_000_000))
    os.utime(newer, (1_695_100_000, 1_695_100_000))
    other = tmp_path / "exports" / "daily" / "20231001-20231031" / "daily_9a8b7c6d-0000-4000-8000-000000000003.csv"
    other.parent.mkdir()
    other.write_text(ea_rows(SEPT.format(day=2, cost="4").replace("9/", "10/")))
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "exports"))
    assert failures(result) == []
    assert sums(lake, "billing_period") == [("2023-09", 2, Decimal("3"), None), ("2023-10", 1, Decimal("4"), None)]
    _, again = ingest_files(tmp_path, ("azure", "azure-cost", tmp_path / "exports"))
    assert {o.status for o in again.outcomes} == {"unchanged"}
