"""The synthetic organisation's bill as a FOCUS 1.0 CSV, for the `focus` connector.

Same rows as the CUR 2.0 export, with FOCUS column names, as a plain (uncompressed) CSV
per billing period, one folder per period, no manifest:

    <out>/ml-org-focus/YYYY-MM/ml-org-focus-00001.csv

BilledCost is the unblended cost; EffectiveCost the amortized cost the generator expects
(connectors.synthetic.cur2.Rows.effective). Tags are the CUR 2.0 `resource_tags` as JSON.

Prices as FOCUS requires them: a priced line (Usage, Purchase) has its PricingQuantity (the
usage amount) and PricingUnit (`Units` where the bill names none), and its ListUnitPrice and
ContractedUnitPrice, both the stream's rate (the organisation has no negotiated discount), so
ListCost and ContractedCost are the unit price × PricingQuantity: the line's cost, to the 1e-10
the generator rounds it to. Tax and credits have no quantity or unit price; a credit's contracted
and list cost are its billed cost (FOCUS: a charge unrelated to others), a tax's too (the products
it taxes, TAXED in billing.py, bill at list price: their contracted and list cost are what they
billed). A Savings Plan negation contracts and lists at 0: the covered usage's line holds the hour's
contracted and list cost, which the negation's billed cost takes back (as the export of a CUR has it).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from decimal import Decimal

from connectors.synthetic.cur2 import COVERED, LINE_TYPES, NEGATION, STRING, Catalogue, Rows, money_array
from connectors.synthetic.org import UNITS

CHARGE_CATEGORY = {"Usage": "Usage", "SavingsPlanCoveredUsage": "Usage", "SavingsPlanNegation": "Credit",
                   "SavingsPlanRecurringFee": "Purchase", "Tax": "Tax", "Fee": "Purchase", "Credit": "Credit"}
# FOCUS column → the CUR 2.0 (CSV) column it copies
COPIED = {
    "BillingAccountId": "bill_payer_account_id", "BillingAccountName": "bill_payer_account_name",
    "BillingPeriodStart": "bill_billing_period_start_date", "BillingPeriodEnd": "bill_billing_period_end_date",
    "ChargePeriodStart": "line_item_usage_start_date", "ChargePeriodEnd": "line_item_usage_end_date",
    "BilledCost": "line_item_unblended_cost",
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
        self.priced = np.array([CHARGE_CATEGORY[s.line_type] in ("Usage", "Purchase") for s in cat.streams])
        self.unit_price = pa.array([format(Decimal(s.rate) / UNITS, "f") if priced else None
                                    for s, priced in zip(cat.streams, self.priced)], STRING)
        self.unit = pa.array([s.unit or "Units" if priced else None for s, priced in zip(cat.streams, self.priced)],
                             STRING)

    def table(self, csv_table: pa.Table, cat: Catalogue, rows: Rows) -> pa.Table:
        take = pa.array(rows.sid, pa.int64())
        kind = cat.line_type[rows.sid]
        committed = (kind == COVERED) | (kind == NEGATION)
        pricing = np.where(committed, "Committed", np.where(kind == LINE_TYPES.index("Usage"), "Standard", ""))
        columns = {name: csv_table.column(cur2) for name, cur2 in COPIED.items()}
        priced = self.priced[rows.sid]
        contracted = np.where(kind == NEGATION, 0, rows.cost)
        quantity = csv_table.column("line_item_usage_amount")
        columns.update({
            "ContractedCost": money_array(contracted).cast(STRING),
            "ListCost": money_array(np.where(rows.public_valid, rows.public, contracted)).cast(STRING),
            "ContractedUnitPrice": self.unit_price.take(take), "ListUnitPrice": self.unit_price.take(take),
            "PricingQuantity": pa.array(np.where(priced, quantity.to_numpy(), np.nan), from_pandas=True),
            "PricingUnit": self.unit.take(take),
            "EffectiveCost": money_array(rows.effective).cast(STRING),
            "ChargeCategory": self.category.take(take),
            "ProviderName": pa.repeat(pa.scalar("AWS", STRING), len(rows.sid)),
            "ServiceName": self.service_name.take(take),
            "PricingCategory": pa.array(pricing, STRING),
        })
        names = sorted(columns)
        return pa.Table.from_arrays([columns[n] for n in names], names=names)
