"""The FOCUS columns of an AWS bill beyond costs, times and accounts (connectors.aws_common):
commitments, pricing, capacity reservations, and who issues and publishes the charge. Each
is read from AWS's own CUR columns (legacy, Athena and CUR 2.0 names alike):

- CommitmentDiscountId: `savingsPlan/SavingsPlanARN`, else `reservation/ReservationARN`;
  Category `Spend` (Savings Plan) or `Usage` (reservation); Type `Savings Plan` or
  `Reserved Instance`. Status `Used` on the usage a commitment covered
  (SavingsPlanCoveredUsage, DiscountedUsage) and `Unused` on the commitment's fee line when
  part of it went unused (SavingsPlanRecurringFee, RIFee with a non-zero EffectiveCost, which
  is exactly that unused part). Quantity/Unit: the commitment consumed or left unused, in the
  line's currency for a Savings Plan (covered usage: its SavingsPlanEffectiveCost; recurring
  fee: TotalCommitmentToDate − UsedCommitment), in hours for a reservation (covered usage:
  UsageAmount; RIFee: UnusedQuantity). The bill names no commitment, so Name stays NULL.
  x_commitment_start / x_commitment_end: `savingsPlan/StartTime` / `EndTime`, else
  `reservation/StartTime` / `EndTime` (when it was bought and when it expires: a daily
  export's rows run from midnight whatever time of day it began).
- Pricing: PricingQuantity = UsageAmount, PricingUnit = `pricing/unit`, ListUnitPrice =
  `pricing/publicOnDemandRate`, ContractedUnitPrice = `lineItem/NetUnblendedRate`, else
  `lineItem/UnblendedRate`, PricingCurrency = `pricing/currency`, SkuPriceId =
  `pricing/RateCode`, else `pricing/RateId` (as the FinOps Foundation's converter maps them).
- Capacity reservations: CUR 2.0 `capacity_reservation_capacity_reservation_arn` / `_status`
  (`Used`, `Unused`; AWS's `Reserved` and `Cancelled` have no FOCUS value and stay NULL) /
  `_type` (→ x_capacity_reservation_type: `ODCR` or `EC2 Capacity Blocks for ML`). Without
  those columns (legacy CUR), AWS documents that `lineItem/ResourceId` holds the reservation's
  ARN (`…:capacity-reservation/cr-…`) only on the UnusedBox / UnusedDed usage types (the unused
  capacity, billed on demand: `Unused`) and Reservation / DedicatedRes (the used capacity,
  whose cost sits on the instance: `Used`).
- InvoiceIssuerName = `bill/InvoicingEntity`, PublisherName = `lineItem/LegalEntity` (the
  seller, a Marketplace vendor included), RegionName = `product/location`, ChargeFrequency by
  line item type (usage and the discounts on it: Usage-Based; recurring commitment fees:
  Recurring; upfront fees, credits, refunds and tax: One-Time).
"""

from __future__ import annotations

from connectors.aws_columns import AwsColumns, first_text, literal, quantity, text
from service.core.schema import QUANTITY

SAVINGS_PLAN_ARN = ("savings_plan_savings_plan_a_r_n", "savings_plan_savings_plan_arn")
RESERVATION_ARN = ("reservation_reservation_a_r_n", "reservation_reservation_arn")
CAPACITY_ARN = "capacity_reservation_capacity_reservation_arn"
CAPACITY_STATUS = "capacity_reservation_capacity_reservation_status"
CAPACITY_TYPE = "capacity_reservation_capacity_reservation_type"
# legacy CUR usage types that carry a capacity reservation's ARN as their resource id
CAPACITY_USAGE = {"UnusedBox": "Unused", "UnusedDed": "Unused", "Reservation": "Used", "DedicatedRes": "Used"}

CHARGE_FREQUENCY = {
    "Usage": "Usage-Based", "DiscountedUsage": "Usage-Based", "SavingsPlanCoveredUsage": "Usage-Based",
    "SavingsPlanNegation": "Usage-Based", "BundledDiscount": "Usage-Based", "Discount": "Usage-Based",
    "EdpDiscount": "Usage-Based", "PrivateRateDiscount": "Usage-Based", "DistributorDiscount": "Usage-Based",
    "SppDiscount": "Usage-Based", "RiVolumeDiscount": "Usage-Based",
    "RIFee": "Recurring", "SavingsPlanRecurringFee": "Recurring",
    "Fee": "One-Time", "SavingsPlanUpfrontFee": "One-Time", "Credit": "One-Time", "Refund": "One-Time",
    "Tax": "One-Time",
}


def product_text(columns: AwsColumns, key: str) -> str:
    """A product attribute: its own column (`product/location`, `product_location`), else the
    CUR 2.0 `product` map (a map in Parquet, JSON text in CSV)."""
    own = text(columns, f"product_{key}")
    if own != "NULL" or not columns.has("product"):
        return own
    product = columns.raw("product")
    if columns.types[columns.by_snake["product"]].startswith("MAP"):
        return f"NULLIF({product}[{literal(key)}], '')"
    return f"NULLIF(json_extract_string(NULLIF({product}, ''), {literal('$.' + key)}), '')"


def _cases(value: str, mapping: dict[str, str]) -> str:
    return f"CASE {value} " + " ".join(f"WHEN {literal(k)} THEN {literal(v)}" for k, v in mapping.items()) + " END"


def focus_columns(columns: AwsColumns, *, line_type: str, money, usage: str, effective: str,
                  currency: str) -> dict[str, str]:
    """Canonical column → SQL. `money(field)` is the field's exact parsed value (or NULL),
    `usage` the usage amount as a quantity, `effective` the line's EffectiveCost."""
    savings_plan = first_text(columns, SAVINGS_PLAN_ARN)
    reservation = first_text(columns, RESERVATION_ARN)

    def as_quantity(field: str) -> str:
        return f"CAST({money(field)} AS {QUANTITY})"

    sp_unused = f"{as_quantity('savings_plan_total_commitment_to_date')} - {as_quantity('savings_plan_used_commitment')}"
    quantity_sql = (
        f"CASE {line_type} WHEN 'SavingsPlanCoveredUsage' THEN {as_quantity('savings_plan_savings_plan_effective_cost')} "
        f"WHEN 'SavingsPlanRecurringFee' THEN {sp_unused} "
        f"WHEN 'DiscountedUsage' THEN {usage} "
        f"WHEN 'RIFee' THEN {quantity(columns, 'reservation_unused_quantity')} END")
    committed = f"coalesce({savings_plan}, {reservation}) IS NOT NULL"
    status = (f"CASE WHEN NOT ({committed}) THEN NULL "
              f"WHEN {line_type} IN ('SavingsPlanCoveredUsage', 'DiscountedUsage') THEN 'Used' "
              f"WHEN {line_type} IN ('SavingsPlanRecurringFee', 'RIFee') AND {effective} <> 0 THEN 'Unused' END")
    expressions = {
        "CommitmentDiscountId": f"coalesce({savings_plan}, {reservation})",
        **{f"x_commitment_{edge}": (f"CASE WHEN {committed} THEN coalesce("
                                    f"{_time(columns, f'savings_plan_{edge}_time')}, "
                                    f"{_time(columns, f'reservation_{edge}_time')}) END")
           for edge in ("start", "end")},
        "CommitmentDiscountCategory": (f"CASE WHEN {savings_plan} IS NOT NULL THEN 'Spend' "
                                       f"WHEN {reservation} IS NOT NULL THEN 'Usage' END"),
        "CommitmentDiscountType": (f"CASE WHEN {savings_plan} IS NOT NULL THEN 'Savings Plan' "
                                   f"WHEN {reservation} IS NOT NULL THEN 'Reserved Instance' END"),
        "CommitmentDiscountStatus": status,
        "CommitmentDiscountQuantity": f"CASE WHEN {committed} THEN {quantity_sql} END",
        "CommitmentDiscountUnit": (
            f"CASE WHEN {savings_plan} IS NOT NULL AND {line_type} IN ('SavingsPlanCoveredUsage', "
            f"'SavingsPlanRecurringFee') THEN {currency} WHEN {reservation} IS NOT NULL AND {line_type} IN "
            "('DiscountedUsage', 'RIFee') THEN 'Hours' END"),
        "PricingQuantity": usage,
        "PricingUnit": text(columns, "pricing_unit"),
        "ListUnitPrice": money("pricing_public_on_demand_rate"),
        "ContractedUnitPrice": f"coalesce({money('line_item_net_unblended_rate')}, {money('line_item_unblended_rate')})",
        "PricingCurrency": text(columns, "pricing_currency"),
        "SkuPriceId": f"coalesce({text(columns, 'pricing_rate_code')}, {text(columns, 'pricing_rate_id')})",
        "ChargeFrequency": _cases(line_type, CHARGE_FREQUENCY),
        "InvoiceIssuerName": text(columns, "bill_invoicing_entity"),
        "PublisherName": text(columns, "line_item_legal_entity"),
        "ServiceProviderName": "'AWS'",
        "RegionName": product_text(columns, "location"),
    }
    expressions.update(_capacity(columns, line_type))
    return expressions


def _time(columns: AwsColumns, field: str) -> str:
    """A commitment's start or end as a timestamp; one that does not parse is NULL (it never fails a period)."""
    if not columns.has(field):
        return "NULL"
    if columns.is_text(field):  # '2027-06-01T00:00:00Z' or with an offset: honoured through TIMESTAMPTZ
        return f"CAST(TRY_CAST(NULLIF({columns.raw(field)}, '') AS TIMESTAMPTZ) AS TIMESTAMP)"
    return f"TRY_CAST({columns.raw(field)} AS TIMESTAMP)"


def _capacity(columns: AwsColumns, line_type: str) -> dict[str, str]:
    if columns.has(CAPACITY_ARN):
        status = text(columns, CAPACITY_STATUS)
        return {"CapacityReservationId": text(columns, CAPACITY_ARN),
                "CapacityReservationStatus": f"CASE WHEN {status} IN ('Used', 'Unused') THEN {status} END",
                "x_capacity_reservation_type": text(columns, CAPACITY_TYPE)}
    resource, usage_type = text(columns, "line_item_resource_id"), text(columns, "line_item_usage_type")
    if resource == "NULL" or usage_type == "NULL":
        return {}
    # `USE1-UnusedBox:p5.48xlarge` → `UnusedBox`
    kind = f"regexp_extract({usage_type}, '(?:^|-)([A-Za-z]+):', 1)"
    on_reservation = f"{line_type} = 'Usage' AND contains({resource}, ':capacity-reservation/')"
    return {"CapacityReservationId": f"CASE WHEN {on_reservation} AND {kind} IN "
                                     f"({', '.join(literal(k) for k in CAPACITY_USAGE)}) THEN {resource} END",
            "CapacityReservationStatus": f"CASE WHEN {on_reservation} THEN {_cases(kind, CAPACITY_USAGE)} END"}
