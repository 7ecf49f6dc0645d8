"""The report's top runs show each run's eval cost (what the eval jobs naming it cost, beside its
cost), in the page, its CSV and report.json, the figure `spendlake runs` gives for the same window
(the month to the report's day's end). The lake is test_run_evals' hand-computed one: r1 $40 with
eval cost $30, the eval runs $20, $10 and $5 with none, the debug run $5."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal

from click.testing import CliRunner

from service.cli.main import cli
from tests.test_run_evals import evaluated_config

D = Decimal


def test_the_reports_top_runs_show_the_eval_cost_runs_gives_for_its_month(tmp_path):
    path = evaluated_config(tmp_path)

    def ran(*args):
        result = CliRunner().invoke(cli, ["--config", str(path), *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    # the report of 2026-11-02 reads the month to that day's end
    runs = json.loads(ran("runs", "--since", "2026-11-01", "--until", "2026-11-03", "--format", "json"))
    expected = {r["run"]: D(r["eval_cost"]) for r in runs["rows"]}
    assert expected == {"r1": D(30), "ev-1": D(0), "ev-2": D(0), "dbg": D(0), "ev-3": D(0)}
    ran("report", "--date", "2026-11-02", "--out", str(tmp_path / "reports"))
    folder = tmp_path / "reports" / "2026-11-02"
    [section] = [s for s in json.loads((folder / "report.json").read_text())["sections"] if s["key"] == "clusters"]
    [table] = [t for t in section["tables"] if t["key"] == "top_runs"]
    assert table["columns"][-1] == "eval_cost" and "cost" in table["columns"]  # a key added, none renamed
    assert {r["run"]: D(r["eval_cost"]) for r in table["rows"]} == expected
    with open(folder / "top_runs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["run"]: D(r["eval_cost"]) for r in rows} == expected
    page = (folder / "report.html").read_text()
    [r1] = re.findall(r"<tr><td>r1</td>.*?</tr>", page)
    assert '<th class="num">eval cost</th></tr>' in page  # the last column
    assert r1.endswith('<td class="num">$40.00</td><td class="num">0.0%</td><td class="num">$30.00</td></tr>'), r1
