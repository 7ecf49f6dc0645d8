"""Azure Cost Management cost details exports (EA, MCA, pay-as-you-go), actual or amortized: CSV, CSV.gz, Parquet.

Handled: both EA header generations (older `Cost`, `BillingCurrency`, `Product`; newer
`CostInBillingCurrency`, `BillingCurrencyCode`, `ProductName`, `benefitId`), MCA's camelCase
(`costInBillingCurrency`, `billingCurrency`, `date`) — column names match case-insensitively —
pay-as-you-go's (MOSA: dataset 2019-11-01, still its latest, usage only: `PreTaxCost`,
`Currency`, `UsageDateTime`, `UsageQuantity`, `ResourceRate`, `InstanceId`),
`Tags` written as a JSON object without its outer braces (`"k": "v","k2": "v2"`), dates as
`MM/DD/YYYY`, `M/D/YYYY` or ISO (connectors/azure_dates.py), a UTF-8 BOM, CRLF line ends, and a currency on every row. EA's usage details dataset 2019-10-01
(`PreTaxCost`, `UsageDateTime`, `SubscriptionGuid`, `DepartmentName`) has no currency column at
all: its enrollment's one billing currency is the source's `currency:` (never guessed; without it
the file fails naming the key to set). Exports made before run manifests
leave every run's month-to-date snapshot, `<export>_<guid>.csv`, in the date range's folder:
only the newest counts (azure_manifest.without_older_unlisted_runs).

Which cost a file holds, and so which canonical column it fills:
- an *actual* cost export is what the invoice bills: BilledCost = cost, EffectiveCost NULL;
- an *amortized* export spreads reservation and savings plan purchases over the usage they
  cover: EffectiveCost = cost, BilledCost NULL.
The other figure is not in the file, so it stays NULL rather than being guessed.
`cost_type: auto` (the default) takes the type an export run's manifest.json declares, else
decides from the rows: a file is amortized when
commitment-covered usage (PricingModel Reservation/SavingsPlan, ChargeType Usage) carries a
cost, or when it has UnusedReservation/UnusedSavingsPlan rows — in an actual export that usage
costs 0 and the purchase carries the money. A file with neither sign nor a commitment's
purchase (a subscription or a part with on-demand usage only: the two coincide there) takes
the type the other files of the delivery holding its billing periods show, so an amortized
export written in several files is effective cost whole; else the type the export's names say
(`DailyAmortizedCost/…`, a folder `amortized`, whole words: `named_cost_type`), so its month without a
commitment line is effective cost as its other months; else it is actual. The files of a delivery
are judged by their first HEAD_LINES lines when every file's hold a sign of one and the same
export, so each is read once (an amortized sign decides, as over the whole file; after an actual
start, an amortized export's line fails the read: `_guarded`); else their rows are read for their
signs in a pass of their own. Set `cost_type: actual|amortized` to skip that pass.

The other FOCUS columns, from Azure's own: CommitmentDiscount* from `benefitId`/`benefitName`
(`ReservationId`/`ReservationName` in older EA files) and `PricingModel` (Used on usage a
reservation or savings plan covered, Unused on UnusedReservation/UnusedSavingsPlan rows);
ListUnitPrice = `PayGPrice` (MCA's dataset 2019-10-01: `MarketPrice`), ContractedUnitPrice = `UnitPrice`, PricingQuantity = `Quantity`
in PricingUnit = `UnitOfMeasure` (e.g. `10 Hours`: Azure prices per block), ChargeFrequency
from `Frequency`, SkuMeter = `MeterName`, PublisherName = `PublisherName`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import duckdb
from pydantic import Field

from connectors import empty_costs
from connectors.azure_dates import DAY, period_times, period_times_per_value
from connectors.azure_manifest import NO_COSTS, without_older_unlisted_runs
from connectors.azure_names import named_cost_type
from connectors.base import Delivery, OtherDataset
from connectors.export_formats import AZURE_OTHER_DATASETS, has_columns
from connectors.exportfile import (CSV_SUFFIXES, PARQUET_SUFFIXES, Table, decimal, money, open_table, rounded_away,
                                   sql_string, text)
from connectors.folder_export import FolderExport
from connectors.tagsql import per_value_text, tags, tags_per_value
from service.core.config import SourceConfig
from service.core.errors import DataError, SpendlakeError, duckdb_error
from service.core.per_value import PerValueSelect
from service.core.schema import COST_COLUMN_NAMES, QUANTITY
from service.core.hidden_columns import rounding_select

COST = ("CostInBillingCurrency", "Cost", "PreTaxCost")
CURRENCY = ("BillingCurrencyCode", "BillingCurrency", "Currency")
COMMITMENTS = "('Reservation', 'SavingsPlan')"
CHARGE_CATEGORY = {"Usage": "Usage", "UnusedReservation": "Usage", "UnusedSavingsPlan": "Usage",
                   "Purchase": "Purchase", "Refund": "Purchase", "Tax": "Tax", "RoundingAdjustment": "Adjustment"}
# A portal download in another language names each column `<translation> (<Name>)`:
# `Abonnement-GUID (SubscriptionGuid)`, `PreTaxCost (PreTaxCost)`.
LOCALIZED = re.compile(r"\(([A-Za-z][A-Za-z0-9]*)\)\s*$")
PRICING_CATEGORY = {"OnDemand": "Standard", "Spot": "Dynamic", "Reservation": "Committed", "SavingsPlan": "Committed"}
CHARGE_FREQUENCY = {"UsageBased": "Usage-Based", "Recurring": "Recurring", "OneTime": "One-Time"}
COMMITMENT_TYPE = {"Reservation": "Reservation", "SavingsPlan": "Savings Plan"}
COMMITMENT_CATEGORY = {"Reservation": "Usage", "SavingsPlan": "Spend"}
# cost_type auto: a delivery's files are judged by their first HEAD_LINES lines when they all hold a sign of
# one export, so each file is read once (the whole file was read for its signs, then again for its lines)
HEAD_LINES = 1 << 16
AFTER_ACTUAL = ("an amortized cost export's line (unused commitment, or covered usage with a cost) after the "
                "file's first {lines:,} lines read as an actual export's: two exports in one file? deliver "
                "each as a file of its own, or set cost_type")


def lookup(value_sql: str | None, mapping: dict[str, str], otherwise: str | None = None) -> str | None:
    """`mapping[value]`; other values are kept (or become `otherwise`, an SQL expression)."""
    if value_sql is None:
        return None
    cases = " ".join(f"WHEN {sql_string(k)} THEN {sql_string(v)}" for k, v in mapping.items())
    return f"CASE {value_sql} {cases} ELSE {otherwise or value_sql} END"


def commitment_columns(table: Table, charge_type: str | None) -> dict[str, str | None]:
    """FOCUS CommitmentDiscount* from the reservation / savings plan a row used or left unused:
    `benefitId`/`benefitName` (older EA: `ReservationId`/`ReservationName`), `PricingModel`
    for its kind, and ChargeType `UnusedReservation`/`UnusedSavingsPlan` for the unused part."""
    commitment = text(table, "benefitId", "ReservationId")
    if commitment is None:
        return {}
    model = text(table, "PricingModel")
    unused = "('UnusedReservation', 'UnusedSavingsPlan')"
    if model is None:
        kind = None
    elif charge_type is None:
        kind = model
    else:  # an unused row may carry PricingModel OnDemand: its ChargeType names the kind
        kind = (f"CASE WHEN {charge_type} = 'UnusedReservation' THEN 'Reservation' "
                f"WHEN {charge_type} = 'UnusedSavingsPlan' THEN 'SavingsPlan' ELSE {model} END")

    def when_committed(sql: str | None) -> str | None:
        return sql and f"CASE WHEN {commitment} IS NOT NULL THEN {sql} END"

    status = charge_type and (f"CASE WHEN {commitment} IS NULL THEN NULL WHEN {charge_type} IN {unused} THEN 'Unused' "
                              f"WHEN {charge_type} = 'Usage' THEN 'Used' END")
    return {
        "CommitmentDiscountId": commitment,
        "CommitmentDiscountName": when_committed(text(table, "benefitName", "ReservationName")),
        "CommitmentDiscountType": when_committed(lookup(kind, COMMITMENT_TYPE, "NULL")),
        "CommitmentDiscountCategory": when_committed(lookup(kind, COMMITMENT_CATEGORY, "NULL")),
        "CommitmentDiscountStatus": status,
    }


class AzureCostSource(SourceConfig):
    """An `azure-cost` source: which cost its export holds (`auto` decides from its rows)."""

    cost_type: Literal["auto", "actual", "amortized"] = "auto"
    currency: str | None = Field(default=None, pattern=r"^[A-Z]{3}$",
                                 description="the billing currency of files without a currency column (EA 2019-10-01)")


class AzureCostConnector(FolderExport):
    kind = "azure-cost"
    config_model = AzureCostSource
    suffixes = CSV_SUFFIXES + PARQUET_SUFFIXES
    what = "Azure cost details"
    reads_runs = False  # the cost type (actual or amortized) is decided from each file's rows
    # 1: a file without ChargeType (pay-as-you-go's dataset holds usage only) is ChargeCategory Usage, not
    # NULL; without ResourceId, Quantity or UnitPrice, InstanceId, UsageQuantity and ResourceRate fill them.
    # 2: MCA's dataset 2019-10-01 has its retail price as MarketPrice, ListUnitPrice (it was NULL)
    reader_version = 2

    def deliveries(self) -> Iterator[Delivery]:
        return self.folder_deliveries(without_older_unlisted_runs(self.storage.list()))

    def __init__(self, config: SourceConfig):
        super().__init__(config)
        self._delivery_files: tuple[str, ...] = ()  # the files a file without signs of its cost type looks at
        self._signs: dict[str, dict[str, str] | None] = {}  # _signs_of, by URI, for the delivery being read
        self._amortized: dict[str, bool] = {}  # the cost type decided for each file of the delivery, by URI
        self._judged_actual_by_head: set[str] = set()  # files their first rows read as actual: see _guarded
        self._heads: dict[str, bool] | None = None  # _told_by_heads, for the delivery being read

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection, scratch: Path) -> list:
        self._delivery_files, self._signs, self._amortized = delivery.files, {}, {}
        self._judged_actual_by_head, self._heads = set(), None
        parts = super().read(delivery, con, scratch)
        self._one_cost_type_a_period()
        return parts

    def _one_cost_type_a_period(self) -> None:
        """Fail a billing period the delivery's files read as an actual and an amortized export:
        the two exports bill the same charges (on-demand usage is in both at the same cost), so the
        lake would hold them twice. A file's periods are those its rows were judged by (_signs_of);
        a configured or manifest-declared cost type is one a source (manifests: _one_export_a_month)."""
        files: dict[str, dict[bool, str]] = {}  # period → amortized → the first such file
        for uri, amortized in self._amortized.items():
            for period in self._signs.get(uri) or ():
                files.setdefault(period, {}).setdefault(amortized, uri)
        for period, kinds in sorted(files.items()):
            if len(kinds) > 1:
                raise DataError(f"{period} holds an actual and an amortized cost export: {kinds[False]} (actual) "
                                f"and {kinds[True]} (amortized), which bill the same charges: read together, "
                                "they would be counted twice", where=kinds[True],
                                hint="give each cost type its own azure-cost source, its location the folder of "
                                     "one export (cost_type: actual and cost_type: amortized)")

    def select(self, con: duckdb.DuckDBPyConnection, path: Path, uri: str) -> str | PerValueSelect:
        table = open_table(con, path, uri, money=COST, header_name=english_name)
        if table.name(*COST) is None:
            other_dataset(table, uri, self.export_type(uri))
        table.require(COST, DAY, kind=self.kind)
        currency = text(table, *CURRENCY) or self._configured_currency(uri)
        amortized = self._amortized[uri] = self._is_amortized(con, table, self.export_type(uri))
        cost = self._guarded(table, empty_costs.required(table, table.name(*COST), money(table, *COST),
                                                         empty_costs.AZURE_EMPTY))
        charge_type = text(table, "ChargeType")
        info = table.col("AdditionalInfo")
        expressions = {
            "BillingAccountId": text(table, "BillingAccountId"),
            "BillingAccountName": text(table, "BillingAccountName"),
            **period_times(table),
            "EffectiveCost" if amortized else "BilledCost": cost,
            "BillingCurrency": currency,
            # pay-as-you-go's dataset, the one without ChargeType, holds usage only
            "ChargeCategory": lookup(charge_type, CHARGE_CATEGORY) or "'Usage'",
            "ChargeClass": charge_type and f"CASE WHEN {charge_type} = 'Refund' THEN 'Correction' END",
            "ChargeDescription": text(table, "ProductName", "Product"),
            "ProviderName": "'Microsoft'",
            "ServiceName": text(table, "MeterCategory"),
            "ServiceCategory": text(table, "ServiceFamily"),
            "ResourceId": text(table, "ResourceId", "InstanceName", "InstanceId"),
            "ResourceName": text(table, "ResourceName"),
            "RegionId": text(table, "ResourceLocation"),
            "AvailabilityZone": text(table, "AvailabilityZone"),
            "SubAccountId": text(table, "SubscriptionId", "SubscriptionGuid"),
            "SubAccountName": text(table, "SubscriptionName"),
            "SkuId": text(table, "MeterId"),
            "PricingCategory": lookup(text(table, "PricingModel"), PRICING_CATEGORY),
            "ConsumedQuantity": decimal(table, QUANTITY, "Quantity", "UsageQuantity"),
            "ConsumedUnit": text(table, "UnitOfMeasure"),
            "InvoiceId": text(table, "InvoiceId"),
            "Tags": tags(table, "Tags", braces_optional=True),
            "ChargeFrequency": lookup(text(table, "Frequency"), CHARGE_FREQUENCY),
            "PublisherName": text(table, "PublisherName"),
            "ServiceProviderName": "'Microsoft'",
            "SkuMeter": text(table, "MeterName"),
            "PricingQuantity": decimal(table, QUANTITY, "Quantity", "UsageQuantity"),
            "PricingUnit": text(table, "UnitOfMeasure"),
            "ListUnitPrice": money(table, "PayGPrice", "MarketPrice"),
            "ContractedUnitPrice": money(table, "UnitPrice", "ResourceRate"),
            **commitment_columns(table, charge_type),
            "x_line_item_type": charge_type,
            "x_usage_type": text(table, "MeterName"),
            # the VM size, e.g. Standard_ND96asr_v4, is in AdditionalInfo's ServiceType
            "x_instance_type": info and f"CASE WHEN json_valid({info}) THEN {info}->>'$.ServiceType' END",
        }
        present = {k: v for k, v in expressions.items() if v}
        rounding = rounding_select({"EffectiveCost" if amortized else "BilledCost": rounded_away(table, *COST)})
        # the dates and the Tags JSON text parsed once per distinct text by the stager (service.core.per_value),
        # listed in the SELECT's order (a column it parses fails first)
        once = {"Tags": (per_value_text(table, "Tags"), tags_per_value(table, "Tags", braces_optional=True))}
        once = sorted((period_times_per_value(table) | once).items(), key=lambda kv: COST_COLUMN_NAMES.index(kv[0]))
        per_value = {name: sql for name, (_, sql) in once if sql}
        select = PerValueSelect(present, f"{rounding} FROM {table.source}",
                                {name: texts for name, (texts, sql) in once if sql}, per_value)
        return select if per_value else select.sql

    def _configured_currency(self, uri: str) -> str:
        """The source's `currency:` as SQL, for a file that names none; else a DataError saying to set it."""
        if self.config.currency is None:
            names = " or ".join(repr(name) for name in CURRENCY)
            raise DataError(f"required column {names} is missing", where=uri,
                            hint=f"EA's usage details dataset 2019-10-01 has no currency column: set "
                                 f"{self.config.config_path}.currency to the enrollment's billing currency "
                                 "(e.g. currency: USD), or export a newer dataset version")
        return sql_string(self.config.currency)

    def _is_amortized(self, con: duckdb.DuckDBPyConnection, table: Table, declared: str | None) -> bool:
        if self.config.cost_type != "auto":
            return self.config.cost_type == "amortized"
        if declared in ("ActualCost", "AmortizedCost"):  # from the export run's manifest.json
            return declared == "AmortizedCost"
        told = self._told_by_heads(con)
        if table.uri in told:  # read once: a later amortized line fails the read of one told actual
            if not told[table.uri] and table.uri not in self._signs:
                self._judged_actual_by_head.add(table.uri)
            return told[table.uri]
        own = self._signs_of(con, table)
        if own is None or any(signs != "unknown" for signs in own.values()):
            return own is not None and "amortized" in own.values()
        # on-demand lines only: as the delivery's other files of the same periods, when they agree
        others = set()
        for uri in self._delivery_files:
            if uri != table.uri and uri in self.local:
                try:
                    theirs = self._signs.get(uri) if uri in self._signs else self._signs_of(
                        con, open_table(con, self.local[uri], uri, money=COST, header_name=english_name))
                except SpendlakeError:  # that file fails on its own read, naming itself
                    theirs = self._signs[uri] = None
                others.update(theirs[period] for period in own if theirs and period in theirs)
        if others - {"unknown"}:
            return others - {"unknown"} == {"amortized"}
        return named_cost_type(self.config.location, table.uri) == "amortized"

    def _told_by_heads(self, con: duckdb.DuckDBPyConnection) -> dict[str, bool]:
        """Whether each file of the delivery is amortized, by its first HEAD_LINES lines, when every
        file's show one and the same export: each file is then read once, where its whole was read
        for its signs first (a delivery in four 250k-line files: 981 MB read twice). Else {}: the
        whole files' signs decide, per billing period. A head that is its whole file is its signs."""
        if self._heads is None:
            told: dict[str, bool | None] = {}
            for uri in self._delivery_files:
                try:
                    head, whole = signs_in(con, open_table(con, self.local[uri], uri, money=COST,
                                                           header_name=english_name), HEAD_LINES)
                except SpendlakeError:  # that file fails on its own read, naming itself
                    head, whole = None, False
                if whole:
                    self._signs[uri] = head
                told[uri] = "amortized" in head.values() if head and set(head.values()) != {"unknown"} else None
            kinds = set(told.values())
            self._heads = {uri: bool(kind) for uri, kind in told.items()} if len(kinds) == 1 and None not in kinds \
                else {}
        return self._heads

    def _signs_of(self, con: duckdb.DuckDBPyConnection, table: Table) -> dict[str, str] | None:
        """Per billing period the file's rows hold, which export they are from: `amortized`
        (covered usage carries a cost, or unused commitment rows), `actual` (a commitment's
        purchase carries the money, covered usage costs 0), else `unknown`; None: a file without
        ChargeType or PricingModel, which tells nothing (pay-as-you-go's, EA's 2019-10-01)."""
        if table.uri in self._signs:
            return self._signs[table.uri]
        found, _ = signs_in(con, table)
        self._signs[table.uri] = found
        return found

    def _guarded(self, table: Table, cost: str | None) -> str | None:
        """The cost's SQL; for a file its first rows read as an actual export, one that fails the
        read at an amortized export's line after them (the file holds both exports: read whole,
        it would have been taken as amortized)."""
        if table.uri not in self._judged_actual_by_head:
            return cost
        amortized, _ = sign_conditions(table)
        line = (f"{table.col('ChargeType')} || ', PricingModel ' || {table.col('PricingModel')} || ', cost ' || "
                f"CAST({cost} AS VARCHAR)")
        failed = table.fail("ChargeType", AFTER_ACTUAL.format(lines=HEAD_LINES), line)
        return f"CASE WHEN {amortized} THEN {failed} ELSE {cost} END"


def sign_conditions(table: Table) -> tuple[str, str] | None:
    """SQL of a line that shows an amortized export (unused commitment rows, or commitment-covered
    usage carrying a cost) and of one that shows an actual export (a commitment's purchase carrying
    the money, covered usage costing 0); None for a file without ChargeType or PricingModel."""
    charge_type, pricing_model, cost = table.col("ChargeType"), table.col("PricingModel"), money(table, *COST)
    if charge_type is None or pricing_model is None or cost is None:
        return None
    committed = f"{pricing_model} IN {COMMITMENTS}"
    return (f"({charge_type} IN ('UnusedReservation', 'UnusedSavingsPlan') "
            f"OR ({charge_type} = 'Usage' AND {committed} AND {cost} <> 0))",
            f"(({charge_type} = 'Purchase' AND {committed} AND {cost} <> 0) "
            f"OR ({charge_type} = 'Usage' AND {committed} AND {cost} = 0))")


def signs_in(con: duckdb.DuckDBPyConnection, table: Table,
             head: int | None = None) -> tuple[dict[str, str] | None, bool]:
    """Per billing period of the file's rows (its first `head` rows, default all), which export
    they show (sign_conditions): `amortized` (amortized wins), `actual`, else `unknown`; and
    whether those rows are the whole file. None: a file without the columns, which tells nothing."""
    conditions = sign_conditions(table)
    if conditions is None:
        return None, True
    amortized, actual = conditions
    rows = table.source if head is None else f"(SELECT * FROM {table.source} LIMIT {head + 1})"
    # counted per distinct day and billing period text, each pair's dates parsed once
    start = table.col("BillingPeriodStartDate") or "CAST(NULL AS VARCHAR)"
    month = period_times(table, {"BillingPeriodStartDate": "s", "day": "d"})["BillingPeriodStart"]
    query = (f"SELECT strftime({month}, '%Y-%m'), sum(amortized), sum(actual), sum(lines) FROM ("
             f"SELECT {start} AS s, {table.col(*DAY)} AS d, count(*) FILTER ({amortized}) AS amortized, "
             f"count(*) FILTER ({actual}) AS actual, count(*) AS lines FROM {rows} GROUP BY ALL) GROUP BY 1")
    try:
        found = con.execute(query).fetchall()
    except duckdb.Error as exc:
        raise duckdb_error(exc, "cannot read the file", where=table.uri,
                           hint="check that it is a complete, UTF-8 cost details export") from None
    return ({period: "amortized" if amortized else "actual" if actual else "unknown"
             for period, amortized, actual, _ in found}, head is None or sum(r[3] for r in found) <= head)


def other_dataset(table: Table, uri: str, declared: str | None) -> None:
    """Raise OtherDataset when the file, pointed at or lying beside cost details, is one of
    AZURE_OTHER_DATASETS (a column's name matched whatever its case and spaces: Microsoft's
    schemas write both `NetSavings` and `Net Savings`) or its export run's manifest declares a
    type that delivers no costs: skipped with one line, not failed as cost details missing a column."""
    found = next(((dataset, f"it has {' and '.join(columns)}") for dataset, columns in AZURE_OTHER_DATASETS
                  if has_columns(table.columns, columns)), None)
    if found is None and declared in NO_COSTS:
        found = (f"{declared} export", f"its run's manifest says type {declared}")
    if found:
        raise OtherDataset(uri, f"an Azure {found[0]} ({found[1]}), not cost details: "
                                "azure-cost reads the actual or amortized cost export")


def english_name(field: str) -> str:
    """The column's own (English) name in a localized header, else the field as written."""
    found = LOCALIZED.search(field)
    return found.group(1) if found else field
