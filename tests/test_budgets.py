"""Budgets: hand-computed forecasts, the `budget` rule's findings, `spendlake budgets`."""

from __future__ import annotations

import json
from pathlib import Path
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal

import pytest
from click.testing import CliRunner

from attribution_helpers import line, make_lake
from rules.context import RuleContext
from rules.budget import BudgetRule
from service.findings.budgets import budget_status, early_in_month, judged_month
from service.findings.forecast import Forecast, forecast_month
from service.cli.main import cli
from service.core.config import load_config, parse_config
from service.core.config_budgets import BudgetConfig
from service.core.lake import Lake
from service.core.timewindow import Window, month_start
from service.findings.run import run_rules
from tests.attribution_helpers import declared_sources

ATTRIBUTION = {"dimensions": {"team": {"tags": ["team"]}}}


def daily(first: date, last: date, cost) -> dict[date, Decimal]:
    days = (last - first).days + 1
    return {first + timedelta(days=n): Decimal(cost(first + timedelta(days=n))) for n in range(days)}


def test_flat_run_rate_projects_the_rest_of_the_month():
    spend = daily(date(2026, 10, 1), date(2026, 11, 14), lambda d: 100)
    outlook = forecast_month(spend, datetime(2026, 11, 15))
    # Nov 1-14 spent 1400; Nov 15 (whole day left) to Nov 30 = 16 days × 100.
    assert outlook.actual == Decimal(1400)
    assert outlook.days_left == Decimal(16)
    assert outlook.forecast == Decimal(3000)
    assert outlook.low == outlook.high == Decimal(3000)


def test_forecast_knows_weekends_and_part_of_today():
    spend = daily(date(2026, 10, 1), date(2026, 11, 15), lambda d: 10 if d.weekday() >= 5 else 100)
    now = datetime(2026, 11, 16, 12)  # a Monday, half gone
    outlook = forecast_month(spend, now)
    month_so_far = sum(v for d, v in spend.items() if d.month == 11)
    assert outlook.actual == month_so_far
    # rest of Monday (0.5 × 100) + Nov 17-30: 10 weekdays × 100 + 4 weekend days × 10
    assert outlook.forecast == month_so_far + Decimal(50) + Decimal(1000) + Decimal(40)
    assert outlook.days_left == Decimal("14.5")
    assert outlook.low < outlook.forecast < outlook.high


def test_data_ending_on_the_1st_judges_the_month_it_closes_not_an_empty_new_one():
    # The bill ends a day before "now": data through Dec 1 00:00 is November, as `--since mtd` reads it
    # (was: December with 0 actual and the whole month forecast from November's rate, 200%).
    spend = daily(date(2026, 10, 1), date(2026, 11, 30), lambda d: 100)
    now = datetime(2026, 12, 1)
    outlook = forecast_month(spend, now)
    assert outlook.actual == Decimal(3000)
    assert outlook.days_left == 0 and outlook.forecast == outlook.low == outlook.high == Decimal(3000)
    assert judged_month(now) == "2026-11" and not early_in_month(now)
    assert judged_month(datetime(2026, 12, 1, 6)) == "2026-12" and early_in_month(datetime(2026, 12, 1, 6))


def budget_lake(tmp_path, *, today: date, per_day: str = "100", days: int = 45):
    lines = [line(f"{today - timedelta(days=n)} 00:00:00", per_day, end=f"{today - timedelta(days=n - 1)} 00:00:00",
                  tags={"Team": "pretrain"}) for n in range(1, days + 1)]
    lines.append(line(f"{today - timedelta(days=2)} 00:00:00", "55", tags={"team": "eval"}))
    return make_lake(tmp_path, lines)


def budgets_config(lake, budgets):
    return parse_config({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION, "budgets": budgets})


@pytest.mark.slow
def test_budget_rule_raises_the_highest_line_crossed_with_owner_and_overrun(tmp_path):
    lake = budget_lake(tmp_path, today=date(2026, 11, 15))
    config = budgets_config(lake, [
        {"name": "pretrain-soft", "value": "pretrain", "amount": 2000},   # actual 1400 ≥ 50%, forecast 3000 ≥ 100%
        {"name": "pretrain-hard", "value": "Pretrain", "amount": 1200, "on": ["actual"]},  # actual 1400 > 1200
        {"name": "eval", "value": "eval", "amount": 10000},                # 55 so far: no line crossed
    ])
    report = run_rules(config, only=["budget"], since="7d", now=datetime.fromisoformat("2026-11-15T00:00:00+00:00"))
    found = {(f.evidence["budget"], f.evidence["kind"]): f for f in report.result.findings}
    assert set(found) == {("pretrain-soft", "actual"), ("pretrain-soft", "forecast"), ("pretrain-hard", "actual")}
    soft_actual = found[("pretrain-soft", "actual")]
    assert (soft_actual.severity, soft_actual.evidence["line"], soft_actual.impact_usd) == ("warning", "0.5", 0)
    assert soft_actual.category == "overspend" and soft_actual.monthly_waste_usd is None  # an overrun is not waste
    soft_forecast = found[("pretrain-soft", "forecast")]
    assert soft_forecast.severity == "warning" and soft_forecast.evidence["forecast"] == "3000.00"
    assert soft_forecast.impact_usd == Decimal("1000.00")  # the forecast overrun: 3000 − 2000
    hard = found[("pretrain-hard", "actual")]
    assert hard.severity == "critical" and hard.impact_usd == Decimal("200.00")  # the actual overrun
    assert {f.team.lower() for f in found.values()} == {"pretrain"}  # as each budget spells it
    assert "pretrain" in hard.summary and "1,400.00" in hard.summary
    # the rule's numbers are those of `spendlake budgets` at the same instant
    statuses = {s.budget.name: s.to_json() for s in budget_status(lake, config, datetime(2026, 11, 15))}
    assert soft_forecast.evidence["forecast"] == statuses["pretrain-soft"]["forecast"]
    assert hard.evidence["actual"] == statuses["pretrain-hard"]["actual"] == "1400.00"


def test_the_budget_rule_judges_the_outlooks_its_context_gives(tmp_path):
    @dataclass(frozen=True)
    class Given:  # anything with a budget and an outlook will do: rules see an interface
        budget: BudgetConfig
        outlook: Forecast
        left_out: tuple = ()

    budget = BudgetConfig(name="gpu", value="pretrain", amount=Decimal(1000), lines=(Decimal("0.5"), Decimal(1)))
    outlook = Forecast(actual=Decimal(600), forecast=Decimal(1100), low=Decimal(900), high=Decimal(1300),
                       days_left=Decimal(12))
    ctx = RuleContext(con=Lake(tmp_path / "lake").query(), window=Window(datetime(2026, 11, 8, tzinfo=timezone.utc),
                                                                         datetime(2026, 11, 15, tzinfo=timezone.utc)),
                      budget_outlooks=lambda: [Given(budget, outlook)])
    found = {f.evidence["kind"]: f for f in BudgetRule().evaluate(ctx)}
    assert (found["actual"].evidence["line"], found["actual"].severity) == ("0.5", "warning")
    assert (found["forecast"].evidence["line"], found["forecast"].impact_usd) == ("1", Decimal(100))
    assert found["forecast"].team == "pretrain"
    assert BudgetRule().evaluate(RuleContext(con=ctx.con, window=ctx.window)) == []  # no budgets, no findings


def test_a_credit_alone_in_another_currency_is_no_spend_a_budget_misses(tmp_path):
    # an EUR budget with nothing spent in EUR: a USD credit (a negative amount) alone is no spend it
    # could have counted, so no other-currency warning; USD spent besides it is, and only that is named
    @dataclass(frozen=True)
    class Given:
        budget: BudgetConfig
        outlook: Forecast
        left_out: tuple

    budget = BudgetConfig(name="gpu", value="pretrain", amount=Decimal(1000), currency="EUR")
    nothing = Forecast(actual=Decimal(0), forecast=Decimal(0), low=Decimal(0), high=Decimal(0), days_left=Decimal(12))
    window = Window(datetime(2026, 11, 8, tzinfo=timezone.utc), datetime(2026, 11, 15, tzinfo=timezone.utc))

    def found(left_out):
        return BudgetRule().evaluate(RuleContext(con=Lake(tmp_path / "lake").query(), window=window,
                                                 budget_outlooks=lambda: [Given(budget, nothing, left_out)]))

    assert found((("USD", Decimal("-25")),)) == []
    [warned] = found((("USD", Decimal("-25")), ("GBP", Decimal("40"))))
    assert (warned.resource_id, warned.severity, warned.impact_usd) == ("budget:gpu", "warning", 0)
    assert "while GBP 40.00 was (currencies" in warned.summary


def budgets_json(lake, budgets):
    """`spendlake budgets --format json` on a config of the lake with these budgets: (config path, result)."""
    path = lake.root.parent / "spendlake.yaml"
    path.write_text(json.dumps({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION,
                                "budgets": budgets}))
    result = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "json"])
    assert result.exit_code == 0, result.output
    return path, result


def test_a_budget_names_the_spend_of_its_scope_in_other_currencies_it_leaves_out(tmp_path):
    # nlp spent USD 300 and EUR 250 this month: a USD budget counts the 300 and says the EUR 250 is left out
    lines = [line("2026-11-01 00:00", "300", end="2026-11-02 00:00", tags={"team": "nlp"}),
             line("2026-11-01 00:00", "250", end="2026-11-02 00:00", currency="EUR", tags={"team": "nlp"}),
             line("2026-11-01 00:00", "900", end="2026-11-02 00:00", currency="EUR", tags={"team": "cv"})]
    from service.report.sections.budgets import budgets_section

    lake = make_lake(tmp_path, lines)
    path, shown = budgets_json(lake, [{"name": "nlp-gpu", "value": "nlp", "amount": 400},
                                      {"name": "cv-gpu", "value": "cv", "amount": 400, "currency": "EUR"}])
    nlp, cv = json.loads(shown.stdout)
    assert nlp["actual"] == "300.00"  # converted nothing
    assert nlp["left_out"] == [{"currency": "EUR", "actual": "250.00"}] and cv["left_out"] == []
    assert ("note: budget nlp-gpu (team nlp) counts USD spend only: EUR 250.00 spent this month is left out"
            in shown.stderr), shown.stderr
    # the report's budget line and the section's note say it too
    section = budgets_section(load_config(path), lake, date(2026, 11, 1))
    assert [row["left_out"] for row in section.tables[0].rows] == ["EUR 250.00", ""]
    assert section.note == ("Budget nlp-gpu (team nlp) counts USD spend only: EUR 250.00 spent this month is left out "
                            "(currencies are never converted).")
    [finding] = [f for f in run_rules(load_config(path), only=["budget"], dry_run=True).result.findings
                 if f.evidence["kind"] == "actual" and f.evidence["budget"] == "nlp-gpu"]
    assert finding.evidence["left_out"] == [{"currency": "EUR", "actual": "250.00"}]


def test_a_budget_counts_the_cost_it_names_billed_by_default_or_effective(tmp_path):
    # nlp's GPUs ran on a Savings Plan: billed 0 (the fee is its own line, on no team), effective 60;
    # cv ran on demand, billed and effective 40. A budget counted nlp's $0 whatever it was for.
    lines = [line("2026-11-01 00:00", "0", end="2026-11-02 00:00", effective="60", tags={"team": "nlp"}),
             line("2026-11-01 00:00", "40", end="2026-11-02 00:00", tags={"team": "cv"}),
             line("2026-11-01 00:00", "720", end="2026-11-02 00:00", effective="0", category="Purchase")]
    lake = make_lake(tmp_path, lines)
    _, shown = budgets_json(lake, [{"name": "nlp-billed", "value": "nlp", "amount": 100},
                                   {"name": "nlp-effective", "value": "nlp", "amount": 100, "cost": "effective"},
                                   {"name": "cv-effective", "value": "cv", "amount": 100, "cost": "effective"}])
    rows = {row["budget"]: row for row in json.loads(shown.stdout)}
    assert {name: (row["cost"], row["actual"], row["used_pct"]) for name, row in rows.items()} == {
        "nlp-billed": ("billed", "0.00", "0.0"), "nlp-effective": ("effective", "60.00", "60.0"),
        "cv-effective": ("effective", "40.00", "40.0")}
    path = lake.root.parent / "spendlake.yaml"
    csv_out = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "csv"])
    # cost came after the columns readers had: last, after last_month (early in a month), not between them
    assert csv_out.stdout.splitlines()[0] == ("budget,dimension,value,currency,amount,actual,used_pct,forecast,"
                                              "forecast_low,forecast_high,forecast_pct,days_left,status,last_month,"
                                              "cost"), csv_out.stdout
    from service.report.sections.budgets import budgets_section

    [table] = budgets_section(load_config(path), lake, date(2026, 11, 1)).tables
    assert [column.key for column in table.columns][-1] == "cost"
    # the number `attribute --cost effective` shows
    attributed = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "2026-11-01", "--until",
                                          "2026-11-02", "--cost", "effective", "--format", "json"])
    assert {r["team"]: r["cost"][:5] for r in json.loads(attributed.stdout)["rows"]}["nlp"] == "60.00"
    path.write_text(json.dumps({"lake": str(lake.root), "sources": declared_sources(lake),
                                "budgets": [{"name": "x", "value": "nlp", "amount": 1, "cost": "list"}]}))
    refused = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert refused.exit_code == 2 and "budgets[0].cost: must be one of billed or effective" in refused.output, refused.output


def test_budget_status_and_the_cli_agree_with_attribution(tmp_path):
    today = datetime.utcnow().date()
    lake = budget_lake(tmp_path, today=today)
    config = budgets_config(lake, [{"name": "pretrain", "value": "pretrain", "amount": 1000000}])
    [status] = budget_status(lake, config)
    # the data ends at today's 00:00: the month judged is the one `mtd` reads (on the 1st, the whole last month)
    expected_actual = Decimal(100) * (today - month_start(datetime.combine(today, time())).date()).days
    assert status.outlook.actual == expected_actual and status.status == "ok"
    _, result = budgets_json(lake, [{"name": "pretrain", "value": "pretrain", "amount": 1000000}])
    [row] = json.loads(result.output)
    assert row["budget"] == "pretrain" and Decimal(row["actual"]) == expected_actual
    assert row["status"] == "ok" and Decimal(row["forecast"]) >= expected_actual


def test_budget_config_errors_name_the_path(tmp_path):
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"budgets": [{"name": "x", "dimension": "squad", "value": "a", "amount": 1}]}))
    result = CliRunner().invoke(cli, ["--config", str(path), "budgets"])
    assert result.exit_code == 2
    assert "budgets[0].dimension: unknown dimension 'squad'" in result.output


def test_a_budget_on_job_type_without_clusters_says_to_add_them(tmp_path):
    """README's `dimension: job_type` said "unknown dimension 'job_type'; declared: team, project,
    experiment": not that it is a dimension of shared GPU clusters, which `clusters:` brings."""
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"budgets": [{"name": "x", "dimension": "job_type", "value": "eval", "amount": 1}]}))
    result = CliRunner().invoke(cli, ["--config", str(path), "budgets"])
    assert result.exit_code == 2
    assert ("budgets[0].dimension: 'job_type' is a dimension of shared GPU clusters: add `clusters:` under "
            "`attribution:`") in result.output, result.output


@pytest.mark.parametrize("amount, currency, refused", [
    ("0.001", "USD", "budgets[1].amount: 0.001 USD is less than one minor unit of USD (0.01)"),
    ("0.5", "JPY", "budgets[1].amount: 0.5 JPY is less than one minor unit of JPY (1)"),
    ("0.001", "KWD", None),  # the fils: a thousandth of a dinar
    ("0.01", "USD", None),
])
def test_a_budget_below_one_minor_unit_of_its_currency_is_refused(tmp_path, amount, currency, refused):
    """A budget of 0.001 USD was accepted and shown as 0.00, exceeded by any spend."""
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"budgets": [{"name": "a", "value": "a", "amount": 1}, {
        "name": "b", "value": "b", "amount": amount, "currency": currency}]}))
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert (result.exit_code, refused and refused in result.output) == ((2, True) if refused else (0, None)), \
        result.output


@pytest.mark.parametrize("budget, refused", [
    ({"amount": "1e400"}, "budgets[1].amount: 1E+400 does not fit the lake's money type DECIMAL(38,12) (at most 26 "
                          "digits before the point)"),
    ({"amount": "1e26"}, "budgets[1].amount: 1E+26 does not fit"),
    ({"amount": "99999999999999999999999999.99"}, None),  # 26 digits: the largest a period's sum holds
    ({"lines": [50, 80, 100]}, "budgets[1].lines: lines are fractions of the amount, 50 is 5000 %; write 0.5 for 50 %"),
    ({"lines": [0.5, 1.5, 10]}, None),  # 150 % and 1000 % are lines one may mean
    ({"lines": [0.8, 0.8, 1.0]}, "budgets[1].lines: 0.8 is written twice in lines; write each line once"),
])
def test_a_budget_amount_the_lake_cannot_hold_or_lines_written_as_percents_are_refused(tmp_path, budget, refused):
    """`amount: 1e400` passed `config validate`, then `budgets` and `report` failed with a
    decimal.InvalidOperation (exit 1); `lines: [50, 80, 100]` said "line 10000%" in findings, and
    `[0.8, 0.8]` was kept once without a word."""
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"budgets": [{"name": "a", "value": "a", "amount": 1},
                                            {"name": "b", "value": "b", "amount": 100, **budget}]}))
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert (result.exit_code, refused and refused in result.output) == ((2, True) if refused else (0, None)), \
        result.output


def test_a_budgets_on_key_written_in_yaml_is_the_key_on(tmp_path):
    """YAML 1.1 reads a bare `on` as the boolean true; the config reads YAML 1.2 booleans, so
    the documented `on: [actual]` works as written (it failed as `budgets[0][1]: Keys should be strings`)."""
    from service.core.config import load_config

    path = tmp_path / "spendlake.yaml"
    path.write_text("budgets:\n  - name: gpu\n    value: pretrain\n    amount: 1000\n    on: [actual]\n"
                    "rules:\n  unbounded-logs: {enabled: off}\n")
    config = load_config(path)
    assert config.budgets[0].on == ("actual",)
    assert config.rules["unbounded-logs"]["enabled"] == "off"  # a string, which the rule's bool field reads as false
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert result.exit_code == 0, result.output


def test_the_readme_budgets_example_loads_as_documented(tmp_path):
    """README "Budgets" shows a full `budgets:` section; it must load as it reads (YAML 1.1
    would read its `on:` key as the boolean true)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    example = readme.split("\n## Budgets\n", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "spendlake.yaml"
    path.write_text(example)
    (budget,) = load_config(path).budgets
    assert (budget.name, budget.dimension, budget.value, budget.amount, budget.currency) == (
        "pretrain-gpu", "team", "pretrain", Decimal(250000), "USD")
    assert budget.lines == (Decimal("0.5"), Decimal("0.8"), Decimal("1.0")) and budget.on == ("actual", "forecast")
    assert budget.cost == "billed"


def test_budgets_piped_without_format_keep_the_json_contract_of_format_json(tmp_path):
    # piped, the default format is JSON: last_month stays an object there too (it was the table's
    # text, "2026-10: 0.6% within"), and no budgets is [] rather than a sentence
    lake = budget_lake(tmp_path, today=date(2026, 11, 4))  # the data ends on the 4th: October is shown
    path = tmp_path / "spendlake.yaml"
    document = {"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION,
                "budgets": [{"name": "pretrain", "value": "pretrain", "amount": 500000}]}
    path.write_text(json.dumps(document))
    asked = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "json"])
    piped = CliRunner().invoke(cli, ["--config", str(path), "budgets"])
    assert asked.exit_code == piped.exit_code == 0, piped.output
    [row] = json.loads(piped.stdout)
    assert row["last_month"] == {"month": "2026-10", "actual": "3100.00", "used_pct": "0.6", "status": "within"}
    assert json.loads(piped.stdout) == json.loads(asked.stdout)
    table = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "table"], env={"COLUMNS": "250"})
    # money as every other table shows it
    assert " 500,000.00 │ " in table.stdout and "2026-10: 0.6% within" in table.stdout, table.stdout
    path.write_text(json.dumps({**document, "budgets": []}))
    none = CliRunner().invoke(cli, ["--config", str(path), "budgets"])
    assert none.exit_code == 0 and json.loads(none.stdout) == [], none.output


def test_a_budgets_actual_is_attribute_since_mtd_to_the_cent_where_the_daily_split_differs(tmp_path):
    # A shared Tax line split proportionally: day by day, 1 Nov's 100 goes half to nlp and half
    # to cv (50/50 direct spend) and 2 Nov has none to split; over the month nlp has 400 of the
    # 500 direct spend: 80 to nlp, 20 to cv. Budgets summed the days (nlp 450, cv 150), while
    # `attribute --since mtd` gives nlp 480, cv 120. The same in October, the month before.
    from prometheus_client import CollectorRegistry

    from service.attribution import attribute
    from service.report.sections.budgets import budgets_section
    from service.serve.app import Api
    from service.serve.families import budget_families

    AMOUNTS = {"nlp": 400, "cv": 200}  # each past a line: the budget rule's finding shows its actual
    lines = []
    for month in ("2026-10", "2026-11"):
        lines += [line(f"{month}-01 00:00", "100", end=f"{month}-02 00:00", tags={"team": "nlp"}),
                  line(f"{month}-01 00:00", "100", end=f"{month}-02 00:00", tags={"team": "cv"}),
                  line(f"{month}-01 00:00", "100", end=f"{month}-02 00:00", category="Tax"),
                  line(f"{month}-02 00:00", "300", end=f"{month}-03 00:00", tags={"team": "nlp"})]
    lake = make_lake(tmp_path, lines)
    document = {"lake": str(lake.root), "sources": declared_sources(lake),
                "attribution": {**ATTRIBUTION, "shared": [{"match": {"charge_category": "Tax"}, "split": "proportional",
                                                            "by": "team"}]},
                "budgets": [{"name": team, "value": team, "amount": AMOUNTS[team]} for team in AMOUNTS]}
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps(document))
    config = load_config(path)
    now = datetime(2026, 11, 3)  # the data's end
    statuses = {s.budget.value: s for s in budget_status(lake, config)}
    shown = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = {row["value"]: row for row in json.loads(shown.stdout)}
    findings = {f.evidence["value"]: f for f in run_rules(config, only=["budget"], dry_run=True).result.findings
                if f.evidence["kind"] == "actual"}
    used = budget_families(config, lake, now)[0]
    ratios = {sample.labels["value"]: sample.value for sample in used.samples}
    report = {row["value"]: row for row in budgets_section(config, lake, date(2026, 11, 2)).tables[0].rows}
    api = Api(config, CollectorRegistry())
    for team, expected in (("nlp", Decimal(480)), ("cv", Decimal(120))):
        mtd = CliRunner().invoke(cli, ["--config", str(path), "attribute", "--since", "mtd", "--where", f"team={team}",
                                       "--format", "json"])
        [total] = json.loads(mtd.stdout)["totals"]
        assert Decimal(total["cost"]) == expected  # the month's split, not the days' (450 and 150)
        assert statuses[team].outlook.actual == Decimal(total["cost"])  # exactly
        assert rows[team]["actual"] == f"{expected:.2f}" and findings[team].evidence["actual"] == f"{expected:.2f}"
        assert ratios[team] == float(expected / AMOUNTS[team])
        answer = json.loads(api.handle("/api/v1/attribute", {"since": ["2026-11-01"], "until": ["2026-11-03"],
                                                             "where": [f"team={team}"]}, None).body)
        assert report[team]["actual"] == Decimal(answer["totals"][0]["cost"]) == expected
        october = attribute(lake, config, Window(datetime(2026, 10, 1, tzinfo=timezone.utc),
                                                 datetime(2026, 11, 1, tzinfo=timezone.utc)), by=("team",),
                            where={"team": [team]})
        assert statuses[team].last_month.actual == october.totals[0][1] == expected
        assert rows[team]["last_month"]["actual"] == f"{expected:.2f}"


def test_a_budget_whose_value_no_cost_line_carries_warns_with_the_closest_values(tmp_path):
    # a typo (`nlpp`) counted nothing and showed `ok` at 0% without a word: finance read it as no spend
    from service.report.sections.budgets import budgets_section

    lake = make_lake(tmp_path, [line("2026-11-01 00:00", "300", end="2026-11-02 00:00", tags={"team": "nlp"})])
    path, shown = budgets_json(lake, [{"name": "nlp-gpu", "value": "nlpp", "amount": 400},
                                      {"name": "nlp-all", "value": " NLP", "amount": 400}])
    typo, spelled = json.loads(shown.stdout)
    assert (typo["actual"], typo["status"], spelled["actual"]) == ("0.00", "ok", "300.00")
    assert shown.stderr.count("counts nothing") == 1, shown.stderr  # " NLP" is nlp: counted
    assert ("warning: budget nlp-gpu counts nothing: no cost line of the lake has team nlpp; closest team values: nlp"
            in shown.stderr), shown.stderr
    section = budgets_section(load_config(path), lake, date(2026, 11, 1))
    assert section.note.startswith("Budget nlp-gpu counts nothing: no cost line of the lake has team nlpp"), section.note



def test_a_budget_set_before_its_spend_starts_is_no_spend_yet_not_a_typo(tmp_path):
    """Budgets are set before the spend starts: a new team's budget warned 'counts nothing' and
    exported spendlake_budget_unmatched 1 (an alert) like a typo. A value no known value nearly
    spells is 'no spend yet' with a note; a typo (ml-infra for ml_infra, nlpp) still warns."""
    from service.report.sections.budgets import budgets_section

    lake = make_lake(tmp_path, [line("2026-11-01 00:00", "300", end="2026-11-02 00:00", tags={"team": "nlp"}),
                                line("2026-11-01 00:00", "100", end="2026-11-02 00:00", tags={"team": "ml_infra"})])
    path, shown = budgets_json(lake, [{"name": "genomics", "value": "genomics", "amount": 400},
                                      {"name": "infra", "value": "ML-Infra", "amount": 400},
                                      {"name": "nlp-gpu", "value": "nlpp", "amount": 400}])
    new, separators, typo = json.loads(shown.stdout)
    assert (new["actual"], new["status"]) == ("0.00", "no spend yet")
    assert (separators["status"], typo["status"]) == ("ok", "ok")
    assert ("note: budget genomics has no spend yet: no cost line of the lake has team genomics; known team values: "
            "ml_infra, nlp") in shown.stderr, shown.stderr
    assert "budget genomics counts nothing" not in shown.stderr
    assert ("warning: budget infra counts nothing: no cost line of the lake has team ML-Infra; closest team values: "
            "ml_infra") in shown.stderr, shown.stderr
    assert "warning: budget nlp-gpu counts nothing" in shown.stderr
    section = budgets_section(load_config(path), lake, date(2026, 11, 1))
    assert "Budget genomics has no spend yet: no cost line of the lake has team genomics" in section.note
    assert [row["status"] for row in section.tables[0].rows] == ["no spend yet", "ok", "ok"]


def test_a_team_really_named_unallocated_keeps_its_budget_findings(tmp_path):
    """With `default: no-team`, `unallocated` is a team like any other: its budget's findings
    went to `no-team`, because the owner a rule leaves unnamed was the literal `unallocated`
    too; the metric's team of a finding stored without one was that literal as well."""
    from prometheus_client import CollectorRegistry, generate_latest

    from service.serve.families import teams_of
    from service.serve.metrics import LakeCollector

    today = date(2026, 11, 15)
    lines = [line(f"{today - timedelta(days=n)} 00:00:00", "100", end=f"{today - timedelta(days=n - 1)} 00:00:00",
                  tags={"team": "unallocated"}) for n in range(1, 20)]
    lake = make_lake(tmp_path, [*lines, line(f"{today - timedelta(days=2)} 00:00:00", "55")])
    config = parse_config({"lake": str(lake.root), "sources": declared_sources(lake),
                           "attribution": {"dimensions": {"team": {"tags": ["team"], "default": "no-team"}}},
                           "budgets": [{"name": "u", "value": "unallocated", "amount": 100}]})
    report = run_rules(config, only=["budget"], since="7d", now=datetime.fromisoformat("2026-11-15T00:00:00+00:00"))
    assert report.result.findings and {f.team for f in report.result.findings} == {"unallocated"}
    registry = CollectorRegistry()
    registry.register(LakeCollector(config))
    scraped = generate_latest(registry).decode()
    assert 'spendlake_findings{rule="budget",severity="critical",team="unallocated"}' in scraped, scraped
    assert teams_of([replace(report.result.findings[0], team=None)], config) == ["no-team"]


def test_a_100_column_budgets_table_keeps_each_budgets_status(tmp_path):
    """`status` (exceeded, forecast to exceed) was the last column, so the first left out: at 100 or 120
    columns an exceeded budget showed its numbers and not what they come to."""
    lake = budget_lake(tmp_path, today=date(2026, 11, 4))
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": ATTRIBUTION,
                                "budgets": [{"name": "pretrain", "value": "pretrain", "amount": 100}]}))
    table = CliRunner().invoke(cli, ["--config", str(path), "budgets", "--format", "table"], env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.output
    header = next(line for line in table.stdout.splitlines() if line.startswith("┃"))
    assert header.split("┃")[-2].strip() == "status"
    assert [line.split("│")[-2].strip() for line in table.stdout.splitlines() if line.startswith("│ pretrain")] == [
        "exceeded"]
    assert "status" not in table.stderr.split("not shown at 100 columns: ", 1)[1]


def test_an_effective_budget_on_a_delivery_without_effective_cost_says_it_counts_it_as_0(tmp_path):
    """small50: an Azure actual-cost export delivers no effective cost: a budget with `cost: effective`
    counted nlp's $40 as $0, said nowhere (attribute --cost effective says it). Its note names the delivery;
    a billed budget of the same scope counts the 40 and says nothing."""
    lines = [{**line("2026-11-01 00:00", "40", end="2026-11-02 00:00", tags={"team": "nlp"}), "effective": None}]
    lake = make_lake(tmp_path, lines)
    _, shown = budgets_json(lake, [{"name": "nlp-effective", "value": "nlp", "amount": 100, "cost": "effective"},
                                   {"name": "nlp-billed", "value": "nlp", "amount": 100}])
    rows = {row["budget"]: row["actual"] for row in json.loads(shown.stdout)}
    assert rows == {"nlp-effective": "0.00", "nlp-billed": "40.00"}, rows
    assert ("note: budget nlp-effective (team nlp) counts effective cost: cur 2026-11 delivered no effective cost, "
            "only billed cost: counted as 0 here; `cost: billed` counts it") in shown.stderr, shown.stderr
    assert "nlp-billed (team nlp) counts" not in shown.stderr, shown.stderr
    # the report's budgets section says it too
    from service.report.sections.budgets import budgets_section

    section = budgets_section(load_config(lake.root.parent / "spendlake.yaml"), lake, date(2026, 11, 1))
    assert "Budget nlp-effective (team nlp) counts effective cost: cur 2026-11 delivered no effective" in section.note


def test_the_note_on_a_delivery_without_effective_cost_names_only_deliveries_holding_the_budgets_scope(tmp_path):
    """fixb50a: the note named every delivery of the month without effective cost, whatever the budget's
    scope: a budget of team nlp was told an Azure actual-cost export holding only team vision's storage was
    counted as 0 for it. It names only the deliveries with lines of its scope (nlp's own, still named)."""
    from attribution_helpers import relation

    lake = make_lake(tmp_path, [line("2026-11-01 00:00", "40", end="2026-11-02 00:00", tags={"team": "nlp"})])
    azure = [{**line("2026-11-01 00:00", "25", end="2026-11-02 00:00", tags={"team": "vision"}), "effective": None}]
    con = lake.connect()
    lake.commit_costs(con, relation(con, azure), source="azure", delivery_id="a1", periods=None)
    con.close()
    budgets = [{"name": "nlp-effective", "value": "nlp", "amount": 100, "cost": "effective"},
               {"name": "vision-effective", "value": "vision", "amount": 100, "cost": "effective"}]
    _, shown = budgets_json(lake, budgets)
    rows = {row["budget"]: row["actual"] for row in json.loads(shown.stdout)}
    assert rows == {"nlp-effective": "40.00", "vision-effective": "0.00"}, rows
    assert "budget nlp-effective (team nlp) counts" not in shown.stderr, shown.stderr
    assert ("note: budget vision-effective (team vision) counts effective cost: azure 2026-11 delivered no effective "
            "cost, only billed cost: counted as 0 here; `cost: billed` counts it") in shown.stderr, shown.stderr
