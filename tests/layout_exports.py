"""Export files of the manifest-less kinds (FOCUS, GCP, Azure, bare legacy CUR) written
anywhere under a location, and what an independent DuckDB query sums from them, for the
delivery-layout tests (RELIABILITY 40-41)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from aws_exports import legacy_csv, line

from service.core.lake import Lake

Row = tuple[str, str, str]  # (billing period YYYY-MM, currency, cost)


def _text(rows: list[dict[str, str]], path: Path) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    data = out.getvalue().encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)


def _next(period: str) -> str:
    year, month = map(int, period.split("-"))
    return f"{year + month // 12}-{month % 12 + 1:02d}"


def focus(path: Path, rows: list[Row]) -> None:
    """FOCUS 1.2 columns: text in CSV, typed in Parquet (decimal money, UTC timestamps)."""
    if path.suffix == ".parquet":
        utc = lambda text: datetime.fromisoformat(text).replace(tzinfo=timezone.utc)  # noqa: E731
        table = pa.table({
            "BilledCost": pa.array([Decimal(c) for _, _, c in rows], pa.decimal128(38, 15)),
            "EffectiveCost": pa.array([Decimal(c) for _, _, c in rows], pa.decimal128(38, 15)),
            "BillingCurrency": [cur for _, cur, _ in rows],
            "BillingPeriodStart": pa.array([utc(f"{p}-01") for p, _, _ in rows], pa.timestamp("us", "UTC")),
            "ChargePeriodStart": pa.array([utc(f"{p}-03") for p, _, _ in rows], pa.timestamp("us", "UTC")),
            "ProviderName": ["AWS"] * len(rows),
        })
        pq.write_table(table, path)
        return
    _text([{"BilledCost": c, "EffectiveCost": c, "BillingCurrency": cur, "BillingPeriodStart": f"{p}-01T00:00:00Z",
            "ChargePeriodStart": f"{p}-03T00:00:00Z", "ProviderName": "AWS"} for p, cur, c in rows], path)


def gcp(path: Path, rows: list[Row]) -> None:
    """BigQuery billing export rows: NDJSON or Parquet, nested invoice.month."""
    records = [{"billing_account_id": "0X0X0X", "cost": float(c), "currency": cur,
                "invoice": {"month": p.replace("-", "")}, "usage_start_time": f"{p}-03 00:00:00 UTC",
                "usage_end_time": f"{p}-03 01:00:00 UTC"} for p, cur, c in rows]
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(records), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records))


def azure(path: Path, rows: list[Row]) -> None:
    """EA cost details (newer header), month-first dates."""
    def us(period: str, day: int) -> str:
        year, month = period.split("-")
        return f"{month}/{day:02d}/{year}"
    _text([{"SubscriptionId": "sub-1", "Date": us(p, 3), "MeterCategory": "Storage", "CostInBillingCurrency": c,
            "BillingCurrencyCode": cur, "BillingPeriodStartDate": us(p, 1), "BillingPeriodEndDate": us(p, 28),
            "ChargeType": "Usage", "PricingModel": "OnDemand"} for p, cur, c in rows], path)


def aws_cur(path: Path, rows: list[Row]) -> None:
    """A bare legacy CUR CSV (no manifest, no period folder)."""
    data = legacy_csv([line(p, cost=c, currency=cur, identity__LineItemId=f"{path.name}-{i}")
                       for i, (p, cur, c) in enumerate(rows)])
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)


WRITERS = {"focus": focus, "gcp-billing": gcp, "azure-cost": azure, "aws-cur": aws_cur}
# Two file formats each kind reads, to mix within one period.
FORMATS = {"focus": (".csv", ".parquet"), "gcp-billing": (".jsonl", ".parquet"), "azure-cost": (".csv", ".csv.gz"),
           "aws-cur": (".csv", ".csv.gz")}

# Independent sums: (period, currency, Σ cost at the lake's 12 decimals) per file, by kind.
_SUMS = {
    ".csv": {
        "focus": "SELECT left(BillingPeriodStart, 7), BillingCurrency, CAST(BilledCost AS DECIMAL(38,12)) "
                 "FROM read_csv(?, all_varchar = true, union_by_name = true)",
        "azure-cost": "SELECT strftime(strptime(BillingPeriodStartDate, '%m/%d/%Y'), '%Y-%m'), BillingCurrencyCode, "
                      "CAST(CostInBillingCurrency AS DECIMAL(38,12)) FROM read_csv(?, all_varchar = true)",
        "aws-cur": 'SELECT left("bill/BillingPeriodStartDate", 7), "lineItem/CurrencyCode", '
                   'CAST("lineItem/UnblendedCost" AS DECIMAL(38,12)) FROM read_csv(?, all_varchar = true)',
    },
    ".parquet": {
        "focus": "SELECT strftime(BillingPeriodStart, '%Y-%m'), BillingCurrency, CAST(BilledCost AS DECIMAL(38,12)) "
                 "FROM read_parquet(?, union_by_name = true, hive_partitioning = true)",
        "gcp-billing": "SELECT left(invoice.month, 4) || '-' || right(invoice.month, 2), currency, CAST(CAST(cost AS VARCHAR) AS DECIMAL(38,12)) "
                       "FROM read_parquet(?, hive_partitioning = false)",
    },
    ".jsonl": {
        "gcp-billing": "SELECT left(invoice.month, 4) || '-' || right(invoice.month, 2), currency, CAST(CAST(cost AS VARCHAR) AS DECIMAL(38,12)) "
                       "FROM read_json(?, format = 'newline_delimited')",
    },
}


def duckdb_sums(kind: str, root: Path) -> dict[tuple[str, str], Decimal]:
    """Σ cost per (period, currency) of every export file under `root`, by plain DuckDB."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    totals: dict[tuple[str, str], Decimal] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        fmt = ".csv" if path.name.endswith((".csv", ".csv.gz")) else path.suffix
        sql = _SUMS.get(fmt, {}).get(kind)
        if sql is None:
            continue
        for period, currency, cost in con.execute(sql, [str(path)]).fetchall():
            totals[(period, currency)] = totals.get((period, currency), Decimal(0)) + cost
    return totals


def lake_sums(lake: Lake) -> dict[tuple[str, str], Decimal]:
    rows = lake.query().execute("SELECT billing_period, BillingCurrency, sum(BilledCost) FROM costs GROUP BY ALL").fetchall()
    return {(period, currency): cost for period, currency, cost in rows}
