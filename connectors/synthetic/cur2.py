"""Rows of the synthetic organisation in the AWS Data Exports CUR 2.0 schema.

Streams (connectors.synthetic.org) are expanded into line items chunk by chunk with numpy,
so 10M rows take seconds and bounded memory. Money is exact: integers of 1e-10 USD written
as Parquet DECIMAL(38,10), or as text with ten decimals in CSV. Column names and kinds are
those of CUR 2.0: `resource_tags` and `product` are map<string,string> in Parquet and JSON
text in CSV; timestamps are UTC.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.synthetic.org import ACCOUNTS, PAYER, REGIONS, UNITS, Stream

MONEY = pa.decimal128(38, 10)
TIMESTAMP = pa.timestamp("ms")
STRING = pa.string()
TAGS = pa.map_(pa.string(), pa.string())
LINE_TYPES = ("Usage", "SavingsPlanCoveredUsage", "SavingsPlanNegation", "SavingsPlanRecurringFee",
              "Tax", "Fee", "Credit")
USAGE, COVERED, NEGATION, RECURRING = range(4)
CHUNK_ROWS = 1 << 18
ID_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz234567", dtype=np.uint8)

# (column, Parquet type) in the order the export writes them
SCHEMA = pa.schema([
    ("bill_bill_type", STRING), ("bill_billing_entity", STRING),
    ("bill_billing_period_end_date", TIMESTAMP), ("bill_billing_period_start_date", TIMESTAMP),
    ("bill_invoice_id", STRING), ("bill_invoicing_entity", STRING),
    ("bill_payer_account_id", STRING), ("bill_payer_account_name", STRING),
    ("identity_line_item_id", STRING), ("identity_time_interval", STRING),
    ("line_item_availability_zone", STRING), ("line_item_blended_cost", MONEY), ("line_item_blended_rate", STRING),
    ("line_item_currency_code", STRING), ("line_item_legal_entity", STRING),
    ("line_item_line_item_description", STRING), ("line_item_line_item_type", STRING),
    ("line_item_operation", STRING), ("line_item_product_code", STRING), ("line_item_resource_id", STRING),
    ("line_item_tax_type", STRING), ("line_item_unblended_cost", MONEY), ("line_item_unblended_rate", STRING),
    ("line_item_usage_account_id", STRING), ("line_item_usage_account_name", STRING),
    ("line_item_usage_amount", pa.float64()), ("line_item_usage_end_date", TIMESTAMP),
    ("line_item_usage_start_date", TIMESTAMP), ("line_item_usage_type", STRING),
    ("pricing_currency", STRING), ("pricing_public_on_demand_cost", MONEY), ("pricing_public_on_demand_rate", STRING),
    ("pricing_purchase_option", STRING), ("pricing_term", STRING), ("pricing_unit", STRING),
    ("product", TAGS), ("product_instance_type", STRING), ("product_location", STRING),
    ("product_pricing_unit", STRING), ("product_product_family", STRING), ("product_region_code", STRING),
    ("product_servicecode", STRING), ("product_usagetype", STRING),
    ("reservation_effective_cost", MONEY), ("reservation_reservation_a_r_n", STRING),
    ("reservation_unused_amortized_upfront_fee_for_billing_period", MONEY),
    ("reservation_unused_recurring_fee", MONEY),
    ("resource_tags", TAGS),
    ("savings_plan_amortized_upfront_commitment_for_billing_period", MONEY),
    ("savings_plan_offering_type", STRING), ("savings_plan_payment_option", STRING),
    ("savings_plan_purchase_term", STRING),
    ("savings_plan_recurring_commitment_for_billing_period", MONEY),
    ("savings_plan_savings_plan_a_r_n", STRING), ("savings_plan_savings_plan_effective_cost", MONEY),
    ("savings_plan_savings_plan_rate", MONEY), ("savings_plan_total_commitment_to_date", MONEY),
    ("savings_plan_used_commitment", MONEY),
    ("capacity_reservation_capacity_reservation_arn", STRING),
    ("capacity_reservation_capacity_reservation_status", STRING),
    ("capacity_reservation_capacity_reservation_type", STRING),
])
CSV_SCHEMA = pa.schema([pa.field(f.name, STRING if f.type in (TAGS, TIMESTAMP, MONEY) else f.type)
                        for f in SCHEMA])


def manifest_columns() -> list[dict[str, str]]:
    """The `columns` list of a manifest: each name and its type (CSV holds the same values as text)."""
    kinds = {STRING: "string", TIMESTAMP: "timestamp", MONEY: "decimal(38,10)", pa.float64(): "double",
             TAGS: "map<string,string>"}
    return [{"name": f.name, "type": kinds[f.type]} for f in SCHEMA]


def money_array(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """int64 of 1e-10 USD → DECIMAL(38,10) without a detour through float or Python ints."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    words = np.empty((len(values), 2), dtype=np.int64)
    words[:, 0] = values
    words[:, 1] = values >> 63  # two's complement sign extension to 128 bits
    bitmap = None
    if valid is not None:
        bitmap = pa.array(valid, pa.bool_()).buffers()[1]
        null_count = int(len(valid) - np.count_nonzero(valid))
    else:
        null_count = 0
    return pa.Array.from_buffers(MONEY, len(values), [bitmap, pa.py_buffer(words.tobytes())], null_count=null_count)


def _fixed_strings(chars: np.ndarray) -> pa.Array:
    """An (n, width) uint8 matrix of ASCII → a string array, with no per-row Python."""
    rows, width = chars.shape
    offsets = np.arange(rows + 1, dtype=np.int32) * width
    return pa.Array.from_buffers(STRING, rows, [None, pa.py_buffer(offsets.tobytes()),
                                                pa.py_buffer(np.ascontiguousarray(chars).tobytes())])


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Catalogue:
    """Per-stream constants as Arrow/numpy arrays, taken row-wise by stream index."""

    def __init__(self, streams: Sequence[Stream]):
        self.streams = streams
        col = lambda name: [getattr(s, name) for s in streams]  # noqa: E731
        self.line_type = np.array([LINE_TYPES.index(s.line_type) for s in streams], dtype=np.int8)
        self.rate = np.array(col("rate"), dtype=np.int64)
        self.sp_rate = np.array(col("sp_rate"), dtype=np.int64)
        self.commitment = np.array(col("commitment"), dtype=np.int64)
        self.used = np.array(col("used"), dtype=np.int64)
        self.amount = np.array(col("amount"), dtype=np.float64)
        self.sigma = np.array(col("sigma"), dtype=np.float64)
        self.growth = np.array(col("growth"), dtype=np.float64)
        self.per_month = np.array(col("per_month"), dtype=bool)
        self.integer = np.array(col("integer"), dtype=bool)
        self.hours = np.array(col("hours"), dtype=np.int64)
        self.start = np.array(col("start"), dtype=np.int64)
        self.end = np.array(col("end"), dtype=np.int64)
        self.granularity = np.array(col("granularity"), dtype=np.int64)
        account = [ACCOUNTS[s.account] for s in streams]
        # a negation writes the covered usage's rate negated, as its cost (`rows`) is
        rate_text = [format(Decimal(-s.rate if s.line_type == "SavingsPlanNegation" else s.rate) / UNITS, "f")
                     for s in streams]
        self.strings = {
            "line_item_usage_account_id": pa.array([a[0] for a in account]),
            "line_item_usage_account_name": pa.array([a[1] for a in account]),
            "line_item_availability_zone": pa.array([f"{s.region}a" if s.instance_type else "" for s in streams]),
            "line_item_line_item_description": pa.array(col("description")),
            "line_item_line_item_type": pa.array(col("line_type")),
            "line_item_operation": pa.array(col("operation")),
            "line_item_product_code": pa.array(col("product_code")),
            "line_item_resource_id": pa.array(col("resource_id")),
            "line_item_tax_type": pa.array(["Sales Tax" if s.line_type == "Tax" else "" for s in streams]),
            "line_item_unblended_rate": pa.array(rate_text),
            "line_item_blended_rate": pa.array(rate_text),
            "line_item_usage_type": pa.array(col("usage_type")),
            "product_usagetype": pa.array(col("usage_type")),
            "pricing_public_on_demand_rate": pa.array(
                [r if s.line_type in ("Usage", "SavingsPlanCoveredUsage") else "" for r, s in zip(rate_text, streams)]),
            "pricing_purchase_option": pa.array(["On Demand" if s.line_type in ("Usage", "SavingsPlanCoveredUsage", "SavingsPlanNegation") else "" for s in streams]),
            "pricing_term": pa.array(["OnDemand" if s.line_type in ("Usage", "SavingsPlanCoveredUsage", "SavingsPlanNegation") else "" for s in streams]),
            "pricing_unit": pa.array(col("unit")),
            "product_pricing_unit": pa.array(col("unit")),
            "product_instance_type": pa.array(col("instance_type")),
            "product_location": pa.array([REGIONS[s.region][1] if s.region else "" for s in streams]),
            "product_product_family": pa.array(col("product_family")),
            "product_region_code": pa.array(col("region")),
            "product_servicecode": pa.array(col("servicecode")),
            "savings_plan_savings_plan_a_r_n": pa.array(col("savings_plan_arn")),
            "capacity_reservation_capacity_reservation_arn": pa.array(col("capacity_reservation_arn")),
            "capacity_reservation_capacity_reservation_status": pa.array(col("capacity_status")),
            "capacity_reservation_capacity_reservation_type": pa.array(
                ["ODCR" if s.capacity_reservation_arn else "" for s in streams]),
        }
        is_fee = [s.line_type == "SavingsPlanRecurringFee" for s in streams]
        for name, value in (("savings_plan_offering_type", "ComputeSavingsPlans"),
                            ("savings_plan_payment_option", "No Upfront"), ("savings_plan_purchase_term", "1yr")):
            self.strings[name] = pa.array([value if fee else "" for fee in is_fee])
        tag_maps = [list(s.tags) for s in streams]
        product_maps = [[("product_name", s.product_name)] + ([("instance_family", s.instance_type.split(".")[0])]
                                                              if s.instance_type else []) for s in streams]
        self.maps = {"resource_tags": pa.array(tag_maps, TAGS), "product": pa.array(product_maps, TAGS)}
        self.map_json = {
            "resource_tags": pa.array([json.dumps(dict(m), separators=(",", ":")) for m in tag_maps]),
            "product": pa.array([json.dumps(dict(m), separators=(",", ":")) for m in product_maps]),
        }


@dataclass
class Rows:
    """One chunk of line items before it becomes columns (all arrays of the same length)."""

    sid: np.ndarray  # stream index into the catalogue
    start_ms: np.ndarray
    end_ms: np.ndarray
    usage: np.ndarray
    cost: np.ndarray  # unblended, 1e-10 USD
    public: np.ndarray  # public on-demand cost
    public_valid: np.ndarray
    effective: np.ndarray  # amortized (what EffectiveCost should come out as)


def slots(cat: Catalogue, ids: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(stream index, hour slot) of each row of streams `ids` in [lo, hi) (hour slots of the
    window). Deterministic, so a writer can count a period's rows before writing them."""
    start, end, gran = cat.start[ids], cat.end[ids], cat.granularity[ids]
    a, b = np.maximum(start, lo), np.minimum(end, hi)
    first = start + (a - start + gran - 1) // gran * gran
    counts = np.where(b > first, (b - first + gran - 1) // gran, 0)
    local = np.repeat(np.arange(len(ids)), counts)
    offsets = np.repeat(np.cumsum(counts) - counts, counts)
    slot = first[local] + (np.arange(len(local)) - offsets) * gran[local]
    sid = ids[local]
    keep = (cat.hours[sid] >> (slot % 24)) & 1 == 1
    return sid[keep], slot[keep]


def expand(cat: Catalogue, ids: np.ndarray, lo: int, hi: int, window_ms: int, days_in_month: np.ndarray,
           rng: np.random.Generator) -> Rows:
    """The rows of streams `ids` whose slots fall in [lo, hi) (hour slots of the window)."""
    sid, slot = slots(cat, ids, lo, hi)
    g = cat.granularity[sid]
    usage = cat.amount[sid].copy()
    per_month = cat.per_month[sid]
    usage[per_month] *= g[per_month] / (24.0 * days_in_month[slot[per_month] // 24])
    usage *= 1.0 + cat.growth[sid] * slot / 720.0
    sigma = cat.sigma[sid]
    usage *= rng.lognormal(-sigma * sigma / 2.0, sigma)
    usage = np.where(cat.integer[sid], np.rint(usage), np.round(usage, 8))
    kind = cat.line_type[sid]
    cost = np.rint(usage * cat.rate[sid]).astype(np.int64)
    cost = np.where(kind == NEGATION, -cost, cost)
    sp_effective = np.rint(usage * cat.sp_rate[sid]).astype(np.int64)
    effective = np.select([kind == COVERED, kind == NEGATION, kind == RECURRING],
                          [sp_effective, 0, cat.commitment[sid] - cat.used[sid]], cost)
    public = np.where(kind == NEGATION, 0, cost)
    return Rows(sid=sid, start_ms=window_ms + slot * 3_600_000, end_ms=window_ms + (slot + g) * 3_600_000,
                usage=usage, cost=cost, public=public, public_valid=kind != RECURRING, effective=effective)


def columns(cat: Catalogue, rows: Rows, *, period: tuple[datetime, datetime], invoice_id: str,
            rng: np.random.Generator, csv: bool) -> pa.Table:
    """A chunk as a table of the CUR 2.0 schema (Parquet types, or CSV text)."""
    n = len(rows.sid)
    take = pa.array(rows.sid, pa.int64())
    kind = cat.line_type[rows.sid]
    null_money = np.zeros(n, dtype=bool)
    sp_row = kind == COVERED
    fee_row = kind == RECURRING
    cols: dict[str, pa.Array] = {name: arr.take(take) for name, arr in cat.strings.items()}
    for name, arr in (cat.map_json if csv else cat.maps).items():
        cols[name] = arr.take(take)

    def const(value: str) -> pa.Array:
        return pa.repeat(pa.scalar(value, STRING), n)

    cols.update({
        "bill_bill_type": const("Anniversary"), "bill_billing_entity": const("AWS"),
        "bill_invoice_id": const(invoice_id), "bill_invoicing_entity": const("Amazon Web Services, Inc."),
        "bill_payer_account_id": const(PAYER[0]), "bill_payer_account_name": const(PAYER[1]),
        "line_item_currency_code": const("USD"), "pricing_currency": const("USD"),
        "line_item_legal_entity": const("Amazon Web Services, Inc."),
        "identity_line_item_id": _fixed_strings(ID_ALPHABET[rng.integers(0, 32, size=(n, 26), dtype=np.uint8)]),
        "line_item_usage_amount": pa.array(rows.usage, pa.float64()),
        "line_item_unblended_cost": money_array(rows.cost),
        "line_item_blended_cost": money_array(rows.cost),
        "pricing_public_on_demand_cost": money_array(rows.public, rows.public_valid),
        "savings_plan_savings_plan_effective_cost": money_array(np.where(sp_row, rows.effective, 0), sp_row),
        "savings_plan_savings_plan_rate": money_array(cat.sp_rate[rows.sid], sp_row),
        "savings_plan_recurring_commitment_for_billing_period": money_array(cat.commitment[rows.sid], fee_row),
        "savings_plan_total_commitment_to_date": money_array(cat.commitment[rows.sid], fee_row),
        "savings_plan_used_commitment": money_array(cat.used[rows.sid], fee_row),
        "savings_plan_amortized_upfront_commitment_for_billing_period": money_array(np.zeros(n, np.int64), fee_row),
        "reservation_effective_cost": money_array(np.zeros(n, np.int64), null_money),
        "reservation_unused_amortized_upfront_fee_for_billing_period": money_array(np.zeros(n, np.int64), null_money),
        "reservation_unused_recurring_fee": money_array(np.zeros(n, np.int64), null_money),
        "reservation_reservation_a_r_n": const(""),
    })
    start_ts = pa.array(rows.start_ms.astype("datetime64[ms]"), TIMESTAMP)
    end_ts = pa.array(rows.end_ms.astype("datetime64[ms]"), TIMESTAMP)
    period_start = pa.repeat(pa.scalar(period[0].replace(tzinfo=None), TIMESTAMP), n)
    period_end = pa.repeat(pa.scalar(period[1].replace(tzinfo=None), TIMESTAMP), n)
    start_text, start_short = _timestamp_text(rows.start_ms)
    end_text, end_short = _timestamp_text(rows.end_ms)
    cols["identity_time_interval"] = pc.binary_join_element_wise(start_short, end_short, "/")
    if csv:
        cols.update({"line_item_usage_start_date": start_text, "line_item_usage_end_date": end_text,
                     "bill_billing_period_start_date": const(_iso(period[0])),
                     "bill_billing_period_end_date": const(_iso(period[1]))})
        for field in SCHEMA:
            if field.type == MONEY:
                cols[field.name] = cols[field.name].cast(STRING)
        return pa.Table.from_arrays([cols[f.name] for f in CSV_SCHEMA], schema=CSV_SCHEMA)
    cols.update({"line_item_usage_start_date": start_ts, "line_item_usage_end_date": end_ts,
                 "bill_billing_period_start_date": period_start, "bill_billing_period_end_date": period_end})
    return pa.Table.from_arrays([cols[f.name] for f in SCHEMA], schema=SCHEMA)


def _timestamp_text(ms: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """Epoch milliseconds → `2026-10-01T00:00:00.000Z` and `2026-10-01T00:00:00Z`, formatting
    each distinct hour once (a chunk holds few)."""
    distinct, inverse = np.unique(ms, return_inverse=True)
    moments = [datetime.fromtimestamp(int(v) / 1000, timezone.utc) for v in distinct]
    index = pa.array(inverse.astype(np.int64))
    full = pa.array([_iso(m) for m in moments], STRING).take(index)
    short = pa.array([m.strftime("%Y-%m-%dT%H:%M:%SZ") for m in moments], STRING).take(index)
    return full, short


def month_bounds(moment: datetime) -> tuple[datetime, datetime]:
    first = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    following = (first + timedelta(days=32)).replace(day=1)
    return first, following


def utc_midnight(day) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
