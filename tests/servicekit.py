"""Shared by the service tests: small lakes with real commits, ingest through the real
orchestration with an in-memory connector, and a `spendlake serve` subprocess."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from connectors.base import COSTS, Delivery
from service.core.config import Config, SourceConfig, parse_config
from service.core.errors import SourceError
from service.core.lake import Lake
from service.core.schema import cost_select_list

REPO = Path(__file__).resolve().parent.parent


def cost_relation(con, rows):
    """Canonical cost rows from (charge_start, charge_end, currency, billed, tags) tuples."""
    values = ", ".join(
        f"(TIMESTAMP '{start}', TIMESTAMP '{end}', '{cur}', '{cost}', MAP {{{tags_sql(tags)}}})"
        for start, end, cur, cost, tags in rows
    )
    select = cost_select_list({
        "BillingPeriodStart": "date_trunc('month', s)", "ChargePeriodStart": "s", "ChargePeriodEnd": "e",
        "BillingCurrency": "c", "BilledCost": "b", "EffectiveCost": "b", "Tags": "t",
        "ServiceName": "'Amazon Elastic Compute Cloud'",
    })
    return con.sql(f"SELECT {select} FROM (VALUES {values}) AS v(s, e, c, b, t)")


def tags_sql(tags: dict[str, str]) -> str:
    return ", ".join(f"'{k}': '{v}'" for k, v in tags.items())


def commit(lake: Lake, source: str, rows, delivery_id: str = "d1") -> None:
    con = lake.connect()
    try:
        lake.commit_costs(con, cost_relation(con, rows), source=source, delivery_id=delivery_id, periods=None)
    finally:
        con.close()


def make_config(tmp_path: Path, **service) -> Config:
    data = {"lake": str(tmp_path / "lake"),
            "sources": [{"name": "cur", "kind": "focus", "location": str(tmp_path / "export")}],
            "service": {"listen": "127.0.0.1:0", **service}}
    return parse_config(data, str(tmp_path / "spendlake.yaml"))


# Two teams' November usage (the collector's tests), and a moment after it
ROWS = [("2026-11-20 00:00:00", "2026-11-20 01:00:00", "USD", "3.5", {"team": "nlp"}),
        ("2026-11-27 05:00:00", "2026-11-27 06:00:00", "USD", "1.25", {"team": "vision"})]
NOW = datetime(2026, 11, 28, 0, 0, tzinfo=timezone.utc)


def scrape(collector: Collector) -> CollectorRegistry:
    """A registry of its own holding `collector`: each get_sample_value is a scrape."""
    registry = CollectorRegistry()
    registry.register(collector)
    return registry


def removed_while_listed(monkeypatch, folder: Path) -> None:
    """`folder` removed by a writer (`forget`, a build) just after its parent was listed, before it is
    listed itself, the next time a reader lists that parent, or the folder itself, found by a glob rooted
    there (pathlib's glob lists each folder with os.scandir, as it reads)."""
    real = os.scandir

    def scandir(path=None):
        if isinstance(path, (str, os.PathLike)) and Path(path) == folder and folder.exists():
            shutil.rmtree(folder)  # as the glob that found it lists it
        with real(path) as found:
            entries = list(found)
        if isinstance(path, (str, os.PathLike)) and Path(path) == folder.parent and folder.exists():
            shutil.rmtree(folder)
        return contextlib.nullcontext(iter(entries))

    monkeypatch.setattr(os, "scandir", scandir)


def write_config(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


class MemoryConnector:
    """A billing source in memory, registered in place of a real kind for the test.
    `ROWS` None makes listing fail like an unreachable bucket."""

    kind = "focus"
    config_model = SourceConfig
    feeds = COSTS
    ROWS: list | None = [("2026-11-20 00:00:00", "2026-11-20 01:00:00", "USD", "1", {})]
    DELIVERY = "d1"

    def __init__(self, config):
        self.config = config

    def local_paths(self):
        return []

    def deliveries(self):
        if self.ROWS is None:
            raise SourceError("access denied listing the export", where="s3://bills/focus/")
        yield Delivery(self.DELIVERY, None, ("memory",))

    def read(self, delivery, con, scratch):
        return cost_relation(con, self.ROWS)


def start_serve(config_path: Path, *extra: str, env: dict | None = None, prefix: tuple[str, ...] = (),
                options: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """`python -m service serve` (run by `prefix`: setpriv...; `options` the command's own, `-vv`),
    returning the process and its base URL once it listens."""
    proc = subprocess.Popen(
        [*prefix, sys.executable, "-m", "service", *options, "--config", str(config_path), "serve", *extra],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    deadline = time.monotonic() + 20
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"serving (http://\S+)", line)
        if match:
            proc.output = lines  # keep draining, so a chatty service never blocks on a full pipe
            threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
            return proc, match.group(1)
    proc.kill()
    raise AssertionError("spendlake serve did not start:\n" + "".join(lines) + proc.stdout.read())
