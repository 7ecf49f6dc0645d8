"""`oci-cost`: Oracle Cloud Infrastructure cost reports, Oracle's own CSV format.

Where: Oracle writes them to its usage-report bucket (Object Storage namespace `bling`, bucket
= the tenancy OCID) as `reports/cost-csv/<number>-00001.csv.gz`; `location` is a local copy
of that bucket (or of its `reports/cost-csv/` folder, or one file) or an `s3://` URL read
through Object Storage's S3-compatible API (`endpoint_url:
https://<namespace>.compat.objectstorage.<region>.oraclecloud.com`, a customer secret key as
the AWS credentials). Usage reports (`reports/usage-csv/`) and FOCUS reports beside them are
not read (FOCUS reports: `kind: focus`).

What Oracle documents (Cost and Usage Reports): a report is written every six hours and holds
the rows of about six hours of usage, one per resource and hour, with late data up to a day
old; a file over a million rows is split into `-00002.csv.gz`, `-00003.csv.gz`, …; reports
are kept one year. So the files are increments, not snapshots: every file counts, and a
billing period is the month of `lineItem/intervalUsageStart` (UTC), gathered from all files.
The files are one delivery (id: their fingerprint); each ingest after a new file re-reads
them and replaces every month found. A file of the same text as another (a browser's second
download, `… (1).csv`; a `cp`; the report unzipped beside it) is a copy, left out of the
delivery and told as skipped: Oracle never rewrites a report, so equal text is the same rows
(`_without_copies`). A month that began more than a year before the newest
interval has lost its first files to Oracle's retention: its rows are left out and the lake
keeps the month as it was ingested while whole.

Corrections. Oracle: "Corrections are added as new rows to the report, with the
lineItem/isCorrection column set and the referenceNo value of the corrected line populated in
the lineItem/backReference column" (the column is written `lineItem/backreferenceNo`; either
name is read). Oracle does not say more; a correction is the corrected line's new content, so
it replaces that line: a row whose `lineItem/referenceNo` a correction row back-references
(in any file of the delivery) is left out, and the correction row is kept, with ChargeClass
`Correction`. A correction of a correction replaces it the same way. `isCorrection` counts as
set when it holds anything but blank, false, no or 0.

Columns (Oracle's cost report schema) → canonical:
    lineItem/tenantId → BillingAccountId;  product/compartmentId, product/compartmentName →
    SubAccountId, SubAccountName (compartments are where OCI places cost ownership);
    lineItem/intervalUsageStart, …End → ChargePeriodStart, ChargePeriodEnd (UTC);
    cost/myCost → BilledCost and EffectiveCost (the cost charged, overage included; OCI bills
    no amortised purchases here); cost/currencyCode → BillingCurrency;
    product/service → ServiceName; product/Description → ChargeDescription;
    product/resourceId → ResourceId (its OCID's type, `ocid1.<type>.…`, → ResourceType);
    product/region → RegionId; product/availabilityDomain → AvailabilityZone;
    cost/productSku → SkuId; usage/billedQuantity → PricingQuantity; cost/skuUnitDescription
    (earlier cost/billingUnitReadable) → PricingUnit; cost/unitPrice → ContractedUnitPrice;
    usage/consumedQuantity, …Units → ConsumedQuantity, ConsumedUnit (when a file has them);
    tags/<namespace>.<key> and tags/<key> → Tags `<namespace>.<key>` / `<key>`, as written,
    empty values left out (the set of tag columns varies from file to file).
    ChargeCategory is Usage and ChargeFrequency Usage-Based for every row; ProviderName and
    ServiceProviderName are `Oracle`. Not kept: lineItem/referenceNo and backreferenceNo (used
    for corrections above), cost/subscriptionId, and the *Overage columns and
    cost/overageFlag (the main columns include overage).
"""

from __future__ import annotations

import gzip
import io
import re
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterator
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath

import duckdb

from connectors import content, empty_costs
from connectors.base import Delivery, StoredExport
from connectors.csvfile import csv_reader, local_csv, with_a_line
from connectors.exportfile import (Table, decimal, ident, money, open_table, rounded_away, sql_string, text,
                                   timestamp)
from connectors.file_copies import SAME, written_first
from connectors.storage import StoredObject, fingerprint, suffix_of
from service.core.config import SourceConfig
from service.core.errors import SourceError, SpendlakeError, duckdb_error
from service.core.schema import QUANTITY, cost_select_list
from service.core.hidden_columns import rounding_select

COST_FOLDER = "cost-csv"
REPORT_NAME = re.compile(r"^\d+(?:-\d+)?\.csv(?:\.gz)?$")
OTHER_REPORTS = re.compile(r"(?:^|/)(?:usage-csv|FOCUS Reports)/", re.IGNORECASE)
START, END = "lineItem/intervalUsageStart", "lineItem/intervalUsageEnd"
COST, CURRENCY = "cost/myCost", "cost/currencyCode"
REFERENCE, CORRECTION = "lineItem/referenceNo", "lineItem/isCorrection"
BACK_REFERENCE = ("lineItem/backreferenceNo", "lineItem/backReference")
TAG_PREFIX = "tags/"
NOT_SET = "('', 'false', 'f', 'n', 'no', '0')"
RETENTION = timedelta(days=365)  # Oracle keeps cost reports one year


class OciCostConnector(StoredExport):
    kind = "oci-cost"
    reader_version = 1  # 1: a free line without a currency takes the delivery's one currency
    final_when = "never"  # a cost report carries no invoice id
    files_one_delivery = True  # so a report saved again in other bytes beside it is found by its rows

    def __init__(self, config: SourceConfig) -> None:
        super().__init__(config)
        self._local: dict[str, Path] = {}  # the last delivery read's files: URI → local copy

    def deliveries(self) -> Iterator[Delivery]:
        files = cost_report_files(self.storage.list())
        if not files:
            raise SourceError(f"no OCI cost report files (reports/cost-csv/*.csv.gz) under {self.config.location}",
                              where=f"{self.config.config_path}.location",
                              hint="point it at the usage-report bucket, a copy of it, or its reports/cost-csv/ folder")
        self._objects = {o.uri: o for o in files}
        files = self._without_copies(files)
        yield Delivery(fingerprint(files), None, tuple(o.uri for o in files))

    def delivery_without(self, delivery: Delivery, files: Collection[str]) -> Delivery:
        kept = [self._objects[uri] for uri in delivery.files if uri not in files]
        return Delivery(fingerprint(kept), None, tuple(o.uri for o in kept))

    def _without_copies(self, files: list[StoredObject]) -> list[StoredObject]:
        """The files less each holding the text of another (files of one size, or of one name but for
        `.gz`, a `gzip -dk` beside the report, are read through to tell): of files alike, the
        original is told by file_copies.written_first, Oracle's `.csv.gz` before a `.csv` written at
        once (`gzip -dk` keeps the report's time); the others are told as copies. Reports of a
        header alone hold nothing twice."""
        alike: dict[tuple, list[StoredObject]] = defaultdict(list)
        for obj in files:
            alike["name", obj.key.lower().removesuffix(".gz")].append(obj)
            if obj.size >= 0:
                alike["size", obj.size].append(obj)
        by_text: dict[str, list[StoredObject]] = defaultdict(list)
        raw: dict[str, str] = {}  # a file read → the SHA-256 of its bytes
        for obj in {o.uri: o for group in alike.values() if len(group) > 1 for o in group}.values():
            digests = content.read_through(self.storage.read_chunks(obj), obj.name)
            if digests is not None and digests.more_than_a_line:  # None: a damaged gzip, left to the read
                by_text[digests.content].append(obj)
                raw[obj.uri] = digests.raw
        kept = [obj for obj in files if obj.uri not in raw]
        for same in by_text.values():
            original, *others = sorted(same, key=lambda o: written_first(
                o.key, o.modified, exporters_name=o.name.lower().endswith(".gz")))
            kept.append(original)
            for copy in others:
                self.copies[copy.uri] = original.uri
                self.storage.passed_over[copy.uri] = SAME.format(
                    same="bytes" if raw[copy.uri] == raw[original.uri] else "content", original=original.uri)
        return sorted(kept, key=lambda o: o.key)

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection,
             scratch: Path) -> list[duckdb.DuckDBPyRelation]:
        tables, self._local = [], {}
        for uri in delivery.files:
            obj = self._objects.get(uri) or StoredObject(uri, PurePosixPath(uri).name, -1, "")
            path = self._local[uri] = local_csv(self.storage.local_copy(obj, scratch), scratch, uri,
                                                self.storage.open_local)
            table = open_table(con, path, uri, money=(COST,))
            table.require(START, COST, CURRENCY, kind=self.kind)
            tables.append((table, _header(path)))
        superseded = f"oci_superseded_{uuid.uuid4().hex}"
        con.execute(f"CREATE TEMP TABLE {superseded} (reference VARCHAR)")
        newest, currencies = None, set()
        for table, _ in tables:
            latest, found = self._scan(con, table, superseded)
            newest = max(filter(None, [newest, latest]), default=None)
            currencies |= found
        since = _whole_months_since(newest)
        currency = currencies.pop() if len(currencies) == 1 else None
        parts = []
        for table, header in tables:
            try:
                sql, params = select(table, header, superseded, since, currency)
                parts.append(con.sql(sql, params=params))
            except duckdb.Error as exc:
                raise self.locate(duckdb_error(exc, "cannot read the cost report", where=table.uri), con) from None
        return parts

    def locate(self, error: SpendlakeError, con: duckdb.DuckDBPyConnection) -> SpendlakeError:
        """A value the SQL refused (a time, a number: read as text, it has no line) with the line
        its record begins on (connectors.csvfile.with_its_line); an empty cost so too (connectors.empty_costs)."""
        return (empty_costs.with_its_line(error, self._local) or with_a_line(error, self._local)
                or super().locate(error, con))

    def _scan(self, con: duckdb.DuckDBPyConnection, table: Table, superseded: str) -> tuple[datetime | None, set[str]]:
        """Record the lines this file's corrections replace; return its newest interval start
        and the currencies its lines name."""
        back = table.col(*BACK_REFERENCE)
        flag = table.col(CORRECTION)
        try:
            if back and flag:
                con.execute(f"INSERT INTO {superseded} SELECT DISTINCT nullif(trim({back}), '') FROM {table.source} "
                            f"WHERE {is_set(flag)} AND nullif(trim({back}), '') IS NOT NULL")
            [(newest, currencies)] = con.execute(
                f"SELECT max({timestamp(table, START)}), list(DISTINCT {text(table, CURRENCY)}) FROM {table.source}"
            ).fetchall()
        except duckdb.Error as exc:
            raise self.locate(duckdb_error(exc, "cannot read the cost report", where=table.uri), con) from None
        return newest, {c for c in currencies or () if c is not None}


def cost_report_files(listing: list[StoredObject]) -> list[StoredObject]:
    """The cost report files of a listing: the CSVs under a `cost-csv/` folder; where there is
    none (the location is that folder, or one file), the CSVs named as Oracle names reports
    (`<number>-00001.csv.gz`), outside usage and FOCUS report folders."""
    csvs = [o for o in listing if suffix_of(o.name) in (".csv", ".csv.gz") and not OTHER_REPORTS.search(o.key)]
    under = [o for o in csvs if COST_FOLDER in PurePosixPath(o.key).parts[:-1]]
    return under or [o for o in csvs if REPORT_NAME.match(o.name)]


def is_set(flag_sql: str) -> str:
    return f"coalesce(lower(trim({flag_sql})), '') NOT IN {NOT_SET}"


def _whole_months_since(newest: datetime | None) -> datetime | None:
    """The first month still whole in the bucket: the one after the month the retention cut."""
    if newest is None:
        return None
    cut = newest - RETENTION
    return datetime(cut.year + cut.month // 12, cut.month % 12 + 1, 1)


def _header(path: Path) -> list[str]:
    """The file's own column names (DuckDB renames one that differs from another only in case)."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rb") as raw:
        return next(csv_reader(io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline="")), [])


def _tags(table: Table, header: list[str]) -> str:
    names = [name for name, _ in table.columns.values()]
    originals = dict(zip(names, header)) if len(header) == len(names) else {}
    pairs = [f"{{'key': {sql_string(originals.get(name, name)[len(TAG_PREFIX):])}, 'value': CAST({ident(name)} AS VARCHAR)}}"
             for name in names if originals.get(name, name).startswith(TAG_PREFIX)]
    if not pairs:
        return "MAP {}"
    return f"map_from_entries(list_filter([{', '.join(pairs)}], lambda e: coalesce(e.value, '') <> ''))"


def select(table: Table, header: list[str], superseded: str, since: datetime | None,
           currency: str | None) -> tuple[str, list]:
    """SELECT <canonical columns> FROM the file, without the lines a correction replaced (and
    its parameters). A line costing nothing without a currency takes `currency`, the one the
    delivery's other lines name (a tenancy bills in one currency): Oracle leaves it blank on
    free lines (Object Storage's free transfer and requests) that are otherwise a bill of their
    own, '(no currency)', and a FOCUS export without its mandatory BillingCurrency."""
    start = timestamp(table, START)
    cost = empty_costs.required(table, COST, money(table, COST), empty_costs.OCI_EMPTY)
    flag, reference = table.col(CORRECTION), table.col(REFERENCE)
    resource = text(table, "product/resourceId")
    expressions = {
        "BillingAccountId": text(table, "lineItem/tenantId"),
        "BillingPeriodStart": f"date_trunc('month', {start})",
        "BillingPeriodEnd": f"date_trunc('month', {start}) + INTERVAL 1 MONTH",
        "ChargePeriodStart": start,
        "ChargePeriodEnd": timestamp(table, END),
        "BilledCost": cost,
        "EffectiveCost": cost,
        "BillingCurrency": text(table, CURRENCY) if currency is None else
        f"coalesce({text(table, CURRENCY)}, CASE WHEN coalesce({money(table, COST)}, 0) = 0 "
        f"THEN {sql_string(currency)} END)",
        "ChargeCategory": "'Usage'",
        "ChargeClass": flag and f"CASE WHEN {is_set(flag)} THEN 'Correction' END",
        "ChargeFrequency": "'Usage-Based'",
        "ChargeDescription": text(table, "product/Description"),
        "ProviderName": "'Oracle'",
        "ServiceProviderName": "'Oracle'",
        "ServiceName": text(table, "product/service"),
        "ResourceId": resource,
        "ResourceType": resource and f"nullif(regexp_extract({resource}, '^ocid[0-9]*\\.([a-z0-9]+)\\.', 1), '')",
        "RegionId": text(table, "product/region"),
        "AvailabilityZone": text(table, "product/availabilityDomain"),
        "SubAccountId": text(table, "product/compartmentId"),
        "SubAccountName": text(table, "product/compartmentName"),
        "SkuId": text(table, "cost/productSku"),
        "PricingQuantity": decimal(table, QUANTITY, "usage/billedQuantity"),
        "PricingUnit": text(table, "cost/skuUnitDescription", "cost/billingUnitReadable"),
        "ContractedUnitPrice": money(table, "cost/unitPrice"),
        "ConsumedQuantity": decimal(table, QUANTITY, "usage/consumedQuantity"),
        "ConsumedUnit": text(table, "usage/consumedQuantityUnits"),
        "Tags": _tags(table, header),
    }
    present = {k: v for k, v in expressions.items() if v}
    where, params = ["true"], []
    if reference:
        where.append(f"NOT EXISTS (SELECT 1 FROM {superseded} s WHERE s.reference = nullif(trim({reference}), ''))")
    if since is not None:
        where.append(f"{start} >= ?")
        params.append(since)
    rounding = rounding_select(dict.fromkeys(("BilledCost", "EffectiveCost"), rounded_away(table, COST)))
    return f"SELECT {cost_select_list(present)}{rounding} FROM {table.source} WHERE {' AND '.join(where)}", params
