"""Tags columns as MAP(VARCHAR, VARCHAR), whatever the export wrote: a map (Parquet), JSON
object text (FOCUS CSV, Azure's without its outer braces), or BigQuery's list of {key, value, …}
records. Keys and values stay as written; what is not a map of unique keys fails naming the
file and column (exportfile.parsed_or_fail), never becomes no tags.
"""

from __future__ import annotations

import duckdb

from connectors.exportfile import Table, ident, is_record_list, nonblank, parsed_as_given_or_fail, parsed_or_fail

# Google's FOCUS view lists in Tags the resource's labels, its resource manager tags, its project's
# labels and its system labels, each record's x_type saying which: one key may be in several (a
# project label `team` beside the resource's own). The first type here holding the key wins: the
# resource's own label over its project's, as `gcp-billing` overlays them. A short tag key two
# namespaces give one resource (an organization's `env` and a project's) keys each tag by its
# namespaced name, `<x_namespace>/<key>`, as `gcp-billing` reads the export's tags.
RANKED = ("label", "tag", "project_label", "system_label")


def json_tags_sql(table: Table, sql: str, column: str, *, braces_optional: bool = False) -> str:
    """A JSON object as MAP(VARCHAR, VARCHAR): keys exactly as written (even ' org'),
    string values unquoted, other values as their JSON text, JSON null as NULL. Anything
    else (malformed, not an object, a key twice) fails. `braces_optional`: Azure writes
    the object without its outer braces, and no tags as nothing or as `""` (a JSON empty
    string: Red Hat's nise, which koku is tested with, writes it so)."""
    def parsed(text: str) -> str:
        return f"try(json_transform({text}, '\"MAP(VARCHAR, VARCHAR)\"'))"

    if not braces_optional:
        return parsed_as_given_or_fail(table, sql, parsed, column, "not a JSON object with unique keys")
    raw = f"nullif({nonblank(sql)}, '\"\"')"
    raw = f"(CASE WHEN starts_with({raw}, '{{') THEN {raw} ELSE '{{' || {raw} || '}}' END)"
    return parsed_or_fail(table, raw, parsed(raw), column, "not a JSON object with unique keys")


def tags(table: Table, *candidates: str, braces_optional: bool = False) -> str | None:
    name = table.name(*candidates)
    if name is None:
        return None
    kind = str(table.type_of(name))
    if kind.startswith("MAP("):
        return f"CAST({ident(name)} AS MAP(VARCHAR, VARCHAR))"
    if is_record_list(table.type_of(name), "key", "value"):
        return key_value_tags_sql(table, ident(name), name)
    return json_tags_sql(table, ident(name), name, braces_optional=braces_optional)


def key_value_tags_sql(table: Table, sql: str, column: str) -> str:
    """{key, value} records as MAP(VARCHAR, VARCHAR), keys as written; a NULL or repeated key fails
    (list_distinct drops NULLs, so equal lengths mean every key present and unique). Records typed
    by `x_type` (Google's FOCUS view) may repeat a key across types: RANKED says which wins."""
    fields = {field.lower() for field, _ in table.type_of(column).child.children}
    if "x_type" not in fields:
        keys = f"list_transform({sql}, lambda pair: CAST(pair.key AS VARCHAR))"
        values = f"list_transform({sql}, lambda pair: CAST(pair.value AS VARCHAR))"
        as_map = f"CASE WHEN len(list_distinct({keys})) = len({keys}) THEN map({keys}, {values}) END"
        return parsed_or_fail(table, sql, as_map, column, "a key missing or given twice")
    rank = "CASE lower(pair.x_type) " + " ".join(f"WHEN '{kind}' THEN {n}" for n, kind in enumerate(RANKED))
    key = "CAST(pair.key AS VARCHAR)"
    if "x_namespace" in fields:  # one short tag key from two namespaces: each its namespaced name, as gcp-billing
        key = (f"CASE WHEN lower(pair.x_type) = 'tag' AND len(list_filter({sql}, lambda q: lower(q.x_type) = 'tag' "
               f"AND q.key = pair.key)) > 1 THEN nullif(CAST(pair.x_namespace AS VARCHAR), '') || '/' || {key} "
               f"ELSE {key} END")
    ranked = (f"list_sort(list_transform({sql}, lambda pair: {{'rank': {rank} ELSE {len(RANKED)} END, "
              f"'key': {key}, 'value': CAST(pair.value AS VARCHAR)}}))")
    typed = f"list_transform({ranked}, lambda pair: pair.rank || '/' || pair.key)"  # NULL without a key
    keys = f"list_transform({ranked}, lambda pair: pair.key)"
    first = f"list_filter({ranked}, lambda pair, i: list_position({keys}, pair.key) = i)"
    as_map = (f"CASE WHEN len(list_distinct({typed})) = len({typed}) THEN map(list_transform({first}, "
              f"lambda pair: pair.key), list_transform({first}, lambda pair: pair.value)) END")
    return parsed_or_fail(table, sql, as_map, column, "a key missing or given twice within one x_type")


def tags_per_value(table: Table, *candidates: str, braces_optional: bool = False) -> str | None:
    """`tags` as SQL over a text column `value` holding the column as `per_value_text` gives it, for
    the stager to run once per distinct value (service.core.per_value): Google's FOCUS view repeats
    a few hundred lists of records over a million lines, each ranked and checked against the whole
    list per line otherwise. None when the column is absent or a map."""
    name = table.name(*candidates)
    if name is None or str(table.type_of(name)).startswith("MAP("):
        return None
    if is_record_list(table.type_of(name), "key", "value"):  # back from its JSON text, exactly (DuckDB renders the type)
        return key_value_tags_sql(table, f"CAST(CAST({ident('value')} AS JSON) AS {table.type_of(name)})", name)
    return json_tags_sql(table, ident("value"), name, braces_optional=braces_optional)


def per_value_text(table: Table, *candidates: str) -> str | None:
    """The column as the text `tags_per_value`'s (or exportfile.timestamp_per_value's) SQL reads:
    a list of records as its JSON."""
    name = table.name(*candidates)
    if name is None:
        return None
    return f"to_json({ident(name)})" if is_record_list(table.type_of(name), "key", "value") else ident(name)
