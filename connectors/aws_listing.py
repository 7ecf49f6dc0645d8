"""What the inventory connectors that list one AWS API share (aws-tags, cloudwatch-logs).

Each lists its API once per configured region (paginated, read-only), or reads a local
`path` instead: the JSON that the AWS CLI prints for that API, or CSV/Parquet files with the
table's columns. A connector names its API and turns what it lists into rows of its table.
All the regions' calls, their attempts and backoffs, end by the source's `deadline_seconds`, each
attempt's connect and reads by `timeout_seconds` (AwsListingSource, aws_client.held_client).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import duckdb

from connectors.aws_client import aws_error, default_region, held_client
from connectors.inventory_base import FileOrApiConnector, SnapshotPart, SourceT, cli_dump_part, local_files, rows_relation
from connectors.source_folder import Folder
from service.core.config import InventorySource
from service.core.deadline import Deadline
from service.core.source_deadline import RequestLimits

# What one region (None for a local file) listed.
Listed = list[tuple[str | None, list[dict[str, Any]]]]


class AwsListingSource(InventorySource, RequestLimits):
    """What a listing source takes: timeout_seconds and deadline_seconds (RequestLimits) too."""

    def requests(self) -> int:
        """The default deadline's count: one listing in each region, a page each."""
        return max(1, len(self.regions))


@dataclass(frozen=True)
class AwsApi:
    """The API a connector lists: `client` (boto3), its paginated `operation`, the IAM `action`
    errors name, the `list_key` of each page and of the CLI's JSON, and an `example` of that
    JSON for the hint of a file that is not it."""

    client: str
    operation: str
    action: str
    list_key: str
    example: str


class AwsListing(FileOrApiConnector[SourceT]):
    """Subclasses set `api` and `feeds` (one table) and write `rows`."""

    api: ClassVar[AwsApi]

    @property
    def table(self) -> str:
        return self.feeds.tables[0]

    def rows(self, listed: Listed) -> list[dict[str, Any]]:
        """Rows of `table` for what each region listed."""
        raise NotImplementedError

    def parameters(self) -> dict[str, Any]:
        """The operation's parameters from the config."""
        return {}

    def snapshot(self, con: duckdb.DuckDBPyConnection, scratch: Path, now: datetime) -> list[SnapshotPart]:
        if self.config.path:
            folder = Folder.of(self.config.path, f"{self.config_path}.path")
            return [self._from_file(con, path, folder) for path in local_files(self.config.path, folder.setting)]
        deadline = self.config.start_deadline(self.config_path)  # all regions' calls
        listed: Listed = [(region, list(self._pages(region, deadline)))
                          for region in self.config.regions or (default_region(self.config.profile, self.config_path),)]
        return [SnapshotPart(self.table, rows_relation(con, self.table, self.rows(listed)))]

    def _pages(self, region: str, deadline: Deadline) -> Iterator[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        client = held_client(self.api.client, self.config, config_path=self.config_path, region=region,
                             deadline=deadline, where=f"region {region}",
                             smaller=f"list fewer regions ({self.config_path}.regions)")
        try:
            for page in client.get_paginator(self.api.operation).paginate(**self.parameters()):
                yield from page.get(self.api.list_key, [])
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, self.api.action, f"region {region}", self.config_path) from None

    def _from_file(self, con: duckdb.DuckDBPyConnection, path: Path, folder: Folder) -> SnapshotPart:
        return cli_dump_part(con, path, folder, self.table, self.api.action.split(":")[1], self.api.list_key,
                             lambda items: self.rows([(None, items)]), self.api.example)
