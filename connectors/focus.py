"""FOCUS 1.0–1.4 exports of any provider (AWS, Azure, GCP, Oracle, …): CSV, CSV.gz or Parquet.

Canonical columns are FOCUS names, so the mapping is mostly one to one. What varies between
producers, and is handled here:

- nulls written as empty cells or as the bare token `NULL` (MySQL dumps);
- timestamps with or without `T`, `Z` or seconds (`2024-06-01T00:00Z`), read as UTC;
- `Tags` as JSON text (CSV), a map (Parquet), or BigQuery's list of {key, value, …} records
  (Google's FOCUS export table written out as Parquet); keys and values are kept exactly as written,
  including keys with a leading space (`" org"`); non-string values keep their JSON text;
- a UTF-8 BOM and CRLF line ends (the CSV reader handles both);
- every FOCUS 1.2 column and the 1.3 and 1.4 additions are kept as the file gives them (absent
  ones are NULL); FOCUS 1.3 deprecates `ProviderName` for `ServiceProviderName` (ProviderName
  falls back to it); Microsoft's FOCUS 1.0 export writes the invoice id, SKU details, meter
  name and pricing currency as `x_InvoiceId`, `x_SkuDetails`, `x_SkuMeterName`,
  `x_PricingCurrency`; AWS its usage type and operation as `x_UsageType` / `x_Operation`;
  the lake's usage type (x_usage_type) is x_UsageType, else SkuMeter, where AWS's FOCUS 1.2
  export moved it and other producers write the meter name (as `azure-cost` reads MeterName);
  each producer's instance type (AWS's usage type, Microsoft's VM size, SkuPriceDetails'
  InstanceType) is read as x_instance_type (connectors/focus_instances.py);
  the lake's own `x_` columns (`x_line_item_type`, `x_instance_type`, `x_credits`, ...) are read
  where a file has them, so `spendlake export` read back keeps what clusters and commitments read;
  Google's FOCUS view gives `x_Credits` as the row's credit records: x_credits is their sum;
- Oracle's FOCUS reports (`FOCUS Reports/<yyyy>/<mm>/<dd>/*.csv.gz` in its usage-report bucket)
  keep six FOCUS 1.0-preview names (ALTERNATIVES); their rows are summed as FOCUS defines
  (oci_BackReferenceNumber is not read), and Oracle's own reports beside them are skipped;
- quantities and unit prices are exact decimals like the costs; the JSON columns
  (SkuPriceDetails, AllocatedMethodDetails, ContractApplied) keep the file's JSON text, and
  AllocatedTags is a map like Tags.

Deliveries: AWS delivers its FOCUS export through Data Exports, laid out like CUR 2.0
(`data/BILLING_PERIOD=…/` + `metadata/BILLING_PERIOD=…/*-Manifest.json`); there the manifests
decide, as for `aws-cur2` (the newest execution of a period counts, data without a manifest
waits). Anywhere else every file holding rows of a billing period is part of that period's
delivery, in one folder, several, or Hive partitions by any column (service.ingest.periods),
except older versions of a focus-data-toolkit bundle (connectors/focus_bundles.py).

FOCUS 1.3 and 1.4 exports put other datasets beside the cost rows (Contract Commitment,
Billing Period, Invoice Detail). They are recognised by their columns (OTHER_DATASETS: a
file without ChargePeriodStart that has the dataset's id or status column), and skipped
with one line each: an inventory source of kind focus-datasets (connectors/focus_datasets.py)
reads them into tables of their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import duckdb

from connectors.aws_cur2 import DATA, MANIFEST, AwsCur2Connector
from connectors import empty_costs
from connectors.base import Delivery, OtherDataset
from connectors.csvfile import TEXT, read_csv
from connectors.focus_bundles import newest_versions
from connectors.focus_instances import USAGE_TYPE_COLUMNS, instance_type, instance_type_per_value
from connectors.exportfile import (CSV_MONEY, CSV_SUFFIXES, NOT_A_NUMBER, PARQUET_SUFFIXES, ParquetRun, Table,
                                   amounts_sum, decimal, ident, is_record_list, json_text, open_table, identifier,
                                   rounded_away, sql_string, text, timestamp, timestamp_per_value)
from connectors.folder_export import FolderExport
from connectors.storage import StoredObject, fingerprint, suffix_of
from connectors.tagsql import per_value_text, tags, tags_per_value
from service.core.errors import ConfigError, DataError, SpendlakeError, duckdb_error
from service.core.hidden_columns import ROUNDING_COLUMNS, rounding_select
from service.core.per_value import PerValueSelect
from service.core.schema import CHARGE_CATEGORIES, COST_COLUMNS, JSON_COLUMNS, MONEY, QUANTITY

REQUIRED = ("BilledCost", "BillingCurrency", "BillingPeriodStart", "ChargePeriodStart")
# FOCUS datasets other than Cost and Usage, by a column only they have.
OTHER_DATASETS = (("ContractCommitmentId", "Contract Commitment"), ("InvoiceDetailId", "Invoice Detail"),
                  ("BillingPeriodStatus", "Billing Period"))

# Canonical columns a FOCUS version names differently → the names to try, in order. FOCUS
# 1.3 deprecates ProviderName for ServiceProviderName (a file may carry either or both);
# Microsoft's FOCUS 1.0 export carries some later FOCUS columns under `x_` names; Oracle's
# FOCUS reports keep six FOCUS 1.0-preview names (Provider, Publisher, InvoiceIssuer, Region,
# UsageQuantity, UsageUnit), which 1.0 renamed (Region became RegionName beside a new RegionId:
# Oracle writes the region's identifier, `us-ashburn-1`, so it fills both). The usage type falls
# back to SkuMeter, where AWS's FOCUS 1.2 export moved x_UsageType (the module's docstring).
ALTERNATIVES = {
    "ProviderName": ("ProviderName", "ServiceProviderName", "Provider"),
    "PublisherName": ("PublisherName", "Publisher"),
    "InvoiceIssuerName": ("InvoiceIssuerName", "InvoiceIssuer"),
    "RegionId": ("RegionId", "Region"),
    "RegionName": ("RegionName", "Region"),
    "ConsumedQuantity": ("ConsumedQuantity", "UsageQuantity"),
    "ConsumedUnit": ("ConsumedUnit", "UsageUnit"),
    "InvoiceId": ("InvoiceId", "x_InvoiceId"),
    "SkuPriceDetails": ("SkuPriceDetails", "x_SkuDetails"),
    "SkuMeter": ("SkuMeter", "x_SkuMeterName"),
    "PricingCurrency": ("PricingCurrency", "x_PricingCurrency"),
    "x_usage_type": (*USAGE_TYPE_COLUMNS, "x_SkuMeterName"),
}
# FOCUS's allowed values of its enumerated columns. Producers vary their case (Google's FOCUS view
# writes 'usage', 'tax', 'committed', 'correction'), which the rules and attribution compare exactly:
# a value is read in FOCUS's spelling whatever its case; one FOCUS does not allow stays as written.
ENUMERATED = {
    "ChargeCategory": CHARGE_CATEGORIES,
    "ChargeClass": ("Correction",),
    "ChargeFrequency": ("One-Time", "Recurring", "Usage-Based"),
    "PricingCategory": ("Standard", "Dynamic", "Committed", "Other"),
    "CommitmentDiscountCategory": ("Spend", "Usage"),
    "CommitmentDiscountStatus": ("Used", "Unused"),
    "CapacityReservationStatus": ("Used", "Unused"),
}
# Oracle's own cost and usage reports (`reports/cost-csv/`, `reports/usage-csv/`) sit in the
# bucket beside its FOCUS reports, holding the same usage: recognised by this column, skipped.
OCI_OWN_REPORT = "lineItem/intervalUsageStart"
TAG_COLUMNS = ("Tags", "AllocatedTags")
ID_COLUMNS = ("BillingAccountId", "SubAccountId", "ResourceId")  # a spreadsheet rewrites long numeric ones
NULLS = ("", "NULL")  # how producers write a null cell
# FOCUS: BilledCost and EffectiveCost MUST NOT be null. An empty cell read as nothing billed would be one total,
# the export's (service.export.focus fills either from the other) another: the file fails, naming its line.
NOT_NULL = ("BilledCost", "EffectiveCost")
# Every column a FOCUS file's rows are read from (lowercased): a Hive folder of another name
# (`BillingPeriod=2024-09/`, `year=2024/`) reaches no row (service.ingest.copies).
READ = frozenset(name.lower() for name in (*(n for n, _ in COST_COLUMNS), *(c for cs in ALTERNATIVES.values() for c in cs),
                                           *(c for c, _ in OTHER_DATASETS), OCI_OWN_REPORT, "ChargeType"))

class DataExportsLayout(AwsCur2Connector):
    """The manifests of an AWS Data Exports delivery, read the way `aws-cur2` reads them."""

    def problem(self, delivery: Delivery) -> Exception | None:
        """What was wrong with this delivery's manifest, found while listing."""
        return self._problems.get(delivery.delivery_id)

    def outside(self, objs: list[StoredObject]) -> Delivery:
        """A failed delivery of data files beside the layout: in no manifest, they would never be
        read, so they fail rather than go missing from the lake without a word."""
        keys = sorted(obj.key for obj in objs)
        named = ", ".join(keys[:3]) + (f" (and {len(keys) - 3} more)" if len(keys) > 3 else "")
        files = "1 FOCUS file under this location is" if len(keys) == 1 else \
            f"{len(keys)} FOCUS files under this location are"
        failed = Delivery("outside:" + fingerprint(objs), None, tuple(sorted(obj.uri for obj in objs)))
        self._problem(failed.delivery_id, ConfigError(
            f"{files} in no AWS Data Exports manifest: {named}",
            where=f"{self.config.config_path}.location",
            hint="point the source at the Data Exports export's folder and give those files their own source"))
        return failed


class FocusConnector(FolderExport):
    kind = "focus"
    # FOCUS 1.2+: InvoiceId MUST be null when the charge is on no issued or provisional invoice
    final_when = "every"
    # 1: the lake's own x_ columns of a spendlake export are read; 2: enumerated values in FOCUS's case;
    # 3: the instance type from the producers' own columns (connectors/focus_instances.py), the usage type
    # from SkuMeter where a file has no x_UsageType (AWS's FOCUS 1.2 export's was null)
    reader_version = 3
    suffixes = CSV_SUFFIXES + PARQUET_SUFFIXES
    what = "FOCUS"
    period_column = "BillingPeriodStart"
    null_cells = NULLS
    data_exports: DataExportsLayout | None = None

    def deliveries(self) -> Iterator[Delivery]:
        listing = self.storage.list()
        if not any(MANIFEST.search(obj.key) for obj in listing):
            yield from self.folder_deliveries(newest_versions(self.storage, listing))
            return
        self.data_exports = DataExportsLayout(self.config)
        self._objects.update((obj.uri, obj) for obj in listing)
        yield from self.data_exports.deliveries()
        outside = [obj for obj in listing if suffix_of(obj.name) in self.suffixes and not DATA.search(obj.key)]
        if outside:
            yield self.data_exports.outside(outside)

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection, scratch: Path) -> duckdb.DuckDBPyRelation:
        problem = self.data_exports and self.data_exports.problem(delivery)
        if problem:
            raise problem
        return super().read(delivery, con, scratch)

    def hive_reaches(self, key: str) -> bool:
        return key.lower() in READ

    def select(self, con: duckdb.DuckDBPyConnection, path: Path | ParquetRun, uri: str) -> str | PerValueSelect:
        money_columns = [name for name, kind in COST_COLUMNS if kind == MONEY]
        # CSV money as text, parsed in SQL: the reader's exact decimals (DECIMAL(38,18), to learn
        # what the lake's 12 decimals round away) cost a 128-bit division per value to store
        table = open_table(con, path, uri, money=money_columns, nullstr=NULLS, money_type=TEXT)
        if table.name("ChargePeriodStart") is None:
            for column, dataset in OTHER_DATASETS:
                if table.name(column):
                    raise OtherDataset(uri, f"a FOCUS {dataset} dataset (it has {column}), not cost and usage "
                                            "rows; an inventory source of kind focus-datasets reads it")
            if table.name(OCI_OWN_REPORT):
                raise OtherDataset(uri, f"an Oracle Cloud report in Oracle's own format (it has {OCI_OWN_REPORT}), "
                                        "which repeats the FOCUS reports' costs; kind oci-cost reads it")
        table.require(*REQUIRED, kind=self.kind)
        if table.name("ChargeType") and not table.name("ChargeCategory"):
            # FOCUS 0.5's ChargeType and cost names: read as 1.x, taxes and credits would count
            # as usage and the effective cost as none
            raise DataError("a FOCUS file of a version before 1.0 (it has ChargeType, not ChargeCategory)",
                            where=uri, hint="spendlake reads FOCUS 1.0 to 1.3: export the data as FOCUS 1.0 or later")
        expressions: dict[str, str | None] = {}
        per_value: dict[str, str] = {}  # JSON tags and times as text: parsed once per distinct value by the stager
        texts: dict[str, str] = {}  # the text of each per_value column that is not the column itself
        for name, kind in COST_COLUMNS:
            candidates = ALTERNATIVES.get(name, (name,))
            if name == "x_credits" and (listed := credits_listed(table)):
                expressions[name] = listed
            elif kind in (MONEY, QUANTITY):
                expressions[name] = amount = decimal(table, kind, *candidates)
                if name in NOT_NULL:
                    expressions[name] = empty_costs.required(table, name, amount, empty_costs.FOCUS_EMPTY)
            elif kind == "TIMESTAMP":
                expressions[name] = timestamp(table, *candidates)
                if once := timestamp_per_value(table, *candidates):
                    per_value[name] = once
            elif name in TAG_COLUMNS:
                expressions[name] = tags(table, *candidates)
                if once := tags_per_value(table, *candidates):
                    per_value[name] = once
            elif name in JSON_COLUMNS:
                expressions[name] = json_text(table, *candidates)
            elif name in ID_COLUMNS:
                expressions[name] = identifier(table, *candidates)
            elif name == "x_instance_type":
                expressions[name] = instance_type(table)
                if once := instance_type_per_value(table):
                    texts[name], per_value[name] = once
            elif name in ENUMERATED:
                expressions[name] = in_focus_spelling(text(table, *candidates), ENUMERATED[name])
            else:
                expressions[name] = text(table, *candidates)
        present = {k: v for k, v in expressions.items() if v is not None}
        rounding = rounding_select({m: rounded_away(table, *ALTERNATIVES.get(m, (m,))) for m in ROUNDING_COLUMNS})
        # the columns the file has: the stager adds the others as nulls
        select = PerValueSelect(present, f"{rounding}{table.file_column} FROM {table.source}",
                                {name: texts.get(name) or per_value_text(table, *ALTERNATIVES.get(name, (name,)))
                                 for name in per_value},
                                per_value, absent_as_null=False)
        return select if per_value else select.sql

    def locate(self, error: SpendlakeError, con: duckdb.DuckDBPyConnection) -> SpendlakeError:
        """A CSV money value the SQL found not a number, with its line: the CSV reader parses
        that column of the file as a number, and its error names the line (read as text, the
        value has none); any other as FolderExport.locate tells it. Called while the files are still
        local."""
        for uri, path in self.local.items():
            # "<uri>: column X: …", or "<uri>: <what failed>: column X: …" where the failure names the file
            found = re.search(re.escape(f"{uri}: ") + f"(?:[^:]+: )?column (.+?): {NOT_A_NUMBER}: ", str(error))
            if found and suffix_of(PurePosixPath(uri).name) in CSV_SUFFIXES and path.exists():
                try:
                    relation, _ = read_csv(con, path, uri, types={found.group(1).lower(): CSV_MONEY}, nullstr=NULLS)
                    relation.aggregate(f"count({ident(found.group(1))})").fetchall()
                except duckdb.Error as exc:
                    return duckdb_error(exc, "could not read the delivery", where=uri)
        return super().locate(error, con)


def in_focus_spelling(value: str | None, allowed: tuple[str, ...]) -> str | None:
    """`value` (SQL) as FOCUS spells it when it is one of `allowed` in another case, else as it is."""
    if value is None:
        return None
    cases = " ".join(f"WHEN {sql_string(v.lower())} THEN {sql_string(v)}" for v in allowed)
    return f"CASE lower({value}) {cases} ELSE {value} END"


def credits_listed(table: Table) -> str | None:
    """Google's FOCUS view writes `x_Credits` as the row's credits, a list of {Name, Amount, …}
    records (its BilledCost and EffectiveCost are already net of them): the lake's x_credits is
    their sum, as `gcp-billing` makes it; None when the column is no such list (spendlake's own
    export read back holds the sum)."""
    name = table.name("x_credits")
    return amounts_sum(ident(name)) if name and is_record_list(table.type_of(name), "amount") else None
