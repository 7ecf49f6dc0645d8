"""cloudwatch-logs: every log group's retention and size → `log_groups`.

From `logs:DescribeLogGroups` (paginated, once per configured region) or from a local file:
the JSON that `aws logs describe-log-groups` prints (`{"logGroups": [...]}`; its region is
taken from each group's ARN), or a CSV/Parquet file with the table's columns. A group
without `retentionInDays` never expires: `retention_days` is NULL. Daily snapshots of
`stored_bytes` show growth.
"""

from __future__ import annotations

from typing import Any

from connectors.aws_client import region_of
from connectors.aws_listing import AwsApi, AwsListing, AwsListingSource, Listed
from connectors.inventory_base import from_epoch_ms
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


class CloudWatchLogsSource(AwsListingSource):
    """DescribeLogGroups → log_groups."""

    name_prefix: str | None = None


class CloudWatchLogsConnector(AwsListing[CloudWatchLogsSource]):
    kind = "cloudwatch-logs"
    feeds = Feeds.snapshot("log_groups")
    api = AwsApi("logs", "describe_log_groups", "logs:DescribeLogGroups", "logGroups",
                 example='{"logGroups": [{"logGroupName": ..., "storedBytes": ...}]}')

    def rows(self, listed: Listed) -> list[dict[str, Any]]:
        return [log_group_row(group, region) for region, groups in listed for group in groups]

    def parameters(self) -> dict[str, Any]:
        return {"logGroupNamePrefix": self.config.name_prefix} if self.config.name_prefix else {}
