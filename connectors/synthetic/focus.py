"""The synthetic organisation's bill as a FOCUS 1.0 CSV, for the `focus` connector.

Same rows as the CUR 2.0 export, with FOCUS column names, as a plain (uncompressed) CSV
per billing period, one folder per period, no manifest:

    <out>/ml-org-focus/YYYY-MM/ml-org-focus-00001.csv

BilledCost is the unblended cost; EffectiveCost the amortized cost the generator expects
(connectors.synthetic.cur2.Rows.effective). Tags are the CUR 2.0 `resource_tags` as JSON.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from connectors.synthetic.cur2 import COVERED, LINE_TYPES, NEGATION, STRING, Catalogue, Rows, money_array

CHARGE_CATEGORY = {"Usage": "Usage", "SavingsPlanCoveredUsage": "Usage", "SavingsPlanNegation": "Credit",
                   "SavingsPlanRecurringFee": "Purchase", "Tax": "Tax", "Fee": "Purchase", "Credit": "Credit"}
# FOCUS column → the CUR 2.0 (CSV) column it copies
COPIED = {
    "BillingAccountId": "bill_payer_account_id", "BillingAccountName": "bill_payer_account_name",
    "BillingPeriodStart": "bill_billing_period_start_date", "BillingPeriodEnd": "bill_billing_period_end_date",
    "ChargePeriodStart": "line_item_usage_start_date", "ChargePeriodEnd": "line_item_usage_end_date",
    "BilledCost": "line_item_unblended_cost", "ListCost": "pricing_public_on_demand_cost",
    "BillingCurrency": "line_item_currency_code", "ChargeDescription": "line_item_line_item_description",
    "ResourceId": "line_item_resource_id", "RegionId": "product_region_code",
    "AvailabilityZone": "line_item_availability_zone", "SubAccountId": "line_item_usage_account_id",
    "SubAccountName": "line_item_usage_account_name", "ConsumedQuantity": "line_item_usage_amount",
    "ConsumedUnit": "pricing_unit", "InvoiceId": "bill_invoice_id", "Tags": "resource_tags",
    "x_UsageType": "line_item_usage_type", "x_Operation": "line_item_operation",
}


class FocusColumns:
    """Per-stream FOCUS values (service name, charge category), taken row-wise."""

    def __init__(self, cat: Catalogue):
        self.service_name = pa.array([s.product_name for s in cat.streams], STRING)
        self.category = pa.array([CHARGE_CATEGORY[s.line_type] for s in cat.streams], STRING)

    def table(self, csv_table: pa.Table, cat: Catalogue, rows: Rows) -> pa.Table:
        take = pa.array(rows.sid, pa.int64())
        kind = cat.line_type[rows.sid]
        committed = (kind == COVERED) | (kind == NEGATION)
        pricing = np.where(committed, "Committed", np.where(kind == LINE_TYPES.index("Usage"), "Standard", ""))
        columns = {name: csv_table.column(cur2) for name, cur2 in COPIED.items()}
        columns.update({
            "EffectiveCost": money_array(rows.effective).cast(STRING),
            "ChargeCategory": self.category.take(take),
            "ProviderName": pa.repeat(pa.scalar("AWS", STRING), len(rows.sid)),
            "ServiceName": self.service_name.take(take),
            "PricingCategory": pa.array(pricing, STRING),
        })
        names = sorted(columns)
        return pa.Table.from_arrays([columns[n] for n in names], names=names)
