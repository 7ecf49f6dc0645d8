"""The synthetic ML organisation's AWS bill, written as a real Data Exports CUR 2.0 delivery.

    result = generate_organisation(out_dir, days=60, start=date(2026, 10, 1), seed=7)

writes, per format (`parquet` and/or `csv.gz`), one export in the layout AWS delivers:

    <out_dir>/<export>/data/BILLING_PERIOD=YYYY-MM/<export>-00001.snappy.parquet   (or .csv.gz)
    <out_dir>/<export>/metadata/BILLING_PERIOD=YYYY-MM/<export>-Manifest.json

with `legacy-csv.gz`, the same rows as a legacy CUR (connectors.synthetic.legacy)
under `<out_dir>/ml-org-cur/`, and with `focus-csv` as FOCUS 1.0 CSV files
(connectors.synthetic.focus) under `<out_dir>/ml-org-focus/`. `parts=N` splits each
period's data into N numbered files, as AWS splits large deliveries
(connectors.synthetic.writers). The CUR 2.0 manifest lists its data files as
`s3://ml-org-billing/cur2/<export>/data/...` URIs, as AWS does; a reader of a local copy
resolves them relative to the export directory. Same
arguments → byte-identical files. The result carries the expected totals per billing
period (billed = Σ unblended cost; effective = amortized as issue 2 defines it), and the
spend per team tag, so tests and benchmarks can check the lake against them.

The organisation itself (connectors.synthetic.org) is built first and returned, so later
features can derive inventory (S3 listings, log groups, GPU utilisation), budgets or an
injected anomaly from the same instances, buckets and experiments; to change the bill
itself, build the organisation, append or alter its streams, then `write_billing` it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import numpy as np

from connectors.synthetic.cur2 import (
    CHUNK_ROWS, Catalogue, Rows, expand, manifest_columns, month_bounds, slots, utc_midnight,
)
from connectors.synthetic.legacy import file_digest, install_assembly, tag_keys
from connectors.synthetic.capacity import add_capacity_reservation
from connectors.synthetic.org import UNITS, Organisation, Stream, build_organisation
from connectors.synthetic.writers import EXPORT_NAMES, FORMATS, PeriodWriters
BUCKET, PREFIX = "ml-org-billing", "cur2"
CENT = UNITS // 100
TAXED = ("AmazonS3", "AmazonCloudWatch", "AmazonFSx", "AWSSupportBusiness")
TAX_RATE = Decimal("0.0625")
CREDITS_PER_MONTH = Decimal("25000")


@dataclass(frozen=True)
class PeriodTotals:
    billing_period: str  # YYYY-MM
    rows: int
    billed_cost: Decimal
    effective_cost: Decimal
    final: bool  # has an invoice id


@dataclass
class GenerationResult:
    organisation: Organisation
    exports: dict[str, Path]  # format → export directory (holds data/ and metadata/)
    files: list[Path] = field(default_factory=list)
    manifests: list[Path] = field(default_factory=list)
    periods: list[PeriodTotals] = field(default_factory=list)
    spend_by_team: dict[str | None, Decimal] = field(default_factory=dict)  # billed; None = no team tag

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.periods)

    @property
    def billed_cost(self) -> Decimal:
        return sum((p.billed_cost for p in self.periods), Decimal(0))


def default_start(days: int, today: date | None = None) -> date:
    """The window of `days` that ends with yesterday (UTC): what a demo wants to show."""
    today = today or datetime.now(timezone.utc).date()
    return today - timedelta(days=days)


def generate_organisation(out_dir: str | Path, *, days: int = 60, start: date | None = None, seed: int = 7,
                          rows: int | None = None, formats: Sequence[str] = ("parquet",),
                          parts: int = 1) -> GenerationResult:
    """Write the organisation's CUR 2.0 export(s) under `out_dir` and return what was written.

    `rows`: size the fleets so the export holds about this many line items over `days`.
    `start`: first day (UTC) of the window; default: the `days` ending yesterday.
    `parts`: data files per billing period and format (AWS splits large deliveries).
    Each export directory is replaced as a whole, so a re-run never leaves stale periods.
    """
    start = start or default_start(days)
    scale = 1.0
    if rows is not None:
        base = build_organisation(seed, start, days)
        scale = max(rows, 1) / max(expected_rows(base), 1)
    org = build_organisation(seed, start, days, scale)
    add_capacity_reservation(org)
    return write_billing(org, out_dir, formats=formats, parts=parts)


def write_billing(org: Organisation, out_dir: str | Path, *,
                  formats: Sequence[str] = ("parquet",), parts: int = 1) -> GenerationResult:
    """Write an organisation's bill. The extension point: build the organisation with
    `build_organisation`, change it (an injected anomaly, a planned run), then write it."""
    unknown = set(formats) - set(FORMATS)
    if unknown or not formats:
        raise ValueError(f"formats must be among {sorted(FORMATS)}, got {list(formats)}")
    out = Path(out_dir)
    exports = {fmt: out / EXPORT_NAMES[fmt] for fmt in formats}
    for root in exports.values():
        if root.exists():
            shutil.rmtree(root)
    result = GenerationResult(organisation=org, exports=exports)
    _write(org, result, parts)
    return result


def expected_rows(org: Organisation) -> int:
    """About how many line items the organisation's streams bill (without the monthly lines)."""
    total = 0
    for s in org.streams:
        slots = -(-(s.end - s.start) // s.granularity)
        share = bin(s.hours).count("1") / 24 if s.granularity == 1 else 1
        total += int(slots * share)
    return total


def _write(org: Organisation, result: GenerationResult, parts: int) -> None:
    cat = Catalogue(org.streams)
    window_start = utc_midnight(org.start)
    window_end = window_start + timedelta(days=org.days)
    window_ms = int(window_start.timestamp() * 1000)
    bounds = [month_bounds(window_start + timedelta(days=d)) for d in range(org.days)]
    days_in_month = np.array([(b[1] - b[0]).days for b in bounds], dtype=np.float64)
    team_totals: dict[str | None, int] = {}
    period_start = month_bounds(window_start)[0]
    while period_start < window_end:
        period = month_bounds(period_start)
        label = period[0].strftime("%Y-%m")
        final = period[1] < window_end
        invoice = str(int(hashlib.sha256(f"{org.seed}/{label}".encode()).hexdigest(), 16) % 10**10).zfill(10) if final else ""
        lo = max(0, int((period[0] - window_start).total_seconds() // 3600))
        hi = min(org.hours, int((period[1] - window_start).total_seconds() // 3600))
        # Parts are cut by row count, so count first (the slots are deterministic: cheap).
        expected = sum(len(slots(cat, ids, lo, hi)[0]) for ids in _chunks(cat, lo, hi)) if parts > 1 else 0
        writers = PeriodWriters(result.exports, label, tag_keys(org.streams), rows=expected, parts=parts)
        billed, effective, count = 0, 0, 0
        stream_cost = np.zeros(len(org.streams), dtype=np.int64)
        rng = np.random.default_rng([org.seed, period[0].year, period[0].month])
        for ids in _chunks(cat, lo, hi):
            chunk = expand(cat, ids, lo, hi, window_ms, days_in_month, rng)
            np.add.at(stream_cost, chunk.sid, chunk.cost)
            billed += int(chunk.cost.sum())
            effective += int(chunk.effective.sum())
            count += len(chunk.sid)
            writers.write(cat, chunk, period, invoice, rng)
        extra, extra_cat = _monthly_lines(org, stream_cost, period, window_start, window_end)
        writers.write(extra_cat, extra, period, invoice, rng)
        billed += int(extra.cost.sum())
        effective += int(extra.effective.sum())
        count += len(extra.sid)
        for stream, cost in zip(org.streams, stream_cost.tolist()):
            team_totals[stream.team] = team_totals.get(stream.team, 0) + cost
        team_totals[None] = team_totals.get(None, 0) + int(extra.cost.sum())
        for fmt, paths in writers.close().items():
            root = result.exports[fmt]
            if fmt == "legacy-csv.gz":
                manifest = install_assembly(root, period, paths, writers.legacy_header, BUCKET, PREFIX)
                paths = [root / key.split(f"/{root.name}/", 1)[1] for key in json.loads(manifest.read_text())["reportKeys"]]
            elif fmt == "focus-csv":  # a plain folder of FOCUS files: no manifest
                manifest = None
            else:
                manifest = _write_manifest(root, fmt, label, period, paths)
            result.files.extend(paths)
            if manifest:
                result.manifests.append(manifest)
        result.periods.append(PeriodTotals(label, count, Decimal(billed) / UNITS, Decimal(effective) / UNITS, final))
        period_start = period[1]
    result.spend_by_team = {team: Decimal(v) / UNITS for team, v in sorted(team_totals.items(), key=lambda kv: kv[0] or "")}


def _chunks(cat: Catalogue, lo: int, hi: int):
    """Groups of consecutive streams holding at most about CHUNK_ROWS rows in [lo, hi)."""
    span = np.clip(np.minimum(cat.end, hi) - np.maximum(cat.start, lo), 0, None)
    estimate = -(-span // cat.granularity)
    group, size = [], 0
    for index, rows in enumerate(estimate.tolist()):
        if rows == 0:
            continue
        if group and size + rows > CHUNK_ROWS:
            yield np.array(group, dtype=np.int64)
            group, size = [], 0
        group.append(index)
        size += rows
    if group:
        yield np.array(group, dtype=np.int64)


def _monthly_lines(org: Organisation, stream_cost: np.ndarray, period, window_start, window_end):
    """Support fee, sales tax and credits: one line each per month, computed from the month's usage."""
    streams: list[Stream] = []
    usage_total = Decimal(int(stream_cost.sum())) / UNITS
    support = _support_fee(usage_total)
    common = dict(region="", unit="", amount=1.0, start=0, end=0, resource_id="", instance_type="")
    streams.append(Stream(account="payer", product_code="AWSSupportBusiness", servicecode="AWSSupportBusiness",
                          product_name="AWS Support (Business)", product_family="", usage_type="Dollar",
                          operation="", rate=_units(support), line_type="Fee",
                          description="AWS Support (Business) monthly fee", **common))
    subtotal: dict[tuple[str, str], int] = {}
    for stream, cost in zip(org.streams, stream_cost.tolist()):
        if stream.product_code in TAXED:
            key = (stream.account, stream.product_code)
            subtotal[key] = subtotal.get(key, 0) + cost
    subtotal[("payer", "AWSSupportBusiness")] = _units(support)
    names = {s.product_code: s.product_name for s in org.streams + streams}
    for (account, code), cost in sorted(subtotal.items()):
        tax = (Decimal(cost) / UNITS * TAX_RATE).quantize(Decimal("0.01"))
        streams.append(Stream(account=account, product_code=code, servicecode=code, product_name=names[code],
                              product_family="", usage_type="", operation="", rate=_units(tax), line_type="Tax",
                              description=f"Tax for product code {code}", **common))
    covered = (min(period[1], window_end) - max(period[0], window_start)).total_seconds()
    credit = (CREDITS_PER_MONTH * Decimal(org.scale).quantize(Decimal("0.0001")) * Decimal(covered)
              / Decimal((period[1] - period[0]).total_seconds())).quantize(Decimal("0.01"))
    streams.append(Stream(account="training", product_code="AmazonEC2", servicecode="AmazonEC2",
                          product_name="Amazon Elastic Compute Cloud", product_family="", usage_type="",
                          operation="", rate=-_units(credit), line_type="Credit",
                          description="AWS Credits: research program", **common))
    cat = Catalogue(streams)
    n = len(streams)
    cost = cat.rate.copy()
    ms = lambda moment: int(moment.timestamp() * 1000)  # noqa: E731
    rows = Rows(sid=np.arange(n, dtype=np.int64), start_ms=np.full(n, ms(period[0])), end_ms=np.full(n, ms(period[1])),
                usage=np.ones(n), cost=cost, public=np.zeros(n, np.int64), public_valid=np.zeros(n, bool),
                effective=cost)
    return rows, cat


def _support_fee(usage: Decimal) -> Decimal:
    """AWS Business Support: the greater of $100 or 10% / 7% / 5% / 3% of tiers of monthly usage."""
    fee, lower = Decimal(0), Decimal(0)
    for upper, rate in ((Decimal(10_000), "0.10"), (Decimal(80_000), "0.07"), (Decimal(250_000), "0.05"), (None, "0.03")):
        top = usage if upper is None else min(usage, upper)
        if top > lower:
            fee += (top - lower) * Decimal(rate)
        if upper is None or usage <= upper:
            break
        lower = upper
    return max(Decimal(100), fee).quantize(Decimal("0.01"))


def _units(amount: Decimal) -> int:
    return int(amount * UNITS)


def _write_manifest(root: Path, fmt: str, label: str, period, data_files: Sequence[Path]) -> Path:
    digest = file_digest(data_files)
    export = root.name
    keys = [f"{PREFIX}/{export}/data/BILLING_PERIOD={label}/{f.name}" for f in data_files]
    manifest = {
        "executionId": str(uuid.UUID(bytes=digest[:16])),
        "exportArn": f"arn:aws:bcm-data-exports:us-east-1:210987654321:export/{export}",
        "exportName": export,
        "bucket": BUCKET,
        "billingPeriod": {"start": period[0].strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                          "end": period[1].strftime("%Y-%m-%dT%H:%M:%S.000Z")},
        "dataFiles": [f"s3://{BUCKET}/{key}" for key in keys],
        "format": "PARQUET" if fmt == "parquet" else "TEXT_OR_CSV",
        "compression": "PARQUET" if fmt == "parquet" else "GZIP",
        "columns": manifest_columns(),
        "queryStatement": "SELECT * FROM COST_AND_USAGE_REPORT",
        "tableConfigurations": {"COST_AND_USAGE_REPORT": {"TIME_GRANULARITY": "HOURLY", "INCLUDE_RESOURCES": "TRUE"}},
    }
    path = root / "metadata" / f"BILLING_PERIOD={label}" / f"{export}-Manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path
