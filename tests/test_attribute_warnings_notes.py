"""What `spendlake attribute` says on stderr of a cost some deliveries lack, a comma-separated
`--where` value, job rules no job meets and over-booked hours is in its JSON's `notes` and
`/api/v1/attribute`'s too, in the same words (options spelled as the URL's parameters there)."""

from __future__ import annotations

import yaml

from service.core.config import load_config
from tests.attribution_helpers import add_jobs, declared_sources, line, make_lake
from tests.test_attribute_notes import api_and_cli
from tests.test_clusters_allocation import gpu_line, job

NOVEMBER = ("--since", "2026-11-01", "--until", "2026-12-01")


def _config_file(tmp_path, lake, **extra) -> str:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), **extra}))
    return str(path)


def answers(path: str, query: str, *options: str) -> tuple[dict, dict, list[str]]:
    """The API's answer to `query`, the CLI's JSON to `options` and the CLI's stderr lines."""
    api, cli_json, stderr = api_and_cli(load_config(path), path, query, *options)
    return api, cli_json, stderr.splitlines()


PAST = "the window's last 685.0 h have no data yet (the data runs through 2026-11-02T11:00:00Z)"  # of November


def test_a_cost_the_deliveries_lack_is_a_note_in_the_json_and_the_api(tmp_path):
    # an amortized-only delivery (an azure-cost amortized export): no billed cost, --cost billed counts 0
    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", None, effective="5", tags={"team": "nlp"})],
                     source="amortized")
    path = _config_file(tmp_path, lake)
    api, cli_json, stderr = answers(path, "since=2026-11-01&until=2026-12-01&cost=billed", *NOVEMBER,
                                    "--cost", "billed")
    said = "amortized 2026-11 delivered no billed cost, only effective cost: counted as 0 here; {} counts it"
    assert said.format("cost=effective") in api["notes"], api
    assert said.format("--cost effective") in cli_json["notes"], cli_json
    assert f"note: {said.format('--cost effective')}" in stderr, stderr
    api, cli_json, stderr = answers(path, "since=2026-11-01&until=2026-12-01&cost=effective", *NOVEMBER,
                                    "--cost", "effective")
    # November past the line's hour: only that, in the JSON (stderr keeps the table's coverage line's note off)
    assert api["notes"] == cli_json["notes"] == [PAST] and stderr == [], (api, stderr)


def test_a_comma_separated_where_value_says_to_repeat_where_in_the_json_and_the_api(tmp_path):
    lake = make_lake(tmp_path, [line("2026-11-02T10:00:00", "5", tags={"team": "nlp"})])
    path = _config_file(tmp_path, lake)
    api, cli_json, stderr = answers(path, "since=2026-11-01&until=2026-12-01&where=team=nlp,cv", *NOVEMBER,
                                    "--where", "team=nlp,cv")
    [api_note] = [note for note in api["notes"] if "several values" in note]
    [cli_note] = [note for note in cli_json["notes"] if "several values" in note]
    assert api_note.endswith("; several values: repeat where, e.g. where=team=nlp where=team=cv"), api_note
    assert cli_note.endswith("; several values: repeat --where, e.g. --where team=nlp --where team=cv"), cli_note
    assert f"warning: --where {cli_note}" in stderr, stderr


def test_job_rules_no_job_meets_and_over_booked_hours_are_in_the_json_and_the_api(tmp_path):
    # jobs a (8 GPUs) and b (4) on i-a's 8 GPUs in one hour: over-booked; a rule whose job_name no job has
    lake = make_lake(tmp_path, [gpu_line("i-a")])
    add_jobs(lake, [job("a", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"]),
                    job("b", 4, "2026-11-02T10:00:00", "2026-11-02T10:30:00", instance_ids=["i-a"])])
    path = _config_file(tmp_path, lake, inventory=[{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "j")}],
                        attribution={"clusters": {}, "dimensions": {"job_type": {"rules": [
                            {"match": {"job_name": "^pretrian"}, "value": "pretrain"}]}}})
    api, cli_json, stderr = answers(path, "since=2026-11-01&until=2026-12-01&by=job_type", *NOVEMBER,
                                    "--by", "job_type")
    warnings = [line.removeprefix("warning: ") for line in stderr if line.startswith("warning: ")]
    assert [w for w in warnings if "rules[0] (job_name '^pretrian') matches no job record" in w], stderr
    assert [w for w in warnings if w.startswith("1 instance-hour(s) in the window were over-booked")], stderr
    assert api["notes"] == cli_json["notes"] == [PAST, *warnings], (api, stderr)
