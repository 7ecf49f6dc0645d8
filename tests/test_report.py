"""The daily report files: deterministic, atomic, escaped, uploaded to S3, honest about gaps."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

from report_fixtures import FORMULAS, INJECTIONS, focus_export, sample_report
from rules.base import Finding
from service.cli import cli
from service.core.config import parse_config
from service.core.errors import UsageError
from service.core.lake import Lake
from service.findings import store_findings
from service.estimate import estimate, plan_inputs
from service.ingest import ingest
from service.plans import plan_from_estimate, register_plan
from service.report import report_day, write_local, write_report
from service.report_render import md, render_csvs, render_files, render_markdown

DAY = date(2026, 11, 29)


def demo_config(tmp_path):
    lines = [(DAY - timedelta(days=back), "10.50", {"team": "pretrain"}, "Amazon EC2") for back in range(40)]
    export = focus_export(tmp_path / "export", lines)
    config = parse_config({"lake": str(tmp_path / "lake"),
                           "sources": [{"name": "focus-main", "kind": "focus", "location": str(export)}]})
    assert not ingest(config).failed
    result = estimate(plan_inputs({"params": "1B", "tokens": "93.6B", "gpu": "A100", "gpus": 10, "mfu": "0.5",
                                   "price_per_gpu_hour": "2"}), config)
    register_plan(Lake(config.lake), plan_from_estimate(result, name="run-1", project=INJECTIONS[0],
                                                        experiment=INJECTIONS[1], start="2026-11-28"))
    return config


def test_same_day_twice_gives_byte_identical_files(tmp_path):
    config = demo_config(tmp_path)
    first = write_report(config, DAY, str(tmp_path / "out"))
    before = {name: (tmp_path / "out" / "2026-11-29" / name).read_bytes() for name in first.files}
    second = write_report(config, DAY, str(tmp_path / "out"))
    after = {name: (tmp_path / "out" / "2026-11-29" / name).read_bytes() for name in second.files}
    assert before == after and {"report.html", "report.json", "summary.md"} <= set(before)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["2026-11-29"]  # no staging left behind


def test_default_location_is_beside_the_lake(tmp_path):
    config = demo_config(tmp_path)
    result = write_report(config, DAY)
    assert result.html == str(tmp_path / "reports" / "2026-11-29" / "report.html")


def test_freshness_and_plans_come_from_the_lake(tmp_path):
    config = demo_config(tmp_path)
    write_report(config, DAY, str(tmp_path / "out"))
    data = json.loads((tmp_path / "out" / "2026-11-29" / "report.json").read_text())
    sections = {s["key"]: s for s in data["sections"]}
    (freshness,) = sections["freshness"]["tables"]
    (row,) = freshness["rows"]
    assert (row["source"], row["status"], row["data_through"], row["hours_behind"]) == \
        ("focus-main", "ok", "2026-11-30T00:00:00Z", 0)
    (plans,) = sections["plans"]["tables"]
    (plan,) = plans["rows"]
    # 100 h on 10 A100s from 2026-11-28: by the end of the 29th, 48 of 100 hours → 48% of $2,000 compute
    assert plan["project"] == INJECTIONS[0]
    assert Decimal(plan["planned_to_date_low"]) > Decimal("960")


def test_waste_sums_open_findings_by_rule_and_lists_the_top_ones(tmp_path):
    config = demo_config(tmp_path)
    lake = Lake(config.lake)
    store_findings(lake, [
        finding("a", "idle-gpu", "1708.90", team=INJECTIONS[0], severity="critical"),
        finding("b", "idle-gpu", "12.50", team="eval"),
        finding("c", "checkpoint-sprawl", "300", team=FORMULAS[0]),
        finding("d", "checkpoint-sprawl", "999", status="acknowledged"),
    ])
    write_report(config.model_copy(update={"report": config.report.model_copy(update={"top": 2})}), DAY,
                 str(tmp_path / "out"))
    folder = tmp_path / "out" / "2026-11-29"
    data = json.loads((folder / "report.json").read_text())
    waste = next(s for s in data["sections"] if s["key"] == "waste")
    by_rule, top = waste["tables"]
    assert [(r["rule"], r["findings"], r["critical"], r["monthly_waste_usd"]) for r in by_rule["rows"]] == [
        ("idle-gpu", 2, 1, "1721.40"), ("checkpoint-sprawl", 1, 0, "300.00")]
    assert [r["id"] for r in top["rows"]] == ["a", "c"]
    assert (folder / "open_findings.csv").read_text().count("'=HYPERLINK") == 1
    assert "$1,721.40" in (folder / "report.html").read_text()


def finding(id_, rule, waste, *, team="pretrain", severity="warning", status="open"):
    seen = datetime(2026, 11, 28, tzinfo=timezone.utc)
    return Finding(id=id_, rule=rule, severity=severity, resource_id=f"i-{id_}", team=team,
                   monthly_waste_usd=Decimal(waste), summary=f"{rule} on i-{id_}", first_seen=seen, last_seen=seen,
                   status=status)


def test_sections_without_a_data_source_say_so_and_show_no_numbers(tmp_path):
    config = demo_config(tmp_path)
    write_report(config, DAY, str(tmp_path / "out"))
    data = json.loads((tmp_path / "out" / "2026-11-29" / "report.json").read_text())
    missing = [s for s in data["sections"] if not s["available"]]
    assert all(s["tables"] == [] and s["note"].startswith("Not available yet") for s in missing)
    html = (tmp_path / "out" / "2026-11-29" / "report.html").read_text()
    assert all(s["note"] in html for s in missing)


def test_csv_cells_that_look_like_formulas_are_neutralised_and_numbers_stay_numbers():
    text = render_csvs(sample_report())["top_experiments.csv"]
    lines = text.splitlines()
    assert lines[0] == "experiment,currency,cost"
    assert [line.split(",")[0].strip('"') for line in lines[1:]] == ["'" + f.replace('"', '""') for f in FORMULAS]
    assert all(line.endswith(",EUR,-5") for line in lines[1:])


def test_markdown_summary_makes_tag_values_inert():
    assert md("[x](http://evil) <b>") == r"\[x\]\(http://evil\) &lt;b&gt;"
    summary = render_markdown(sample_report())
    assert "<script>" not in summary and "<img" not in summary
    assert r"&lt;script&gt;alert\(1\)&lt;/script&gt;" in summary


def test_html_escapes_every_label():
    html = render_files(sample_report())["report.html"].decode()
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # ours, allowed by hash in the Content-Security-Policy


def test_a_failed_write_leaves_the_previous_report_intact(tmp_path, monkeypatch):
    folder = tmp_path / "out" / "2026-11-29"
    write_local({"report.html": b"old", "old.csv": b"x"}, folder)
    real_open = open

    def failing_open(path, mode="r", *args, **kwargs):
        if "w" in mode and str(path).endswith("summary.md"):
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(Exception, match="No space left"):
        write_local({"report.html": b"new", "summary.md": b"new"}, folder)
    monkeypatch.undo()
    assert (folder / "report.html").read_bytes() == b"old"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["2026-11-29"]
    write_local({"report.html": b"new"}, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["report.html"]  # the stale CSV is gone


def test_upload_to_s3(tmp_path):
    config = demo_config(tmp_path)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="finance")
        result = write_report(config, DAY, "s3://finance/spendlake/daily")
        listed = s3.list_objects_v2(Bucket="finance")["Contents"]
        keys = sorted(o["Key"] for o in listed)
        html = s3.get_object(Bucket="finance", Key="spendlake/daily/2026-11-29/report.html")
        local = write_report(config, DAY, str(tmp_path / "out"))
        assert html["ContentType"] == "text/html; charset=utf-8"
        assert html["Body"].read() == (tmp_path / "out" / "2026-11-29" / "report.html").read_bytes()
    assert result.location == "s3://finance/spendlake/daily/2026-11-29/"
    assert keys == sorted(f"spendlake/daily/2026-11-29/{name}" for name in local.files)


def test_upload_to_a_missing_bucket_fails_with_a_hint(tmp_path):
    config = demo_config(tmp_path)
    with mock_aws():
        result = CliRunner().invoke(cli, ["--config", _write_config(tmp_path, config), "report", "--date",
                                          "2026-11-29", "--out", "s3://nope/x"])
    assert result.exit_code == 3 and "s3:PutObject" in result.stderr


def test_cli_writes_the_report_and_prints_where(tmp_path):
    config = demo_config(tmp_path)
    result = CliRunner().invoke(cli, ["--config", _write_config(tmp_path, config), "report", "--date",
                                      "2026-11-29", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "out" / "2026-11-29" / "report.html") in result.output
    bad = CliRunner().invoke(cli, ["--config", _write_config(tmp_path, config), "report", "--date", "29/11/2026"])
    assert bad.exit_code == 2 and "YYYY-MM-DD" in bad.stderr


def test_report_day_defaults_to_yesterday():
    from datetime import datetime, timezone

    assert report_day(None, now=datetime(2026, 12, 1, 6, tzinfo=timezone.utc)) == date(2026, 11, 30)
    with pytest.raises(UsageError):
        report_day("yesterday")


def _write_config(tmp_path, config) -> str:
    path = tmp_path / "spendlake.yaml"
    sources = "".join(f"  - {{name: {s.name}, kind: {s.kind}, location: '{s.location}'}}\n" for s in config.sources)
    path.write_text(f"lake: {config.lake}\nsources:\n{sources}")
    return str(path)
