"""What no run's eval_cost holds is said, never dropped (break52c items 1-3). Figures by hand, 10:00-11:00
on 2026-11-02: i-a (p5.48xlarge, 8 GPUs) bills USD 80 an hour, i-b EUR 80:

- r1's pretrain job holds 4 GPUs of i-a: USD 40;
- eval run ev1 (2 GPUs of i-a, parent_run r1): USD 20, r1's eval_cost;
- eval run eveur (8 GPUs of i-b, parent_run r1): EUR 80, r1's too, in a currency r1 has no row in;
- eval run evself (1 GPU of i-a) names itself: USD 10, its own cost, not its eval_cost too;
- eval run evghost (1 GPU of i-a) names r1-old, no run of the window (r1 renamed): USD 10, no row's.
So r1 shows eval_cost USD 20 and a note names EUR 80 (its story's summary says USD 20.00, EUR 80.00,
the sum of the eval runs it lists per currency); one warning names r1-old, USD 10 and r1 first among
the run ids; evself's eval_cost is 0 with a note. Every run keeps its cost: USD 80, EUR 80.
"""

from __future__ import annotations

import json
from decimal import Decimal
from urllib.parse import parse_qs

import yaml
from click.testing import CliRunner

from service.attribution import RunsQuery, runs
from service.cli.main import cli
from service.core.config import load_config
from tests.attribution_helpers import line
from tests.test_clusters_allocation import assert_ties_out, gpu_line, job, setup
from tests.test_runs import whole_config
from tests.test_service_http import api_for

D = Decimal
DAY = {"since": "2026-11-02", "until": "2026-11-03"}
GHOST = ("eval jobs name parent_run 'r1-old', which no run of the window is (a misspelt or renamed run, or one whose "
         "jobs ran outside the window): their USD 10.00 (evghost) is in no run's eval_cost; known run ids: r1, ")
EUR_NOTE = ("eval runs naming run r1 cost EUR 80.00 (eveur), a currency r1 has no row in (its rows: USD): its "
            "eval_cost, in its row's currency, leaves that out")
SELF_NOTE = "eval run evself names itself as its parent_run: its USD 10.00 is its own cost, not its eval_cost too"


def fleet(tmp_path):
    at = "2026-11-02T{}:00"

    def eval_job(record, gpus, run, parent, instance="i-a"):
        return job(record, gpus, at.format("10:00"), at.format("11:00"), instance_ids=[instance], run_id=run,
                   job_type="eval", labels={"parent_run": parent})

    jobs = [job("1", 4, at.format("10:00"), at.format("11:00"), instance_ids=["i-a"], run_id="r1", job_type="pretrain"),
            eval_job("2", 2, "ev1", "r1"), eval_job("3", 8, "eveur", "R1", "i-b"), eval_job("4", 1, "evself", "evself"),
            eval_job("5", 1, "evghost", "r1-old")]
    lines = [gpu_line("i-a"), line("2026-11-02T10:00:00", "80", currency="EUR", resource="i-b",
                                   instance_type="p5.48xlarge", tags={"team": "platform"})]
    return setup(tmp_path, lines, jobs)


def test_runs_say_what_no_rows_eval_cost_holds(tmp_path):
    lake, cfg = fleet(tmp_path)
    result = runs(lake, cfg, RunsQuery.parse(**DAY))
    assert {(r.run, r.currency): (r.cost, r.eval_cost) for r in result.rows} == {
        ("r1", "USD"): (D(40), D(20)), ("ev1", "USD"): (D(20), D(0)), ("eveur", "EUR"): (D(80), D(0)),
        ("evself", "USD"): (D(10), D(0)), ("evghost", "USD"): (D(10), D(0))}
    assert [(t.currency, t.cost) for t in result.totals] == [("EUR", D(80)), ("USD", D(80))]
    [ghost] = result.warnings
    assert ghost.startswith(GHOST), ghost
    assert result.notes == (SELF_NOTE, EUR_NOTE)  # by run id
    assert result.to_json()["notes"] == [ghost, SELF_NOTE, EUR_NOTE]
    assert_ties_out(lake, cfg)
    # one run's story: its own notes only, no warning of the other runs' parents
    one = runs(lake, cfg, RunsQuery.parse(**DAY, run="r1"))
    assert (one.warnings, one.notes) == ((), (EUR_NOTE,))
    assert [(e.run, e.currency, e.cost) for e in one.story.evals] == [("eveur", "EUR", D(80)), ("ev1", "USD", D(20))]
    itself = runs(lake, cfg, RunsQuery.parse(**DAY, run="evself"))
    assert (itself.story.evals, itself.notes, [r.eval_cost for r in itself.rows]) == ((), (SELF_NOTE,), [D(0)])


def test_the_cli_and_api_warn_once_and_the_storys_summary_sums_the_eval_runs_it_lists(tmp_path):
    lake, _ = fleet(tmp_path)
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))

    def ran(*args):
        result = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", DAY["since"], "--until",
                                          DAY["until"], *args], env={"COLUMNS": "250"})
        assert result.exit_code == 0, result.output
        return result

    for fmt in ("table", "json"):
        stderr = ran("--format", fmt).stderr
        assert stderr.count("parent_run 'r1-old'") == 1 and f"warning: {GHOST}" in stderr, stderr
        assert f"note: {EUR_NOTE}\n" in stderr and f"note: {SELF_NOTE}\n" in stderr, stderr
    printed = json.loads(ran("--format", "json").stdout)
    served = json.loads(api_for(load_config(path)).handle("/api/v1/runs", parse_qs("since=2026-11-02&until=2026-11-03"),
                                                          None).body)
    assert served["notes"][1:] == printed["notes"] and len(printed["notes"]) == 3, served  # after the window's past
    assert served["notes"][0].startswith("the window's last 13.0 h have no data yet")  # the data's end, as ever
    story = ran("--run", "r1", "--format", "table")
    [summary] = [row for row in story.stdout.splitlines() if row.startswith("│ eval cost")]
    assert summary.split("│")[2].strip() == "USD 20.00, EUR 80.00", summary  # eveur EUR 80 + ev1 USD 20, listed
    assert "r1-old" not in story.stderr and f"note: {EUR_NOTE}" in story.stderr, story.stderr
