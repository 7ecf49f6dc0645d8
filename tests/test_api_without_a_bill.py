"""/api/v1/attribute and /api/v1/runs on a lake holding no bill of the configured sources: the
$0 says why, in the CLI's words (break51b item 1). A source renamed whose ingest under its new
name failed leaves the lake holding only the old name's bill: the API answered 200, cost "0",
`notes` [] (runs) or no `notes` (attribute), while the CLI said on stderr that the lake holds no
bill of the configured sources and what to run. The API answers 200 as the CLI exits 0, with the
line first in `notes` (plans, which the CLI refuses with exit 3, are the API's 503). The API says
`the lake` where the CLI names its folder: the server's paths are not told to its clients."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config
from service.core.lake import Lake
from tests.attribution_helpers import add_jobs
from tests.test_clusters_allocation import job
from tests.test_runs import lake_with_runs, whole_config
from tests.test_service_http import api_for

WINDOW = "since=2026-11-02&until=2026-11-03"
ASKED = {  # each endpoint and the CLI command it answers as
    "/api/v1/runs?" + WINDOW: ["runs", "--since", "2026-11-02", "--until", "2026-11-03"],
    "/api/v1/runs?run=r1&" + WINDOW: ["runs", "--run", "r1", "--since", "2026-11-02", "--until", "2026-11-03"],
    "/api/v1/attribute?by=team&" + WINDOW: ["attribute", "--by", "team", "--since", "2026-11-02", "--until",
                                            "2026-11-03"],
}


def answers(path, config) -> list[tuple[str, list[str], dict]]:
    """Each endpoint's target, the CLI's stderr lines and the API's answer, which is the CLI's JSON
    with the first of its `notes` added."""
    api, found = api_for(config), []
    for target, args in ASKED.items():
        shown = CliRunner().invoke(cli, ["--config", str(path), *args, "--format", "json"])
        assert shown.exit_code == 0, shown.output
        route, _, query = target.partition("?")
        served = api.handle(route, parse_qs(query), None)
        assert served.status == 200, served.body
        answer, printed = json.loads(served.body), json.loads(shown.stdout)
        assert answer == {**printed, "notes": [answer["notes"][0], *printed.get("notes", ())]}, (answer, printed)
        found.append((target, shown.stderr.splitlines(), answer))
    return found


def test_a_lake_holding_only_a_renamed_sources_bill_says_so_in_the_apis_notes_as_the_cli_does(tmp_path):
    lake, _ = lake_with_runs(tmp_path)
    data = whole_config(tmp_path, lake)
    [old] = [source["name"] for source in data["sources"]]
    data["sources"][0]["name"] = f"{old}-renamed"  # its ingest under the new name never stored a bill
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(data))
    for target, stderr, served in answers(path, load_config(path)):
        note = served["notes"][0]
        assert note.replace("the lake ", f"the lake at {lake.root} ", 1) in stderr, (target, stderr)
        assert note.startswith(f"the lake holds no bill of the configured sources, only of {old}, "
                               "which the config no longer names"), note
        assert str(tmp_path) not in json.dumps(served)
        assert f"`spendlake forget {old}`" in note
        assert served["rows"] if "runs" in target else not served["rows"]  # the runs of the job records, at 0
        assert all(row["cost"] == "0" for row in served["rows"])


def test_a_lake_of_job_records_alone_says_its_runs_show_no_cost_until_an_ingest_in_the_apis_notes(tmp_path):
    lake = Lake(tmp_path / "lake")
    add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T12:00:00", instance_ids=["i-a"], run_id="r1",
                        team="nlp", project="llm")])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump(whole_config(tmp_path, lake)))
    said = {target: (stderr, served) for target, stderr, served in answers(path, load_config(path))}
    for target in ("/api/v1/runs?" + WINDOW, "/api/v1/runs?run=r1&" + WINDOW):
        stderr, served = said[target]
        assert served["notes"][0] == ("the lake holds no bill: the runs of its job records show no cost until "
                                      "`spendlake ingest` stores one")
        assert f"the lake at {lake.root} holds no bill: the runs of its job records show no cost" in stderr[0]
    stderr, served = said["/api/v1/attribute?by=team&" + WINDOW]
    assert served["rows"] == [] and served["notes"] == ["the lake is empty: run `spendlake ingest`"]
    assert stderr[0] == f"the lake at {lake.root} is empty: run `spendlake ingest`", stderr
