"""Quotes, spaces and non-ASCII in the lake's and the sources' paths (RELIABILITY 49).

Nothing is inspected: the real commands run over a lake and sources whose paths hold `'`,
`"`, spaces and non-ASCII letters, and must answer as they do for plain paths."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from conftest import DATA, SAMPLES
from service.cli.main import cli
from test_samples import KIND_BY_FILE

pytestmark = pytest.mark.slow  # ingests every sample, snapshots the inventory and writes a report

AWKWARD = "it's a \"quoted\" dir ü ß 数据"
INVENTORY = DATA / "inventory"


def run(config, *args):
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def test_49_quotes_spaces_and_non_ascii_in_lake_and_source_paths_work(tmp_path):
    base = tmp_path / AWKWARD
    sources = []
    for number, (file, kind) in enumerate(sorted(KIND_BY_FILE.items())):
        folder = base / f"source {number} '{kind}' \"é\""
        folder.mkdir(parents=True)
        shutil.copy(SAMPLES / file, folder / f"export 'ü' {number}.csv")
        sources.append({"name": f"bill-{number}", "kind": kind, "location": str(folder)})
    inventory_dir = base / "inventory 'ü'"
    shutil.copytree(INVENTORY, inventory_dir)
    inventory = [
        {"name": "tags", "kind": "aws-tags", "path": str(inventory_dir / "tags" / "get-resources.json")},
        {"name": "logs", "kind": "cloudwatch-logs", "path": str(inventory_dir / "logs" / "describe-log-groups.json")},
        {"name": "objects", "kind": "s3-objects", "path": str(inventory_dir / "s3" / "listing.csv"),
         "lifecycle_path": str(inventory_dir / "s3" / "lifecycle.json")},
        {"name": "gpus", "kind": "gpu-metrics", "path": str(inventory_dir / "gpu" / "dcgm-export.csv")},
    ]
    config = base / "spendlake 'ü'.yaml"
    config.write_text(yaml.safe_dump({"lake": str(base / "lake \"ü\" 'q'"), "sources": sources,
                                      "inventory": inventory}, allow_unicode=True), encoding="utf-8")

    ingested = run(config, "ingest")
    assert ingested.exit_code == 0, ingested.output
    assert ingested.output.count("committed") >= len(sources)
    assert run(config, "inventory").exit_code == 0

    status = run(config, "status", "--format", "json")
    assert status.exit_code == 0, status.output
    rows = json.loads(status.output)
    assert {r["source"] for r in rows} == {s["name"] for s in sources}
    assert all(r["check"] == "ok" for r in rows)

    assert run(config, "verify").exit_code == 0
    checked = run(config, "attribute", "--check", "--format", "json")
    assert checked.exit_code == 0, checked.output
    assert checked.output and all(r["ok"] for r in json.loads(checked.stdout))

    answer = run(config, "attribute", "--since", "2000-01-01", "--until", "2100-01-01", "--by", "team",
                 "--format", "json")
    assert answer.exit_code == 0, answer.output
    attributed = {t["currency"]: Decimal(t["cost"]) for t in json.loads(answer.stdout)["totals"]}
    billed: dict[str, Decimal] = {}
    for row in rows:
        billed[row["currency"]] = billed.get(row["currency"], Decimal(0)) + Decimal(row["billed_cost"] or 0)
    assert attributed == {c: v for c, v in billed.items() if v}

    rules = run(config, "rules", "run", "--since", "30d", "--format", "json")
    assert rules.exit_code == 0, rules.output
    assert run(config, "findings", "--format", "json").exit_code == 0
    report = run(config, "report", "--date", "2024-09-15")
    assert report.exit_code == 0, report.output
    assert (base / "reports" / "2024-09-15" / "report.html").is_file()
