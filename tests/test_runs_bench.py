"""bench/runs_bench.py --prepare-only leaves a work folder a user can query by hand: the lake, the
config with `clusters:` beside it, and the commands printed."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

from click.testing import CliRunner

from service.cli.main import cli

REPO = Path(__file__).resolve().parent.parent


def test_prepare_only_writes_the_clusters_config_and_prints_how_to_query_it(tmp_path):
    done = subprocess.run([sys.executable, "bench/runs_bench.py", "--prepare-only", "--nodes", "8", "--jobs", "500",
                           "--rows", "3000", "--work", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "nodes-8-jobs-500-rows-3000"
    printed = done.stdout.split(f"prepared: {folder}; from {REPO}:\n")[1]
    commands = [shlex.split(line) for line in printed.splitlines()]
    assert [c[3:6] for c in commands] == [["--config", str(folder / "spendlake-clusters.yaml"), "attribute"],
                                          ["--config", str(folder / "spendlake-clusters.yaml"), "runs"]]
    shown = CliRunner().invoke(cli, [*commands[1][3:], "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["rows"]
    assert rows and all(r["currency"] == "USD" and Decimal(r["cost"]) > 0 for r in rows if r["gpu_hours"] != "0")
    attributed = CliRunner().invoke(cli, commands[0][3:])
    assert attributed.exit_code == 0, attributed.output
    assert "idle" in {r["run"] for r in json.loads(attributed.stdout)["rows"]}
