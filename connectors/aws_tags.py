"""aws-tags: every tagged resource and its tags → `resource_tags`.

From the Resource Groups Tagging API (`tag:GetResources`, paginated, once per configured
region) or from a local file: the JSON that `aws resourcegroupstaggingapi get-resources`
prints (`{"ResourceTagMappingList": [...]}`), or a CSV/Parquet file with the table's
columns. Keys and values keep their spelling (`Team` and `team` stay distinct); a resource
whose tag list is empty keeps one row with NULL key and value, so it is still counted.
Attribution (not this module) decides which spelling means what.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
from pydantic import Field

from connectors.aws_client import aws_error, default_region, make_client, region_of
from connectors.inventory_base import FileOrApiConnector, SnapshotPart, cli_dump_part, local_files, rows_relation
from service.core.config import InventorySource
from service.core.registry import Feeds


def tag_rows(mappings: list[dict[str, Any]], region: str | None, seen: set[str]) -> list[dict[str, Any]]:
    """Rows of `resource_tags` for GetResources' ResourceTagMappingList; skips ARNs in `seen`
    (a global resource listed by several regions) and adds the new ones to it."""
    rows = []
    for mapping in mappings:
        arn = mapping["ResourceARN"]
        if arn in seen:
            continue
        seen.add(arn)
        where = region_of(arn) or region
        tags = mapping.get("Tags") or []
        if not tags:
            rows.append({"resource_id": arn, "region": where, "key": None, "value": None})
        for tag in tags:
            rows.append({"resource_id": arn, "region": where, "key": tag["Key"], "value": tag.get("Value", "")})
    return rows


class AwsTagsSource(InventorySource):
    """Resource Groups Tagging API GetResources → resource_tags."""

    resource_types: tuple[str, ...] = Field(default=(), description="ResourceTypeFilters, e.g. ec2:instance")


class AwsTagsConnector(FileOrApiConnector[AwsTagsSource]):
    kind = "aws-tags"
    feeds = Feeds.snapshot("resource_tags")

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        if self.config.path:
            return [self._from_file(con, path) for path in local_files(self.config.path, f"{self.config_path}.path")]
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for region in self.config.regions or (default_region(self.config.profile),):
            rows.extend(tag_rows(list(self._get_resources(region)), region, seen))
        return [SnapshotPart("resource_tags", rows_relation(con, "resource_tags", rows))]

    def _get_resources(self, region: str):
        from botocore.exceptions import BotoCoreError, ClientError

        client = make_client("resourcegroupstaggingapi", region=region, profile=self.config.profile,
                             endpoint_url=self.config.endpoint_url, max_attempts=self.config.max_attempts)
        params: dict[str, Any] = {"ResourcesPerPage": 100}
        if self.config.resource_types:
            params["ResourceTypeFilters"] = list(self.config.resource_types)
        try:
            for page in client.get_paginator("get_resources").paginate(**params):
                yield from page.get("ResourceTagMappingList", [])
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, "tag:GetResources", f"region {region}", self.config_path) from None

    def _from_file(self, con: duckdb.DuckDBPyConnection, path: Path) -> SnapshotPart:
        return cli_dump_part(con, path, "resource_tags", "GetResources", "ResourceTagMappingList",
                             lambda mappings: tag_rows(mappings, None, set()),
                             '{"ResourceTagMappingList": [{"ResourceARN": ..., "Tags": [...]}]}')
