"""Canonical tables of the lake. FOCUS names, plus `x_` columns for what FOCUS lacks.

Money is DECIMAL(38,12): exact, and wide enough that `1e16 + 1 - 1e16` is 1. Times are
naive TIMESTAMPs that mean UTC. Tags keep their original keys and values in a map;
normalisation happens in attribution, so fixing a rule corrects history.
"""

from __future__ import annotations

MONEY = "DECIMAL(38,12)"

# (column, DuckDB type) in file order. Connectors must produce exactly these columns.
COST_COLUMNS: tuple[tuple[str, str], ...] = (
    ("BillingAccountId", "VARCHAR"),
    ("BillingAccountName", "VARCHAR"),
    ("BillingPeriodStart", "TIMESTAMP"),
    ("BillingPeriodEnd", "TIMESTAMP"),
    ("ChargePeriodStart", "TIMESTAMP"),
    ("ChargePeriodEnd", "TIMESTAMP"),
    ("BilledCost", MONEY),
    ("EffectiveCost", MONEY),
    ("ListCost", MONEY),
    ("ContractedCost", MONEY),
    ("BillingCurrency", "VARCHAR"),
    ("ChargeCategory", "VARCHAR"),
    ("ChargeClass", "VARCHAR"),
    ("ChargeDescription", "VARCHAR"),
    ("ProviderName", "VARCHAR"),
    ("ServiceName", "VARCHAR"),
    ("ServiceCategory", "VARCHAR"),
    ("ResourceId", "VARCHAR"),
    ("ResourceName", "VARCHAR"),
    ("ResourceType", "VARCHAR"),
    ("RegionId", "VARCHAR"),
    ("AvailabilityZone", "VARCHAR"),
    ("SubAccountId", "VARCHAR"),
    ("SubAccountName", "VARCHAR"),
    ("SkuId", "VARCHAR"),
    ("PricingCategory", "VARCHAR"),
    ("ConsumedQuantity", "DOUBLE"),
    ("ConsumedUnit", "VARCHAR"),
    ("InvoiceId", "VARCHAR"),
    ("Tags", "MAP(VARCHAR, VARCHAR)"),
    ("x_line_item_type", "VARCHAR"),
    ("x_usage_type", "VARCHAR"),
    ("x_instance_type", "VARCHAR"),
    ("x_operation", "VARCHAR"),
    ("x_credits", MONEY),
)

COST_COLUMN_NAMES = tuple(name for name, _ in COST_COLUMNS)
MONEY_COLUMNS = tuple(name for name, kind in COST_COLUMNS if kind == MONEY)

# Hive partition keys of the costs table, in directory order.
COST_PARTITIONS = ("source", "billing_period")


def cost_select_list(expressions: dict[str, str]) -> str:
    """A SELECT list that casts each canonical column; missing ones become typed NULLs.

    `expressions` maps canonical column → SQL expression over the connector's input.
    Unknown keys are a programming error, caught here rather than in the lake.
    """
    unknown = set(expressions) - set(COST_COLUMN_NAMES)
    if unknown:
        raise KeyError(f"not canonical cost columns: {sorted(unknown)}")
    parts = []
    for name, kind in COST_COLUMNS:
        expr = expressions.get(name, "NULL")
        parts.append(f"CAST({expr} AS {kind}) AS {name}")
    return ",\n  ".join(parts)
