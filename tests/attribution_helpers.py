"""Hand-made cost lines for attribution tests: build a lake with `Lake.commit_costs`."""

from __future__ import annotations

from pathlib import Path

import duckdb

from service.core.config import parse_config
from service.core.lake import READER_MEMORY_LIMIT, Lake
from service.core.schema import cost_select_list

FIELDS = ("start", "end", "cost", "currency", "tags", "account", "service", "resource", "category", "usage_type",
          "region", "effective", "list", "instance_type", "split_parent", "split_cost", "split_unused")


def line(start: str, cost: str, *, end: str | None = None, currency: str = "USD", tags: dict | None = None,
         account: str = "111111111111", service: str = "Amazon Elastic Compute Cloud", resource: str = "",
         category: str = "Usage", usage_type: str = "", region: str = "us-east-1", effective: str | None = None,
         list_cost: str | None = None, instance_type: str = "", split_parent: str = "", split_cost: str | None = None,
         split_unused: str | None = None, quantity: str | None = None) -> dict:
    """One cost line; `end` defaults to one hour after `start`. `instance_type` (an EC2
    instance's line), `split_*` (an EKS pod's split cost allocation row) as a CUR has them."""
    return {"start": start, "end": end, "cost": cost, "currency": currency, "tags": tags or {}, "account": account,
            "service": service, "resource": resource, "category": category, "usage_type": usage_type,
            "region": region, "effective": effective or cost, "list": list_cost or cost,
            "instance_type": instance_type, "split_parent": split_parent, "split_cost": split_cost,
            "split_unused": split_unused, "quantity": quantity}


def relation(con, lines: list[dict]):
    """Canonical cost columns from `line(...)` dicts; values are bound, never spliced."""
    con.execute("CREATE OR REPLACE TEMP TABLE handmade (s VARCHAR, e VARCHAR, b VARCHAR, c VARCHAR, "
                "tk VARCHAR[], tv VARCHAR[], acct VARCHAR, svc VARCHAR, rid VARCHAR, cat VARCHAR, ut VARCHAR, "
                "reg VARCHAR, eff VARCHAR, lst VARCHAR, it VARCHAR, sp VARCHAR, sc VARCHAR, su VARCHAR, q VARCHAR)")
    for item in lines:
        con.execute("INSERT INTO handmade VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            item["start"], item["end"], item["cost"], item["currency"], list(item["tags"]),
            list(item["tags"].values()), item["account"], item["service"], item["resource"], item["category"],
            item["usage_type"], item["region"], item["effective"], item["list"], item.get("instance_type", ""),
            item.get("split_parent", ""), item.get("split_cost"), item.get("split_unused"), item.get("quantity")])
    start = "CAST(s AS TIMESTAMP)"
    select = cost_select_list({
        "BillingPeriodStart": f"date_trunc('month', {start})",
        "BillingPeriodEnd": f"date_trunc('month', {start}) + INTERVAL 1 MONTH",
        "ChargePeriodStart": start,
        "ChargePeriodEnd": f"coalesce(CAST(e AS TIMESTAMP), {start} + INTERVAL 1 HOUR)",
        "BilledCost": "b", "EffectiveCost": "eff", "ListCost": "lst", "BillingCurrency": "c",
        "ChargeCategory": "cat", "ServiceName": "svc", "ResourceId": "nullif(rid, '')", "RegionId": "reg",
        "SubAccountId": "acct", "x_usage_type": "nullif(ut, '')", "Tags": "map_from_entries(list_zip(tk, tv))",
        "x_instance_type": "nullif(it, '')", "x_split_parent_resource_id": "nullif(sp, '')",
        "x_split_cost": "sc", "x_split_unused_cost": "su", "ConsumedQuantity": "q",
    })
    return con.sql(f"SELECT {select} FROM handmade")


def make_lake(tmp_path, lines: list[dict], *, source: str = "cur", delivery: str = "d1") -> Lake:
    lake = Lake(tmp_path / "lake")
    con = lake.connect()
    lake.commit_costs(con, relation(con, lines), source=source, delivery_id=delivery, periods=None)
    con.close()
    return lake


def config(attribution: dict | None = None, lake=None):
    data = {"attribution": attribution or {}}
    if lake is not None:
        data["lake"] = str(lake.root)
        data["sources"] = declared_sources(lake)
    return parse_config(data)


def declared_sources(lake: Lake, *, inventory: bool = False) -> list[dict]:
    """Config entries for the sources a hand-built lake holds (only configured sources count):
    its billing sources, and with `inventory` those of its inventory tables too."""
    names = {e.source for e in lake.ledger()}
    if inventory:
        names |= {d.name.split("=", 1)[1] for d in lake.root.glob("*/source=*") if d.parent.name not in ("findings", "plans")}
    names = sorted(names)
    return [{"name": name, "kind": "focus", "location": str(lake.root.parent / f"{name}-export")} for name in names]


def config_file_of(root: Path, lake: Lake) -> tuple[Path, object]:
    """spendlake.yaml under `root` declaring the hand-built `lake`'s sources, and its parsed Config."""
    import yaml

    document = {"lake": str(lake.root), "sources": declared_sources(lake)}
    path = root / "spendlake.yaml"
    path.write_text(yaml.safe_dump(document))
    return path, parse_config(document)


def attribute_cli(path: Path, *args):
    """`spendlake --config path attribute *args` through click's runner."""
    from click.testing import CliRunner

    from service.cli.main import cli

    return CliRunner().invoke(cli, ["--config", str(path), "attribute", *args])


def one_line_config_file(tmp_path) -> Path:
    """spendlake.yaml of a lake holding one $10 line of team nlp (2026-11-02): for tests of
    what the CLI answers to bad input, where the data only has to exist."""
    import yaml

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"team": "nlp"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    return path


def add_jobs(lake: Lake, rows: list[dict], *, source: str = "slurm", snapshot: str = "2026-11-03",
             facts: dict | None = None):
    """Job records (`connectors.jobs_base.job_row` dicts) as one snapshot of a job source
    (`facts`: its record's, e.g. a window source's times, service/core/job_windows.py)."""
    from connectors.jobs_base import jobs_relation

    con = lake.connect()
    try:
        lake.commit_snapshot(con, jobs_relation(con, rows), table="jobs", source=source, key="snapshot_date",
                             value=snapshot, facts=facts)
    finally:
        con.close()


def query_memory_limits(monkeypatch) -> list[str]:
    """The DuckDB memory limit of every `Lake.query` connection, recorded as each opens (read with
    fetchall: a pending result would block the connection's next view)."""
    limits = []
    query = Lake.query

    def recorded(self, *args, **kwargs):
        con = query(self, *args, **kwargs)
        limits.append(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        return con

    monkeypatch.setattr(Lake, "query", recorded)
    return limits


def readers_memory_limit() -> str:
    """READER_MEMORY_LIMIT as DuckDB reports it back (e.g. '381.4 MiB')."""
    return duckdb.connect(config={"memory_limit": READER_MEMORY_LIMIT}).execute(
        "SELECT current_setting('memory_limit')").fetchall()[0][0]
