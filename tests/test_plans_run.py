"""Plans on a run (`spendlake estimate --register NAME --run RUN`): the plan's actual is the run's jobs'
cost, as `spendlake runs --run RUN` tells it, whatever experiment they carry."""

from __future__ import annotations

import json
import logging
import re
from datetime import date
from decimal import Decimal

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import parse_config
from service.planning.plans import load_plans
from service.report.sections.plans import plans_as_of
from tests.test_failed_reruns import hand_lake
from tests.test_plans_cli import hand_edit
from tests.test_runs import whole_config

D = Decimal
DAY = "2026-11-02"
# 7B params on 20B tokens at 8 H100s from the 2nd's midnight: a run of days, over the hand lake's jobs (10:00-12:00)
ESTIMATE = ["estimate", "--params", "7B", "--tokens", "20B", "--gpu", "H100", "--gpus", "8", "--mfu", "0.4",
            "--price-per-gpu-hour", "10", "--storage-price-per-gb-month", "0", "--retention-days", "0"]


def spendlake(config: str, *args):
    return CliRunner().invoke(cli, ["--config", config, *args], catch_exceptions=False)


def configured(tmp_path, lake, **changes) -> str:
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({**whole_config(tmp_path, lake), **changes}))
    return str(path)


def test_a_plan_on_a_run_counts_the_runs_jobs_as_runs_run_tells_them(tmp_path):
    """The hand lake's run r1 (project llm, experiment e1: three jobs on p5's i-a at $80 an hour, 10:00-10:20 with 8
    GPUs, 10:25-10:32 with 4 of its 8, 11:00-12:00 with 8) costs 80 x 20/60 + 80 x 7/60 x 4/8 + 80 = 26.67 + 4.67 +
    80 = $111.33, as `runs --run r1` says; registered with `--run R1` (typed in another case: spelt as the job
    records do), the plan's actual is that."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    out = spendlake(config, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "R1", "--start", DAY,
                    "--format", "json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["plan"]["run"] == "r1", out.stdout
    assert "registered plan r1-plan for project llm, run r1: 2026-11-02T00:00:00Z to " in out.stderr, out.output
    [story] = json.loads(spendlake(config, "runs", "--run", "r1", "--since", DAY, "--format", "json").stdout)["rows"]
    [row] = json.loads(spendlake(config, "plans", "--as-of", DAY, "--format", "json").stdout)
    assert (row["plan"], row["run"], D(row["actual_to_date"]).quantize(D("0.01"))) == ("r1-plan", "r1", D("111.33"))
    assert D(row["actual_to_date"]) == D(story["cost"]), (row, story)
    assert [plan.run for plan in load_plans(lake)] == ["r1"]
    # a run no job record holds (a typo) warns with the closest ones, and the plan reads "unknown run", not under plan
    out = spendlake(config, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "r11", "--start", DAY)
    warning = "warning: plan r1-plan: no cost line in the lake carries run 'r11' yet"
    assert out.exit_code == 0 and warning in out.stderr, out.output
    [row] = json.loads(spendlake(config, "plans", "--as-of", DAY, "--format", "json").stdout)
    assert (row["run"], row["status"]) == ("r11", "unknown run"), row


def test_a_plan_on_a_run_takes_the_runs_cost_from_an_earlier_plan_on_its_experiment(tmp_path):
    """Each dollar in one plan's actual: e1-plan (experiment e1, from the 1st) counts r1's $111.33, all of e1's spend;
    r1-plan, from the 2nd, takes r1's jobs from its start: e1-plan keeps the rest, $0 (later_plans 111.33), where
    both counted it."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    assert spendlake(config, *ESTIMATE, "--register", "e1-plan", "--project", "llm", "--experiment", "e1", "--start",
                     "2026-11-01").exit_code == 0
    before = {row["plan"]: D(row["actual_to_date"]) for row in
              json.loads(spendlake(config, "plans", "--as-of", DAY, "--format", "json").stdout)}
    assert spendlake(config, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "r1", "--start",
                     DAY).exit_code == 0
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    rows = {row["plan"]: row for row in json.loads(out.stdout)}
    cent = D("0.01")
    assert (D(rows["r1-plan"]["actual_to_date"]).quantize(cent), D(rows["e1-plan"]["later_plans"]).quantize(cent)) == (
        D("111.33"), D("111.33")), rows
    assert (before["e1-plan"].quantize(cent), D(rows["e1-plan"]["actual_to_date"])) == (D("111.33"), 0), rows
    assert "USD 111.33 to plan r1-plan (project llm, run r1, from 2026-11-02 00:00 UTC) (later_plans)" in out.stderr
    # r1's failed attempts ($31.33) are r1-plan's failures, no longer e1-plan's (it counted them against an actual of 0)
    assert (D(rows["r1-plan"]["failed_actual"]).quantize(cent), rows["e1-plan"]["failed_actual"]) == (D("31.33"), None)


def test_nested_plans_note_credits_each_dollar_to_the_latest_started_plan_holding_it(tmp_path):
    """p-plan (project llm) and e-plan (experiment e1) from the 1st, r-plan (run r1 of e1) from the 2nd: r1's $111.33
    is r-plan's alone, so p-plan's note names r-plan's 111.33, its later_plans, and not e-plan's (whose actual is 0),
    where it gave the same dollar to both (222.66 said against later_plans 111.33)."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    for name, scope, start in (("p-plan", [], "2026-11-01"), ("e-plan", ["--experiment", "e1"], "2026-11-01"),
                               ("r-plan", ["--experiment", "e1", "--run", "r1"], DAY)):
        assert spendlake(config, *ESTIMATE, "--register", name, "--project", "llm", *scope, "--start", start
                         ).exit_code == 0
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    rows = {row["plan"]: row for row in json.loads(out.stdout)}
    cent = D("0.01")
    assert [(name, D(rows[name]["actual_to_date"]).quantize(cent)) for name in ("p-plan", "e-plan", "r-plan")] == [
        ("p-plan", 0), ("e-plan", 0), ("r-plan", D("111.33"))], rows
    [note] = [line for line in out.stderr.splitlines() if line.startswith("note: plan p-plan's actual leaves out")]
    assert "USD 111.33 to plan r-plan (project llm, experiment e1, run r1, from 2026-11-02 00:00 UTC) (later_plans)" \
        in note and "to plan e-plan" not in note, note
    assert D(rows["p-plan"]["later_plans"]).quantize(cent) == D("111.33"), rows


def test_a_plan_on_a_run_takes_it_from_a_plan_on_an_experiment_starting_the_same_day(tmp_path):
    """One start, the narrower scope's: r-plan (run r1) and e-plan (experiment e1), both from the 2nd, where both
    counted r1's $111.33 and its $31.33 of failures (overlaps' note said so): e-plan's actual is 0, later_plans 111.33."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    for name, scope in (("e-plan", ["--experiment", "e1"]), ("r-plan", ["--run", "r1"])):
        assert spendlake(config, *ESTIMATE, "--register", name, "--project", "llm", *scope, "--start", DAY
                         ).exit_code == 0
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    rows = {row["plan"]: row for row in json.loads(out.stdout)}
    cent = D("0.01")
    assert [(name, D(rows[name]["actual_to_date"]).quantize(cent), rows[name]["failed_actual"] and D(
        rows[name]["failed_actual"]).quantize(cent)) for name in ("e-plan", "r-plan")] == [
        ("e-plan", 0, None), ("r-plan", D("111.33"), D("31.33"))], rows
    assert D(rows["e-plan"]["later_plans"]).quantize(cent) == D("111.33"), rows
    assert "cover the same spend" not in out.stderr, out.stderr


def test_a_run_whose_jobs_carry_another_project_warns_as_an_experiment_of_another_project_does(tmp_path):
    # the hand lake's r2 ran under project `unallocated`: a plan on it for project llm would read $0 ("not begun")
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    out = spendlake(config, *ESTIMATE, "--register", "r2-plan", "--project", "llm", "--run", "r2", "--start", DAY)
    assert out.exit_code == 0 and ("warning: plan r2-plan: no cost line in the lake carries run 'r2' with project "
                                   "'llm' yet; run r2's lines carry project unallocated") in out.stderr, out.output
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    [row] = json.loads(out.stdout)
    assert (row["status"], D(row["actual_to_date"])) == ("unknown run", 0), row
    assert "no cost line carries run 'r2' with project 'llm'; run r2's lines carry project unallocated" in out.stderr


def test_the_plans_table_and_the_reports_page_show_the_run_a_plan_follows(tmp_path, monkeypatch):
    # without the run, a plan on run r1 read as project llm, no experiment: a whole-project plan
    monkeypatch.setenv("COLUMNS", "150")
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    assert spendlake(config, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "r1", "--start", DAY
                     ).exit_code == 0
    table = spendlake(config, "plans", "--as-of", DAY, "--format", "table").stdout.splitlines()
    header, (row,) = next(text for text in table if text.startswith("┃")), [t for t in table if "r1-plan" in t]
    assert header.rstrip("┃ ").endswith("┃ run") and row.rstrip("│ ").endswith("│ r1"), table
    assert spendlake(config, "report", "--date", DAY, "--out", str(tmp_path / "out")).exit_code == 0
    page = (tmp_path / "out" / DAY / "report.html").read_text(encoding="utf-8")
    section = page.split("<h2>Plans vs actual", 1)[1].split("<h2>", 1)[0]
    assert ">run<" in section.split("</thead>")[0] and re.search(r"<td[^>]*>r1</td>", section), section


def test_a_plan_on_a_run_needs_job_records_and_register(tmp_path):
    lake, _ = hand_lake(tmp_path)
    bare = configured(tmp_path, lake, attribution={})
    out = spendlake(bare, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "r1", "--start", DAY)
    assert out.exit_code == 2 and "--run" in out.stderr and "clusters:" in out.stderr, out.output
    out = spendlake(configured(tmp_path, lake), *ESTIMATE, "--run", "r1")
    assert out.exit_code == 2 and "only apply with --register NAME" in out.stderr, out.output
    assert load_plans(lake) == []


def test_a_plan_on_a_run_under_a_config_without_clusters_says_its_actual_is_not_known(tmp_path):
    # the config dropped `clusters:` after the plan was registered: its row says so, the other plans are read
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    for name, scope in (("r1-plan", ["--run", "r1"]), ("llm-plan", [])):
        assert spendlake(config, *ESTIMATE, "--register", name, "--project", "llm", *scope, "--start", DAY
                         ).exit_code == 0
    found = plans_as_of(parse_config({**whole_config(tmp_path, lake), "attribution": {}}), lake, date(2026, 11, 2))
    # llm-plan is read (without the clusters, no line of the bill carries project llm: the jobs gave it)
    assert [(row["plan"], row["status"], row.get("actual_to_date")) for row in found.rows] == [
        ("llm-plan", "unknown project", 0), ("r1-plan", "no job records", None)], found.rows
    assert ("plan r1-plan follows run r1, whose cost job records tell: the config has no `clusters:` under "
            "`attribution:` (README: Shared GPU clusters), so its actual is not known.") in found.notes, found.notes
    # alone, it is still a registered plan, not "No plans registered"
    assert spendlake(config, "plans", "remove", "llm-plan", "--yes").exit_code == 0
    found = plans_as_of(parse_config({**whole_config(tmp_path, lake), "attribution": {}}), lake, date(2026, 11, 2))
    assert [(row["plan"], row["status"]) for row in found.rows] == [("r1-plan", "no job records")], found.rows
    # its plan to date is its own: 8 GPUs at $10 an hour from midnight, the 2nd whole
    assert (found.rows[0]["planned_to_date_low"], found.rows[0]["planned_to_date_high"]) == (1920, 1920), found.rows
    assert not [note for note in found.notes if note.startswith("No plans registered")], found.notes


def test_a_plans_file_written_before_plans_on_runs_is_read_each_plan_on_no_run(tmp_path):
    # a lake registered by an earlier version holds no `run` column: read as NULL, not "it lacks the column(s) run"
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    assert spendlake(config, *ESTIMATE, "--register", "llm-plan", "--project", "llm", "--start", DAY).exit_code == 0
    hand_edit(lake, tmp_path, "SELECT * EXCLUDE (run) FROM plans")
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    assert out.exit_code == 0, out.output
    [row] = json.loads(out.stdout)
    assert (row["plan"], row["run"]) == ("llm-plan", None)
    assert spendlake(config, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "r1", "--start", DAY
                     ).exit_code == 0  # written again, with the column
    assert [(plan.name, plan.run) for plan in load_plans(lake)] == [("llm-plan", None), ("r1-plan", "r1")]


def test_two_plans_on_one_run_from_one_day_count_its_dollars_once_in_the_later_registered(tmp_path):
    """r1-a and then r1-b on run r1 from the 2nd (the run planned again under another name) each counted r1's $111.33
    and its $31.33 of failures (a note said both counted it): r1-b, registered later, counts them; r1-a reads
    `superseded`, its actual 0, and a note names the plan counting its spend."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    for name in ("r1-b", "r1-a"):  # registered b first, then a: the later registered, not the name, decides
        assert spendlake(config, *ESTIMATE, "--register", name, "--project", "llm", "--run", "r1", "--start", DAY
                         ).exit_code == 0
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    rows = {row["plan"]: row for row in json.loads(out.stdout)}
    cent = D("0.01")
    assert [(name, D(rows[name]["actual_to_date"]).quantize(cent), rows[name]["status"], rows[name]["failed_actual"]
             and D(rows[name]["failed_actual"]).quantize(cent)) for name in ("r1-a", "r1-b")] == [
        ("r1-a", D("111.33"), "partial data", D("31.33")), ("r1-b", 0, "superseded", None)], rows
    assert D(rows["r1-b"]["after_end"]).quantize(cent) == D("111.33"), rows
    assert ("note: plan r1-b's actual is empty: plan r1-a, of the same scope (project llm, run r1) and start "
            "(2026-11-02 00:00 UTC) and registered later, counts its spend (after_end: USD 111.33 spent on its scope "
            "since); each dollar is in one plan's actual. Remove the plan not meant (`spendlake plans remove NAME`)."
            ) in out.stderr.splitlines(), out.stderr
    assert "cover the same spend" not in out.stderr, out.stderr


def test_a_failed_attempt_crossing_a_run_plans_start_is_in_each_plans_failures_for_the_dollars_each_counts(tmp_path):
    """Run r1 (llm, e1) on i-a at $80 an hour: job 1 FAILED 22:00 on the 1st to 02:00 on the 2nd ($320, half each
    side of midnight), job 2 re-ran it 03:00-05:00 ($160). e1-plan (experiment e1, from the 1st) and r1-plan (run r1,
    from the 2nd): r1-plan's actual takes r1's $320 from midnight, e1-plan keeps job 1's $160 before it. The failure
    follows the dollars: $160 in each plan's failures, where e1-plan's counted job 1 whole ($320, twice its actual)
    beside r1-plan's $160."""
    from tests.test_clusters_allocation import gpu_line, job, setup

    owner = {"team": "nlp", "project": "llm", "experiment": "e1"}
    hours = [f"2026-11-01T{h}:00:00" for h in range(20, 24)] + [f"2026-11-02T0{h}:00:00" for h in range(6)]
    lake, _ = setup(tmp_path, [gpu_line("i-a", start=hour) for hour in hours], [
        job("1", 8, "2026-11-01T22:00:00", "2026-11-02T02:00:00", instance_ids=["i-a"], run_id="r1", state="FAILED",
            **owner),
        job("2", 8, "2026-11-02T03:00:00", "2026-11-02T05:00:00", instance_ids=["i-a"], run_id="r1", **owner)])
    config = configured(tmp_path, lake)
    for name, scope, start in (("e1-plan", ["--experiment", "e1"], "2026-11-01"), ("r1-plan", ["--run", "r1"], DAY)):
        assert spendlake(config, *ESTIMATE, "--register", name, "--project", "llm", *scope, "--start", start
                         ).exit_code == 0
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    rows = {row["plan"]: row for row in json.loads(out.stdout)}
    assert [(name, D(rows[name]["actual_to_date"]), D(rows[name]["failed_actual"]), rows[name]["later_plans"] and
             D(rows[name]["later_plans"])) for name in ("e1-plan", "r1-plan")] == [
        ("e1-plan", 160, 160, 320), ("r1-plan", 320, 160, None)], rows


def older_version_rewrite(lake, edit: str = "SELECT * EXCLUDE (run, registered) FROM plans"):
    """The plans file written again as a spendlake from before plans on runs writes it (registering or removing any
    plan): with the columns it knows, committed with its record, as `edit` (SQL on a view `plans`) gives them."""
    con = lake.connect()
    try:
        path = lake.partition_file("plans", [("source", "estimate"), ("snapshot", "current")])
        rows = con.sql(edit.replace("FROM plans", f"FROM read_parquet('{path}')")).to_arrow_table()
        lake.commit_snapshot(con, con.from_arrow(rows), table="plans", source="estimate", key="snapshot",
                             value="current")
    finally:
        con.close()


def test_a_plans_file_an_older_version_rewrote_gets_each_plans_run_back_from_the_lakes_state(tmp_path):
    """An older spendlake registering any plan writes the plans file without the `run` column: r1-plan read as a
    plan on all of project llm (actual: every run's). Each row as the lake's state kept it gets its run back, a
    warning names them, and the next registration writes the column again; a row the older version registered again
    (another start) is read as it is."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    for name, scope in (("r1-plan", ["--run", "r1"]), ("llm-plan", [])):
        assert spendlake(config, *ESTIMATE, "--register", name, "--project", "llm", *scope, "--start", DAY
                         ).exit_code == 0
    older_version_rewrite(lake)
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    assert out.exit_code == 0, out.output
    assert [(row["plan"], row["run"]) for row in json.loads(out.stdout)] == [("llm-plan", None), ("r1-plan", "r1")]
    assert ("was written by a spendlake from before plans on runs (2026-12), which drops each plan's run: plan(s) "
            "r1-plan (run r1) read with the run kept in the lake's state") in out.stderr, out.stderr
    assert spendlake(config, "plans", "remove", "llm-plan", "--yes").exit_code == 0  # written again, with the column
    assert [(plan.name, plan.run) for plan in load_plans(lake)] == [("r1-plan", "r1")]
    out = spendlake(config, "plans", "--as-of", DAY, "--format", "json")
    assert "from before plans on runs" not in out.stderr, out.stderr
    # the older version registered r1-plan again, from the 3rd: its plan, on the project
    older_version_rewrite(lake, "SELECT * EXCLUDE (run, registered) REPLACE (start + INTERVAL 1 DAY AS start) "
                                "FROM plans")
    assert [(plan.name, plan.run, plan.start.day) for plan in load_plans(lake)] == [("r1-plan", None, 3)]


def test_an_older_versions_plans_file_is_warned_of_once_per_file_a_process_reads(tmp_path):
    """The service reads the plans at each rules run, report and API call: the older-version warning was logged at
    every one of them until the next registration; now once, and again once the file is written again."""
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    assert spendlake(config, *ESTIMATE, "--register", "r1-plan", "--project", "llm", "--run", "r1", "--start", DAY
                     ).exit_code == 0
    older_version_rewrite(lake)
    logger = logging.getLogger("service.planning.plan_record")  # its own handler: the CLI run above set the root's

    def warnings_of(reads: int) -> int:
        told: list[logging.LogRecord] = []
        handler = logging.Handler(logging.WARNING)
        handler.emit = told.append
        logger.addHandler(handler)
        try:
            for _ in range(reads):
                assert [(plan.name, plan.run) for plan in load_plans(lake)] == [("r1-plan", "r1")]
        finally:
            logger.removeHandler(handler)
        return sum("from before plans on runs" in record.getMessage() for record in told)

    assert warnings_of(3) == 1
    assert warnings_of(2) == 0
    older_version_rewrite(lake, "SELECT * REPLACE (retention_days + 1 AS retention_days) FROM plans")  # written again
    assert warnings_of(2) == 1


def test_registering_the_same_plan_again_keeps_its_registration_time_and_the_files_bytes(tmp_path):
    # the demo run again (the same lake, the same plan registered) wrote a plans file of other bytes: a new time
    lake, _ = hand_lake(tmp_path)
    config = configured(tmp_path, lake)
    path = lake.partition_file("plans", [("source", "estimate"), ("snapshot", "current")])
    registered = []
    for run in ("r1", "r1", "r2"):  # the third is another plan under that name: registered anew
        assert spendlake(config, *ESTIMATE, "--register", "r-plan", "--project", "llm", "--run", run, "--start", DAY
                         ).exit_code == 0
        registered.append((load_plans(lake)[0].registered, path.read_bytes()))
    assert registered[0] == registered[1] and registered[2][0] > registered[1][0], registered
