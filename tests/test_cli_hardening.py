"""Names and values that match nothing (RELIABILITY 57), and a table of bad inputs walked
through the real command line: each is exit 2 or 3 with one clear line, never a traceback."""

from __future__ import annotations

import csv
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import SAMPLES
from rules.base import Finding
from service.cli.main import cli
from service.core.lake import Lake
from service.findings.store import store_findings

FOCUS = SAMPLES / "focus" / "focus_1.0_sample_1000.csv"
WINDOW = ["--since", "2024-01-01", "--until", "2025-01-01"]


def invoke(*args: str, env: dict | None = None):
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def write_config(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A lake holding the FOCUS sample (tags application/environment/business_unit) and two findings."""
    root = tmp_path_factory.mktemp("base")
    (root / "export").mkdir()
    shutil.copy(FOCUS, root / "export" / "bill.csv")
    config = write_config(root / "spendlake.yaml", {
        "lake": str(root / "lake"), "sources": [{"name": "focus", "kind": "focus", "location": str(root / "export")}],
        "attribution": {"dimensions": {"team": {"tags": ["business_unit"]}, "project": {"tags": ["application"]}}}})
    assert invoke("--config", str(config), "ingest").exit_code == 0
    store_findings(Lake(root / "lake"), [
        Finding(id="a1", rule="idle-gpu", severity="warning", resource_id="i-1", team="eval", category="waste",
                impact_usd=Decimal("120.50"), monthly_waste_usd=Decimal("120.50"), summary="idle for 6 hours"),
        Finding(id="b2", rule="checkpoint-sprawl", severity="critical", resource_id="s3://ckpt", team="pretrain",
                category="waste", impact_usd=Decimal("900"), monthly_waste_usd=Decimal("900"),
                summary="no lifecycle")])
    return root


def copy_of(base: Path, tmp_path: Path) -> Path:
    """A private copy of the base lake and config (for cases that damage it)."""
    shutil.copytree(base / "lake", tmp_path / "lake")
    shutil.copytree(base / "export", tmp_path / "export")
    data = yaml.safe_load((base / "spendlake.yaml").read_text())
    data.update(lake=str(tmp_path / "lake"), sources=[{**data["sources"][0], "location": str(tmp_path / "export")}])
    return write_config(tmp_path / "spendlake.yaml", data)


def test_57_findings_of_an_unknown_rule_is_exit_2_with_the_closest_names(base):
    config = str(base / "spendlake.yaml")
    result = invoke("--config", config, "findings", "--rule", "idle-gpus")
    assert result.exit_code == 2, result.output
    assert "error: --rule: no rule named 'idle-gpus' — closest rules: idle-gpu" in result.output
    ran = invoke("--config", config, "rules", "run", "--rule", "chekpoint-sprawl", "--dry-run")
    assert ran.exit_code == 2 and "closest rules: checkpoint-sprawl" in ran.output
    assert invoke("--config", config, "findings", "--rule", "idle-gpu", "--format", "json").exit_code == 0


def test_57_a_where_value_that_matches_nothing_answers_and_warns_with_the_closest_values(base):
    config = str(base / "spendlake.yaml")
    good = invoke("--config", config, "attribute", *WINDOW, "--by", "project", "--format", "csv")
    projects = [row["project"] for row in csv.DictReader(good.output.splitlines())]
    assert "BrightPathMatrix" in projects and good.exit_code == 0
    result = invoke("--config", config, "attribute", *WINDOW, "--by", "project", "--where", "project=BrightPathMatrx",
                    "--where", "team=nothing-like-it", "--format", "csv")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("warning: --where project=BrightPathMatrx matches nothing in the lake; closest "
                               "project values: BrightPathMatrix")
    [team] = [line for line in lines if line.startswith("warning: --where team=")]
    assert "known team values: " in team
    assert [line for line in lines if not line.startswith("warning: ")] == ["project,currency,cost"]
    matched = invoke("--config", config, "attribute", *WINDOW, "--where", "project=brightpathmatrix")
    assert matched.exit_code == 0 and "warning" not in matched.output


def test_57_a_team_that_matches_no_finding_answers_and_warns_with_the_closest_teams(base):
    config = str(base / "spendlake.yaml")
    result = invoke("--config", config, "findings", "--team", "evl", "--format", "json")
    assert result.exit_code == 0
    assert result.output.splitlines() == ["warning: --team evl matches no finding; closest teams: eval", "[]"]
    none_open = invoke("--config", config, "findings", "--team", "eval", "--status", "resolved", "--format", "json")
    assert none_open.exit_code == 0 and "warning" not in none_open.output
    # any case or spacing names the team, as `attribute --where team=Eval` does (was: no finding, a warning)
    spelled = invoke("--config", config, "findings", "--team", " Eval", "--format", "json")
    assert [f["id"] for f in json.loads(spelled.output)] == ["a1"], spelled.output
    quiet = invoke("--config", config, "findings", "--team", "EVAL", "--status", "resolved", "--format", "json")
    assert quiet.exit_code == 0 and "warning" not in quiet.output


def lake_file_config(base, tmp):
    (tmp / "file").write_text("x")
    return write_config(tmp / "c.yaml", {"lake": str(tmp / "file")})


def damaged(how):
    def setup(base, tmp):
        config = copy_of(base, tmp)
        [partition] = sorted((tmp / "lake" / "costs").rglob("data.parquet"))[:1]
        how(partition, tmp)
        return config
    return setup


def damaged_findings(how):
    """The findings table has no ledger: DuckDB's own error is what finds its damage."""
    def setup(base, tmp):
        config = copy_of(base, tmp)
        [data] = (tmp / "lake" / "findings").rglob("data.parquet")
        content = data.read_bytes()
        data.write_bytes(how(content))
        return config
    return setup


def footer_altered(content: bytes) -> bytes:
    """Every byte of the footer's metadata flipped: DuckDB's error then names no file."""
    size = int.from_bytes(content[-8:-4], "little")
    start = len(content) - 8 - size
    return content[:start] + bytes(b ^ 0x5A for b in content[start:-8]) + content[-8:]


def bad_value(base, tmp):
    config = copy_of(base, tmp)
    rows = list(csv.reader(FOCUS.open(encoding="utf-8-sig")))
    rows[3][rows[0].index("BilledCost")] = "1.0.0"
    with (tmp / "export" / "bill.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return config


def symlinked(base, tmp):
    (tmp / "export").mkdir()
    (tmp / "elsewhere").mkdir()
    shutil.copy(FOCUS, tmp / "elsewhere" / "bill.csv")
    (tmp / "export" / "bill.csv").symlink_to(tmp / "elsewhere" / "bill.csv")
    return write_config(tmp / "c.yaml", {"lake": str(tmp / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(tmp / "export")}]})


def not_utf8(base, tmp):
    (tmp / "c.yaml").write_bytes(b"lake: \xff\xfe\n")
    return tmp / "c.yaml"


def existing(base, tmp):
    return base / "spendlake.yaml"


def both_kinds(base: Path, tmp_path: Path) -> Path:
    return write_config(tmp_path / "c.yaml", {
        "lake": str(tmp_path / "lake"), "sources": [{"name": "bill", "kind": "focus", "location": str(tmp_path / "x")}],
        "inventory": [{"name": "tags", "kind": "aws-tags", "regions": ["us-east-1"]}]})


CASES = [  # (case, config setup, arguments, exit code, what the one line names)
    ("lake is a file", lake_file_config, ["status"], 2, "is a file; the lake must be a directory"),
    ("47 lake is an empty string", lambda b, t: write_config(t / "c.yaml", "lake: ''\n"), ["status"], 2,
     "lake: must be a path, not an empty string"),
    ("lake inside the source", lambda b, t: write_config(t / "c.yaml", {
        "lake": str(t / "x" / "lake"), "sources": [{"name": "a", "kind": "focus", "location": str(t / "x")}]}),
     ["ingest"], 2, "is inside sources[0].location"),
    ("duplicate key", lambda b, t: write_config(t / "c.yaml", "lake: ./a\nlake: ./b\n"), ["status"], 2,
     "key 'lake' appears twice in one mapping: line 1 and line 2"),
    ("33 two sources reading one folder", lambda b, t: write_config(t / "c.yaml", {
        "lake": str(t / "lake"), "sources": [{"name": "a", "kind": "focus", "location": str(t / "x")},
                                             {"name": "b", "kind": "azure-cost", "location": str(t / "x" / "sub")}]}),
     ["ingest"], 2, "overlap, so their files would be counted twice"),
    ("too many sources", lambda b, t: write_config(t / "c.yaml", {"sources": [
        {"name": f"s{i}", "kind": "focus", "location": f"/x/{i}"} for i in range(1001)]}), ["status"], 2,
     "sources: 1,001 entries"),
    ("not YAML", lambda b, t: write_config(t / "c.yaml", "lake: [unclosed\n"), ["status"], 2, "not valid YAML"),
    ("not a mapping", lambda b, t: write_config(t / "c.yaml", "- a\n- b\n"), ["status"], 2,
     "the top level must be a mapping"),
    ("not UTF-8", not_utf8, ["status"], 2, "not UTF-8"),
    ("unknown key", lambda b, t: write_config(t / "c.yaml", {"lakes": "./x"}), ["status"], 2, "lakes: unknown key"),
    ("config missing", lambda b, t: t / "missing.yaml", ["status"], 2, "config file not found"),
    ("no config", None, ["attribute", "--since", "7d"], 2, "no config found (looked at --config, $SPENDLAKE_CONFIG"),
    ("unknown source", existing, ["ingest", "--source", "nope"], 2, "no source named 'nope'"),
    ("an inventory source to ingest", both_kinds, ["ingest", "--source", "tags"], 2,
     "'tags' is an inventory source: `spendlake inventory --source` reads it — sources here: bill"),
    ("a billing source to inventory", both_kinds, ["inventory", "--source", "bill"], 2,
     "'bill' is a billing source: `spendlake ingest --source` reads it — inventory here: tags"),
    ("unknown rule", existing, ["rules", "run", "--rule", "idle-gpus"], 2, "closest rules: idle-gpu"),
    ("57 unknown rule in the config names the file", lambda b, t: write_config(t / "c.yaml", {
        "lake": str(t / "lake"), "rules": {"idle-gpus": {"enabled": False}}}), ["config", "validate"], 2,
     "c.yaml: rules.idle-gpus: unknown rule; closest rules: idle-gpu"),
    ("findings of an unknown rule", existing, ["findings", "--rule", "idlegpu"], 2, "closest rules: idle-gpu"),
    ("unknown dimension", existing, ["attribute", "--since", "7d", "--by", "teem"], 2, "unknown dimension 'teem'"),
    ("out-of-range window", existing, ["attribute", "--since", "99999999999999d"], 2, "out of range"),
    ("bad listen address", existing, ["serve", "--listen", "127.0.0.1:99999"], 2, "port from 0 to 65535"),
    ("unknown finding", existing, ["findings", "ack", "zzz", "--reason", "x"], 2, "no finding with id 'zzz'"),
    ("missing partition", damaged(lambda p, t: p.unlink()), ["attribute", "--since", "2024-01-01"], 3, "missing"),
    ("truncated partition", damaged(lambda p, t: p.write_bytes(p.read_bytes()[:100])), ["status"], 3, "truncated"),
    ("altered partition", damaged(lambda p, t: p.write_bytes(p.read_bytes()[:-9] + b"X" + p.read_bytes()[-8:])),
     ["verify"], 3, "spendlake ingest"),
    ("corrupt ledger", damaged(lambda p, t: (t / "lake" / "_ledger" / "deliveries.json").write_text("{")),
     ["attribute", "--since", "2024-01-01"], 3, "deliveries.json.bad) and run `spendlake ingest`"),
    ("37 ledger bytes not UTF-8", damaged(lambda p, t: (t / "lake" / "_ledger" / "deliveries.json").write_bytes(
        b'{"entries": [\xff\x00')), ["status"], 3, "deliveries.json.bad) and run `spendlake ingest`"),
    ("36 findings file truncated", damaged_findings(lambda content: content[:100]), ["findings"], 3,
     "findings/source=engine/snapshot=current/data.parquet: findings table source=engine/snapshot=current is "
     "truncated (100 bytes, the record says"),
    # `attribute` reads no finding (nor does the rollup build): a command that reads them says it
    ("37 findings file altered", damaged_findings(footer_altered), ["findings"], 3,
     "findings table source=engine/snapshot=current is truncated (no readable Parquet footer) — run `spendlake rules "
     "run`: it sets the damaged file aside under _damaged/ and writes the table again"),
    ("unreadable state", damaged(lambda p, t: (t / "lake" / "_state" / "sources.json").write_text("{")),
     ["ingest"], 3, "state file is unreadable"),
    ("bad cost value", bad_value, ["ingest"], 3, "line 4, column BilledCost: could not convert '1.0.0'"),
    ("symlink out of the location", symlinked, ["ingest"], 3, "is a symbolic link to"),
    ("source location missing", lambda b, t: write_config(t / "c.yaml", {
        "lake": str(t / "lake"), "sources": [{"name": "a", "kind": "focus", "location": str(t / "gone")}]}),
     ["ingest"], 3, str("gone")),
]


@pytest.mark.parametrize("case, setup, args, code, named", CASES, ids=[c[0] for c in CASES])
def test_bad_inputs_exit_2_or_3_with_one_line_and_no_traceback(base, tmp_path, monkeypatch, case, setup, args, code,
                                                              named):
    monkeypatch.chdir(tmp_path)
    config = ["--config", str(setup(base, tmp_path))] if setup else []
    result = invoke(*config, *args)
    assert result.exit_code == code, result.output
    assert named in result.output, result.output
    problems = [line for line in result.output.splitlines()
                if line.lower().startswith("error: ") or "FAILED" in line]  # click's own usage errors say Error:
    assert len(problems) == 1, result.output


def test_57_runs_of_an_unknown_job_state_is_exit_2_and_synonyms_are_read(base):
    config = str(base / "spendlake.yaml")
    result = invoke("--config", config, "runs", "--since", "7d", "--state", "failed,cancled")
    assert result.exit_code == 2, result.output
    assert "error: --state: no job state 'CANCLED' — closest states: CANCELLED" in result.output
    from service.attribution import RunsQuery
    assert RunsQuery.parse(since="7d", state="canceled,failed,oom").states == ("CANCELLED", "FAILED", "OUT_OF_MEMORY")


def test_37_a_damaged_findings_file_is_named_by_the_api_as_a_503_not_an_anonymous_500(base, tmp_path):
    from prometheus_client import CollectorRegistry
    from service.core.config import load_config
    from service.serve.app import Api

    config = load_config(copy_of(base, tmp_path))
    [data] = (tmp_path / "lake" / "findings").rglob("data.parquet")
    content, times = data.read_bytes(), data.stat()
    middle = slice(20, 60)  # a data page: DuckDB names the file only when it reads it
    data.write_bytes(content[:middle.start] + bytes(b ^ 0x5A for b in content[middle]) + content[middle.stop:])
    os.utime(data, ns=(times.st_atime_ns, times.st_mtime_ns))  # bit rot keeps the time: the read finds it
    named = f"the lake's {data.relative_to(tmp_path / 'lake')}"  # over HTTP, no path of the server's disk
    response = Api(config, CollectorRegistry()).handle("/api/v1/findings", {}, None)
    error = json.loads(response.body)["error"]
    assert response.status == 503 and error["where"] == named, error
    assert "it is damaged" in error["message"] and "spendlake rules run" in error["hint"], error
    os.utime(data)  # a write that changed the time: its record's check finds it first
    response = Api(config, CollectorRegistry()).handle("/api/v1/findings", {}, None)
    error = json.loads(response.body)["error"]
    assert response.status == 503 and error["where"] == named, error
    assert "is altered" in error["message"] and "spendlake rules run" in error["hint"], error


def test_33_an_export_or_report_into_a_sources_location_is_refused_so_nothing_is_counted_twice(base, tmp_path):
    config = str(copy_of(base, tmp_path))
    def bill() -> list[tuple]:  # the copied export's files are new inodes: read again, the same bill
        rows = json.loads(invoke("--config", config, "status", "--format", "json").output)
        return [(r["source"], r["billing_period"], r["currency"], r["rows"], r["billed_cost"]) for r in rows]

    before = bill()
    for args, what in ((["export", "--format", "focus"], "the export"), (["report"], "reports")):
        result = invoke("--config", config, *args, "--out", str(tmp_path / "export" / "copy"))
        assert result.exit_code == 2, result.output
        assert (f"error: --out: {tmp_path / 'export' / 'copy'} is inside sources[0].location ({tmp_path / 'export'}), "
                f"so the next ingest would read it — write {what} to a folder outside the sources' locations"
                in result.output), result.output
    assert not (tmp_path / "export" / "copy").exists()
    assert invoke("--config", config, "ingest").exit_code == 0
    assert bill() == before  # the bill, once


def test_33_aws_cur_reports_under_one_prefix_are_two_sources_and_other_prefixes_do_not_overlap(tmp_path):
    config = write_config(tmp_path / "c.yaml", {"lake": str(tmp_path / "lake"), "sources": [
        {"name": "a", "kind": "aws-cur", "location": "s3://bills/cur", "report_name": "hourly"},
        {"name": "b", "kind": "aws-cur", "location": "s3://bills/cur/", "report_name": "daily"},
        {"name": "c", "kind": "aws-cur2", "location": "s3://bills/cur2"},
        {"name": "d", "kind": "focus", "location": str(tmp_path / "x")},
        {"name": "e", "kind": "focus", "location": str(tmp_path / "x2")}]})
    result = invoke("--config", str(config), "config", "validate")
    assert result.exit_code == 0 and "config ok: 5 source(s)" in result.output, result.output


def test_39_a_renamed_source_before_ingest_is_named_not_an_empty_lake_and_forget_unanswered_removes_nothing(
        base, tmp_path):
    config = copy_of(base, tmp_path)
    data = yaml.safe_load(config.read_text())
    data["sources"][0]["name"] = "focus-renamed"
    write_config(config, data)
    result = invoke("--config", str(config), "attribute", *WINDOW, "--format", "csv")
    assert result.exit_code == 0
    assert ("holds no bill of the configured sources, only of focus, which the config no longer names: run "
            "`spendlake ingest` to read the configured ones (a renamed source is read again under its new name), "
            "and `spendlake forget focus` to remove the old") in result.output
    unanswered = invoke("--config", str(config), "forget", "focus")  # no terminal: no answer
    assert unanswered.exit_code == 2, unanswered.output
    assert "error: forget: not confirmed: nothing was removed — answer y, or run `spendlake forget focus --yes`" \
        in unanswered.output
    assert (tmp_path / "lake" / "costs" / "source=focus").exists()


def test_57_a_window_without_a_bill_says_which_periods_the_lake_holds(base):
    config = str(base / "spendlake.yaml")
    result = invoke("--config", config, "attribute", "--since", "2020-01-01", "--until", "2020-02-01",
                    "--format", "csv")
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "team,currency,cost", "note: no cost in the window 2020-01-01 00:00 → 2020-02-01 00:00 UTC; the lake holds "
        "the billing periods 2024-09 to 2024-10"], result.output
    assert "no cost in the window" not in invoke("--config", config, "attribute", *WINDOW, "--format", "csv").output


def test_57_a_table_of_no_rows_is_the_reason_line_alone(base):
    # was: the empty table with a blank `total` footer and the coverage line above the note
    result = invoke("--config", str(base / "spendlake.yaml"), "attribute", "--since", "2020-01-01", "--until",
                    "2020-02-01", "--format", "table")
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "note: no cost in the window 2020-01-01 00:00 → 2020-02-01 00:00 UTC; the lake holds the billing periods "
        "2024-09 to 2024-10"], result.output


def test_1_a_source_named_twice_is_ingested_once(base):
    result = invoke("--config", str(base / "spendlake.yaml"), "ingest", "--source", "focus", "--source", "focus")
    assert result.exit_code == 0
    lines = [line for line in result.output.splitlines() if line.startswith("focus ")]
    assert lines and len(lines) == len(set(lines)), result.output


def test_54_serve_on_an_address_in_use_names_the_flag_that_gave_it(base, tmp_path):
    import socket

    config = copy_of(base, tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        result = invoke("--config", str(config), "serve", "--listen", address)
    assert result.exit_code == 2, result.output
    assert f"error: --listen: cannot listen on {address}: Address already in use" in result.output, result.output


def test_57_thousands_of_where_values_matching_nothing_warn_in_a_screenful(base):
    wheres = [arg for i in range(500) for arg in ("--where", f"team=nobody-{i}")]
    result = invoke("--config", str(base / "spendlake.yaml"), "attribute", *WINDOW, *wheres, "--format", "csv")
    assert result.exit_code == 0
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 11 and warnings[-1] == "warning: 490 more --where values match nothing", warnings[-2:]


@pytest.mark.parametrize("command", [["attribute", *WINDOW], ["runs", *WINDOW], ["commitments", "--since", "2024-01-01"]],
                         ids=lambda c: c[0])
def test_58_by_given_twice_is_exit_2_not_the_last_one_alone(base, command):
    """`--where` repeats, so `--by team --by project` reads as two dimensions; click kept the
    last alone (a table by project, team silently gone), where the API answers a repeated `by` 400."""
    result = invoke("--config", str(base / "spendlake.yaml"), *command, "--by", "team", "--by", "project")
    assert result.exit_code == 2, result.output
    assert result.output.strip() == ("error: --by: given 2 times (team, project) — name the dimensions once, "
                                     "comma-separated: --by team,project")


@pytest.mark.parametrize("command, option", [
    (["attribute", "--since", "7d", "--since", "30d"], "--since"),
    (["runs", *WINDOW, "--format=json", "--format", "csv"], "--format"),
    (["findings", "--team", "nlp", "--team", "vision"], "--team"),
    (["rules", "run", "--since", "7d", "--since", "1d", "--dry-run"], "--since"),
    (["estimate", "--gpu", "H100", "--gpu", "A100"], "--gpu"),
    (["plans", "--as-of", "2024-06-01", "--as-of", "2024-07-01"], "--as-of"),
    (["--config", "other.yaml", "status"], "--config"),  # the root's, parsed before any command
], ids=lambda c: c[0] if isinstance(c, list) else c)
def test_59_a_single_value_option_given_twice_is_exit_2_not_the_last_one(base, command, option):
    """Click kept the last of `--since 7d --since 30d` silently: a 30-day table for a user who
    asked for 7 days too. Every command's single-value option is checked in one place."""
    result = invoke("--config", str(base / "spendlake.yaml"), *command)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {option}: given 2 times — give {option} once"


@pytest.mark.parametrize("command, option", [
    (["report", "--date", ""], "--date"),
    (["plans", "--as-of", " "], "--as-of"),
    (["attribute", "--since", ""], "--since"),
    (["attribute", "--since", "2024-01-01", "--until", ""], "--until"),
    (["runs", "--since", "2024-01-01", "--until", ""], "--until"),
    (["commitments", "--since", ""], "--since"),
    (["commitments", "--until", ""], "--until"),
    (["export", "--format", "focus", "--out", "x", "--since", ""], "--since"),
    (["export", "--format", "focus", "--out", "x", "--until", ""], "--until"),
    (["rules", "run", "--since", "", "--dry-run"], "--since"),
    (["demo", "--start", ""], "--start"),
], ids=lambda c: " ".join(c) if isinstance(c, list) else c)
def test_an_empty_date_or_time_option_is_exit_2_naming_it_not_the_default(base, command, option, tmp_path, monkeypatch):
    """`report --date ""` (a scheduler's unset variable) wrote the default day's report, and an
    empty --until ended the window at the data's end: an empty day or time names none."""
    monkeypatch.chdir(tmp_path)  # without the check, `export --out x` and `demo` would write in the checkout
    result = invoke("--config", str(base / "spendlake.yaml"), *command)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {option}: is empty, naming no day or time — leave {option} out for its default"


@pytest.mark.parametrize("command", [
    ["estimate", "--start", "", "--help"],
    ["report", "--date", " ", "--help"],
    ["attribute", "--since", "7d", "--since", "30d", "--help"],
], ids=" ".join)
def test_help_wins_over_an_empty_or_repeated_option_as_click_lets_it_win_elsewhere(base, command):
    """`spendlake estimate --start "" --help` was exit 2 for the empty --start: --help, eager,
    prints the command's help whatever the rest of the line holds."""
    result = invoke("--config", str(base / "spendlake.yaml"), *command)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: cli {command[0]} ")


def test_status_csv_says_final_true_or_false_as_its_json_does(base):
    config = str(base / "spendlake.yaml")
    rows = list(csv.DictReader(invoke("--config", config, "status", "--format", "csv").output.splitlines()))
    shown = json.loads(invoke("--config", config, "status", "--format", "json").output)
    entries = shown if isinstance(shown, list) else shown["periods"]
    assert rows and [row["final"] for row in rows] == [json.dumps(entry["final"]) for entry in entries]


def test_59_repeatable_options_and_flags_still_repeat(base):
    result = invoke("--config", str(base / "spendlake.yaml"), "attribute", *WINDOW, "--where", "team=nlp",
                    "--where", "team=vision", "--format", "json")
    assert result.exit_code == 0, result.output


def test_a_terminal_that_cannot_print_a_character_is_one_error_line_not_a_traceback(tmp_path):
    config = tmp_path / "spendlake.yaml"
    config.write_text("lake: ./lake ✨\n")  # a path, a team or a tag value outside Latin-1
    shown = CliRunner(charset="latin-1").invoke(cli, ["--config", str(config), "config", "validate"])
    assert shown.exit_code == 2 and not isinstance(shown.exception, UnicodeEncodeError)
    assert shown.stderr == ("error: this terminal's encoding (iso8859-1) cannot print '\\u2728': "
                            "use a UTF-8 locale (LANG=C.UTF-8) or PYTHONIOENCODING=utf-8\n")
    assert CliRunner().invoke(cli, ["--config", str(config), "config", "validate"]).exit_code == 0  # UTF-8 prints it


@pytest.mark.parametrize("args, said", [
    (["attribute", *WINDOW, "--by", "x" * 100_000], "--by: unknown dimension 'x"),
    (["attribute", *WINDOW, "--where", "x" * 100_000], "--where: cannot read 'x"),
    (["attribute", *WINDOW, "--where", "team!" + "x" * 100_000], "--where: cannot read 'team!x"),
    (["runs", *WINDOW, "--by", "x" * 100_000], "--by: runs cannot be grouped by 'x"),
    (["commitments", *WINDOW, "--by", "x" * 100_000], "--by: unknown dimension(s) x"),
    (["attribute", *WINDOW, "--where", "project=" + "x" * 100_000], "--where project=x"),
], ids=["attribute-by", "where", "where-not-equal", "runs-by", "commitments-by", "where-matching-nothing"])
def test_a_very_long_value_is_echoed_cut_with_its_length(base, args, said):
    """A 100,000-character --by or --where was echoed whole in the exit 2 message (or the warning)."""
    result = invoke("--config", str(base / "spendlake.yaml"), *args)
    assert said in result.output and "… (100,0" in result.output, result.output[:400]
    assert len(result.output) < 2_000 and "x" * 201 not in result.output
