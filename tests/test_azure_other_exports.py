"""Azure Cost Management's other export datasets (price sheet, reservation details, transactions,
recommendations) beside or instead of cost details: told apart by their columns, never read as costs."""

from __future__ import annotations

from decimal import Decimal

import pytest
from billing_helpers import failures, ingest_files, sums
from test_azure_cost import write_run

# The headers of Microsoft's dataset schemas (MCA, 2023-03-01 / 2023-05-01), one row each.
PRICE_SHEET = ("BasePrice,BillingAccountId,BillingAccountName,BillingCurrency,BillingProfileId,BillingProfileName,"
               "Currency,EffectiveEndDate,EffectiveStartDate,MarketPrice,MeterCategory,MeterId,MeterName,MeterRegion,"
               "MeterSubCategory,MeterType,PriceType,Product,ProductId,ProductOrderName,ServiceFamily,SkuId,Term,"
               "TierMinimumUnits,UnitOfMeasure,UnitPrice\n"
               "27.2,acct:1,Contoso,USD,bp-1,Main,USD,2024-05-31,2024-05-01,27.2,Virtual Machines,m-1,ND96asr v4,"
               "US East,NDasrA100 v4 Series,1 Hour,Consumption,NDasrA100 v4,DZH318Z0BQ3H,Azure plan,Compute,"
               "DZH318Z0BQ3H/00G1,,0,1 Hour,27.2\n")
RESERVATION_DETAILS = ("InstanceFlexibilityGroup,InstanceFlexibilityRatio,InstanceId,Kind,ReservationOrderId,"
                       "ReservationId,ReservedHours,RIUsedHours,SkuName,TotalReservedQuantity,UsageDate,UsedHours\n"
                       "NDasrA100 v4 Series,1,/subscriptions/sub-1/vm1,Reservation,ro-1,r-1,24,20,"
                       "Standard_ND96asr_v4,1,2024-05-02,20\n")
RESERVATION_TRANSACTIONS = ("Amount,ArmSkuName,BillingFrequency,BillingProfileId,BillingProfileName,Currency,"
                            "Description,EventDate,EventType,Invoice,InvoiceId,InvoiceSectionId,InvoiceSectionName,"
                            "PurchasingSubscriptionGuid,PurchasingSubscriptionName,Quantity,Region,"
                            "ReservationOrderId,ReservationOrderName,Term\n"
                            "9000,Standard_ND96asr_v4,recurring,bp-1,Main,USD,ND96asr v4 1 year,2024-05-01,Purchase,"
                            "G1,G1,is-1,Research,sub-1,Training,1,eastus,ro-1,gpu-ri,P1Y\n")
# the recommendations schema page writes its fields with spaces, `Net Savings`
RESERVATION_RECOMMENDATIONS = ("Cost With No ReservedInstances,First UsageDate,Instance Flexibility Ratio,"
                               "Instance Flexibility Group,Location,LookBackPeriod,MeterID,Net Savings,"
                               "Normalized Size,Recommended Quantity,Recommended Quantity Normalized,ResourceType,"
                               "scope,SkuName,Sku Properties,SubscriptionId,Term,Total Cost With ReservedInstances\n"
                               "19000,2024-04-01,1,NDasrA100 v4 Series,eastus,30,m-1,9000,Standard_ND96asr_v4,1,1,"
                               "virtualMachines,Single,Standard_ND96asr_v4,,sub-1,P1Y,10000\n")
COST_DETAILS = ("billingAccountId,date,productName,meterCategory,quantity,costInBillingCurrency,billingCurrency,"
                "billingPeriodStartDate,billingPeriodEndDate,chargeType,pricingModel\n"
                "acct:1,05/02/2024,NDasrA100 v4,Virtual Machines,1,27.2,USD,05/01/2024,05/31/2024,Usage,OnDemand\n")
OTHERS = [("pricesheet.csv", PRICE_SHEET, "an Azure price sheet (it has EffectiveStartDate and UnitPrice)"),
          ("details.csv", RESERVATION_DETAILS, "an Azure reservation details export"),
          ("transactions.csv", RESERVATION_TRANSACTIONS, "an Azure reservation transactions export"),
          ("recommendations.csv", RESERVATION_RECOMMENDATIONS, "an Azure reservation recommendations export")]


def test_other_exports_beside_cost_details_are_skipped_naming_each(tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "costdetails.csv").write_text(COST_DETAILS)
    for name, content, _ in OTHERS:
        (folder / name).write_text(content)
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", folder))
    assert failures(result) == []
    assert sums(lake) == [("Microsoft", "USD", 1, Decimal("27.2"), None)]
    skipped = {o.delivery.files[0].rsplit("/", 1)[-1]: o.note for o in result.outcomes if o.status == "skipped"}
    assert sorted(skipped) == sorted(name for name, _, _ in OTHERS)
    for name, _, what in OTHERS:
        assert skipped[name].startswith(what) and "not cost details" in skipped[name]


@pytest.mark.parametrize(("name", "content", "what"), OTHERS)
def test_an_other_export_alone_fails_saying_what_it_is(tmp_path, name, content, what):
    path = tmp_path / name
    path.write_text(content)
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", path))
    [message] = failures(result)
    assert "nothing a source of kind azure-cost reads under" in message and "1 file(s) skipped" in message
    [skipped] = [o for o in result.outcomes if o.status == "skipped"]
    assert skipped.note.startswith(what) and "not cost details" in skipped.note
    assert "required column" not in message and lake.ledger() == []


def test_a_price_sheet_export_run_beside_the_cost_export_is_skipped_not_a_second_export_of_its_month(tmp_path):
    """Both exports write run manifests into one container: the price sheet's run (manifest type
    PriceSheet) covering May failed both runs as '2 exports deliver 2024-05'; it holds no costs
    to replace the cost export's May with, so it is skipped and May is committed."""
    root = tmp_path / "exports"
    write_run(root, export="costs", date_range="20240501-20240531", run_id="c-1", submitted="2024-05-20T06:00:00Z",
              parts={"part_1_0001.csv": COST_DETAILS})
    write_run(root, export="prices", date_range="20240501-20240531", run_id="p-1", submitted="2024-05-20T07:00:00Z",
              cost_type="PriceSheet", parts={"part_1_0001.csv": PRICE_SHEET})
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", root))
    assert failures(result) == []
    assert sums(lake) == [("Microsoft", "USD", 1, Decimal("27.2"), None)]
    [skipped] = [o for o in result.outcomes if o.status == "skipped"]
    assert "prices/20240501-20240531/p-1/part_1_0001.csv" in skipped.delivery.files[0]
    assert skipped.note.startswith("an Azure price sheet")


def test_a_file_of_a_price_sheet_run_is_skipped_by_its_manifest_whatever_its_columns(tmp_path):
    """A price sheet in a layout OTHER_DATASETS does not know (the EA portal's download) failed as
    cost details missing a cost column; its run's manifest says what it is."""
    root = tmp_path / "exports"
    write_run(root, export="costs", date_range="20240501-20240531", run_id="c-1", submitted="2024-05-20T06:00:00Z",
              parts={"part_1_0001.csv": COST_DETAILS})
    write_run(root, export="prices", date_range="20240501-20240531", run_id="p-1", submitted="2024-05-20T07:00:00Z",
              cost_type="PriceSheet", parts={"part_1_0001.csv": "Service,Unit of Measure,Part Number,Unit Price,"
                                                                 "Currency Code\nND96asr v4,1 Hour,AAA-1,27.2,USD\n"})
    lake, result = ingest_files(tmp_path, ("azure", "azure-cost", root))
    assert failures(result) == []
    [skipped] = [o for o in result.outcomes if o.status == "skipped"]
    assert skipped.note.startswith("an Azure PriceSheet export (its run's manifest says type PriceSheet), not cost")
    assert sums(lake) == [("Microsoft", "USD", 1, Decimal("27.2"), None)]
