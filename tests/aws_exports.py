"""Builders for AWS billing exports in the shapes AWS writes them (legacy CUR CSV with
manifests, Athena Parquet, CUR 2.0 Data Exports), to a local directory or a (moto) bucket.

Rows are dicts keyed by legacy `category/Name` column names; the CUR 2.0 and Athena writers
convert them to snake_case exactly as AWS does."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path

import duckdb

from connectors.aws_common import MONEY_FIELDS, snake_name

LEGACY_COLUMNS = [
    "identity/LineItemId", "bill/InvoiceId", "bill/PayerAccountId", "bill/BillingPeriodStartDate",
    "bill/BillingPeriodEndDate", "lineItem/UsageAccountId", "lineItem/LineItemType", "lineItem/UsageStartDate",
    "lineItem/UsageEndDate", "lineItem/ProductCode", "lineItem/UsageType", "lineItem/Operation",
    "lineItem/ResourceId", "lineItem/UsageAmount", "lineItem/CurrencyCode", "lineItem/UnblendedCost",
    "lineItem/LineItemDescription", "product/ProductName", "product/instanceType", "product/regionCode",
    "pricing/publicOnDemandCost", "pricing/term", "pricing/unit", "reservation/EffectiveCost",
    "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod", "reservation/UnusedRecurringFee",
    "savingsPlan/SavingsPlanEffectiveCost", "savingsPlan/TotalCommitmentToDate", "savingsPlan/UsedCommitment",
    "resourceTags/user:team", "resourceTags/user:Team",
]

Put = Callable[[str, bytes], None]


def next_month(period: str) -> str:
    year, month = map(int, period.split("-"))
    return f"{year + month // 12}-{month % 12 + 1:02d}"


def line(period: str = "2026-10", cost: str = "1", kind: str = "Usage", currency: str = "USD", invoice: str = "",
         team: str = "", **extra: str) -> dict[str, str]:
    """One line item; `extra` uses legacy column names with '/' written as '__'."""
    start, end = f"{period}-01T00:00:00Z", f"{next_month(period)}-01T00:00:00Z"
    row = {
        "identity/LineItemId": f"li-{period}-{cost}-{kind}", "bill/InvoiceId": invoice,
        "bill/PayerAccountId": "012345678901", "bill/BillingPeriodStartDate": start,
        "bill/BillingPeriodEndDate": end, "lineItem/UsageAccountId": "000123456789",
        "lineItem/LineItemType": kind, "lineItem/UsageStartDate": f"{period}-02T03:00:00Z",
        "lineItem/UsageEndDate": f"{period}-02T04:00:00Z", "lineItem/ProductCode": "AmazonEC2",
        "lineItem/UsageType": "USE1-BoxUsage:p5.48xlarge", "lineItem/Operation": "RunInstances",
        "lineItem/ResourceId": "i-0abc", "lineItem/UsageAmount": "1.0", "lineItem/CurrencyCode": currency,
        "lineItem/UnblendedCost": cost, "lineItem/LineItemDescription": f"{kind} line",
        "product/ProductName": "Amazon Elastic Compute Cloud", "product/instanceType": "p5.48xlarge",
        "product/regionCode": "us-east-1", "pricing/publicOnDemandCost": cost, "pricing/term": "OnDemand",
        "pricing/unit": "Hrs", "resourceTags/user:team": team,
    }
    row.update({k.replace("__", "/"): v for k, v in extra.items()})
    return row


def legacy_csv(rows: list[dict[str, str]], columns: list[str] = LEGACY_COLUMNS) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def period_folder(period: str) -> str:
    return f"{period.replace('-', '')}01-{next_month(period).replace('-', '')}01"


def write_legacy(put: Put, *, prefix: str, report: str, period: str, assembly: str, parts: list[list[dict]],
                 overwrite: bool = False, bucket: str = "bucket", manifest: bool = True,
                 extra_keys: tuple[str, ...] = ()) -> list[str]:
    """One legacy CUR delivery; returns the report keys (bucket-absolute, as in the manifest)."""
    base = "/".join(p for p in (prefix, report, period_folder(period)) if p)
    folder = base if overwrite else f"{base}/{assembly}"
    keys = []
    for number, rows in enumerate(parts, 1):
        key = f"{folder}/{report}-{number}.csv.gz"
        put(key, gzip.compress(legacy_csv(rows)))
        keys.append(key)
    if manifest:
        body = {
            "assemblyId": assembly, "account": "012345678901", "reportId": "r" * 16, "reportName": report,
            "bucket": bucket, "compression": "GZIP", "contentType": "text/csv", "charset": "UTF-8",
            "billingPeriod": {"start": f"{period.replace('-', '')}01T000000.000Z",
                              "end": f"{next_month(period).replace('-', '')}01T000000.000Z"},
            "columns": [{"category": c.split("/")[0], "name": c.split("/")[1]} for c in LEGACY_COLUMNS],
            "reportKeys": keys + list(extra_keys),
        }
        put(f"{base}/{report}-Manifest.json", json.dumps(body).encode())
    return keys + list(extra_keys)


def cur2_table(con: duckdb.DuckDBPyConnection, rows: list[dict[str, str]]) -> duckdb.DuckDBPyRelation:
    """Rows as a CUR 2.0 relation: snake_case columns, typed money and times, `resource_tags` map."""
    values = []
    for row in rows:
        tags = {k.split("/", 1)[1].replace(":", "_"): v for k, v in row.items() if k.startswith("resourceTags/") and v}
        values.append({**{snake_name(k): v for k, v in row.items() if not k.startswith("resourceTags/")},
                       "resource_tags": tags, "product": {"product_name": row["product/ProductName"]}})
    con.execute("CREATE OR REPLACE TEMP TABLE cur2_rows (j JSON)")
    con.executemany("INSERT INTO cur2_rows VALUES (?)", [[json.dumps(v)] for v in values])
    times = ["bill_billing_period_start_date", "bill_billing_period_end_date", "line_item_usage_start_date",
             "line_item_usage_end_date"]
    selects = []
    # CUR 2.0 folds most product/* columns into the `product` map (product_name among them).
    for column in [snake_name(c) for c in LEGACY_COLUMNS
                   if not c.startswith("resourceTags/") and c != "product/ProductName"]:
        text = f"NULLIF(j->>'{column}', '')"
        if column in MONEY_FIELDS:
            selects.append(f"CAST({text} AS DOUBLE) AS {column}")
        elif column in times:
            selects.append(f"CAST(CAST({text} AS TIMESTAMPTZ) AS TIMESTAMP) AS {column}")
        else:
            selects.append(f"{text} AS {column}")
    selects.append("CAST(j->'resource_tags' AS MAP(VARCHAR, VARCHAR)) AS resource_tags")
    selects.append("CAST(j->'product' AS MAP(VARCHAR, VARCHAR)) AS product")
    return con.sql(f"SELECT {', '.join(selects)} FROM cur2_rows")


def to_bytes(con: duckdb.DuckDBPyConnection, relation: duckdb.DuckDBPyRelation, tmp: Path, fmt: str) -> bytes:
    """`relation` written as Parquet or CSV.gz (CUR 2.0 CSV: tags as JSON text, money as text)."""
    target = tmp / f"out-{id(relation)}.{fmt}"
    view = f"v_{id(relation)}"
    relation.create_view(view)
    if fmt == "parquet":
        con.execute(f"COPY {view} TO '{target}' (FORMAT parquet)")
    else:
        con.execute(f"COPY (SELECT * REPLACE (CAST(to_json(resource_tags) AS VARCHAR) AS resource_tags, "
                    f"CAST(to_json(product) AS VARCHAR) AS product) FROM {view}) "
                    f"TO '{target}' (FORMAT csv, HEADER, COMPRESSION gzip)")
    return target.read_bytes()


def local_put(root: Path) -> Put:
    def put(key: str, body: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return put


def s3_put(client, bucket: str) -> Put:
    def put(key: str, body: bytes) -> None:
        client.put_object(Bucket=bucket, Key=key, Body=body)
    return put


def write_cur2(put: Put, *, prefix: str, export: str, period: str, execution: str, parts: list[bytes], fmt: str,
               delivery_folder: str | None = None, bucket: str = "bucket", manifest: bool = True) -> list[str]:
    """One Data Exports CUR 2.0 delivery (OVERWRITE_REPORT, or CREATE_NEW_REPORT when
    `delivery_folder` is given); returns the data file URIs the manifest lists."""
    base = "/".join(p for p in (prefix, export) if p)
    sub = f"/{delivery_folder}" if delivery_folder else ""
    uris = []
    for number, body in enumerate(parts, 1):
        extension = "snappy.parquet" if fmt == "parquet" else "csv.gz"
        key = f"{base}/data/BILLING_PERIOD={period}{sub}/{export}-{number:05d}.{extension}"
        put(key, body)
        uris.append(f"s3://{bucket}/{key}")
    if manifest:
        body = {
            "executionId": execution,
            "exportArn": f"arn:aws:bcm-data-exports:us-east-1:012345678901:export/{export}-0000",
            "billingPeriod": {"start": f"{period}-01T00:00:00.000Z", "end": f"{next_month(period)}-01T00:00:00.000Z"},
            "columns": [{"name": snake_name(c), "type": "string"} for c in LEGACY_COLUMNS
                        if not c.startswith("resourceTags/")] + [{"name": "resource_tags", "type": "map<string,string>"}],
            "dataFiles": uris,
        }
        put(f"{base}/metadata/BILLING_PERIOD={period}{sub}/{export}-Manifest.json", json.dumps(body).encode())
    return uris
