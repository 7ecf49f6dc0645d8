"""The daily report files: numbers that tie out to `spendlake attribute`, deterministic and
atomic writes, escaping, S3 upload, and honesty about sections without data."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timezone
from decimal import Decimal

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

from attribution_helpers import config as lake_config, line, make_lake
from report_fixtures import FORMULAS, INJECTIONS, org_config, sample_report
from service.cli.main import cli
from service.core.errors import UsageError
from service.core.publish import removed_if_failed, write_local
from service.planning.estimate import Span
from service.planning.plans import Plan, register_plan
from service.report.write import report_day, write_report
from service.report.render import md, render_csvs, render_files

DAY = date(2026, 11, 29)  # a Sunday: weekend rhythm 0.85, and pretrain jumps by 40%


@pytest.fixture(scope="module")
def org(tmp_path_factory):
    root = tmp_path_factory.mktemp("org")
    config = org_config(root)
    config_file = root / "spendlake.yaml"
    config_file.write_text(f"lake: {config.lake}\nsources:\n"
                           f"  - {{name: focus-main, kind: focus, location: '{config.sources[0].location}'}}\n")
    result = write_report(config, DAY, str(root / "out"))
    return config, str(config_file), root / "out" / "2026-11-29", result


def sections(folder):
    data = json.loads((folder / "report.json").read_text())
    return data, {s["key"]: s for s in data["sections"]}


def table(section, key):
    return next(t for t in section["tables"] if t["key"] == key)


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", config_file, *args], catch_exceptions=False)


@pytest.mark.slow
def test_totals_equal_spendlake_attribute_for_the_same_windows(org):
    _, config_file, folder, _ = org
    _, by_key = sections(folder)
    totals = {row["window"]: row for row in table(by_key["spend"], "totals")["rows"]}
    for window, since, until in (("day", "2026-11-29", "2026-11-30"), ("mtd", "2026-11-01", "2026-11-30"),
                                 ("previous_mtd", "2026-10-01", "2026-10-30")):
        cli = json.loads(spendlake(config_file, "attribute", "--since", since, "--until", until,
                                   "--format", "json").output)
        assert [(t["currency"], t["cost"]) for t in cli["totals"]] == [("USD", totals[window]["cost"])]
        assert (cli["since"], cli["until"]) == (totals[window]["since"], totals[window]["until"])


def test_spend_by_team_day_and_month_to_date_against_hand_numbers(org):
    _, _, folder, _ = org
    data, by_key = sections(folder)
    teams = {row["team"]: row for row in table(by_key["spend"], "spend_by_team")["rows"]}
    # pretrain: (4,200 + 2,100) × 0.85 weekend × 1.4 jump = 7,497 on Sunday; 5,355 on Saturday
    assert Decimal(teams["pretrain"]["day_cost"]) == Decimal("7497")
    assert Decimal(teams["pretrain"]["day_previous"]) == Decimal("5355")
    assert teams["pretrain"]["day_change_pct"] == "40.0"
    assert Decimal(teams["unallocated"]["mtd_cost"]) == 29 * 250  # untagged S3, every day of November
    assert teams[INJECTIONS[0]]["day_cost"] is not None
    (mover,) = table(by_key["spend"], "top_movers")["rows"]
    assert (mover["team"], mover["project"], Decimal(mover["change"])) == ("pretrain", "llm-7b", Decimal("2142"))
    day = next(h for h in data["headlines"] if h["label"] == "Day, billed (USD)")
    assert Decimal(day["value"]) == Decimal("7497") + Decimal("1275") + Decimal("765") + Decimal("510") + \
        Decimal("255") + Decimal("250")


def test_a_movers_rise_is_signed_as_its_fall_is(org):
    """The top movers' change read "$2,142.00" for a rise beside "−$34,845.21" for a fall (demo):
    on the page and in summary.md a rise is "+$2,142.00", coloured as the change % is."""
    folder = org[2]
    assert "- pretrain / llm-7b: +$2,142.00\n" in (folder / "summary.md").read_text()
    assert '<td class="num up">+$2,142.00</td>' in (folder / "report.html").read_text()
    assert ",2142" in (folder / "top_movers.csv").read_text()  # a number still, unsigned


def test_unallocated_share_trend_and_experiments(org):
    _, _, folder, _ = org
    _, by_key = sections(folder)
    shares = {row["dimension"]: row for row in table(by_key["unallocated"], "unallocated")["rows"]}
    assert Decimal(shares["team"]["unallocated_cost"]) == 7250
    assert Decimal(shares["team"]["share_pct"]) == (Decimal(7250) * 100 / Decimal(shares["team"]["total_cost"])) \
        .quantize(Decimal("0.1"))
    trend = table(by_key["trend"], "daily_spend_by_team")["rows"]
    assert len({row["period"] for row in trend}) == 30 and trend[0]["period"] == "2026-10-31"
    experiments = table(by_key["experiments"], "top_experiments")["rows"]
    assert experiments[0]["experiment"] == "7b-base"
    assert FORMULAS[0] in [row["experiment"] for row in experiments]
    assert (folder / "top_experiments.csv").read_text().count("'" + FORMULAS[0].replace('"', '""')) == 1


def test_budgets_show_actual_forecast_and_lines(org):
    _, _, folder, _ = org
    _, by_key = sections(folder)
    rows = {r["budget"]: r for r in table(by_key["budgets"], "budgets")["rows"]}
    pretrain, eval_ = rows["pretrain-gpu"], rows["eval"]
    assert Decimal(pretrain["actual"]) == Decimal("176337")  # pretrain's month to date, as in spend_by_team
    assert pretrain["used_pct"] == "98.0"  # 176,337 / 180,000
    # one day left, a Monday: + the mean of the last four Mondays (6,300) = 182,637 > 180,000
    assert Decimal(pretrain["forecast"]) == Decimal("182637") and pretrain["status"] == "forecast to exceed"
    assert pretrain["lines"] == "50%, 80%, 100%"
    assert Decimal(eval_["actual"]) == Decimal("16590") and eval_["status"] == "ok"
    html = (folder / "report.html").read_text()
    assert "98% used, forecast 101%" in html


def test_plan_vs_actual_and_freshness(org):
    _, _, folder, _ = org
    _, by_key = sections(folder)
    (plan,) = table(by_key["plans"], "plans")["rows"]
    # llm-7b from the 28th: 5,355 + 7,497 attributed
    assert Decimal(plan["actual_to_date"]) == Decimal("12852")
    # 48 h into a 56-72 h run, either scenario spends 1,024 GPUs × $4 an hour: $196,608, plus < $1 of storage
    assert plan["planned_to_date_low"] == plan["planned_to_date_high"]
    assert Decimal(plan["planned_to_date_low"]).quantize(Decimal(1)) == Decimal("196609")
    assert plan["status"] == "under plan"
    html = (folder / "report.html").read_text()
    assert "llm-7b-base: cumulative spend vs plan (USD)" in html
    assert html.count("<polyline") == 3  # actual, planned low and high (the optimistic run ends sooner)
    (source,) = table(by_key["freshness"], "freshness")["rows"]
    assert (source["source"], source["status"], source["data_through"], source["hours_behind"]) == \
        ("focus-main", "ok", "2026-11-30T00:00:00Z", 0)


def test_waste_by_rule_and_top_findings(org):
    _, _, folder, _ = org
    _, by_key = sections(folder)
    rules = table(by_key["waste"], "waste_by_rule")["rows"]
    assert [(r["rule"], r["findings"], r["monthly_waste_usd"]) for r in rules] == [
        ("idle-gpu", 1, "1708.90"), ("checkpoint-sprawl", 1, "312.40")]
    assert [r["team"] for r in table(by_key["waste"], "open_findings")["rows"]] == ["pretrain", INJECTIONS[0]]


@pytest.mark.slow
def test_same_day_twice_gives_byte_identical_files(org):
    config, _, folder, first = org
    before = {name: (folder / name).read_bytes() for name in first.files}
    again = write_report(config, DAY, str(folder.parent))
    assert {name: (folder / name).read_bytes() for name in again.files} == before
    assert {"report.html", "report.json", "summary.md", "spend_by_team.csv"} <= set(before)
    assert sorted(p.name for p in folder.parent.iterdir()) == ["2026-11-29"]  # no staging left behind


def test_sections_without_a_data_source_say_so_and_show_no_numbers(org):
    _, _, folder, _ = org
    data, _ = sections(folder)
    # every data source of this build exists now that the spend-anomaly rule does; the
    # unallocated-spend case of "not available" is pinned in the anomalies test below
    assert [s["key"] for s in data["sections"] if not s["available"]] == []


def test_html_and_markdown_escape_tag_values(org):
    _, _, folder, _ = org
    html = (folder / "report.html").read_text()
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # ours, allowed by hash in the Content-Security-Policy
    summary = (folder / "summary.md").read_text()
    assert "<script>" not in summary and "<img" not in summary
    assert md("[x](http://evil) <b>") == r"\[x\](http://evil) &lt;b&gt;"  # no link without its brackets
    assert "- &lt;script&gt;alert(1)&lt;/script&gt;: $8,295.00" in summary  # 29 days × (300 or 255)


def test_every_table_on_the_page_links_its_csv_beside_it(org):
    """Finance opens the page (served at /reports/latest/) and takes a table to a spreadsheet: each
    table's CSV is a link where the table is, not a file name to find in the folder."""
    _, _, folder, _ = org
    html = (folder / "report.html").read_text()
    linked = re.findall(r'<a (?:class="csv" )?href="([^"]+)">', html)
    data, _ = sections(folder)
    tables = [t["key"] for s in data["sections"] for t in s["tables"]]
    assert sorted(set(linked) - {"report.json"}) == sorted(f"{key}.csv" for key in tables)
    assert all((folder / name).is_file() for name in linked)
    assert html.count('<a class="csv" href=') == html.count("<h3>")  # one beside each table's heading


def test_62_a_right_to_left_override_in_a_tag_cannot_turn_the_summarys_amounts_around():
    r"""Chat shows `- \u202eevil: $7.09` as `- 90.7$ :live`: the control is shown as its escape."""
    assert md("\u202eevil") == "\\\\u202eevil"  # Markdown for a literal `\u202eevil`
    assert md("\u2067x\u200f") == "\\\\u2067x\\\\u200f"
    assert md("مرحبا team") == "مرحبا team"  # right-to-left text itself stays as written


def test_34_a_terminal_escape_in_a_job_value_is_shown_not_run_by_cat_summary_md():
    report = sample_report()
    table = report.sections[0].tables[0]
    table.rows[0]["team"] = "nlp\x1b]0;owned\x07\x9b2J"  # OSC (retitle), C1 CSI (clear)
    table.markdown = (("team",), "mtd_cost")  # in the summary, as the spend tables are
    summary = render_files(report)["summary.md"].decode()
    assert "- nlp\\\\x1b\\]0;owned\\\\x07\\\\x9b2J: " in summary  # Markdown for a literal `\x1b]0;owned...`
    assert not any(ch in summary for ch in "\x1b\x07\x9b")


def test_62_a_bidi_override_in_a_tag_is_shown_as_its_escape_on_the_page():
    report = sample_report()
    hostile = "\u202eevil"
    report.sections[0].tables[0].rows[0]["team"] = hostile  # a table cell and its sentence
    series = report.sections[1].charts[0].series
    series[hostile] = series.pop("pretrain")  # a chart's tooltip
    html = render_files(report)["report.html"].decode()
    assert "\u202e" not in html and html.count("\\u202eevil") >= 2  # the cell and the chart (summary.md: md)


def test_a_nul_or_escape_in_a_tag_is_shown_as_its_escape_on_the_page():
    """A tag value holding NUL or ESC went raw into report.html (HTML forbids them in text)."""
    report = sample_report()
    report.sections[0].tables[0].rows[0]["team"] = "nul\x00esc\x1b"
    html = render_files(report)["report.html"].decode()
    assert "\x00" not in html and "\x1b" not in html and "nul\\x00esc\\x1b" in html


def test_csv_cells_that_look_like_formulas_are_neutralised_and_numbers_stay_numbers():
    lines = render_csvs(sample_report())["top_experiments.csv"].splitlines()
    assert lines[0] == "experiment,currency,cost"
    assert [line.split(",")[0].strip('"') for line in lines[1:]] == ["'" + f.replace('"', '""') for f in FORMULAS]
    assert all(line.endswith(",EUR,-5") for line in lines[1:])


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


def test_a_failed_write_removes_the_folders_it_made_and_keeps_the_users(tmp_path, monkeypatch):
    """A full disk left an empty `<out>` (made for the staging folder beside `<out>/<day>`) that a
    reader takes for a report location; a folder the user made stays, emptied of nothing."""
    real_open = open

    def full_disk(path, mode="r", *args, **kwargs):
        if "w" in mode and str(path).endswith("report.html"):
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    (tmp_path / "mine").mkdir()
    monkeypatch.setattr("builtins.open", full_disk)
    for out in (tmp_path / "new" / "out", tmp_path / "mine"):
        with pytest.raises(Exception, match="No space left"):
            write_local({"report.html": b"new"}, out / "2026-11-29")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"] and not any((tmp_path / "mine").iterdir())


@pytest.mark.parametrize("moment", ["its <out> made", "its <out>/<day> made"])
def test_a_write_beside_a_run_failing_at_once_survives_that_runs_cleanup(tmp_path, monkeypatch, moment):
    """Two runs writing into a new `<out>` at once (the service's report and a user's): the one
    failing removes the folders it made, when empty; the other had just made the same folder (its
    staging folder's `<out>`, or `<out>/<day>` to rename its files into) and failed with 'No such
    file or directory'. It now makes the folder again and writes its report."""
    import os
    from pathlib import Path

    folder = tmp_path / "out" / "2026-11-29"
    failing = removed_if_failed(folder)
    failing.__enter__()  # started before either folder existed: it made them, as far as it knows

    def other_run_fails():
        if not fired:
            fired.append(True)
            assert failing.__exit__(OSError, OSError(28, "No space left on device"), None) is False

    fired: list[bool] = []
    real_mkdir, real_replace = Path.mkdir, os.replace

    def mkdir(self, *args, **kwargs):
        real_mkdir(self, *args, **kwargs)
        if moment == "its <out> made" and self == folder.parent:
            other_run_fails()

    def replace(source, target):
        if moment == "its <out>/<day> made":
            other_run_fails()
        real_replace(source, target)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(os, "replace", replace)
    write_local({"report.html": b"mine", "summary.md": b"mine"}, folder, last="report.html")
    monkeypatch.undo()
    assert fired and sorted(p.name for p in folder.parent.iterdir()) == ["2026-11-29"]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {"report.html": b"mine", "summary.md": b"mine"}


@pytest.mark.slow
def test_upload_to_s3(org):
    config, _, folder, local = org
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="finance")
        result = write_report(config, DAY, "s3://finance/spendlake/daily")
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="finance")["Contents"])
        html = s3.get_object(Bucket="finance", Key="spendlake/daily/2026-11-29/report.html")
        assert html["ContentType"] == "text/html; charset=utf-8"
        assert html["Body"].read() == (folder / "report.html").read_bytes()
    assert result.location == "s3://finance/spendlake/daily/2026-11-29/"
    assert keys == sorted(f"spendlake/daily/2026-11-29/{name}" for name in local.files)


@pytest.mark.slow
def test_upload_to_a_missing_bucket_fails_with_a_hint(org):
    _, config_file, _, _ = org
    with mock_aws():
        result = CliRunner().invoke(cli, ["--config", config_file, "report", "--date", "2026-11-29",
                                          "--out", "s3://nope/x"])
    assert result.exit_code == 3 and "s3:PutObject" in result.stderr


@pytest.mark.slow
def test_cli_writes_the_report_where_configured_and_prints_where(org, tmp_path):
    _, config_file, _, _ = org
    result = spendlake(config_file, "report", "--date", "2026-11-29", "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert str(tmp_path / "out" / "2026-11-29" / "report.html") in result.output
    bad = CliRunner().invoke(cli, ["--config", config_file, "report", "--date", "29/11/2026"])
    assert bad.exit_code == 2 and "YYYY-MM-DD" in bad.stderr


def test_default_location_is_beside_the_lake():
    from service.core.config import parse_config
    from service.report.write import default_out

    assert default_out(parse_config({"lake": "/data/spend/lake"})) == "/data/spend/reports"
    assert default_out(parse_config({"lake": "/x/lake", "report": {"out": "s3://b/p"}})) == "s3://b/p"


def test_report_day_defaults_to_yesterday():
    assert report_day(None, now=datetime(2026, 12, 1, 6, tzinfo=timezone.utc)) == date(2026, 11, 30)
    with pytest.raises(UsageError):
        report_day("yesterday")


def test_a_lake_whose_only_data_is_part_of_a_day_reports_that_day_by_default(tmp_path):
    """The default day is the data's last whole day, the day before the one its data ends in; on
    a lake whose data is the first hours of one day (a new export's first delivery, Google's
    detailed sample: 2022-08-01 03:00-08:00) that is a day before any bill: `report` wrote "no
    bill for July 2022 to report" and no Bills table. That day is reported (its figures not all
    in, as the page says); once a whole day is there, it is the last whole day again."""
    lake = make_lake(tmp_path / "a", [line("2026-11-02 03:00", "1.25"), line("2026-11-02 07:00", "2")])
    assert report_day(None, lake=lake) == date(2026, 11, 2)
    lake = make_lake(tmp_path / "b", [line("2026-11-01 23:00", "1.25"), line("2026-11-02 07:00", "2")])
    assert report_day(None, lake=lake) == date(2026, 11, 1)


def test_a_date_written_as_asked_that_names_no_day_says_why():
    """`--date 2026-02-30` said "cannot read '2026-02-30' as a date — use YYYY-MM-DD", the form it was in;
    it now says why, as `--since 2026-11-31` does."""
    with pytest.raises(UsageError) as refused:
        report_day("2026-02-30")
    assert str(refused.value) == ("--date: '2026-02-30' is not a valid date (day is out of range for month) "
                                  "— use YYYY-MM-DD, e.g. 2026-02-28")
    with pytest.raises(UsageError) as refused:
        report_day("yesterday")
    assert str(refused.value) == "--date: cannot read 'yesterday' as a date — use YYYY-MM-DD"


def test_a_time_given_as_the_day_says_it_is_a_time_and_names_its_day():
    """`--date 2026-12-05T00:00` (a scheduler's timestamp) said "'2026-12-05T00:00' is not a valid date — use
    YYYY-MM-DD, e.g. 2026-02-28", though it names a day; it now says it is a time and which UTC day to give."""
    with pytest.raises(UsageError) as refused:
        report_day("2026-12-05T00:00")
    assert str(refused.value) == "--date: '2026-12-05T00:00' is a time, not a day — use YYYY-MM-DD: 2026-12-05"
    with pytest.raises(UsageError) as refused:
        report_day("2026-12-05T22:30:00-05:00")  # the report's days are UTC ones
    assert str(refused.value) == ("--date: '2026-12-05T22:30:00-05:00' is a time, not a day "
                                  "— use YYYY-MM-DD: 2026-12-06 (the UTC day)")


def test_render_is_pure():
    assert render_files(sample_report()) == render_files(sample_report())


@pytest.mark.slow
def test_top_n_folds_the_rest_into_other_and_keeps_the_total(org, tmp_path):
    config, _, folder, _ = org
    narrow = config.model_copy(update={"report": config.report.model_copy(update={"top": 3})})
    write_report(narrow, DAY, str(tmp_path))
    _, by_key = sections(tmp_path / "2026-11-29")
    rows = table(by_key["spend"], "spend_by_team")["rows"]
    assert [r["team"] for r in rows] == ["pretrain", "inference", "data", "other"]
    (mtd,) = [r for r in table(by_key["spend"], "totals")["rows"] if r["window"] == "mtd"]
    assert sum(Decimal(r["mtd_cost"]) for r in rows) == Decimal(mtd["cost"])
    assert Decimal(rows[-1]["day_cost"]) == Decimal("510") + Decimal("255") + Decimal("250")  # eval, <script>, unallocated


@pytest.mark.slow
def test_currencies_are_never_added_together(tmp_path):
    from report_fixtures import focus_export
    from service.core.config import parse_config
    from service.ingest.billing import ingest

    days = [date(2026, 11, 27), date(2026, 11, 28), date(2026, 11, 29)]
    usd = focus_export(tmp_path / "us", [(d, "100", {"team": "pretrain"}, "EC2") for d in days])
    eur = focus_export(tmp_path / "eu", [(d, "40", {"team": "eval"}, "VM") for d in days], currency="EUR")
    config = parse_config({"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus-us", "kind": "focus", "location": str(usd)},
        {"name": "focus-eu", "kind": "focus", "location": str(eur)}]})
    assert not ingest(config).failed
    write_report(config, DAY, str(tmp_path / "out"))
    data, by_key = sections(tmp_path / "out" / "2026-11-29")
    mtd = {r["currency"]: r["cost"] for r in table(by_key["spend"], "totals")["rows"] if r["window"] == "mtd"}
    assert {k: Decimal(v) for k, v in mtd.items()} == {"EUR": 120, "USD": 300}
    assert [h["label"] for h in data["headlines"]][:4] == ["Day, billed (EUR)", "Day, billed (USD)",
                                                           "Month to date, billed (EUR)", "Month to date, billed (USD)"]
    html = (tmp_path / "out" / "2026-11-29" / "report.html").read_text()
    # as many team-days of each: the first alphabetically is drawn, the other named under the chart
    assert "Daily spend by team, billed (EUR)" in html and "EUR 120.00" in html
    assert ("The chart draws EUR only, the first alphabetically of those with as many rows (currencies are never "
            "converted): $300.00 over the same days is left out; daily_spend_by_team.csv has it.") in html
    assert [r["source"] for r in table(by_key["freshness"], "freshness")["rows"]] == ["focus-eu", "focus-us"]


@pytest.mark.slow  # its own organisation lake, two reports
def test_anomalies_and_unallocated_causes_show_once_their_rules_exist(tmp_path, monkeypatch):
    from rules.base import Finding, Rule
    from service.core.registry import RULES
    from service.core.lake import Lake
    from service.findings.store import store_findings

    config = org_config(tmp_path / "org")
    write_report(config, DAY, str(tmp_path / "before"))
    _, by_key = sections(tmp_path / "before" / "2026-11-29")
    assert by_key["anomalies"]["note"] == "No open spend anomalies in the last rules run."
    assert "No open unallocated-spend findings in the last rules run." in by_key["unallocated"]["note"]

    for name in ("spend-anomaly", "unallocated-spend"):
        monkeypatch.setitem(RULES.added, name, type(name, (Rule,), {"name": name}))
    seen = datetime(2026, 11, 29, tzinfo=timezone.utc)
    store_findings(Lake(config.lake), [Finding(
        id="u1", rule="unallocated-spend", severity="warning", resource_id="dimension=team",
        category="ownership", impact_usd=Decimal("7500"), summary="2.6% of spend has no team: Amazon S3 $7,250",
        first_seen=seen, last_seen=seen), Finding(
        id="a1", rule="spend-anomaly", severity="warning", resource_id="team=pretrain/service=Amazon EC2",
        team="pretrain", category="overspend", impact_usd=Decimal("2142.00"), summary="pretrain EC2 spend 40% above expected",
        evidence={"root_causes": [{"dimension": "resource", "value": "i-0abc", "impact_usd": "1500.5"},
                                  {"dimension": "usage_type", "value": INJECTIONS[0], "impact_usd": "641.5"}]},
        first_seen=seen, last_seen=seen)])
    write_report(config, DAY, str(tmp_path / "after"))
    _, by_key = sections(tmp_path / "after" / "2026-11-29")
    (row,) = table(by_key["anomalies"], "anomalies")["rows"]
    assert row["root_causes"] == f"resource i-0abc: $1,500.50; usage_type {INJECTIONS[0]}: $641.50"
    assert row["team"] == "pretrain"
    assert by_key["waste"]["tables"] == []  # anomalies and unallocated spend are not waste
    (cause,) = table(by_key["unallocated"], "unallocated_causes")["rows"]
    assert cause["summary"].startswith("2.6% of spend has no team")
    assert "&lt;script&gt;" in (tmp_path / "after" / "2026-11-29" / "report.html").read_text()


def test_a_started_plan_whose_project_no_line_carries_is_unknown_not_under_plan(tmp_path):
    tags = {"project": "llm-7b", "experiment": "base"}
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", "100", end=f"2026-11-{d + 1:02d}T00:00:00", tags=tags)
                                for d in range(20, 30)])  # to the report day's end
    for name, project, experiment in (("typo", "llm-7c", None), ("known", "llm-7b", None),
                                      ("new-experiment", "llm-7b", "sft")):
        register_plan(lake, Plan(name=name, project=project, experiment=experiment,
                                 start=datetime(2026, 11, 25, tzinfo=timezone.utc),
                                 run_hours=Span(Decimal(240), Decimal(240)),
                                 retention_days=0, compute_cost=Span(Decimal(5000), Decimal(5000)),
                                 storage_cost=Span(Decimal(0), Decimal(0)), inputs={}))
    write_report(lake_config(lake=lake), DAY, str(tmp_path / "out"))
    _, by_key = sections(tmp_path / "out" / DAY.isoformat())
    status = {row["plan"]: (row["status"], row["actual_to_date"]) for row in table(by_key["plans"], "plans")["rows"]}
    assert status == {"typo": ("unknown project", "0"), "known": ("under plan", "500.000000000000"),
                      "new-experiment": ("unknown experiment", "0")}, status
    note = by_key["plans"]["note"]
    assert "plan typo: no cost line carries project 'llm-7c'; closest project values: llm-7b." in note, note


def test_a_plans_spend_in_another_currency_is_named_not_silently_left_out(tmp_path):
    # llm-7b spent USD 100 and EUR 250 a day since the plan's start: the USD plan counts the USD,
    # and the note names the EUR (was: under plan at the USD alone, the EUR left out without a word)
    tags = {"project": "llm-7b"}
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", cost, end=f"2026-11-{d + 1:02d}T00:00:00", tags=tags,
                                     currency=currency)
                                for d in range(25, 30) for cost, currency in (("100", "USD"), ("250", "EUR"))])
    register_plan(lake, Plan(name="p", project="llm-7b", experiment=None, start=datetime(2026, 11, 25, tzinfo=timezone.utc),
                             run_hours=Span(Decimal(240), Decimal(240)), retention_days=0,
                             compute_cost=Span(Decimal(5000), Decimal(5000)), storage_cost=Span(Decimal(0), Decimal(0)),
                             inputs={}))
    write_report(lake_config(lake=lake), DAY, str(tmp_path / "out"))
    _, by_key = sections(tmp_path / "out" / DAY.isoformat())
    [row] = table(by_key["plans"], "plans")["rows"]
    assert Decimal(row["actual_to_date"]) == 500
    assert by_key["plans"]["note"] == ("plan p counts USD spend only: EUR 1,250.00 spent since its start is left out "
                                       "(currencies are never converted)."), by_key["plans"]["note"]


def test_a_200000_character_tag_value_is_cut_with_an_ellipsis_in_the_summary_and_on_the_page_not_in_the_csv():
    """break41: summary.md ("for chat") printed a 200,000-character team in full (202 KB), the page a
    cell 200,000 characters long; both now show its first VALUE_LIMIT characters and `…`."""
    from service.report.render import VALUE_LIMIT
    report = sample_report()
    table = report.sections[0].tables[0]
    huge = "x" * 199_990 + "tail-marker"
    table.rows[0]["team"] = huge
    table.markdown = (("team",), "mtd_cost")
    files = render_files(report)
    summary, html = files["summary.md"].decode(), files["report.html"].decode()
    assert len(summary) < 5_000 and "tail-marker" not in summary
    assert f"- {'x' * (VALUE_LIMIT - 1)}…: " in summary
    assert "tail-marker" not in html and len(html) < 100_000
    assert "x" * 32 + "<wbr>" in html and "…" in html
    assert huge in files["spend_by_team.csv"].decode()  # the CSV keeps the whole value
