"""FOCUS metadata of an export, in the shape the FOCUS specification's metadata section gives.

    <out>/metadata/data_generator.json          {"DataGenerator": "spendlake"}
    <out>/metadata/schemas/schema-<SchemaId>.json
        {SchemaId, FocusVersion, DataGeneratorVersion, CreationDate, ColumnDefinition: [
            {ColumnName, DataType (STRING | DATETIME | DECIMAL | JSON), NumericPrecision,
             NumberScale (DECIMAL), StringEncoding (STRING, JSON)}, ...]}
    <out>/<billing period>/metadata.json        the period's reference to its schema:
        {DataGenerator, DataGeneratorVersion, FocusVersion, FocusDataset: "CostAndUsage",
         SchemaId, CreationDate, BillingPeriod, data_location: [{filepath, total_bytes,
         total_rows}], x_Sources, x_Since, x_Until, x_WithAttribution}

A SchemaId is a UUID derived from the FOCUS version and the column definitions, so an
export whose columns or types change names a new schema (as FOCUS requires) and one that
does not keeps its id.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from importlib.metadata import PackageNotFoundError, version

import pyarrow as pa

from service.core.timewindow import iso_utc

DATA_GENERATOR = "spendlake"
DATASET = "CostAndUsage"
METADATA_FILE = "metadata.json"
SCHEMA_NAMESPACE = uuid.UUID("5f1c6c1e-8a77-4d54-9c64-2c3c0d0f0c17")  # spendlake's; fixed forever


def generator_version() -> str:
    try:
        return version("spendlake")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def column_definitions(schema: pa.Schema, json_columns: Sequence[str]) -> list[dict]:
    """One ColumnDefinition per column of the written file, in file order."""
    definitions = []
    for field in schema:
        kind = field.type
        if field.name in json_columns:
            definitions.append({"ColumnName": field.name, "DataType": "JSON", "StringEncoding": "UTF-8"})
        elif pa.types.is_decimal(kind):
            definitions.append({"ColumnName": field.name, "DataType": "DECIMAL", "NumericPrecision": kind.precision,
                                "NumberScale": kind.scale})
        elif pa.types.is_timestamp(kind) or field.name.endswith(("Start", "End")) and pa.types.is_string(kind):
            definitions.append({"ColumnName": field.name, "DataType": "DATETIME"})
        else:
            definitions.append({"ColumnName": field.name, "DataType": "STRING", "StringEncoding": "UTF-8"})
    return definitions


def schema_object(focus_version: str, definitions: list[dict], created: datetime) -> dict:
    identity = json.dumps({"FocusVersion": focus_version, "ColumnDefinition": definitions}, sort_keys=True)
    return {"SchemaId": str(uuid.uuid5(SCHEMA_NAMESPACE, identity)), "FocusVersion": focus_version,
            "DataGeneratorVersion": generator_version(), "CreationDate": iso_utc(created),
            "ColumnDefinition": definitions}


def period_metadata(schema: dict, period: str, data_file: str, rows: int, size: int, *, sources: Sequence[str],
                    since: datetime | None, until: datetime | None, attribution: bool, created: datetime) -> dict:
    return {"DataGenerator": DATA_GENERATOR, "DataGeneratorVersion": schema["DataGeneratorVersion"],
            "FocusVersion": schema["FocusVersion"], "FocusDataset": DATASET, "SchemaId": schema["SchemaId"],
            "CreationDate": iso_utc(created), "BillingPeriod": period,
            "data_location": [{"filepath": data_file, "total_bytes": size, "total_rows": rows}],
            "x_Sources": list(sources), "x_Since": since and iso_utc(since), "x_Until": until and iso_utc(until),
            "x_WithAttribution": attribution}


def to_bytes(document: dict) -> bytes:
    return (json.dumps(document, indent=2) + "\n").encode()


def data_generator() -> dict:
    return {"DataGenerator": DATA_GENERATOR}
