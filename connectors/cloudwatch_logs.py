"""cloudwatch-logs: every log group's retention and size → `log_groups`.

From `logs:DescribeLogGroups` (paginated, once per configured region) or from a local file:
the JSON that `aws logs describe-log-groups` prints (`{"logGroups": [...]}`; its region is
taken from each group's ARN), or a CSV/Parquet file with the table's columns. A group
without `retentionInDays` never expires: `retention_days` is NULL. Daily snapshots of
`stored_bytes` show growth.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from connectors.aws_client import aws_error, default_region, make_client, region_of
from connectors.inventory_base import (FileOrApiConnector, SnapshotPart, cli_dump_part, from_epoch_ms, local_files,
                                       rows_relation)
from service.core.config import InventorySource
from service.core.registry import Feeds


def log_group_row(group: dict[str, Any], region: str | None) -> dict[str, Any]:
    arn = group.get("logGroupArn") or group.get("arn") or ""
    return {
        "region": region_of(arn) or region,
        "name": group["logGroupName"],
        "retention_days": group.get("retentionInDays"),
        "stored_bytes": group.get("storedBytes"),
        "created_at": from_epoch_ms(group.get("creationTime")),
    }


class CloudWatchLogsSource(InventorySource):
    """DescribeLogGroups → log_groups."""

    name_prefix: str | None = None


class CloudWatchLogsConnector(FileOrApiConnector[CloudWatchLogsSource]):
    kind = "cloudwatch-logs"
    feeds = Feeds.snapshot("log_groups")

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        if self.config.path:
            return [self._from_file(con, path) for path in local_files(self.config.path, f"{self.config_path}.path")]
        rows = []
        for region in self.config.regions or (default_region(self.config.profile),):
            rows.extend(log_group_row(group, region) for group in self._describe(region))
        return [SnapshotPart("log_groups", rows_relation(con, "log_groups", rows))]

    def _describe(self, region: str):
        from botocore.exceptions import BotoCoreError, ClientError

        client = make_client("logs", region=region, profile=self.config.profile,
                             endpoint_url=self.config.endpoint_url, max_attempts=self.config.max_attempts)
        params = {"logGroupNamePrefix": self.config.name_prefix} if self.config.name_prefix else {}
        try:
            for page in client.get_paginator("describe_log_groups").paginate(**params):
                yield from page.get("logGroups", [])
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, "logs:DescribeLogGroups", f"region {region}", self.config_path) from None

    def _from_file(self, con: duckdb.DuckDBPyConnection, path: Path) -> SnapshotPart:
        return cli_dump_part(con, path, "log_groups", "DescribeLogGroups", "logGroups",
                             lambda groups: [log_group_row(g, None) for g in groups],
                             '{"logGroups": [{"logGroupName": ..., "storedBytes": ...}]}')
