"""`spendlake plans`: the report's plans vs actual rows (plans.csv) from the command line."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timezone
from decimal import Decimal

import duckdb
import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from attribution_helpers import config as lake_config, declared_sources, line, make_lake
from service.cli.main import cli
from service.core.config import parse_config
from service.core.lake import Lake
from service.planning.estimate import Span
from service.planning.plans import Plan, register_plan
from service.report.sections.plans import plans_as_of, plans_section
from service.report.write import write_report
from service.serve.app import Api

DAY = date(2026, 11, 29)


def plan(name: str, project: str, compute: str, experiment: str | None = None) -> Plan:
    return Plan(name=name, project=project, experiment=experiment, start=datetime(2026, 11, 25, tzinfo=timezone.utc),
                run_hours=Span(Decimal(200), Decimal(240)), retention_days=0,
                compute_cost=Span(Decimal(compute), Decimal(compute) * Decimal("1.2")),  # $25 an hour either way
                storage_cost=Span(Decimal(0), Decimal(0)),
                inputs={})


def small_lake(tmp_path):
    """llm-7b spends USD 100 and EUR 250 a day from the 20th; plans: one on it, one misspelt, one
    starting after the report day's end."""
    tags = {"project": "llm-7b", "experiment": "base"}
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", cost, tags=tags, currency=currency)
                                for d in range(20, 30) for cost, currency in (("100", "USD"), ("250", "EUR"))])
    config_file = tmp_path / "spendlake.yaml"
    config_file.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    return lake, str(config_file)


def spendlake(config_file, *args):
    return CliRunner().invoke(cli, ["--config", config_file, *args], catch_exceptions=False)


def test_plans_prints_the_reports_plans_csv_rows_in_csv_and_json(tmp_path):
    lake, config_file = small_lake(tmp_path)
    for registered in (plan("known", "llm-7b", "5000"), plan("typo", "llm-7c", "5000"),
                       plan("sft", "llm-7b", "800", experiment="sft")):
        register_plan(lake, registered)
    write_report(lake_config(lake=lake), DAY, str(tmp_path / "out"))
    folder = tmp_path / "out" / DAY.isoformat()

    csv = spendlake(config_file, "plans", "--as-of", DAY.isoformat(), "--format", "csv")
    assert csv.exit_code == 0, csv.output
    assert csv.stdout == (folder / "plans.csv").read_text()
    assert "known,llm-7b,,2026-11-25T00:00:00Z" in csv.stdout  # rows, not only the header

    report = json.loads((folder / "report.json").read_text())
    (section,) = [s for s in report["sections"] if s["key"] == "plans"]
    out = spendlake(config_file, "plans", "--as-of", DAY.isoformat(), "--format", "json")
    assert json.loads(out.stdout) == section["tables"][0]["rows"]
    # the lake's data ends at the 29th, 01:00: "known" is set against its plan to then
    assert [row["status"] for row in json.loads(out.stdout)] == ["under plan to data end", "unknown experiment",
                                                                 "unknown project"]
    # money of an estimate in cents, as registered, money of the bill exact (was: "6000.000000000000")
    assert [(row["planned_to_date_high"], row["actual_to_date"], row["planned_total_high"])
            for row in json.loads(out.stdout)][0] == ("3000.00", "500.000000000000", "6000.00")
    # what the report's section says under the table (a value no line carries, spend in EUR), on stderr
    assert "plan typo: no cost line carries project 'llm-7c'" in out.stderr
    assert "plan known counts USD spend only: EUR 1,250.00" in out.stderr


def test_plans_defaults_to_the_reports_day_and_reads_as_of_as_a_date(tmp_path):
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    # the lake's data ends at the 29th, 01:00: the report's default day is the last whole one, the 28th
    default = spendlake(config_file, "plans", "--format", "csv")
    assert default.stdout == spendlake(config_file, "plans", "--as-of", "2026-11-28", "--format", "csv").stdout
    earlier = json.loads(spendlake(config_file, "plans", "--as-of", "2026-11-26", "--format", "json").stdout)
    assert Decimal(earlier[0]["actual_to_date"]) == 200  # the 25th and the 26th
    bad = spendlake(config_file, "plans", "--as-of", "2026-11-31")
    assert bad.exit_code == 2 and "--as-of" in bad.stderr, bad.stderr


def test_plans_table_and_no_plans(tmp_path):
    lake, config_file = small_lake(tmp_path)
    none = spendlake(config_file, "plans", "--format", "table")
    assert none.exit_code == 0
    assert none.stdout.strip() == "No plans registered: `spendlake estimate --register NAME --project P --start DATE`."
    assert json.loads(spendlake(config_file, "plans", "--format", "json").stdout) == []

    register_plan(lake, plan("known", "llm-7b", "5000"))
    table = spendlake(config_file, "plans", "--format", "table", "--as-of", "2026-11-29")
    assert table.exit_code == 0
    # 120 h at $25 an hour by the 29th's end, against USD 100 a day since the 25th
    (row,) = [text for text in table.stdout.splitlines() if "known" in text]
    assert row.count("3,000.00") == 1 and "500.00" in row and "under plan to data end" in row, table.stdout
    assert "plans vs actual, to the end of 2026-11-29" in table.stdout


def test_a_plan_to_date_both_scenarios_agree_on_is_one_figure_beside_the_range_of_the_plan_total(tmp_path, monkeypatch):
    """Mid-run `plan low` and `plan high` read 3,000.00 and 3,000.00, a range that looked broken (walk46): either
    MFU spends the GPUs' price an hour, so the scenarios part only once the faster run ends; the range is in what
    the run costs in all, which the table showed only at its high. Now one figure to date, the total as a range."""
    monkeypatch.setenv("COLUMNS", "150")
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    mid, done = (spendlake(config_file, "plans", "--format", "table", "--as-of", day).stdout.splitlines()
                 for day in ("2026-11-29", "2026-12-06"))
    header = next(text for text in mid if text.startswith("┃"))
    assert "plan low" not in header and "plan high" not in header and "plan total" in header, mid
    (at,) = [i for i, text in enumerate(mid) if "known" in text]
    assert mid[at].count("3,000.00") == 1 and "5,000.00 to" in mid[at] and "6,000.00" in mid[at + 1], mid
    # past the faster run's end (200 h): 5,000 low, 240 h × $25 high, each its own figure
    (at,) = [i for i, text in enumerate(done) if "known" in text]
    assert done[at].count("5,000.00 to") == 2 and done[at + 1].count("6,000.00") == 2, done
    csv = json.loads(spendlake(config_file, "plans", "--format", "json", "--as-of", "2026-11-29").stdout)
    assert [(r["planned_to_date_low"], r["planned_to_date_high"], r["planned_total_low"], r["planned_total_high"])
            for r in csv] == [("3000.00", "3000.00", "5000.00", "6000.00")]  # JSON and CSV keep both figures


def test_the_reports_page_shows_a_plans_low_and_high_as_the_plans_table_does(tmp_path):
    """The page's plans table showed `plan low` $3,000.00 beside `plan high` $3,000.00 mid-run and the plan total
    at its high only, where `spendlake plans` shows one figure to date and the total's range (walk46): the page
    now shows each pair as that table does (CSV and JSON keep both figures)."""
    lake, _ = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    pages = {}
    for day in (DAY, date(2026, 12, 6)):  # mid-run; past the faster run's end (200 h)
        write_report(lake_config(lake=lake), day, str(tmp_path / "out"))
        html = (tmp_path / "out" / day.isoformat() / "report.html").read_text(encoding="utf-8")
        section = html.split("<h2>Plans vs actual", 1)[1].split("<h2>", 1)[0]
        pages[day] = [re.sub(r"<[^>]*>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", section)]
        header = section.split("</thead>")[0]
        assert "plan low" not in header and "plan high" not in header, header
        assert [h in header for h in (">plan to date<", ">plan total<")] == [True, True], header
    assert pages[DAY][5:9] == ["$3,000.00", "$500.00", "under plan to data end", "$5,000.00 to $6,000.00"], pages
    assert pages[date(2026, 12, 6)].count("$5,000.00 to $6,000.00") == 2, pages
    csv = (tmp_path / "out" / DAY.isoformat() / "plans.csv").read_text(encoding="utf-8")
    assert "planned_to_date_low,planned_to_date_high," in csv and ",3000.00,3000.00," in csv, csv


def test_the_plans_table_shows_the_plan_total_at_150_columns(tmp_path, monkeypatch):
    """The table wrote the start and end as ISO times (`2026-11-25T00:00:00Z`, 20 characters each) where
    the report's page writes `2026-11-25 00:00`: 8 columns more, and at 150 columns this plan lost
    `plan total` (what the run was to cost in all, the figure to set against the actual once done)."""
    monkeypatch.setenv("COLUMNS", "150")
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("sft-chat-v5-27", "sft-chat-v5", "47335.23", experiment="sft-chat-v5"))
    table = spendlake(config_file, "plans", "--format", "table", "--as-of", "2026-11-29")
    assert "plan total" in table.stdout and "56,802.28" in table.stdout and "not shown" not in table.output, \
        table.output
    (row,) = [text for text in table.stdout.splitlines() if "sft-chat-v5-27" in text]
    assert "│ 2026-11-25 00:00 │" in row and "T00:00:00Z" not in table.stdout  # as the report's page writes it


def test_plans_on_a_lake_without_a_bill_or_past_its_data_say_so(tmp_path):
    # no bill: every actual would read $0, under plan; the report writes nothing for such a lake either
    empty = tmp_path / "empty"
    config_file = tmp_path / "empty.yaml"
    config_file.write_text(yaml.safe_dump({"lake": str(empty / "lake"), "sources": []}))
    assert "No plans registered" in spendlake(str(config_file), "plans", "--format", "table").stdout
    register_plan(Lake(empty / "lake"), plan("known", "llm-7b", "5000"))
    out = spendlake(str(config_file), "plans", "--format", "csv")
    assert out.exit_code == 3 and out.stdout == "", out.stdout
    assert "is empty: no actual spend to set against the plans — run `spendlake ingest`" in out.stderr, out.stderr

    # a day past the data's end: its actual is not all in yet
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    past = spendlake(config_file, "plans", "--as-of", "2026-11-30", "--format", "json")
    assert past.exit_code == 0
    assert ("the lake's billing data ends at 2026-11-29 01:00 UTC, before the day's end: spend after it is not in "
            "the actual yet, so a status '... to data end' sets it against the plan to then.") in past.stderr, past.stderr
    assert "billing data ends" not in spendlake(config_file, "plans", "--as-of", "2026-11-28").stderr


def test_a_plan_as_of_a_day_past_the_data_is_set_against_its_plan_to_the_datas_end(tmp_path):
    # the data ends at the 29th, 01:00; as of the 30th "fast" ($5 an hour from the 25th) plans $720
    # and $485 to the data's end, "known" $3,600 and $2,425: $500 read "under plan" for both (was),
    # though "fast" has spent more than its plan to the last hour the lake knows
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    register_plan(lake, plan("fast", "llm-7b", "1000"))
    out = spendlake(config_file, "plans", "--as-of", "2026-11-30", "--format", "json")
    assert {row["plan"]: (row["planned_to_date_high"], row["actual_to_date"], row["status"])
            for row in json.loads(out.stdout)} == {
        "fast": ("720.00", "500.000000000000", "over plan to data end"),
        "known": ("3600.00", "500.000000000000", "under plan to data end")}, out.stdout
    assert "status '... to data end' sets it against the plan to then." in out.stderr, out.stderr
    # the report of that day says the same, beside the same rows
    from service.report.sections.plans import plans_section
    section = plans_section(lake_config(lake=lake), lake, date(2026, 11, 30))
    assert [row["status"] for row in section.tables[0].rows] == ["over plan to data end", "under plan to data end"]
    assert "status '... to data end'" in section.note
    # its chart's actual ends with the data, on the 29th, not flat to the 30th (was: $500 on the 30th)
    chart = section.charts[0]
    assert [chart.series["actual"][chart.categories.index(day)] for day in ("2026-11-29", "2026-11-30")] == [500, None]
    # as of the last whole day of data, the plan to that day's end
    rows = json.loads(spendlake(config_file, "plans", "--as-of", "2026-11-28", "--format", "json").stdout)
    assert [row["status"] for row in rows] == ["under plan", "under plan"], rows


def test_the_api_answers_the_rows_the_cli_prints(tmp_path):
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    register_plan(lake, plan("typo", "llm-7c", "5000"))
    api = Api(lake_config(lake=lake), CollectorRegistry())
    response = api.handle("/api/v1/plans", {"as_of": ["2026-11-30"]}, None)
    assert response.status == 200
    body = json.loads(response.body)
    cli_json = spendlake(config_file, "plans", "--as-of", "2026-11-30", "--format", "json")
    assert body["as_of"] == "2026-11-30" and body["rows"] == json.loads(cli_json.stdout)
    assert body["notes"] and all(f"note: {note}" in cli_json.stderr for note in body["notes"])
    assert len(body["notes"]) == 3  # the typo, the EUR left out, and the 30th past the data's end
    bad = api.handle("/api/v1/plans", {"as_of": ["30/11"]}, None)
    assert bad.status == 400 and json.loads(bad.body)["error"]["where"] == "as_of"


def test_the_apis_503_without_a_bill_says_the_lake_and_logs_where_it_is(tmp_path, caplog):
    """The CLI's words, from the one check beside plans_as_of (was: the API's own, "the lake holds no
    bill"), with the lake by name: its path, which the CLI says, was told to any HTTP client; it is
    in the service's log."""
    register_plan(Lake(tmp_path / "lake"), plan("known", "llm-7b", "5000"))
    no_bill = Api(parse_config({"lake": str(tmp_path / "lake"), "sources": []}), CollectorRegistry())
    response = no_bill.handle("/api/v1/plans", {}, None)
    error = json.loads(response.body)["error"]
    assert response.status == 503 and error["hint"] == "run `spendlake ingest`"
    assert error["message"] == "the lake is empty: no actual spend to set against the plans"
    assert str(tmp_path) not in response.body.decode()
    assert f"the lake at {tmp_path / 'lake'} is empty: no actual spend to set against the plans" in caplog.text


def test_an_actual_between_the_scenarios_is_on_plan_when_the_optimistic_one_has_spent_more(tmp_path):
    # the optimistic run (200 h) spends its $5,000 faster than the pessimistic one (240 h) its
    # $5,000: by the 29th's end (120 h) $3,000 and $2,500; $2,700 spent lies between (was: over plan,
    # above "high" though below "low")
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", "540", end=f"2026-11-{d + 1:02d}T00:00:00",
                                     tags={"project": "llm-7b"}) for d in range(25, 30)])
    register_plan(lake, Plan(name="p", project="llm-7b", experiment=None,
                             start=datetime(2026, 11, 25, tzinfo=timezone.utc),
                             run_hours=Span(Decimal(200), Decimal(240)), retention_days=0,
                             compute_cost=Span(Decimal(5000), Decimal(5000)),
                             storage_cost=Span(Decimal(0), Decimal(0)), inputs={}))
    found = plans_as_of(lake_config(lake=lake), lake, DAY)
    [row] = found.rows
    assert (row["planned_to_date_low"], row["planned_to_date_high"]) == (Decimal("3000.00"), Decimal("2500.00"))
    assert row["actual_to_date"] == 2700 and row["status"] == "on plan", row


def test_every_plans_actual_comes_from_one_state_of_the_lake_when_an_ingest_commits_between(tmp_path, monkeypatch):
    # an ingest commits (USD 1,000 more on the 27th) after the first plan's actual was read: the
    # answer is read again, both actuals from the state that stands (was: 500 and 1,500)
    from service.report.sections import plans as plans_module
    from attribution_helpers import relation

    lake, _ = small_lake(tmp_path)
    tags = {"project": "llm-7b", "experiment": "base"}
    for name in ("a", "b"):
        register_plan(lake, plan(name, "llm-7b", "5000"))
    read = plans_module.plan_actual
    actuals: list = []

    def committing(config, lake, plan, until, result=None, snapshot=None):
        actuals.append(read(config, lake, plan, until, result, snapshot))
        if len(actuals) == 1:
            con = lake.connect()
            lines = [line(f"2026-11-{d:02d}T00:00:00", "100", tags=tags) for d in range(20, 30)]
            lake.commit_costs(con, relation(con, [*lines, line("2026-11-27T05:00:00", "1000", tags=tags)]),
                              source="cur", delivery_id="d2", periods=None)
            con.close()
        return actuals[-1]

    monkeypatch.setattr(plans_module, "plan_actual", committing)
    found = plans_as_of(lake_config(lake=lake), lake, DAY)
    assert [row["actual_to_date"] for row in found.rows] == [Decimal(1500), Decimal(1500)], found.rows
    assert len(actuals) == 4  # both plans, twice


def test_a_plan_not_started_or_without_data_since_its_start_says_so_not_on_or_under_plan(tmp_path):
    # the lake's data ends at the 29th, 01:00; as of the 29th: a plan starting on December 1st was
    # "on plan" ($0 of $0), one started at 05:00 on the 29th "under plan" ($0 of $125, no bill read
    # since its start)
    from dataclasses import replace

    lake, config_file = small_lake(tmp_path)
    for name, start in (("later", datetime(2026, 12, 1, tzinfo=timezone.utc)),
                        ("ahead", datetime(2026, 11, 29, 5, tzinfo=timezone.utc)),
                        ("known", datetime(2026, 11, 25, tzinfo=timezone.utc))):
        register_plan(lake, replace(plan(name, "llm-7b", "5000"), start=start))
    rows = json.loads(spendlake(config_file, "plans", "--as-of", "2026-11-29", "--format", "json").stdout)
    assert {row["plan"]: (row["status"], row["planned_to_date_high"], row["actual_to_date"]) for row in rows} == {
        "later": ("not started", "0.00", "0"), "ahead": ("no data yet", "475.00", "0"),
        "known": ("under plan to data end", "3000.00", "500.000000000000")}, rows
    earlier = json.loads(spendlake(config_file, "plans", "--as-of", "2026-11-28", "--format", "json").stdout)
    assert [row["status"] for row in earlier] == ["not started", "under plan", "not started"]  # by name


def test_a_started_plan_with_nothing_spent_since_its_start_says_so_not_under_plan(tmp_path):
    # break49b: a plan on dpo-chat-v5 from 12-03, $0 spent since while the bill runs on, read `under plan`
    # with no note: a run not begun read as a saving. llm-7b spent until the 24th; the plan starts on the 25th
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", "100", tags={"project": project})
                                for d in range(20, 30) for project in ("llm-7b", "other") if project == "other" or d < 25])
    register_plan(lake, plan("dpo", "llm-7b", "5000"))
    found = plans_as_of(lake_config(lake=lake), lake, DAY)
    [row] = found.rows
    assert (row["status"], row["actual_to_date"]) == ("nothing spent yet", 0), row
    assert ("plan dpo: nothing is spent on project llm-7b since its start (2026-11-25 00:00 UTC): its $0 is not a "
            "saving, the run has not begun.") in found.notes, found.notes


def test_spend_after_a_plans_end_is_shown_apart_and_plans_counting_the_same_spend_are_named(tmp_path):
    # break49b: a plan planned to end on 10-27 counted all the project's later spend ($899,347.59 against
    # $82,825.77, over plan); two plans on one project each counted the other's. llm-7b spends USD 100 a day
    # (a line at each midnight) to the 29th; `short` runs 48 h from the 25th: its actual is the 25th and 26th's
    from dataclasses import replace

    lake, config_file = small_lake(tmp_path)
    short = replace(plan("short", "llm-7b", "5000"), run_hours=Span(Decimal(48), Decimal(48)))
    for registered in (short, plan("base", "llm-7b", "800", experiment="base"),
                       replace(plan("sft", "llm-7b", "800", experiment="sft"), start=datetime(2026, 11, 20,
                                                                                              tzinfo=timezone.utc))):
        register_plan(lake, registered)
    result = spendlake(config_file, "plans", "--as-of", "2026-11-29", "--format", "json")
    rows = {row["plan"]: row for row in json.loads(result.stdout)}
    # base, of one experiment from short's start, takes its spend from short: short's actual keeps the rest of the
    # project's, none here (session 51: both counted the 25th and 26th's 200)
    assert (rows["short"]["actual_to_date"], rows["short"]["after_end"], rows["short"]["later_plans"]) == (
        "0.000000000000", "300.000000000000", "200.000000000000"), rows["short"]
    # spent, by base: not "nothing spent in its window"
    assert rows["short"]["status"] == "under plan to data end", rows["short"]
    assert rows["base"]["after_end"] is None  # its planned end (December 5th) not reached
    notes = [line.removeprefix("note: ") for line in result.stderr.splitlines()]
    assert ("plan short kept spending after its planned end (2026-11-27 00:00 UTC): USD 300.00 on project llm-7b "
            "since is not in its actual (after_end).") in notes
    # sft (another experiment, from the 20th) ends where short, the whole project's, starts; only two plans of one
    # scope and one start both count the same spend, and are named: base and twin
    register_plan(lake, plan("twin", "llm-7b", "800", experiment="base"))
    result = spendlake(config_file, "plans", "--as-of", "2026-11-29", "--format", "json")
    rows = {row["plan"]: row for row in json.loads(result.stdout)}
    assert [rows[name]["actual_to_date"] for name in ("base", "twin", "short")] == [
        "500.000000000000", "500.000000000000", "0.000000000000"], rows
    notes = [line.removeprefix("note: ") for line in result.stderr.splitlines()]
    assert [note for note in notes if note.startswith("plans ")] == [
        "plans base and twin cover the same spend (project llm-7b, experiment base from 2026-11-25 00:00 to "
        "2026-12-05 00:00 UTC): each one's actual counts it."], notes


EDITS = {  # a hand edit of the plans file (its record gone, so nothing checks it): what it must say
    "SELECT * REPLACE (NULL::TIMESTAMP AS start) FROM plans": "plan 'known': start: must be a date and time",
    "SELECT * REPLACE (CAST(start AS VARCHAR) AS start) FROM plans": "plan 'known': start: must be a date and time",
    "SELECT * REPLACE (NULL::VARCHAR AS project) FROM plans": "plan 'known': project: must be text, not nothing",
    "SELECT * REPLACE (NULL::INTEGER AS retention_days) FROM plans": "retention_days: must be a whole number",
    "SELECT * REPLACE (-5::DECIMAL(38,12) AS run_hours_high) FROM plans": "run_hours_high: must be at least 0",
    "SELECT * REPLACE (CAST(compute_cost_low AS DOUBLE) AS compute_cost_low) FROM plans":
        "compute_cost_low: must be a decimal number, not the number 5000",
    "SELECT * REPLACE ('known plan' AS name) FROM plans": "name: must be a plan name",
    "SELECT name, project FROM plans": "it lacks the column(s) experiment, start, end,",
    "SELECT * FROM plans UNION ALL SELECT * FROM plans": "plan known is in it more than once",
}


def hand_edit(lake, tmp_path, edit: str):
    """The plans file rewritten by `edit` (SQL on a view `plans`), its record gone as a hand edit's."""
    from service.core.snapshot_ledger import record_file

    path = lake.partition_file("plans", [("source", "estimate"), ("snapshot", "current")])
    con = duckdb.connect()
    con.execute(f"CREATE VIEW plans AS SELECT * FROM read_parquet('{path}')")
    con.execute(f"COPY ({edit}) TO '{tmp_path / 'edited.parquet'}' (FORMAT parquet)")
    con.close()
    (tmp_path / "edited.parquet").replace(path)
    record_file(lake.root, path).unlink()
    return path


@pytest.mark.parametrize("edit", EDITS)
def test_a_hand_edited_plans_file_is_exit_3_naming_it_and_what_is_wrong_never_a_traceback(tmp_path, edit):
    # was: AttributeError, TypeError (exit 1) or two plans of one name
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    path = hand_edit(lake, tmp_path, edit)
    out = spendlake(config_file, "plans", "--format", "json")
    assert out.exit_code == 3 and out.stdout == "", out.output
    assert out.stderr.startswith(f"error: {path}: this lake file cannot be read, it is damaged ("), out.stderr
    assert EDITS[edit] in out.stderr and "spendlake estimate --register" in out.stderr, out.stderr
    response = Api(lake_config(lake=lake), CollectorRegistry()).handle("/api/v1/plans", {}, None)
    assert response.status == 503 and EDITS[edit] in json.loads(response.body)["error"]["message"]


def test_a_plan_whose_project_spent_in_another_currency_only_says_so_not_under_plan(tmp_path):
    # llm-7b spends EUR 250 a day and no USD: the USD plan read $0, "under plan" (was)
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", "250", tags={"project": "llm-7b"}, currency="EUR")
                                for d in range(20, 30)])
    register_plan(lake, plan("known", "llm-7b", "5000"))
    found = plans_as_of(lake_config(lake=lake), lake, DAY)
    [row] = found.rows
    assert (row["status"], row["actual_to_date"]) == ("other currency", 0), row
    assert found.notes[0] == ("plan known counts USD spend only: EUR 1,250.00 spent since its start is left out "
                              "(currencies are never converted)."), found.notes


def test_a_plan_on_an_unknown_project_among_many_ends_its_note_with_one_full_stop(tmp_path):
    # twelve known projects: the closest values are cut short with "...", and the note said "...."
    lake = make_lake(tmp_path, [line("2026-11-24T00:00:00", "1", tags={"project": f"team-{n:02d}"})
                                for n in range(12)])
    register_plan(lake, plan("typo", "zzz", "5000"))
    note = plans_as_of(lake_config(lake=lake), lake, date(2026, 11, 27)).notes[0]
    assert note.startswith("plan typo: no cost line carries project 'zzz'; known project values: team-00, ")
    assert note.endswith(", ...") and not note.endswith("...."), note


def test_a_plans_chart_runs_until_its_planned_curve_reaches_the_plans_total(tmp_path):
    # storage is paid 30 days past the run's end: the chart stopped at the run's end, its planned
    # line $100 short of the table's plan total. That end is midnight of January 4th: the curve
    # reaches the total at the end of the 3rd, the chart's last day (was: one more, flat)
    from dataclasses import replace
    from service.report.sections.plans import plans_section

    lake, _ = small_lake(tmp_path)
    register_plan(lake, replace(plan("known", "llm-7b", "5000"), retention_days=30,
                                storage_cost=Span(Decimal(100), Decimal(100))))
    [chart] = plans_section(lake_config(lake=lake), lake, DAY).charts
    [row] = plans_as_of(lake_config(lake=lake), lake, DAY).rows
    assert chart.series["planned (high)"][-1] == row["planned_total_high"] == Decimal("6100.00"), chart.series
    assert chart.categories[-1] == "2027-01-03"  # 240 h from November 25th, and 30 days
    assert chart.series["planned (high)"][-2] < row["planned_total_high"]


def test_a_plan_started_before_the_lakes_billing_data_begins_is_partial_data_unless_already_over(tmp_path):
    # the lake's bill begins on the 20th (USD 100 a day): a plan started on the 10th read "under
    # plan", its spend from the 10th to the 19th not in the lake; over plan stays over plan
    from dataclasses import replace

    lake, _ = small_lake(tmp_path)
    for name, compute in (("early", "5000"), ("small", "100")):  # running to December 10th (an actual is its window's)
        register_plan(lake, replace(plan(name, "llm-7b", compute), start=datetime(2026, 11, 10, tzinfo=timezone.utc),
                                    run_hours=Span(Decimal(600), Decimal(720))))
    register_plan(lake, plan("known", "llm-7b", "5000"))
    found = plans_as_of(lake_config(lake=lake), lake, DAY)
    assert {row["plan"]: row["status"] for row in found.rows} == {
        "early": "partial data", "small": "over plan to data end", "known": "under plan to data end"}, found.rows
    assert ("plan early started before the lake's billing data begins (2026-11-20 00:00 UTC): its actual counts "
            "from then.") in found.notes, found.notes
    assert not any(note.startswith("plan known started") for note in found.notes)


def _priced_lake(tmp_path, spend_days):
    """`llm-7b` spends USD `spend_days[day]` at each of those November days' midnight; `other`
    spends USD 1 a day to the 29th, so the bill runs past every report day here."""
    lines = [line(f"2026-11-{d:02d}T00:00:00", cost, tags={"project": "llm-7b"}) for d, cost in spend_days.items()]
    return make_lake(tmp_path, lines + [line(f"2026-11-{d:02d}T00:00:00", "1", tags={"project": "other"})
                                        for d in range(18, 30)])


def test_a_plan_spent_as_planned_with_its_storage_kept_the_days_it_priced_reads_on_plan(tmp_path):
    # review49: the actual stopped at the run's end while the plan to date counted its storage through the
    # retention: a plan spent exactly as planned read "under plan" for up to retention_days, its note saying it
    # "kept spending" on the storage it priced. A 48 h run from the 20th ($200 compute) keeps $70 of storage
    # over the run and 5 days' retention (7 days: $10 a day): $110 on the 20th and 21st, $10 a day to the 26th
    from dataclasses import replace

    lake = _priced_lake(tmp_path, {20: "110", 21: "110", **{d: "10" for d in range(22, 27)}})
    register_plan(lake, replace(plan("kept", "llm-7b", "200"), start=datetime(2026, 11, 20, tzinfo=timezone.utc),
                                run_hours=Span(Decimal(48), Decimal(48)), retention_days=5,
                                compute_cost=Span(Decimal(200), Decimal(200)), storage_cost=Span(Decimal(70), Decimal(70))))
    for day, to_date in ((date(2026, 11, 23), "240.00"), (date(2026, 11, 26), "270.00"), (date(2026, 11, 28), "270.00")):
        found = plans_as_of(lake_config(lake=lake), lake, day)
        [row] = found.rows
        assert (row["planned_to_date_high"], row["actual_to_date"], row["status"]) == (
            Decimal(to_date), Decimal(to_date), "on plan"), (day, row)
        assert not [note for note in found.notes if "kept spending" in note], found.notes
    assert row["after_end"] == 0  # past what it priced (the 27th), nothing more on llm-7b


def test_spend_after_what_a_plan_prices_is_after_end_and_a_window_passed_with_nothing_is_not_a_run_to_come(tmp_path):
    # review49: a plan's window passed with all its scope's spend after it read "nothing spent yet", its note
    # "the run has not begun", beside the note saying it kept spending. A 24 h run from the 20th with 2 days'
    # storage retention (to the 23rd): llm-7b spent only on the 25th and 26th
    from dataclasses import replace

    lake = _priced_lake(tmp_path, {25: "100", 26: "100"})
    register_plan(lake, replace(plan("late", "llm-7b", "200"), start=datetime(2026, 11, 20, tzinfo=timezone.utc),
                                run_hours=Span(Decimal(24), Decimal(24)), retention_days=2))
    found = plans_as_of(lake_config(lake=lake), lake, DAY)
    [row] = found.rows
    assert (row["status"], row["actual_to_date"], row["after_end"]) == ("nothing spent in its window", 0,
                                                                        Decimal(200)), row
    assert ("plan late: nothing was spent on project llm-7b from its start (2026-11-20 00:00 UTC) to its planned end "
            "and the 2 days' storage it priced, to 2026-11-23 00:00 UTC: its $0 is not a saving, the run did not run "
            "in its window.") in found.notes, found.notes
    assert ("plan late kept spending after its planned end (2026-11-21 00:00 UTC and the 2 days' storage it priced, "
            "to 2026-11-23 00:00 UTC): USD 200.00 on project llm-7b since is not in its actual (after_end).") in found.notes
    assert not [note for note in found.notes if "has not begun" in note]


def test_plans_on_one_project_spelt_in_two_cases_are_said_to_count_the_same_spend():
    # review49: the actuals match projects and experiments ignoring case; the overlap note compared them as typed
    from service.report.plan_windows import overlaps

    said = overlaps([plan("upper", "Llama-405b", "5000", experiment="Base"), plan("lower", "llama-405b", "5000"),
                      plan("base", "llama-405b", "5000", experiment="base")])
    # lower, the whole project's, counts neither experiment's spend: starting with it, the narrower plans take it
    assert [sentence.split(" cover ")[0] for sentence in said] == ["plans upper and base"], said


def test_every_plans_actual_after_end_and_experiment_check_are_read_in_the_sections_one_snapshot(tmp_path, monkeypatch):
    # review49: a plan's actual, its after_end and the check of its experiment against its project read through
    # attribute() in a snapshot of their own each (only the failures read in the section's): the report's section,
    # which reads once, could set an actual of one lake state beside an after_end of another. `late` ends on the
    # 21st (after_end: the 25th's and 26th's); `apart` names experiment e1, which only project other's lines carry
    from dataclasses import replace
    from service.attribution import HELD_TABLES, sessions
    from service.core import lake as lakes, snapshot as snapshots
    from service.report.sections.plans import plans_section

    lake = make_lake(tmp_path, [line("2026-11-25T00:00:00", "100", tags={"project": "llm-7b"}),
                                line("2026-11-26T00:00:00", "100", tags={"project": "llm-7b"}),
                                *(line(f"2026-11-{d:02d}T00:00:00", "1", tags={"project": "other", "experiment": "e1"})
                                  for d in range(18, 30))])
    start = datetime(2026, 11, 20, tzinfo=timezone.utc)
    register_plan(lake, replace(plan("late", "llm-7b", "200"), start=start, run_hours=Span(Decimal(24), Decimal(24))))
    register_plan(lake, replace(plan("apart", "llm-7b", "200", experiment="e1"), start=start))
    taken, read_in = [], []
    take = snapshots.take_snapshot
    for module in (snapshots, lakes):  # any snapshot, the section's (Lake.snapshot) first
        monkeypatch.setattr(module, "take_snapshot", lambda *args: taken.append(take(*args)) or taken[-1])
    within = sessions.read_within
    monkeypatch.setattr(sessions, "read_within",
                        lambda lake, snapshot, *rest: read_in.append(snapshot) or within(lake, snapshot, *rest))
    section = plans_section(lake_config(lake=lake), lake, DAY)
    [table] = section.tables
    assert {row["plan"]: (row["actual_to_date"], row["after_end"]) for row in table.rows} == {
        "apart": (0, None), "late": (0, Decimal(200))}, table.rows
    assert "experiment 'e1' with project 'llm-7b'" in section.note, section.note  # unpaired's read
    # the actuals (2), late's after_end, what apart (e1, from late's start) takes of late's and apart's experiment
    # check, each in the one snapshot the section took
    assert len(read_in) == 5 and all(snapshot is taken[0] for snapshot in read_in), (read_in, taken)
    assert set(HELD_TABLES) <= set(taken[0].tables), taken[0].tables


def test_a_plans_chart_draws_the_spend_after_what_it_prices_on_from_its_actual(tmp_path):
    # review49: the chart's actual stopped counting at what the plan prices and was drawn flat to the report day, the
    # spend after it said in the note alone. `late` prices a 24 h run from the 20th and 2 days' storage (to the 23rd);
    # llm-7b spent USD 100 on each of the 25th and 26th: the actual ends on the 22nd, the spend after goes on from it
    from dataclasses import replace
    from service.report.sections.plans import plans_section

    lake = _priced_lake(tmp_path, {20: "30", 25: "100", 26: "100"})
    register_plan(lake, replace(plan("late", "llm-7b", "200"), start=datetime(2026, 11, 20, tzinfo=timezone.utc),
                                run_hours=Span(Decimal(24), Decimal(24)), retention_days=2))
    [chart] = plans_section(lake_config(lake=lake), lake, DAY).charts
    assert chart.categories == [f"2026-11-{d}" for d in range(20, 30)]
    assert chart.series["actual"] == [30, 30, 30, *[None] * 7], chart.series
    assert chart.series["after planned end"] == [None, None, 30, 30, 30, 130, 230, 230, 230, 230], chart.series
    [row] = plans_as_of(lake_config(lake=lake), lake, DAY).rows
    assert (row["actual_to_date"], row["after_end"]) == (30, 200)
    # a plan whose chart ends where what it prices does draws no such line
    [chart] = plans_section(lake_config(lake=lake), lake, date(2026, 11, 22)).charts
    assert "after planned end" not in chart.series and chart.series["actual"][-1] == 30, chart.series


AS_OF = date(2026, 11, 28)  # _priced_lake's last whole day


def _first_and_second_plans(lake) -> None:
    """first: a 48 h run of llm-7b from the 20th, $200 compute and $70 of storage kept 5 days; second: a 48 h
    run of llm-7b from the 24th, $600."""
    from dataclasses import replace

    register_plan(lake, replace(plan("first", "llm-7b", "200"), start=datetime(2026, 11, 20, tzinfo=timezone.utc),
                                run_hours=Span(Decimal(48), Decimal(48)), retention_days=5,
                                compute_cost=Span(Decimal(200), Decimal(200)), storage_cost=Span(Decimal(70), Decimal(70))))
    register_plan(lake, replace(plan("second", "llm-7b", "600"), start=datetime(2026, 11, 24, tzinfo=timezone.utc),
                                run_hours=Span(Decimal(48), Decimal(48)), compute_cost=Span(Decimal(600), Decimal(600))))


def test_a_second_run_registered_within_the_first_plans_storage_retention_ends_the_first_plans_actual(tmp_path):
    # review49: since a plan's actual counts its storage's retention, a second run of the project started within
    # those days read as the first plan's spend, over plan. `first`: a 48 h run from the 20th, $200 compute and $70
    # of storage kept 5 days (to the 27th; $110, $110, then $10 a day); `second` runs 48 h from the 24th at $300 a
    # day. first's actual ends where second starts: $240 against its plan to then, on plan (was $870, over plan)
    from dataclasses import replace

    lake = _priced_lake(tmp_path, {20: "110", 21: "110", 22: "10", 23: "10", 24: "310", 25: "310", 26: "10"})
    _first_and_second_plans(lake)
    found = plans_as_of(lake_config(lake=lake), lake, AS_OF)
    rows = {row["plan"]: row for row in found.rows}
    assert (rows["first"]["actual_to_date"], rows["first"]["after_end"], rows["first"]["status"]) == (
        240, 630, "on plan"), rows["first"]
    # second counts its own run and first's storage kept while it ran ($10 a day): what the lake spent then
    assert (rows["second"]["actual_to_date"], rows["second"]["status"]) == (620, "over plan"), rows["second"]
    assert ("plan first's actual ends where plan second starts (2026-11-24 00:00 UTC), a later run of project llm-7b "
            "before the end of the storage it priced: USD 630.00 on project llm-7b since is not in its actual "
            "(after_end): from then plan second's actual counts it (past where that ends, its after_end)."
            ) in found.notes, found.notes
    # a later plan of another project, or one starting once the storage's retention has ended, does not end it
    for project, start in (("other", 24), ("llm-7b", 27)):
        register_plan(lake, replace(plan("second", project, "600"), start=datetime(2026, 11, start, tzinfo=timezone.utc)))
        [first] = [row for row in plans_as_of(lake_config(lake=lake), lake, AS_OF).rows if row["plan"] == "first"]
        assert (first["actual_to_date"], first["status"]) == (870, "over plan"), (project, first)


def test_a_later_plan_starting_before_the_first_plans_planned_end_ends_its_actual_at_its_start(tmp_path):
    # session 51: a later plan ended the first one's actual only when it started after the first run's planned
    # (pessimistic) end: a second run begun once the first finished early, registered from the next day, before that
    # end, stayed whole in the first plan's actual as well as in its own. first: 48 to 96 h from the 20th ($200
    # compute; $70 of storage kept 5 days), run in 48 h ($110, $110, then $10 a day); r2 begins late on the 22nd ($30
    # of it that day) and is registered from the 23rd (second: 48 h, $600; $300 a day with first's $10 of storage).
    # first's actual ends where second starts: 110 + 110 + 40 = 260 (was 900); the 30 of r2 before its plan's
    # start stays in first's (the later plan takes the spend from its start)
    from dataclasses import replace

    lake = _priced_lake(tmp_path, {20: "110", 21: "110", 22: "40", 23: "310", 24: "310", 25: "10", 26: "10"})
    _first_and_second_plans(lake)
    [first] = [p for p in __import__("service.planning.plans", fromlist=["load_plans"]).load_plans(lake)
               if p.name == "first"]
    register_plan(lake, replace(first, run_hours=Span(Decimal(48), Decimal(96))))
    [second] = [p for p in __import__("service.planning.plans", fromlist=["load_plans"]).load_plans(lake)
                if p.name == "second"]
    register_plan(lake, replace(second, start=datetime(2026, 11, 23, tzinfo=timezone.utc)))
    found = plans_as_of(lake_config(lake=lake), lake, AS_OF)
    rows = {row["plan"]: row for row in found.rows}
    assert (rows["first"]["actual_to_date"], rows["first"]["after_end"]) == (260, 640), rows["first"]
    # set against its plan to the 23rd: the low run's 200 + 70 x 72 / 168 = 230, the high one's 150 + 70 x 72 / 216
    assert rows["first"]["status"] == "over plan", rows["first"]
    assert (rows["second"]["actual_to_date"], rows["second"]["status"]) == (620, "over plan"), rows["second"]
    assert ("plan first's actual ends where plan second starts (2026-11-23 00:00 UTC), a later run of project llm-7b "
            "before the end of the storage it priced: USD 640.00 on project llm-7b since is not in its actual "
            "(after_end): from then plan second's actual counts it (past where that ends, its after_end)."
            ) in found.notes, found.notes
    assert not [note for note in found.notes if note.startswith("plans ")], found.notes


def test_a_window_a_later_plan_cut_with_nothing_spent_names_the_later_plans_start_as_its_end(tmp_path):
    # session 51: "nothing was spent ... to its planned end and the 5 days' storage it priced, to 2026-11-27" where
    # plan second's start (the 24th) ended first's window: the note named an end the actual was not counted to.
    # first: a 48 h run from the 20th with 5 days' storage; nothing on llm-7b before second's run from the 24th
    lake = _priced_lake(tmp_path, {24: "300", 25: "300"})
    _first_and_second_plans(lake)
    found = plans_as_of(lake_config(lake=lake), lake, AS_OF)
    [first] = [row for row in found.rows if row["plan"] == "first"]
    assert (first["status"], first["actual_to_date"], first["after_end"]) == ("nothing spent in its window", 0, 600)
    assert ("plan first: nothing was spent on project llm-7b from its start (2026-11-20 00:00 UTC) to where plan "
            "second starts (2026-11-24 00:00 UTC): its $0 is not a saving, the run did not run in its window."
            ) in found.notes, found.notes
    assert not [note for note in found.notes if "2026-11-27" in note], found.notes


def test_only_a_later_plan_covering_the_first_plans_scope_ends_its_actual(tmp_path):
    # review50: a later plan of one experiment ended a project-wide plan's actual at its start: the project's other
    # spend from then (e1's storage) was in neither actual, and the note said "from then it is plan second's". e1
    # runs 48 h from the 20th ($110, $110, then $10 a day of storage to the 26th); e2 runs from the 24th ($300 a day)
    from dataclasses import replace

    spend = {"e1": {20: "110", 21: "110", **{d: "10" for d in range(22, 27)}}, "e2": {24: "300", 25: "300"}}
    lake = make_lake(tmp_path, [line(f"2026-11-{d:02d}T00:00:00", cost, tags={"project": "llm-7b", "experiment": e})
                                for e, days in spend.items() for d, cost in days.items()]
                     + [line(f"2026-11-{d:02d}T00:00:00", "1", tags={"project": "other"}) for d in range(18, 30)])
    first = replace(plan("first", "llm-7b", "200"), start=datetime(2026, 11, 20, tzinfo=timezone.utc),
                    run_hours=Span(Decimal(48), Decimal(48)), retention_days=5,
                    compute_cost=Span(Decimal(200), Decimal(200)), storage_cost=Span(Decimal(70), Decimal(70)))
    second = replace(plan("second", "llm-7b", "600"), start=datetime(2026, 11, 24, tzinfo=timezone.utc),
                     run_hours=Span(Decimal(48), Decimal(48)), compute_cost=Span(Decimal(600), Decimal(600)))
    register_plan(lake, first)
    register_plan(lake, replace(second, experiment="e2"))
    found = plans_as_of(lake_config(lake=lake), lake, AS_OF)
    rows = {row["plan"]: row for row in found.rows}
    # session 51: first (the whole project) counted all of it to the end of what it prices, e2's run too (870, over
    # plan), as second did (600): both actuals counted e2's run. Each dollar is in one plan's actual: second, the
    # later plan, takes its scope (e2) from its start; first keeps the rest of the project's, e1's 110 + 110 + 5 x 10
    # = 270, its plan to date (200 compute + 70 storage): on plan
    assert (rows["first"]["actual_to_date"], rows["first"]["status"], rows["first"]["later_plans"]) == (
        270, "on plan", 600), rows["first"]
    assert (rows["second"]["actual_to_date"], rows["second"]["later_plans"]) == (600, None), rows["second"]
    assert not [note for note in found.notes if "actual ends where" in note], found.notes
    assert ("plan first's actual leaves out what plans of a narrower scope count from their start: USD 600.00 to plan "
            "second (project llm-7b, experiment e2, from 2026-11-24 00:00 UTC) (later_plans). Each dollar is in one "
            "plan's actual: the latest-started one whose scope holds it (on one start, the narrower one's)."
            ) in found.notes, found.notes
    assert not [note for note in found.notes if note.startswith("plans ")], found.notes
    # its chart draws what it counts: e2's 300 on the 24th and 25th out
    [chart] = [c for c in plans_section(lake_config(lake=lake), lake, AS_OF).charts if c.title.startswith("first")]
    assert chart.series["actual"][4:6] == [250, 260], chart.series
    # the whole project's later plan covers first's experiment: first's actual ends at its start, e1's storage since
    # is second's (its actual counts the whole project's spend from then)
    register_plan(lake, replace(first, experiment="e1"))
    register_plan(lake, second)
    found = plans_as_of(lake_config(lake=lake), lake, AS_OF)
    rows = {row["plan"]: row for row in found.rows}
    assert (rows["first"]["actual_to_date"], rows["first"]["after_end"]) == (240, 30), rows["first"]
    assert rows["second"]["actual_to_date"] == 620, rows["second"]
    assert ("plan first's actual ends where plan second starts (2026-11-24 00:00 UTC), a later run of project llm-7b "
            "before the end of the storage it priced: USD 30.00 on project llm-7b, experiment e1 since is not in its "
            "actual (after_end): from then plan second's actual counts it (past where that ends, its after_end)."
            ) in found.notes, found.notes
    assert not [note for note in found.notes if note.startswith("plans ")], found.notes
