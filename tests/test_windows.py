"""Windows anchored to the data (issue 15.1): each source's data_through, relative windows
that end there, coverage in every answer, equal spans for --compare, and the same answers,
findings and metrics whatever the wall-clock hour."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.utils import floatToGoString

from service.cli.main import cli
from service.core.config import parse_config
from service.core.coverage import billing_data_through, data_end
from service.core.lake import LEDGER_FILE
from service.core.timewindow import month_text
from service.attribution.metric_top import metrics_anchor
from service.findings.run import run_rules
from service.serve.app import Api
from service.serve.metrics import LakeCollector
from tests.attribution_helpers import declared_sources, line, make_lake

END = datetime(2026, 11, 28, tzinfo=timezone.utc)  # the usage data ends at midnight


def day_lines() -> list[dict]:
    lines = []
    for n in range(1, 41):  # 40 days of 24 hourly lines: 1 an hour for nlp, 0.5 untagged
        day = END - timedelta(days=n)
        for hour in range(24):
            start = f"{day + timedelta(hours=hour):%Y-%m-%d %H:%M}"
            lines.append(line(start, "1", tags={"team": "nlp"}, resource="i-1"))
            lines.append(line(start, "0.5", service="Amazon S3", resource="bucket-x"))
    lines.append(line("2026-11-01 00:00", "300", end="2026-12-01 00:00", category="Tax"))  # ends later: not usage
    lines.append(line("2026-11-01 00:00", "90", end="2026-12-01 00:00", service="AWS Support (Business)",
                      category="Purchase"))
    return lines


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("windows")
    lake = make_lake(root, day_lines())
    path = root / "spendlake.yaml"
    document = {"lake": str(lake.root), "sources": declared_sources(lake),
                "attribution": {"shared": [{"match": {"charge_category": "Tax"}, "split": "proportional",
                                            "by": "team"}]},
                "rules": {"unallocated-spend": {"dimensions": ["team"]}}}
    path.write_text(yaml.safe_dump(document))
    return lake, path, parse_config(document)


def run(path, *args):
    return CliRunner().invoke(cli, ["--config", str(path), "attribute", *args])


def test_data_through_is_the_end_of_the_latest_usage_charge_period(setup):
    lake, _, _ = setup
    [entry] = [e for e in lake.ledger() if e.billing_period == "2026-11"]
    assert entry.data_through == "2026-11-28T00:00:00Z"  # not the tax or support line's 2026-12-01
    assert billing_data_through(lake) == {"cur": END} and data_end(lake) == END


def test_a_ledger_without_data_through_is_read_from_the_partition(setup, tmp_path):
    lake, _, _ = setup
    copy = make_lake(tmp_path, day_lines()[:48])  # 2026-11-27's hours
    ledger = json.loads((copy.root / LEDGER_FILE).read_text())
    for item in ledger["entries"]:
        del item["data_through"]  # as ingest wrote it before 2026-12
    (copy.root / LEDGER_FILE).write_text(json.dumps(ledger))
    assert not copy.ledger()[0].data_through_recorded
    assert data_end(copy) == END



def test_a_missing_partition_of_a_ledger_without_data_through_does_not_move_the_data_end_back(tmp_path):
    """A ledger from before 2026-12 (no recorded data_through) whose latest partition file is gone:
    its source's data end was read from its other files only, here none, so the lake's end was a
    retired source's (2026-11-21) and the month the metrics and budgets take November while the
    lake holds a December bill; the missing period reaches at least its own start."""
    make_lake(tmp_path, [line(f"2026-11-{d:02d} 00:00", "1") for d in range(1, 21)], source="retired")
    lake = make_lake(tmp_path, [line(f"2026-12-0{d} 00:00", "1") for d in (1, 2, 3)], source="cur")
    ledger = json.loads((lake.root / LEDGER_FILE).read_text())
    for item in ledger["entries"]:
        if item["source"] == "cur":
            del item["data_through"]  # as ingest wrote it before 2026-12
    (lake.root / LEDGER_FILE).write_text(json.dumps(ledger))
    lake.partition_file("costs", [("source", "cur"), ("billing_period", "2026-12")]).unlink()
    assert billing_data_through(lake) == {"cur": datetime(2026, 12, 1, tzinfo=timezone.utc),
                                          "retired": datetime(2026, 11, 20, 1, tzinfo=timezone.utc)}
    assert month_text(metrics_anchor(lake, datetime(2026, 12, 5, tzinfo=timezone.utc))) == "2026-12"

def test_relative_windows_end_at_the_data_and_say_so(setup):
    _, path, _ = setup
    data = json.loads(run(path, "--since", "7d", "--format", "json").output)
    assert (data["since"], data["until"]) == ("2026-11-21T00:00:00Z", "2026-11-28T00:00:00Z")
    assert data["data_through"] == "2026-11-28T00:00:00Z"
    assert data["sources"] == [{"source": "cur", "data_through": "2026-11-28T00:00:00Z"}]
    # 7 days × 24 × 1.5, and 7/30 of the tax and support lines
    assert Decimal(data["totals"][0]["cost"]) == Decimal(7 * 36) + Decimal(300 + 90) * 7 / 30
    mtd = json.loads(run(path, "--since", "mtd", "--format", "json").output)
    assert (mtd["since"], mtd["until"]) == ("2026-11-01T00:00:00Z", "2026-11-28T00:00:00Z")
    table = run(path, "--since", "24h", "--format", "table").output
    assert "data through 2026-11-28 00:00 UTC" in table and "no data yet" not in table


def test_an_explicit_until_is_kept_and_its_coverage_stated(setup):
    _, path, _ = setup
    data = json.loads(run(path, "--since", "2026-11-27", "--until", "2026-11-29", "--format", "json").output)
    assert data["until"] == "2026-11-29T00:00:00Z" and data["data_through"] == "2026-11-28T00:00:00Z"
    table = run(path, "--since", "2026-11-27", "--until", "2026-11-29", "--format", "table").output
    assert "data through 2026-11-28 00:00 UTC; the window's last 24.0 h have no data yet" in table
    empty = run(path, "--since", "2026-11-29", "--format", "json")
    assert empty.exit_code == 2 and "the data runs through 2026-11-28T00:00:00Z" in empty.output


def test_compare_sets_equal_spans_of_data_side_by_side(setup):
    _, path, _ = setup

    def totals(*args):
        data = json.loads(run(path, *args, "--format", "json").output)
        return [(t["cost"], t.get("previous_cost")) for t in data["totals"]]

    # the window runs a day past the data: it is set against the one day before it, not two
    [(cost, previous)] = totals("--since", "2026-11-27", "--until", "2026-11-29", "--compare")
    assert cost == totals("--since", "2026-11-27", "--until", "2026-11-29")[0][0]
    assert previous == totals("--since", "2026-11-26", "--until", "2026-11-27")[0][0]
    # a relative window: the week of data against the week before it, change 0 for hourly spend
    week = json.loads(run(path, "--since", "7d", "--by", "team", "--compare", "--format", "json").output)
    assert Decimal(week["totals"][0]["change"]) == 0


def test_an_empty_window_is_mended_by_what_the_command_takes(setup):
    # past the data's end only an earlier start helps; `rules run` has no --until to suggest
    _, path, _ = setup
    for command in (["attribute"], ["runs"], ["rules", "run", "--dry-run"]):
        shown = CliRunner().invoke(cli, ["--config", str(path), *command, "--since", "2026-11-29"])
        assert shown.exit_code == 2, shown.output
        assert ("--since: the window is empty: the data runs through 2026-11-28T00:00:00Z — give a --since before "
                "it;") in shown.stderr and "--until" not in shown.stderr, shown.stderr
    backwards = run(path, "--since", "2026-11-20", "--until", "2026-11-10")
    assert "give an earlier --since or a later --until" in backwards.stderr, backwards.stderr


def test_compare_names_the_span_it_compares_with_and_says_when_it_holds_no_cost(setup):
    # the data starts on 2026-10-19: a week before it holds no bill, and --compare shows it as 0
    _, path, _ = setup
    data = json.loads(run(path, "--since", "2026-11-27", "--until", "2026-11-29", "--compare", "--format",
                          "json").output)
    assert (data["previous_since"], data["previous_until"]) == ("2026-11-26T00:00:00Z", "2026-11-27T00:00:00Z")
    table = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "7d", "--compare", "--format",
                                     "table"], env={"COLUMNS": "200"})
    assert ("cost by team, 2026-11-21T00:00:00Z → 2026-11-28T00:00:00Z against 2026-11-14T00:00:00Z → "
            "2026-11-21T00:00:00Z") in " ".join(table.stdout.split()), table.stdout  # the title wraps
    assert "note" not in table.stderr
    early = run(path, "--since", "2026-10-19", "--until", "2026-10-26", "--compare", "--format", "csv")
    assert early.exit_code == 0 and early.stdout.splitlines()[1].startswith("nlp,USD,168"), early.output
    assert ("note: no cost in the previous window 2026-10-12 00:00 → 2026-10-19 00:00 UTC; the lake holds the "
            "billing periods 2026-10 to 2026-11; --compare shows it as 0") in early.stderr, early.stderr
    plain = json.loads(run(path, "--since", "7d", "--format", "json").output)
    assert "previous_since" not in plain and "previous_until" not in plain


@pytest.mark.parametrize("clock", [datetime(2026, 11, 28, 18, 53, tzinfo=timezone.utc),
                                   datetime(2026, 12, 1, 3, 7, tzinfo=timezone.utc)])
def test_same_lake_same_answers_findings_and_metrics_at_any_hour(setup, clock):
    """Run at 18:53 on the day the data ends and at 03:07 three days later: the same window,
    attribution, findings and metric values (the clock only judges freshness)."""
    lake, _, config = setup
    first = datetime(2026, 11, 28, 0, 30, tzinfo=timezone.utc)
    seen = []
    for now in (first, clock):
        registry = CollectorRegistry()
        registry.register(LakeCollector(config, clock=now.timestamp))
        page = generate_latest(registry).decode()
        found = run_rules(config, dry_run=True, now=now).result.seen
        api = Api(config, registry, clock=lambda: now)
        answer = json.loads(api.handle("/api/v1/attribute", {"since": ["7d"], "by": ["team"]}, None).body)
        seen.append((page, [(f.id, f.monthly_waste_usd, f.summary, f.evidence, f.last_seen) for f in found], answer))
    assert seen[0] == seen[1]
    page, findings, answer = seen[0]
    assert answer["until"] == "2026-11-28T00:00:00Z"
    assert findings and 'spendlake_spend_usd{project="unallocated",team="nlp",window="24h"}' in page
    assert f'spendlake_data_through_timestamp_seconds{{source="cur"}} {floatToGoString(END.timestamp())}' in page


def test_status_shows_money_as_the_demo_does(setup):
    """A table shows cents with thousands separators, as the demo prints them (issue 15.6);
    JSON keeps every decimal."""
    _, path, _ = setup
    shown = CliRunner().invoke(cli, ["--config", str(path), "status", "--format", "json"])
    november = [r for r in json.loads(shown.output) if r["billing_period"].startswith("2026-11")]
    billed = Decimal(november[0]["billed_cost"])
    assert billed == Decimal(27 * 36 + 390) and november[0]["billed_cost"].endswith(".000000000000")
    table = CliRunner().invoke(cli, ["--config", str(path), "status", "--format", "table"], env={"COLUMNS": "240"})
    assert table.exit_code == 0, table.output
    assert "1,362.00" in table.output and "1362.0000" not in table.output


def test_month_to_date_on_the_1st_is_the_month_just_ended():
    """Data through the 1st 00:00: `mtd` is the whole month that data covers, not an empty
    window (the month-to-date series vanished on the 1st, issue 15.1)."""
    from service.core.timewindow import Window, parse_window

    first = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert parse_window("mtd", end=first) == Window(datetime(2026, 11, 1, tzinfo=timezone.utc), first)
    later = datetime(2026, 12, 1, 6, tzinfo=timezone.utc)
    assert parse_window("mtd", end=later) == Window(first, later)


def test_mtd_ends_no_window_and_an_until_is_offered_only_what_an_until_takes(setup):
    """break48: `--until mtd` said "cannot read 'mtd' as a time — use e.g. ..., mtd, ...", offering the
    value it refused. mtd starts a window: as an end it would be the month's start, and `--since mtd
    --until mtd` an empty window; an --until's examples are those it reads."""
    _, path, _ = setup
    for since in ("7d", "mtd"):
        shown = run(path, "--since", since, "--until", "MTD")
        assert shown.exit_code == 2, shown.output
        assert shown.stderr.strip() == (
            "error: --until: 'MTD' starts a window (the month to date), it cannot end one — leave --until out to end "
            "at the data's end (`--since mtd` alone: the month to date), or use e.g. 2d, 24h, now, 2026-11-01 or "
            "2026-11-01T06:00:00Z"), shown.stderr
    other = run(path, "--since", "7d", "--until", "soon")
    assert other.exit_code == 2 and other.stderr.strip() == (
        "error: --until: cannot read 'soon' as a time — use e.g. 2d, 24h, now, 2026-11-01 or 2026-11-01T06:00:00Z")
    for offered in re.findall(r"e\.g\. (.*)", other.stderr)[0].replace(" or ", ", ").split(", "):
        assert run(path, "--since", "30d", "--until", offered.strip()).exit_code == 0, offered


def test_a_year_1_window_prints_its_year_in_four_digits(setup, tmp_path):
    """strftime's `%Y` wrote year 1 as `1` (`1-01-01 00:00 → 1-01-03 00:00 UTC`, a report's
    `1-02-01`): dates print as ISO 8601 writes them, the year in four digits."""
    _, path, _ = setup
    shown = run(path, "--since", "0001-01-01", "--until", "0001-01-03", "--format", "table")
    assert shown.exit_code == 0, shown.output
    assert "window 0001-01-01 00:00 → 0001-01-03 00:00 UTC" in shown.output, shown.output
    report = CliRunner().invoke(cli, ["--config", str(path), "report", "--date", "0001-02-01", "--out", str(tmp_path)])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "0001-02-01" / "report.json").read_text()
    assert "30 days to 0001-02-01" in text and "no bill for February 0001" in text, text
    assert not re.search(r"(?<![\d-])1-0[12]", text)


def test_the_compare_table_shows_each_change_as_a_signed_percentage(setup):
    """`--compare`'s table showed change_pct as a bare number (2.42, -12.72) beside the share's
    76.7%: a team lead read 2.42 as dollars; it shows +2.4%, −12.7% or ±0.0%, as the report does (CSV
    and JSON keep the exact figure), rounded half-up with the tables' minus."""
    _, path, _ = setup
    args = ["--config", str(path), "attribute", "--since", "7d", "--compare"]
    rows = json.loads(CliRunner().invoke(cli, [*args, "--format", "json"]).stdout)["rows"]
    table = CliRunner().invoke(cli, [*args, "--format", "table"], env={"COLUMNS": "200"}).stdout
    changed = [row for row in rows if row["change_pct"] is not None]
    assert changed, rows
    for row in changed:
        [line] = [line for line in table.splitlines() if line.startswith(f"│ {row['team']} ")]
        shown = Decimal(row["change_pct"]).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
        assert line.split("│")[6].strip() == (f"{shown:+}%".replace("-", "−") if shown else "±0.0%"), line


def test_a_change_is_rounded_half_up_with_the_tables_minus_in_the_cli_and_the_report():
    """The CLI's --compare wrote its own change (half-even: 2.45 as +2.4%, and '-') beside the report's
    (U+2212): one text for both, rounded half-up as money is."""
    from service.core.units import percent_change_text
    from service.report.model import change_pct
    from service.report.render import change

    assert change_pct(Decimal("102.45"), Decimal("100")) == Decimal("2.5")
    assert [percent_change_text(Decimal(v)) for v in ("2.45", "-2.45", "0.04", "-0.04")] == ["+2.5%", "−2.5%", "±0.0%", "±0.0%"]
    assert change(None) == "—" and percent_change_text(None) is None
