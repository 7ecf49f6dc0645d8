"""Virtual-tag rules on a job's own fields that match no job record: `attribute` and `runs`
warn for a rule no job ever met (a typo), and say with -v which met none in the window."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from tests.attribution_helpers import add_jobs, declared_sources, make_lake
from tests.test_clusters_allocation import gpu_line, job

RULES = [{"match": {"job_name": "^eval"}, "value": "eval"},          # eval-mmlu, on 11-02
         {"match": {"job_name": "^pretrian"}, "value": "pretrain"},  # a typo: no job ever
         {"match": {"partition": "debug"}, "value": "debug"},        # a debug job on 11-20 only
         {"match": {"account": "123", "qos": "HIGH"}, "value": "x"}]  # qos high, on 11-02


def _config(tmp_path):
    lake = make_lake(tmp_path, [gpu_line("i-a")])
    add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", instance_ids=["i-a"], name="eval-mmlu",
                        qos="high"),
                    job("2", 8, "2026-11-20T10:00:00", "2026-11-20T11:00:00", instance_ids=["i-a"], name="pretrain-7b",
                        partition="Debug")])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({
        "lake": str(lake.root), "sources": declared_sources(lake),
        "inventory": [{"name": "slurm", "kind": "jobs-file", "path": str(tmp_path / "jobs")}],
        "attribution": {"clusters": {}, "dimensions": {"job_type": {"rules": RULES}}}}))
    return path


def test_a_job_rule_that_matches_no_job_is_named_and_one_idle_in_the_window_is_said_with_v(tmp_path):
    path = _config(tmp_path)
    typo = ("warning: attribution.dimensions.job_type.rules[1] (job_name '^pretrian') matches no job record of "
            "the lake")
    for command in (["attribute", "--by", "job_type"], ["runs"]):
        for verbose in ([], ["-v"]):
            shown = CliRunner().invoke(cli, ["--config", str(path), *verbose, *command, "--since", "2026-11-01",
                                             "--until", "2026-11-03", "--format", "json"])
            assert shown.exit_code == 0, shown.output
            said = [line for line in shown.stderr.splitlines() if "rules[" in line]
            assert said[0] == typo + (": check it against the jobs' job_name (`job_name` is a regular expression, "
                                      "the others whole values, any case)")
            assert said[1:] == ([] if not verbose else [said[1]])
            if verbose:  # the debug rule met none in the window, the job at 11-20 is outside it
                assert said[1].endswith("attribution.dimensions.job_type.rules[2] (partition 'debug') matches no job "
                                        "in the window (it matches jobs outside it)")
    # a dimension not asked for says nothing
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "team", "--since", "2026-11-01",
                                     "--format", "json"])
    assert shown.exit_code == 0 and "rules[" not in shown.stderr


def test_runs_checks_the_rules_on_the_connection_it_answers_on(tmp_path, monkeypatch):
    # `runs` opened a second connection (and checked the job records again) for the rules: ~25 ms
    from service.core.lake import Lake

    path = _config(tmp_path)
    opened = []
    connect = Lake.connect
    monkeypatch.setattr(Lake, "connect", lambda self, *args, **kwargs: opened.append(1) or connect(self, *args, **kwargs))
    shown = CliRunner().invoke(cli, ["--config", str(path), "runs", "--since", "2026-11-01", "--until", "2026-11-03",
                                     "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert "rules[1] (job_name '^pretrian') matches no job record" in shown.stderr
    assert json.loads(shown.stdout)["rows"] and len(opened) == 1


@pytest.mark.parametrize("billed", [True, False])
def test_runs_keeps_its_rule_check_by_the_snapshot_it_answered_in(tmp_path, billed):
    # `runs` gave the check its connection without the snapshot that connection reads, so no check
    # was kept: /api/v1/runs read the job records for the rules again on every request. Billed or
    # not (a lake of job records alone reads them on a connection of its own)
    from service.attribution import RunsQuery, idle_job_rules, runs
    from service.core.config import load_config
    from service.core.lake import Lake

    config = load_config(_config(tmp_path))
    lake = Lake.of(config)
    if not billed:
        lake = Lake(tmp_path / "jobs-only")
        add_jobs(lake, [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T11:00:00", name="eval-mmlu")])
    answer = runs(lake, config, RunsQuery.parse(since="2026-11-01", until="2026-11-03"))
    assert answer.lake_empty is not billed
    assert "attribution.dimensions.job_type.rules[1]" in [rule.path for rule in answer.idle_rules]

    class Unread:  # the check of that answer's snapshot and window is kept: no job record is read again
        def execute(self, *args):
            raise AssertionError("read again")

    assert idle_job_rules(lake, config.attribution, answer.window, con=Unread(),
                          snapshot=answer.read_in) == list(answer.idle_rules)


def test_attribute_checks_the_rules_on_the_connection_it_answers_on(tmp_path, monkeypatch):
    # `attribute --by job_type` opened a second connection for the rules, after its answer (perf48
    # moved `runs`' onto its own); the API's answer (job_rules=True) keeps the check by its snapshot
    from service.attribution import AttributionQuery, attribute_query, idle_job_rules
    from service.core.config import load_config
    from service.core.lake import Lake

    path = _config(tmp_path)
    opened = []
    connect = Lake.connect
    monkeypatch.setattr(Lake, "connect", lambda self, *args, **kwargs: opened.append(1) or connect(self, *args, **kwargs))
    shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--by", "job_type", "--since", "2026-11-01",
                                     "--until", "2026-11-03", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert "rules[1] (job_name '^pretrian') matches no job record" in shown.stderr
    assert json.loads(shown.stdout)["rows"] and len(opened) == 1
    config = load_config(path)
    query = AttributionQuery.parse(config, since="2026-11-01", until="2026-11-03", by="job_type")
    answer = attribute_query(Lake.of(config), config, query, job_rules=True)
    assert [rule.path for rule in answer.idle_rules] == ["attribution.dimensions.job_type.rules[1]",
                                                         "attribution.dimensions.job_type.rules[2]"]

    class Unread:  # the check of that answer's snapshot and window is kept: no job record is read again
        def execute(self, *args):
            raise AssertionError("read again")

    assert idle_job_rules(Lake.of(config), config.attribution, answer.window, ("job_type",), con=Unread(),
                          snapshot=answer.read_in) == list(answer.idle_rules)


def test_the_rule_check_reads_only_the_job_records_and_once_per_state_of_them(tmp_path, monkeypatch):
    # /api/v1/attribute checks the rules on every request: the check takes no snapshot of the cost
    # partitions (it reads no cost), and a request repeated between two inventory runs reads nothing
    from datetime import datetime, timezone

    from service.attribution import idle_job_rules
    from service.core.config import load_config
    from service.core.lake import Lake
    from service.core.timewindow import Window
    from tests.attribution_helpers import query_memory_limits

    config = load_config(_config(tmp_path))
    lake = Lake.of(config)
    window = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))
    monkeypatch.setattr(Lake, "snapshot", lambda self: [][0])  # no cost partition is checked
    reads = query_memory_limits(monkeypatch)
    first = [(rule.path, rule.ever) for rule in idle_job_rules(lake, config.attribution, window)]
    assert first == [("attribution.dimensions.job_type.rules[1]", False),
                     ("attribution.dimensions.job_type.rules[2]", True)]
    assert [(rule.path, rule.ever) for rule in idle_job_rules(lake, config.attribution, window)] == first
    assert len(reads) == 1, reads
    # a new snapshot of the job records (a job named pretrian-x in the window): read again
    add_jobs(lake, [job("3", 8, "2026-11-02T12:00:00", "2026-11-02T13:00:00", instance_ids=["i-a"],
                        name="pretrian-x")], snapshot="2026-11-04")
    assert [(rule.path, rule.ever) for rule in idle_job_rules(lake, config.attribution, window)] == [
        ("attribution.dimensions.job_type.rules[2]", True)]
    assert len(reads) == 2, reads
    # another window is another check
    later = Window(window.since, datetime(2026, 11, 21, tzinfo=timezone.utc))
    assert idle_job_rules(lake, config.attribution, later) == [] and len(reads) == 3


def test_a_job_record_damaged_after_a_kept_check_fails_the_next_check_as_a_read_does(tmp_path):
    # the kept check was keyed on the job files alone: a record altered after it was not noticed
    from datetime import datetime, timezone

    from service.attribution import idle_job_rules
    from service.core.config import load_config
    from service.core.errors import SpendlakeError
    from service.core.lake import Lake
    from service.core.snapshot_ledger import RECORDS
    from service.core.timewindow import Window

    config = load_config(_config(tmp_path))
    lake = Lake.of(config)
    window = Window(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 3, tzinfo=timezone.utc))
    assert idle_job_rules(lake, config.attribution, window)  # kept
    records = sorted((lake.root / RECORDS / "jobs").glob("source=*/*=*.json"))
    assert records
    record = json.loads(records[0].read_text())
    records[0].write_text(json.dumps({**record, "size": record["size"] + 1}))  # the file no longer matches it
    with pytest.raises(SpendlakeError, match=r"jobs"):
        idle_job_rules(lake, config.attribution, window)
