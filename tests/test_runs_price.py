"""`spendlake runs`' $ per GPU-hour: the exact cost ÷ the exact GPU-hours of the run's priced jobs,
rounded once, whatever the table's GPU-hours (rounded to 0.1) show beside it."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

from service.attribution import runs
from service.cli.run_story import render_story
from service.cli.runs import render
from tests.test_runs import lake_with_runs, query

D = Decimal


def priced(tmp_path, **kwargs):
    """The runs of test_runs' lake, r1 costing USD 20.1499999 for 2 priced GPU-hours: $10.07499995 a
    GPU-hour, which is 10.075000 to 6 decimals and $10.07 to the cent."""
    lake, cfg = lake_with_runs(tmp_path)
    result = runs(lake, cfg, query(**kwargs))
    rows = tuple(replace(r, cost=D("20.1499999"), priced_hours=D(2)) if r.run == "r1" else r for r in result.rows)
    return replace(result, rows=rows)


def test_the_table_rounds_the_exact_cost_per_gpu_hour_once(tmp_path, capsys, monkeypatch):
    """The table wrote the JSON's 6 decimals (10.075000) again to the cent: $10.08 where the exact
    10.07499995 is $10.07; the JSON keeps its 6 decimals."""
    monkeypatch.setenv("COLUMNS", "250")  # wide enough for every column
    result = priced(tmp_path)
    assert result.to_json()["rows"][0]["cost_per_gpu_hour"] == "10.075000"
    render(result, "table")
    line = next(line for line in capsys.readouterr().out.splitlines() if " r1 " in line)
    assert "10.07" in line and "10.08" not in line, line


def test_a_runs_story_rounds_the_exact_cost_per_gpu_hour_once(tmp_path, capsys):
    render_story(priced(tmp_path, run="r1"), "table")
    line = next(line for line in capsys.readouterr().out.splitlines() if "$/GPU-hour" in line)
    assert "10.07" in line and "10.08" not in line, line
