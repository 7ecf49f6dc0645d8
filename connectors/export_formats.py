"""Which billing export a file's columns say it is, so that a file the source's kind cannot
read fails naming what it looks like and the kind that reads it (a FOCUS file under
`kind: aws-cur` says `kind focus reads it`), not only the column it lacks.

Each signature is a set of columns only that export has (compared whatever their case, as every
connector matches names, and spaces: Microsoft's schemas write both `NetSavings` and `Net Savings`);
the first that matches wins, so narrower ones come first.
"""

from __future__ import annotations

from collections.abc import Iterable

GCP_FILE_EXPORT = "export billing data to BigQuery instead and write its table out with bq extract (kind gcp-billing)"
# Azure Cost Management's export datasets other than cost details, by columns only they have
# (Microsoft's dataset schemas, EA and MCA): no kind reads them; azure-cost skips them.
AZURE_OTHER_DATASETS = (("price sheet", ("EffectiveStartDate", "UnitPrice")),
                        ("reservation details export", ("ReservationOrderId", "ReservedHours")),
                        ("reservation transactions export", ("ReservationOrderId", "EventType")),
                        ("reservation recommendations export", ("RecommendedQuantity", "NetSavings")))

# (columns all present, what the file is, the kinds that read it, or what to do when none does)
SIGNATURES: tuple[tuple[tuple[str, ...], str, tuple[str, ...] | str], ...] = (
    (("BilledCost", "ChargePeriodStart"), "a FOCUS cost and usage file", ("focus",)),
    (("identity/LineItemId",), "an AWS legacy Cost and Usage Report (CUR)", ("aws-cur",)),
    (("identity_line_item_id", "resource_tags"), "an AWS Data Exports CUR 2.0 file", ("aws-cur2",)),
    (("identity_line_item_id",), "an AWS Cost and Usage Report in Parquet", ("aws-cur", "aws-cur2")),
    (("lineItem/intervalUsageStart", "cost/myCost"), "an Oracle Cloud cost report", ("oci-cost",)),
    (("lineItem/intervalUsageStart",), "an Oracle Cloud usage report, which has no costs",
     "point the source at the cost reports (reports/cost-csv/, kind oci-cost) or the FOCUS reports (kind focus)"),
    (("Line Item", "Measurement1"), "Google Cloud's billing file export (CSV to Cloud Storage), which lacks "
     "the invoice month, taxes and adjustments", GCP_FILE_EXPORT),
    (("lineItemId", "measurements"), "Google Cloud's billing file export (JSON to Cloud Storage), which lacks "
     "the invoice month, taxes and adjustments", GCP_FILE_EXPORT),
    (("usage_start_time", "invoice"), "a Google Cloud Billing export", ("gcp-billing",)),
    (("usage_start_time", "invoice.month"), "a Google Cloud Billing export", ("gcp-billing",)),
    (("PreTaxCost", "UsageDateTime"), "Azure pay-as-you-go cost details", ("azure-cost",)),
    (("MeterCategory", "CostInBillingCurrency"), "an Azure cost details export", ("azure-cost",)),
    (("MeterCategory", "Cost"), "an Azure cost details export", ("azure-cost",)),
    # OpenCost's CSV export and the allocation APIs' rows flattened (Kubecost's too) name both
    (("CPUCoreRequestAverage", "TotalCost"), "an OpenCost or Kubecost allocation export (a cluster's cost "
     "already spread over its workloads), not a bill", "point the source at the bill of the cloud the cluster "
     "runs on; a k8s-pods inventory source reads the pods, and spendlake shares their nodes' cost itself"),
    *((columns, f"an Azure {dataset}, which has no costs", "point the source at the Azure cost details "
       "export (kind azure-cost)") for dataset, columns in AZURE_OTHER_DATASETS),
)


def looks_like(columns: Iterable[str], kinds: Iterable[str]) -> str | None:
    """What the columns say the file is and what reads it, when that is not one of `kinds` (the
    source's own); None when they match no signature or one that `kinds` reads."""
    columns = list(columns)
    for needed, what, readers in SIGNATURES:
        if has_columns(columns, needed):
            if isinstance(readers, str):
                return f"it looks like {what}: {readers}"
            if set(readers) & set(kinds):
                return None
            return f"it looks like {what}: {' or '.join(f'kind {kind}' for kind in readers)} reads it"
    return None


def has_columns(columns: Iterable[str], needed: Iterable[str]) -> bool:
    """Whether `columns` hold each of `needed`, whatever their case and spaces."""
    present = {_compared(column) for column in columns}
    return all(_compared(column) in present for column in needed)


def _compared(column: str) -> str:
    return column.lower().replace(" ", "")
