"""Config errors told whole and once (net49): a budget's currency checked against ISO 4217, a
budgets list's errors all in one round, a list that fails only by its items not also called
too short, and a GPU count no cluster holds refused by `estimate`."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config


def validate(tmp_path, config: dict):
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"lake": str(tmp_path / "lake"), **config}))
    return CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])


@pytest.mark.parametrize("currency, refused", [
    ("XYZ", "budgets[1].currency: XYZ is not an ISO 4217 currency code; write the code the bill is in"),
    ("EUO", "budgets[1].currency: EUO is not an ISO 4217 currency code (closest: "),
    ("EUR", None), ("JPY", None), ("KWD", None),
])
def test_a_budget_currency_is_an_iso_4217_code(tmp_path, currency, refused):
    """`currency: XYZ` passed (three capitals was the only check) and its budget matched no spend."""
    result = validate(tmp_path, {"budgets": [{"name": "a", "value": "a", "amount": 1},
                                             {"name": "b", "value": "b", "amount": 100, "currency": currency}]})
    assert (result.exit_code, refused and refused in result.output) == ((2, True) if refused else (0, None)), \
        result.output


def test_a_budgets_lists_errors_are_told_in_one_round(tmp_path):
    """A name used twice and an undeclared dimension were said only once every budget's own
    fields passed: the user fixed one round and met the next."""
    result = validate(tmp_path, {"budgets": [
        {"name": "a", "value": "x", "amount": 100, "lines": [50, 80]},
        {"name": "a", "value": "y", "amount": 10},
        {"name": "b", "dimension": "nope", "value": "y", "amount": -5}]})
    assert result.exit_code == 2, result.output
    for said in ("budgets[0].lines: lines are fractions of the amount", "budgets[1].name: budget name 'a' is used twice",
                 "budgets[2].dimension: unknown dimension 'nope'; declared: team, project, experiment",
                 "budgets[2].amount: must be greater than 0"):
        assert said in result.output, result.output
    config = tmp_path / "ok.yaml"
    config.write_text(json.dumps({"budgets": [{"name": "a", "value": "x", "amount": 100, "currency": "EUR"},
                                              {"name": "b", "value": "y", "amount": 10, "dimension": "project"}]}))
    assert [(b.name, b.dimension, b.currency) for b in load_config(config).budgets] == [
        ("a", "team", "EUR"), ("b", "project", "USD")]



def test_a_budget_whose_name_is_not_text_is_said_not_a_traceback(tmp_path):
    """review49 #3: the name of a budget that failed was kept as written to find names used
    twice, and a list there (unhashable) raised TypeError out of `config validate`."""
    result = validate(tmp_path, {"budgets": [{"name": ["a"], "value": "x", "amount": 10},
                                             {"name": "b", "value": "y", "amount": 10}]})
    assert result.exit_code == 2, result.output
    assert "budgets[0].name: " in result.output, result.output

def test_a_list_failing_only_by_its_items_is_not_also_too_short(tmp_path):
    result = validate(tmp_path, {"rules": {"failed-reruns": {"states": ["FAILD"]}}})
    assert result.exit_code == 2
    assert "rules.failed-reruns.states[0]: no job state 'FAILD'; closest states: FAILED" in result.output
    assert "at least 1 item" not in result.output, result.output  # pydantic counts the items that passed
    result = validate(tmp_path, {"rules": {"failed-reruns": {"states": []}}})
    assert (result.exit_code, "rules.failed-reruns.states: needs at least 1 item" in result.output) == (2, True)


def test_a_gpu_count_no_cluster_holds_is_refused(tmp_path):
    """`--gpus 100000000000` priced a run of milliseconds and showed its hours as 0.00."""
    flags = ["estimate", "--params", "7B", "--tokens", "2T", "--gpu", "H100", "--mfu", "0.4",
             "--price-per-gpu-hour", "2", "--format", "json", "--gpus"]
    result = CliRunner().invoke(cli, [*flags, "100000000000"])
    assert result.exit_code == 2, result.output
    assert "--gpus: 100,000,000,000 GPUs is more than any cluster holds (at most 10,000,000)" in result.output
    result = CliRunner().invoke(cli, [*flags, "10000000"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["low"]["wall_clock_hours"] == "0.01"


def test_budgets_given_as_objects_are_checked_as_written_ones_are():
    """Config(budgets=...) with BudgetConfig objects (no dicts to read a name from) still refuses a
    name used twice and reads each one's own dimension."""
    from decimal import Decimal

    from pydantic import ValidationError

    from service.core.config import Config
    from service.core.config_budgets import BudgetConfig

    budget = BudgetConfig(name="a", value="x", amount=Decimal(1), dimension="project")
    assert Config(budgets=(budget,)).budgets == (budget,)
    with pytest.raises(ValidationError, match="budget name 'a' is used twice"):
        Config(budgets=(budget, budget))
    with pytest.raises(ValidationError, match="unknown dimension 'cost_center'"):
        Config(budgets=(BudgetConfig(name="b", value="x", amount=Decimal(1), dimension="cost_center"),))
