"""Google Cloud billing export (standard and detailed usage cost), as files.

Shapes read, one delivery per folder of files:

- Parquet or newline-delimited JSON of the BigQuery export table, in its native shape:
  nested `service.description`, `sku.id`, `project.id`, `location.region`, `invoice.month`,
  `resource.name` (detailed), repeated `labels` [{key, value}] and `credits` [{name, amount, …}];
- CSV written by pandas from those rows (e.g. Red Hat koku's test data): nested fields are
  flattened to dotted column names and repeated fields are Python repr strings
  (`[{'key': 'a', 'value': 'b'}]`), parsed by a small DuckDB Python function.
The standard and the detailed table of one billing account and invoice month in one delivery
fail it (connectors.gcp_exports): the detailed one holds the same costs per resource.

Money, as the issue and FOCUS ask:
- BilledCost = `cost`, the charge before credits (credits sit on the same row);
- x_credits = the sum of `credits.amount` (negative; 0 when the row has none);
- EffectiveCost = cost + credits: what the usage costs after sustained/committed use
  discounts and promotions, which Google delivers as credits (FOCUS: EffectiveCost is the
  cost after all applicable discounts).
JSON and Parquet FLOAT64 values are taken at their shortest decimal text, so `5e-06` is
exactly 0.000005. `invoice.month` (YYYYMM) is the billing period.
Tags = the `system_labels`, overlaid by the project's labels, by the resource manager `tags`
(fields.tags: a short key two namespaces give one line is kept under each namespaced name), and
by the resource's own `labels`: the precedence `focus` gives Google's FOCUS view
(connectors.tagsql.RANKED), which lists all four; keys and values as written.
SkuId = `sku.id`, ChargeDescription = `sku.description`,
ConsumedQuantity/Unit = `usage.amount`/`usage.unit`, PricingQuantity/Unit =
`usage.amount_in_pricing_units`/`usage.pricing_unit`, PublisherName = `seller_name`
(Marketplace), CommitmentDiscount* from a committed use discount credit (commitment_columns).
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import duckdb

from connectors import empty_costs
from connectors.base import Delivery
from connectors.exportfile import (CSV_SUFFIXES, JSON_SUFFIXES, PARQUET_SUFFIXES, ParquetRun, Table, amounts_sum,
                                   ident, money_sql, nonblank, open_table, parsed_or_fail, sql_string, timestamp_sql)
from connectors.export_formats import looks_like
from connectors.folder_export import FolderExport
from connectors.gcp_exports import DETAILED_FIELDS, ExportTable, check_one_table_per_account
from service.core import json_text
from service.core.config import SourceConfig
from service.core.errors import DataError
from service.core.file_parts import FilesPart
from service.core.per_value import PerValuePart
from service.core.schema import QUANTITY, cost_select_list
from service.core.hidden_columns import rounded_away_sql, rounding_select

PY_LITERAL_JSON = "spendlake_py_literal_json"
REQUIRED = ("cost", "currency", "invoice.month", "usage_start_time")
CHARGE_CATEGORY = {"regular": "Usage", "tax": "Tax", "adjustment": "Adjustment", "rounding_error": "Adjustment"}


@functools.lru_cache(maxsize=4096)
def py_literal_json(value: str | None) -> str | None:
    """A repeated field as pandas wrote it (Python repr) or as JSON text → JSON text, or
    None when it is neither. literal_eval only builds literals: no code runs. Cached: a
    line's SQL names the field several times, and lines repeat the same labels."""
    if value is None:
        return None
    try:
        return json.dumps(json_text.loads(value))
    except ValueError:
        pass
    try:
        return json.dumps(ast.literal_eval(value))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    [(exists,)] = con.execute("SELECT count(*) FROM duckdb_functions() WHERE function_name = ?",
                              [PY_LITERAL_JSON]).fetchall()
    if not exists:
        con.create_function(PY_LITERAL_JSON, py_literal_json, [duckdb.sqltype("VARCHAR")], duckdb.sqltype("VARCHAR"),
                            null_handling="special", side_effects=False)


class Fields:
    """A file's fields by dotted path (`service.description`), nested or already flattened."""

    def __init__(self, table: Table):
        self.table = table
        self.paths: dict[str, tuple[str, duckdb.DuckDBPyType]] = {}
        for name, kind in table.columns.values():
            self._walk(name, ident(name), kind)

    def _walk(self, path: str, sql: str, kind: duckdb.DuckDBPyType) -> None:
        self.paths[path.lower()] = (sql, kind)
        if kind.id == "struct":
            for child, child_kind in kind.children:
                self._walk(f"{path}.{child}", f"struct_extract({sql}, {sql_string(child)})", child_kind)

    def get(self, path: str) -> tuple[str, duckdb.DuckDBPyType] | None:
        return self.paths.get(path.lower())

    def require(self, *paths: str) -> None:
        for path in paths:
            if self.get(path) is None:
                found = looks_like((column for column, _ in self.table.columns.values()), ("gcp-billing",))
                raise DataError(f"required field {path!r} is missing", where=self.table.uri,
                                hint=found or "is this a Cloud Billing export (standard or detailed usage cost)?")

    def text(self, path: str) -> str | None:
        found = self.get(path)
        return found and f"nullif(CAST({found[0]} AS VARCHAR), '')"

    def money(self, path: str) -> str | None:
        found = self.get(path)
        return found and money_sql(self.table, found[0], path, found[1])

    def rounded_away(self, path: str) -> str | None:
        """What the lake's 12 decimals round away from a money field (EffectiveCost adds the
        credits to it: not tracked)."""
        found = self.get(path)
        return found and rounded_away_sql(found[0], str(found[1]))

    def quantity(self, path: str) -> str | None:
        found = self.get(path)
        return found and money_sql(self.table, found[0], path, found[1], QUANTITY)

    def timestamp(self, path: str) -> str | None:
        found = self.get(path)
        return found and timestamp_sql(self.table, found[0], path, found[1])

    def repeated(self, path: str, element: str) -> str | None:
        """A repeated field as a typed list, whatever its storage (list, JSON or repr)."""
        found = self.get(path)
        if found is None:
            return None
        sql, kind = found
        if kind.id == "list":
            return picked(sql, kind, element) or f"json_transform(to_json({sql}), {sql_string(element)})"
        raw = nonblank(sql)
        as_json = f"CAST({PY_LITERAL_JSON}({raw}) AS JSON)"
        parsed = f"try(json_transform({as_json}, {sql_string(element)}))"
        return parsed_or_fail(self.table, raw, parsed, path, "not a list of records")

    def labels(self, path: str) -> str | None:
        pairs = self.repeated(path, '[{"key": "VARCHAR", "value": "VARCHAR"}]')
        return pairs and self._as_map(pairs, f"list_transform({pairs}, lambda p: p.key)", path, "a label key")

    def tags(self) -> str | None:
        """Resource manager tags ({key, value, inherited, namespace}) by their short key, as
        Google's FOCUS view lists them; a short key that two namespaces (an organization's and a
        project's `env`) give one line keys each of them by its namespaced name, `<namespace>/<key>`
        (`123456789012/env`), so neither value is dropped or picked at random."""
        pairs = self.repeated("tags", '[{"key": "VARCHAR", "value": "VARCHAR", "namespace": "VARCHAR"}]')
        if pairs is None:
            return None
        short = f"list_transform({pairs}, lambda p: p.key)"
        namespaced = (f"list_transform({pairs}, lambda p: CASE WHEN len(list_filter({short}, lambda k: k = p.key)) "
                      "> 1 THEN p.namespace || '/' || p.key ELSE p.key END)")
        # a line without a repeated short key (nearly all) skips the namespaced names' cost
        keys = f"CASE WHEN len(list_distinct({short})) = len({short}) THEN {short} ELSE {namespaced} END"
        return self._as_map(pairs, keys, "tags", "a tag key")

    def _as_map(self, pairs: str, keys: str, path: str, what: str) -> str:
        # list_distinct drops NULLs, so equal lengths mean every key present and unique
        as_map = (f"CASE WHEN len(list_distinct({keys})) = len({keys}) "
                  f"THEN map({keys}, list_transform({pairs}, lambda p: p.value)) END")
        return parsed_or_fail(self.table, pairs, as_map, path, f"{what} missing or given twice")

    def credits_total(self) -> str | None:
        credits = self.repeated("credits", '[{"amount": "VARCHAR"}]')
        return credits and amounts_sum(credits)


def picked(sql: str, kind: duckdb.DuckDBPyType, element: str) -> str | None:
    """A list of records holding each field of `element` (`[{"key": "VARCHAR", …}]`) in its type,
    as `element`'s records: itself, or each record's fields picked out, where its JSON round trip
    (to_json, json_transform) cost 0.15 CPU s per label field per 250k lines; None for another list."""
    wanted = json.loads(element)[0]
    have = {name: str(child) for name, child in kind.child.children} if kind.child.id == "struct" else {}
    if any(have.get(name) != type_ for name, type_ in wanted.items()):
        return None
    if list(have.items()) == list(wanted.items()):
        return sql
    fields = ", ".join(f"{ident(name)} := p.{ident(name)}" for name in wanted)
    return f"list_transform({sql}, lambda p: CASE WHEN p IS NOT NULL THEN struct_pack({fields}) END)"


def first_present(*expressions: str | None) -> str | None:
    """The first non-null of the expressions the export has columns for, per line."""
    present = [e for e in expressions if e]
    if len(present) > 1:
        return f"coalesce({', '.join(present)})"
    return present[0] if present else None


def commitment_columns(fields: Fields) -> dict[str, str | None]:
    """FOCUS CommitmentDiscount* from the committed use discount a row received: its credit of
    type COMMITTED_USAGE_DISCOUNT (resource-based: Category `Usage`) or
    COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE (spend-based: `Spend`). Google gives the credit an
    `id` or, where it has none, describes it in `name` ("Committed use discount: GPU")."""
    credits = fields.repeated("credits", '[{"name": "VARCHAR", "full_name": "VARCHAR", "id": "VARCHAR", '
                                         '"type": "VARCHAR"}]')
    if credits is None:
        return {}
    cud = f"list_filter({credits}, lambda c: starts_with(c.type, 'COMMITTED_USAGE_DISCOUNT'))[1]"
    return {
        "CommitmentDiscountId": f"coalesce(nullif({cud}.id, ''), nullif({cud}.full_name, ''), nullif({cud}.name, ''))",
        "CommitmentDiscountName": f"coalesce(nullif({cud}.full_name, ''), nullif({cud}.name, ''))",
        "CommitmentDiscountCategory": (f"CASE {cud}.type WHEN 'COMMITTED_USAGE_DISCOUNT' THEN 'Usage' "
                                       "WHEN 'COMMITTED_USAGE_DISCOUNT_DOLLAR_BASE' THEN 'Spend' END"),
        "CommitmentDiscountType": f"CASE WHEN {cud} IS NOT NULL THEN 'Committed Use Discount' END",
        "CommitmentDiscountStatus": f"CASE WHEN {cud} IS NOT NULL THEN 'Used' END",
    }


class GcpBillingConnector(FolderExport):
    kind = "gcp-billing"
    # 1: a line without resource.global_name takes its resource.name as ResourceId; 2: tags and system labels
    reader_version = 2
    final_when = "never"  # the export has no invoice id, only `invoice.month`
    billed_before_credits = True  # BilledCost is Google's `cost`; the invoice nets the credits
    suffixes = CSV_SUFFIXES + PARQUET_SUFFIXES + JSON_SUFFIXES
    what = "Cloud Billing export"

    def __init__(self, config: SourceConfig):
        super().__init__(config)
        self.tables: dict[str, ExportTable] = {}  # URI → the export table each file read was extracted from

    def read(self, delivery: Delivery, con: duckdb.DuckDBPyConnection,
             scratch: Path) -> list[duckdb.DuckDBPyRelation | PerValuePart | FilesPart]:
        parts = super().read(delivery, con, scratch)  # selects each file: its table is known
        check_one_table_per_account(con, self.tables, delivery.files)
        return parts

    def select(self, con: duckdb.DuckDBPyConnection, path: Path | ParquetRun, uri: str) -> str:
        register_functions(con)
        fields = Fields(open_table(con, path, uri, money=("cost", "cost_at_list")))
        fields.require(*REQUIRED)
        month = fields.text("invoice.month")
        table = fields.table
        self.tables.update(dict.fromkeys(path.uris if isinstance(path, ParquetRun) else (uri,), ExportTable(
            any(fields.get(f) for f in DETAILED_FIELDS),
            f"SELECT DISTINCT {table.row_uri or sql_string(uri)}, {fields.text('billing_account_id') or 'NULL'}, "
            f"{month} FROM {table.source}")))
        period = f"try_strptime({month} || '01', '%Y%m%d')"
        period_sql = parsed_or_fail(fields.table, month, period, "invoice.month", "not YYYYMM")
        cost = empty_costs.required(table, "cost", fields.money("cost"), empty_costs.GCP_EMPTY)
        credits = fields.credits_total()
        # map_concat keeps a key's last value: the resource's label wins, then its tag, its project's label,
        # a system label
        layers = [m for m in (fields.labels("system_labels"), fields.labels("project.labels"), fields.tags(),
                              fields.labels("labels")) if m]
        tags = layers[0] if len(layers) == 1 else (
            "map_concat(" + ", ".join(f"coalesce({m}, MAP {{}})" for m in layers) + ")" if layers else None)
        cost_type = fields.text("cost_type")
        expressions = {
            "BillingAccountId": fields.text("billing_account_id"),
            "BillingPeriodStart": period_sql,
            "BillingPeriodEnd": f"{period_sql} + INTERVAL 1 MONTH",
            "ChargePeriodStart": fields.timestamp("usage_start_time"),
            "ChargePeriodEnd": fields.timestamp("usage_end_time"),
            "BilledCost": cost,
            "EffectiveCost": f"{cost} + {credits}" if credits else cost,
            "ListCost": fields.money("cost_at_list"),
            "BillingCurrency": fields.text("currency"),
            "ChargeCategory": cost_type and (
                "CASE " + " ".join(f"WHEN {cost_type} = {sql_string(k)} THEN {sql_string(v)}"
                                   for k, v in CHARGE_CATEGORY.items()) + f" ELSE {cost_type} END"),
            "ChargeDescription": fields.text("sku.description"),
            "ProviderName": "'Google Cloud'",
            "ServiceName": fields.text("service.description"),
            # per line: a service that gives no global name leaves it null on its own lines only
            "ResourceId": first_present(fields.text("resource.global_name"), fields.text("resource.name")),
            "ResourceName": fields.text("resource.name"),
            "RegionId": fields.text("location.region"),
            "AvailabilityZone": fields.text("location.zone"),
            "SubAccountId": fields.text("project.id"),
            "SubAccountName": fields.text("project.name"),
            "SkuId": fields.text("sku.id"),
            "ConsumedQuantity": fields.quantity("usage.amount"),
            "ConsumedUnit": fields.text("usage.unit"),
            "PricingQuantity": fields.quantity("usage.amount_in_pricing_units"),
            "PricingUnit": fields.text("usage.pricing_unit"),
            "PublisherName": fields.text("seller_name"),
            "ServiceProviderName": "'Google Cloud'",
            **commitment_columns(fields),
            "Tags": tags,
            "x_credits": credits,
        }
        present = {k: v for k, v in expressions.items() if v}
        rounding = rounding_select({"BilledCost": fields.rounded_away("cost"),
                                    "ListCost": fields.rounded_away("cost_at_list")})
        return f"SELECT {cost_select_list(present)}{rounding}{fields.table.file_column} FROM {fields.table.source}"
