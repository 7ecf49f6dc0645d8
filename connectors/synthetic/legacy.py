"""The synthetic organisation's bill as a legacy AWS Cost and Usage Report (CSV.gz).

Same rows as the CUR 2.0 export, in the legacy shape the `aws-cur` connector reads:
`category/ColumnName` headers, one `resourceTags/user:<key>` column per tag key (so
`user:team` and `user:Team` are two columns), and the "create new report version" layout:

    <out>/ml-org-cur/yyyymmdd-yyyymmdd/ml-org-cur-Manifest.json          the current assembly
    <out>/ml-org-cur/yyyymmdd-yyyymmdd/<assemblyId>/ml-org-cur-00001.csv.gz
    <out>/ml-org-cur/yyyymmdd-yyyymmdd/<assemblyId>/ml-org-cur-Manifest.json
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from connectors.synthetic.cur2 import CSV_SCHEMA, Catalogue
from connectors.synthetic.org import PAYER, Stream

# CUR 2.0 column → legacy column; CUR 2.0 columns that legacy lacks are left out.
LEGACY_NAMES = {
    "identity_line_item_id": "identity/LineItemId", "identity_time_interval": "identity/TimeInterval",
    "bill_invoice_id": "bill/InvoiceId", "bill_invoicing_entity": "bill/InvoicingEntity",
    "bill_billing_entity": "bill/BillingEntity", "bill_bill_type": "bill/BillType",
    "bill_payer_account_id": "bill/PayerAccountId",
    "bill_billing_period_start_date": "bill/BillingPeriodStartDate",
    "bill_billing_period_end_date": "bill/BillingPeriodEndDate",
    "line_item_usage_account_id": "lineItem/UsageAccountId", "line_item_line_item_type": "lineItem/LineItemType",
    "line_item_usage_start_date": "lineItem/UsageStartDate", "line_item_usage_end_date": "lineItem/UsageEndDate",
    "line_item_product_code": "lineItem/ProductCode", "line_item_usage_type": "lineItem/UsageType",
    "line_item_operation": "lineItem/Operation", "line_item_availability_zone": "lineItem/AvailabilityZone",
    "line_item_resource_id": "lineItem/ResourceId", "line_item_usage_amount": "lineItem/UsageAmount",
    "line_item_currency_code": "lineItem/CurrencyCode", "line_item_unblended_rate": "lineItem/UnblendedRate",
    "line_item_unblended_cost": "lineItem/UnblendedCost", "line_item_blended_rate": "lineItem/BlendedRate",
    "line_item_blended_cost": "lineItem/BlendedCost", "line_item_line_item_description": "lineItem/LineItemDescription",
    "line_item_tax_type": "lineItem/TaxType", "line_item_legal_entity": "lineItem/LegalEntity",
    "product_instance_type": "product/instanceType", "product_location": "product/location",
    "product_product_family": "product/productFamily", "product_region_code": "product/region",
    "product_servicecode": "product/servicecode", "product_usagetype": "product/usagetype",
    "pricing_currency": "pricing/currency", "pricing_public_on_demand_cost": "pricing/publicOnDemandCost",
    "pricing_public_on_demand_rate": "pricing/publicOnDemandRate", "pricing_purchase_option": "pricing/purchaseOption",
    "pricing_term": "pricing/term", "pricing_unit": "pricing/unit",
    "reservation_effective_cost": "reservation/EffectiveCost",
    "reservation_reservation_a_r_n": "reservation/ReservationARN",
    "reservation_unused_amortized_upfront_fee_for_billing_period": "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod",
    "reservation_unused_recurring_fee": "reservation/UnusedRecurringFee",
    "savings_plan_amortized_upfront_commitment_for_billing_period":
        "savingsPlan/AmortizedUpfrontCommitmentForBillingPeriod",
    "savings_plan_offering_type": "savingsPlan/OfferingType", "savings_plan_payment_option": "savingsPlan/PaymentOption",
    "savings_plan_purchase_term": "savingsPlan/PurchaseTerm",
    "savings_plan_recurring_commitment_for_billing_period": "savingsPlan/RecurringCommitmentForBillingPeriod",
    "savings_plan_savings_plan_a_r_n": "savingsPlan/SavingsPlanARN",
    "savings_plan_savings_plan_effective_cost": "savingsPlan/SavingsPlanEffectiveCost",
    "savings_plan_savings_plan_rate": "savingsPlan/SavingsPlanRate",
    "savings_plan_total_commitment_to_date": "savingsPlan/TotalCommitmentToDate",
    "savings_plan_used_commitment": "savingsPlan/UsedCommitment",
}
ORIGINAL_TAG_KEYS = {"user_owner_team": "user:owner-team"}  # CUR 2.0 wrote `-` as `_`


def legacy_tag_column(cur2_key: str) -> str:
    return "resourceTags/" + ORIGINAL_TAG_KEYS.get(cur2_key, cur2_key.replace("_", ":", 1))


def tag_keys(streams: Sequence[Stream]) -> list[str]:
    return sorted({key for s in streams for key, _ in s.tags})


class LegacyColumns:
    """Per-stream values that legacy spreads over columns: product name and one per tag key."""

    def __init__(self, cat: Catalogue, keys: Sequence[str]):
        self.product_name = pa.array([s.product_name for s in cat.streams])
        self.tags = {key: pa.array([dict(s.tags).get(key, "") for s in cat.streams]) for key in keys}

    def table(self, csv_table: pa.Table, sid: pa.Array) -> pa.Table:
        names = [legacy for name, legacy in LEGACY_NAMES.items() if name in CSV_SCHEMA.names]
        arrays = [csv_table.column(name) for name in LEGACY_NAMES if name in CSV_SCHEMA.names]
        names.append("product/ProductName")
        arrays.append(self.product_name.take(sid))
        for key, values in self.tags.items():
            names.append(legacy_tag_column(key))
            arrays.append(values.take(sid))
        return pa.Table.from_arrays(arrays, names=names)


def period_folder(period) -> str:
    return f"{period[0]:%Y%m%d}-{period[1]:%Y%m%d}"


def file_digest(paths: Sequence[Path]) -> bytes:
    """SHA-256 of the files' bytes one after the other, read in blocks (parts can be large)."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.digest()


def install_assembly(root: Path, period, written: Sequence[Path], header: Sequence[str], bucket: str,
                     prefix: str) -> Path:
    """Move the written parts into their `<assemblyId>/` folder and write both manifests."""
    assembly = str(uuid.UUID(bytes=file_digest(written)[:16]))
    folder = root / period_folder(period)
    parts = [folder / assembly / path.name for path in written]
    parts[0].parent.mkdir(parents=True, exist_ok=True)
    for path, part in zip(written, parts):
        path.replace(part)
    for empty in (written[0].parent, written[0].parent.parent):  # the folder they were written in
        if not any(empty.iterdir()):
            empty.rmdir()
    manifest = {
        "assemblyId": assembly, "account": PAYER[0],
        "columns": [{"category": name.split("/")[0], "name": name.split("/", 1)[1], "type": "String"} for name in header],
        "charset": "UTF-8", "compression": "GZIP", "contentType": "text/csv",
        "reportId": hashlib.sha256(root.name.encode()).hexdigest(), "reportName": root.name,
        "billingPeriod": {"start": f"{period[0]:%Y%m%dT%H%M%S}.000Z", "end": f"{period[1]:%Y%m%dT%H%M%S}.000Z"},
        "bucket": bucket,
        "reportKeys": [f"{prefix}/{root.name}/{period_folder(period)}/{assembly}/{part.name}" for part in parts],
        "additionalArtifactKeys": [],
    }
    text = json.dumps(manifest, indent=2) + "\n"
    (parts[0].parent / f"{root.name}-Manifest.json").write_text(text, encoding="utf-8")
    current = folder / f"{root.name}-Manifest.json"
    current.write_text(text, encoding="utf-8")
    return current
