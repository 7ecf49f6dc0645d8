"""AWS billing rows → canonical cost columns, shared by `aws-cur` (legacy CUR, CSV or Athena
Parquet) and `aws-cur2` (Data Exports CUR 2.0, Parquet or CSV.gz).

Every layout is read through one DuckDB query built here; no Python touches the rows. The
source columns are looked up by their Athena / CUR 2.0 snake_case name, so legacy
`lineItem/UnblendedCost`, Athena `line_item_unblended_cost` and CUR 2.0
`line_item_unblended_cost` are the same field.

Money is read as text (CSV) or as the file's numeric type (Parquet) and cast to
DECIMAL(38,12) with TRY_CAST. A value that does not parse stops the read through DuckDB's
`error()`, whose message comes from a Python function that runs only for the failing value:
it finds the first bad row in that one file (the slow path costs nothing on good data).

EffectiveCost (amortized) by line item type, as AWS defines it:
    SavingsPlanCoveredUsage            → savings_plan_savings_plan_effective_cost
    SavingsPlanNegation, …UpfrontFee   → 0
    SavingsPlanRecurringFee            → total_commitment_to_date − used_commitment
    DiscountedUsage                    → reservation_effective_cost
    RIFee                              → unused amortized upfront fee + unused recurring fee
    Fee with a reservation ARN         → 0 (an RI's upfront fee, amortized into the two above)
    anything else                      → unblended cost
ListCost is pricing_public_on_demand_cost, but 0 on a SavingsPlanNegation line (the covered
usage line already holds the On-Demand cost the negation offsets) and on a pod's or task's
split row on an EC2 instance (the instance's line holds it), NULL on a Tax line (AWS writes 0
there: a tax has no public price).
Tags keep their original keys: `user:team` (legacy CSV), `user_team` (Athena columns and
CUR 2.0 map); empty values are dropped. Commitments, pricing, capacity reservations and the
other FOCUS columns: connectors.aws_focus. Unit prices are money (parsed the same strict
way); quantities are exact decimals, NULL when not a number. Split cost allocation data
(`split_line_item_parent_resource_id`, `_split_cost`, `_unused_cost` on EKS pod and ECS task
rows) → x_split_parent_resource_id, x_split_cost, x_split_unused_cost.
"""

from __future__ import annotations

import gzip
import io
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb

from connectors import empty_costs
from connectors.aws_columns import AwsColumns, first_text, ident, literal, quantity, snake_name, text, timestamp
from connectors.aws_focus import RESERVATION_ARN, focus_columns, product_text
from connectors.csvfile import RESAVED_ID_PROBLEM, csv_reader, unless_resaved_id
from connectors.export_formats import looks_like
from service.core.errors import DataError
from service.core.hidden_columns import LINE_ITEM_KEY, rounded_away_sql, rounding_select
from service.core.schema import MONEY, cost_select_list

if TYPE_CHECKING:  # per_value needs Arrow, which a config's validation (it loads this module) does not
    from service.core.per_value import PerValuePart

__all__ = ["AwsColumns", "MONEY_FIELDS", "check_required", "cost_relation", "snake_name"]

BILLED = "line_item_unblended_cost"
REQUIRED = (
    "bill_billing_period_start_date",
    "line_item_usage_start_date",
    "line_item_line_item_type",
    "line_item_currency_code",
    BILLED,
)

MONEY_FIELDS = (
    "line_item_unblended_cost",
    "pricing_public_on_demand_cost",
    "savings_plan_savings_plan_effective_cost",
    "savings_plan_total_commitment_to_date",
    "savings_plan_used_commitment",
    "reservation_effective_cost",
    "reservation_unused_amortized_upfront_fee_for_billing_period",
    "reservation_unused_recurring_fee",
    "pricing_public_on_demand_rate",
    "line_item_unblended_rate",
    "line_item_net_unblended_rate",
    "split_line_item_split_cost",
    "split_line_item_unused_cost",
)

# FOCUS ChargeCategory for each AWS line item type; unknown types are 'Usage'.
CHARGE_CATEGORY = {
    "Usage": "Usage",
    "DiscountedUsage": "Usage",
    "SavingsPlanCoveredUsage": "Usage",
    "Tax": "Tax",
    "Fee": "Purchase",
    "RIFee": "Purchase",
    "SavingsPlanRecurringFee": "Purchase",
    "SavingsPlanUpfrontFee": "Purchase",
    "Credit": "Credit",
    "SavingsPlanNegation": "Credit",
    "BundledDiscount": "Credit",
    "Discount": "Credit",
    "EdpDiscount": "Credit",
    "PrivateRateDiscount": "Credit",
    "DistributorDiscount": "Credit",
    "SppDiscount": "Credit",  # Solution Provider Program: a reseller's discount
    "RiVolumeDiscount": "Credit",
    "Refund": "Adjustment",
}

FAST_MONEY = "DECIMAL(18,12)"
LEGACY_TAG_PREFIX = "resourceTags/"
ATHENA_TAG_PREFIX = "resource_tags_"


class BadValueLocator:
    """Finds the first row of a file whose column holds a value that is not a number.

    Called from inside DuckDB only when a cast failed; the answer is cached per file and
    column because DuckDB may ask once per failing value."""

    def __init__(self, display: dict[str, str]):
        self.display = display  # local path → the name the user knows (s3:// URI)
        self._cache: dict[tuple[str, str], str] = {}

    def __call__(self, file: str, column: str, value: str) -> str:
        key = (file, column)
        if key not in self._cache:
            row = self._first_bad_row(file, column)
            where = self.display.get(file, file)
            at = f"row {row}" if row else "a row"
            self._cache[key] = (f"{where}: {at}, column {column}: cost value {value!r} is not a number "
                                "— fix or re-export the file")
        return self._cache[key]

    @staticmethod
    def _first_bad_row(file: str, column: str) -> int | None:
        def bad(value) -> bool:
            if value is None or value == "":
                return False
            try:
                float(value)
                return False
            except (TypeError, ValueError):
                return True

        if file.lower().endswith(".parquet"):
            import pyarrow.parquet as pq

            values = pq.read_table(file, columns=[column]).column(0).to_pylist()
            return next((n for n, value in enumerate(values, 1) if bad(value)), None)
        opener = gzip.open if file.lower().endswith(".gz") else open
        with opener(file, "rb") as raw:
            reader = csv_reader(io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline=""))
            header = next(reader, [])
            if column not in header:
                return None
            index = header.index(column)
            for number, row in enumerate(reader, 1):
                if len(row) > index and bad(row[index]):
                    return number
        return None


def check_required(columns: AwsColumns, where: str, required: Sequence[str] = REQUIRED) -> None:
    missing = columns.missing(required)
    if missing:
        headers = (header for spellings in columns.spellings.values() for header in spellings)
        found = looks_like(headers, ("aws-cur", "aws-cur2"))
        if found is None and columns.has("identity_line_item_id"):  # AWS's, but a query left them out
            found = "the export leaves them out: add them to its columns (CUR 2.0: its SQL query) and re-export"
        hint = found or "is this an AWS cost and usage report? check the source kind and the export's columns"
        raise DataError(f"required column(s) missing: {', '.join(missing)}", where=where, hint=hint)
    for field in MONEY_FIELDS:  # which of two cost columns holds the cost is never guessed
        spellings = columns.spellings.get(field, [])
        if len(spellings) > 1:
            raise DataError(f"the cost column {field} is present {len(spellings)} times: "
                            + " and ".join(repr(s) for s in spellings), where=where,
                            hint="keep one of them and re-export; spendlake does not guess which holds the cost")


def _tags(columns: AwsColumns, headers: dict[str, str]) -> str:
    if columns.has("resource_tags") and columns.by_snake["resource_tags"] == "resource_tags":
        # Building maps is the costliest step of a CUR 2.0 read: empty values are filtered
        # out (a lambda per entry) only on the rows that can have one.
        expr, kind = ident("resource_tags"), columns.types["resource_tags"]
        if kind.startswith("MAP"):
            tags = f"CAST({expr} AS MAP(VARCHAR, VARCHAR))"
            return (f"CASE WHEN list_contains(map_values({tags}), '') OR list_aggregate(map_values({tags}), 'count') < cardinality({tags}) "
                    f"THEN {_without_empty_values(f'map_entries({tags})')} ELSE {tags} END")
        return _json_tags(expr)  # CUR 2.0 CSV: the map as JSON text
    pairs = []
    for name in columns.types:
        original = headers.get(name, name)
        if original.startswith(LEGACY_TAG_PREFIX):
            key = original[len(LEGACY_TAG_PREFIX):]
        elif name.startswith(ATHENA_TAG_PREFIX):
            key = name[len(ATHENA_TAG_PREFIX):]
        else:
            continue
        pairs.append(f"{{'key': {literal(key)}, 'value': CAST({ident(name)} AS VARCHAR)}}")
    return _without_empty_values(f"[{', '.join(pairs)}]") if pairs else "MAP {}"


def _json_tags(expr: str) -> str:
    """CUR 2.0 CSV's `resource_tags` (JSON text `expr`) as the map, empty values left out. A
    value that is not a JSON object (not JSON, or an array, a string) fails naming the column and
    the value (DuckDB's own error named neither)."""
    whole = f"CASE json_type(try(json({expr}))) WHEN 'OBJECT' THEN json({expr}) END"
    tags = (f"CAST(coalesce({whole}, error('column resource_tags: tags ' || left({expr}, 200) || ' are not a JSON "
            "object (as Data Exports writes them: {\"user_team\":\"nlp\"})')) AS MAP(VARCHAR, VARCHAR))")
    return (f"CASE WHEN coalesce({expr}, '') IN ('', '{{}}') THEN MAP {{}} "
            f"WHEN contains({expr}, '\"\"') OR contains({expr}, 'null') "
            f"THEN {_without_empty_values(f'map_entries({tags})')} ELSE {tags} END")


def _tags_as_text(columns: AwsColumns) -> bool:
    """CUR 2.0 CSV's tags: JSON text, converted by the stager once per distinct value
    (service.core.per_value.PerValuePart; per line they were a fifth of the read's CPU)."""
    return (columns.has("resource_tags") and columns.by_snake["resource_tags"] == "resource_tags"
            and not columns.types["resource_tags"].startswith("MAP"))


def _without_empty_values(entries: str) -> str:
    """A map from a list of {key, value} structs, leaving out empty and NULL values."""
    return f"map_from_entries(list_filter({entries}, lambda e: coalesce(e.value, '') <> ''))"


def _service_name(columns: AwsColumns) -> str:
    return f"coalesce({product_text(columns, 'product_name')}, {text(columns, 'line_item_product_code')})"


def cost_relation(con: duckdb.DuckDBPyConnection, source: duckdb.DuckDBPyRelation, *, display: dict[str, str],
                  headers: dict[str, str] | None = None) -> duckdb.DuckDBPyRelation | PerValuePart:
    """The canonical cost relation over `source` (raw AWS columns plus a `filename` column);
    from CUR 2.0 CSV, a PerValuePart whose Tags the stager converts once per distinct value.

    `display` maps local file paths to the names shown in errors (e.g. s3:// URIs);
    `headers` maps DuckDB's column names to the file's own, where DuckDB renamed a
    column that differs only in case (`resourceTags/user:Team` → `..._1`)."""
    columns = AwsColumns(source, headers)
    check_required(columns, ", ".join(sorted(set(display.values()))) or "the export")
    raw_view = f"aws_raw_{uuid.uuid4().hex}"
    source.create_view(raw_view)
    locator = f"spendlake_bad_value_{uuid.uuid4().hex}"
    con.create_function(locator, BadValueLocator(display), ["VARCHAR", "VARCHAR", "VARCHAR"], "VARCHAR",
                        side_effects=True)

    # Level 1: every money field parsed once (TRY_CAST: a bad value becomes NULL here ...)
    parsed = []
    for field in MONEY_FIELDS:
        if columns.has(field):
            if columns.is_text(field):
                # Parsing text straight into a 38-digit decimal is ~20x slower than into an
                # 18-digit one; costs below a million take the fast path, exactly the same.
                value = f"NULLIF({columns.raw(field)}, '')"
                cast = f"coalesce(TRY_CAST({value} AS {FAST_MONEY}), TRY_CAST({value} AS {MONEY}))"
            else:
                cast = f"TRY_CAST({columns.raw(field)} AS {MONEY})"
            parsed.append(f"{cast} AS {ident('__m_' + field)}")
    parsed.append(f"{quantity(columns, 'line_item_usage_amount')} AS __q_usage")
    level1 = f"SELECT *, {', '.join(parsed)} FROM {raw_view}"

    display_of = f"spendlake_display_{uuid.uuid4().hex}"
    con.create_function(display_of, lambda file: display.get(file, file), ["VARCHAR"], "VARCHAR", side_effects=True)

    def money(field: str) -> str:
        """... and level 2 stops on a NULL whose source text was not empty, and on an empty billed
        cost (empty_costs: AWS gives every line one)."""
        if not columns.has(field):
            return "NULL"
        parsed_value, original = ident("__m_" + field), columns.raw(field)
        present = f"{original} <> ''" if columns.is_text(field) else f"{original} IS NOT NULL"
        message = f"{locator}(filename, {literal(columns.by_snake[field])}, CAST({original} AS VARCHAR))"
        if field == BILLED:
            empty = empty_costs.failed_sql(f"{display_of}(filename)", columns.by_snake[field], empty_costs.CUR_EMPTY)
            return f"coalesce({parsed_value}, CASE WHEN {present} THEN error({message}) ELSE {empty} END)"
        return f"(CASE WHEN {parsed_value} IS NULL AND {present} THEN error({message}) ELSE {parsed_value} END)"

    def identifier(field: str) -> str:
        """An account or resource id; a spreadsheet's 1.23412E+11 fails the read naming file and column."""
        value = text(columns, field)
        if value == "NULL":
            return value
        problem = literal(f": column {columns.by_snake[field]}: {RESAVED_ID_PROBLEM}: ")
        return unless_resaved_id(value, lambda sql: f"error({display_of}(filename) || {problem} || {sql})")

    line_type = text(columns, "line_item_line_item_type")
    unblended = money(BILLED)

    def zero_if_null(field: str) -> str:
        return f"coalesce({money(field)}, 0)"

    # an RI's upfront fee is amortized into its DiscountedUsage and RIFee lines' effective cost:
    # the Fee line that paid it counts nothing amortized, or the fee counts twice
    reservation = first_text(columns, RESERVATION_ARN)
    effective = (
        f"CASE WHEN {line_type} = 'Fee' AND {reservation} <> '' THEN 0 ELSE CASE {line_type} "
        f"WHEN 'SavingsPlanCoveredUsage' THEN {zero_if_null('savings_plan_savings_plan_effective_cost')} "
        "WHEN 'SavingsPlanNegation' THEN 0 WHEN 'SavingsPlanUpfrontFee' THEN 0 "
        f"WHEN 'SavingsPlanRecurringFee' THEN {zero_if_null('savings_plan_total_commitment_to_date')}"
        f" - {zero_if_null('savings_plan_used_commitment')} "
        f"WHEN 'DiscountedUsage' THEN {zero_if_null('reservation_effective_cost')} "
        f"WHEN 'RIFee' THEN {zero_if_null('reservation_unused_amortized_upfront_fee_for_billing_period')}"
        f" + {zero_if_null('reservation_unused_recurring_fee')} "
        f"ELSE {unblended} END END"
    )

    split_parent = text(columns, "split_line_item_parent_resource_id")

    def list_cost(sql: str, restated: str) -> str:
        """`sql`, but `restated` on a line restating the usage of another line that holds its public
        On-Demand cost: a SavingsPlanNegation (it may repeat the covered usage's; AWS's CID
        summary_view sums public_cost without these lines), a pod's or task's split row on an EC2
        instance (its instance's line holds the cost; its own share at public prices is
        split_line_item_public_on_demand_split_cost); NULL on a Tax line: AWS writes 0 there, no
        price of a tax (FOCUS derives a tax's list cost from the charges taxed: export/focus.py)."""
        restates = f"{line_type} = 'SavingsPlanNegation' OR coalesce({split_parent}, '') <> ''"
        return sql if sql == "NULL" else (f"(CASE WHEN {restates} THEN {restated} "
                                          f"WHEN {line_type} = 'Tax' THEN NULL ELSE {sql} END)")

    category = "CASE " + line_type + " " + " ".join(
        f"WHEN {literal(kind)} THEN {literal(cat)}" for kind, cat in CHARGE_CATEGORY.items()) + " ELSE 'Usage' END"
    pricing_term = text(columns, "pricing_term")
    pricing = (f"CASE WHEN {line_type} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage') THEN 'Committed' "
               f"WHEN {pricing_term} = 'OnDemand' THEN 'Standard' WHEN {pricing_term} = 'Spot' THEN 'Dynamic' END")
    currency = text(columns, "line_item_currency_code")
    expressions = {
        "BillingAccountId": identifier("bill_payer_account_id"),
        "BillingAccountName": text(columns, "bill_payer_account_name"),
        "BillingPeriodStart": timestamp(columns, "bill_billing_period_start_date"),
        "BillingPeriodEnd": timestamp(columns, "bill_billing_period_end_date"),
        "ChargePeriodStart": timestamp(columns, "line_item_usage_start_date"),
        "ChargePeriodEnd": timestamp(columns, "line_item_usage_end_date"),
        "BilledCost": unblended,
        "EffectiveCost": effective,
        "ListCost": list_cost(money("pricing_public_on_demand_cost"), "0"),
        "BillingCurrency": currency,
        "ChargeCategory": category,
        "ChargeDescription": text(columns, "line_item_line_item_description"),
        "ProviderName": "'AWS'",
        "ServiceName": _service_name(columns),
        "ResourceId": identifier("line_item_resource_id"),
        "RegionId": f"coalesce({text(columns, 'product_region_code')}, {text(columns, 'product_region')})",
        "AvailabilityZone": text(columns, "line_item_availability_zone"),
        "SubAccountId": identifier("line_item_usage_account_id"),
        "SubAccountName": text(columns, "line_item_usage_account_name"),
        "SkuId": text(columns, "product_sku"),
        "PricingCategory": pricing,
        "ConsumedQuantity": "__q_usage",
        "ConsumedUnit": text(columns, "pricing_unit"),
        "InvoiceId": f"NULLIF(trim({text(columns, 'bill_invoice_id')}), '')",
        "Tags": _tags(columns, headers or {}),
        "x_line_item_type": line_type,
        "x_usage_type": text(columns, "line_item_usage_type"),
        "x_instance_type": text(columns, "product_instance_type"),
        "x_operation": text(columns, "line_item_operation"),
        "x_split_parent_resource_id": text(columns, "split_line_item_parent_resource_id"),
        "x_split_cost": money("split_line_item_split_cost"),
        "x_split_unused_cost": money("split_line_item_unused_cost"),
        **focus_columns(columns, line_type=line_type, money=money, usage="__q_usage", effective=effective,
                        currency=currency),
    }
    # the fields the export lacks are left out: the lake's stager adds them as null arrays,
    # cheaper than DuckDB computing ~30 all-NULL columns (staging._complete)
    select = cost_select_list({name: sql for name, sql in expressions.items() if sql != "NULL"}, absent_as_null=False)
    rounding = {measure: rounded_away_sql(columns.raw(field), columns.types[columns.by_snake[field]])
                for measure, field in (("BilledCost", BILLED),
                                       ("ListCost", "pricing_public_on_demand_cost"))
                if columns.has(field)}  # EffectiveCost is derived from several fields
    if rounding.get("ListCost"):
        rounding["ListCost"] = list_cost(rounding["ListCost"], "NULL")
    keys = rounding_select(rounding)
    if columns.has("identity_line_item_id"):  # checked for repeats while staged, not stored
        # a CUR 2.0 query may leave the interval out: the line's usage window is the same one
        usage = ", ".join(f"CAST({timestamp(columns, f'line_item_usage_{end}_date')} AS VARCHAR)" for end in ("start", "end"))
        window = f"concat_ws('/', {usage})"
        keys += (f", {text(columns, 'identity_line_item_id')} AS {ident(LINE_ITEM_KEY[0])}, "
                f"{text(columns, 'identity_time_interval', window)} AS {ident(LINE_ITEM_KEY[1])}")
    relation = con.sql(f"SELECT {select}{keys} FROM ({level1})")
    if not _tags_as_text(columns):
        return relation
    as_text = {name: sql for name, sql in expressions.items() if sql != "NULL"} | {"Tags": ident("resource_tags")}
    rows = con.sql(f"SELECT {cost_select_list(as_text, absent_as_null=False, as_text={'Tags'})}{keys} FROM ({level1})")
    from service.core.per_value import PerValuePart

    return PerValuePart(relation, rows, {"Tags": _json_tags(ident("value"))})
