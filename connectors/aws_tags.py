"""aws-tags: every tagged resource and its tags → `resource_tags`.

From the Resource Groups Tagging API (`tag:GetResources`, paginated, once per configured
region) or from a local file: the JSON that `aws resourcegroupstaggingapi get-resources`
prints (`{"ResourceTagMappingList": [...]}`), or a CSV/Parquet file with the table's
columns. Keys and values keep their spelling (`Team` and `team` stay distinct); a resource
whose tag list is empty keeps one row with NULL key and value, so it is still counted.
Attribution (not this module) decides which spelling means what.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from connectors.aws_client import region_of
from connectors.aws_listing import AwsApi, AwsListing, AwsListingSource, Listed
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


class AwsTagsSource(AwsListingSource):
    """Resource Groups Tagging API GetResources → resource_tags."""

    resource_types: tuple[str, ...] = Field(default=(), description="ResourceTypeFilters, e.g. ec2:instance")


class AwsTagsConnector(AwsListing[AwsTagsSource]):
    kind = "aws-tags"
    feeds = Feeds.snapshot("resource_tags")
    api = AwsApi("resourcegroupstaggingapi", "get_resources", "tag:GetResources", "ResourceTagMappingList",
                 example='{"ResourceTagMappingList": [{"ResourceARN": ..., "Tags": [...]}]}')

    def rows(self, listed: Listed) -> list[dict[str, Any]]:
        seen: set[str] = set()  # a global resource is listed by every region
        return [row for region, mappings in listed for row in tag_rows(mappings, region, seen)]

    def parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {"ResourcesPerPage": 100}
        if self.config.resource_types:
            params["ResourceTypeFilters"] = list(self.config.resource_types)
        return params
