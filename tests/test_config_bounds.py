"""Every whole-number key of the config has an upper bound (break52b, item 1): a number far past
any sensible value passed `config validate` (exit 0), then crashed the command that made a
timedelta or date of it (`freshness_hours: 99999999999999999999` an OverflowError in `status
--sources`, `hot_days: 1000000` "date value out of range" in `rules run`). Now `config validate`
refuses it, exit 2, naming the dotted path, as it does `report.top: 500`."""

from __future__ import annotations

import typing

import annotated_types
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from rules.base import registered
from service.cli.main import cli
from service.core.config import Config
from service.core.registry import CONNECTORS
from tests.attribution_helpers import one_line_config_file


def _whole_number_keys(model: type[BaseModel], where: str, seen: set) -> typing.Iterator[tuple[str, object]]:
    """(dotted key, its pydantic field) of every int setting of `model` and the models it holds."""
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        kinds = [field.annotation, *typing.get_args(field.annotation)]
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from _whole_number_keys(kind, f"{where}.{name}", seen)
        if int in kinds:
            yield f"{where}.{name}", field


def _config_models() -> typing.Iterator[tuple[str, type[BaseModel]]]:
    yield "config", Config
    connectors, _ = CONNECTORS.load_all()
    for name, connector in connectors.items():
        yield f"connector {name}", connector.config_model
    for name, rule in registered().items():
        yield f"rules.{name}", rule.config_model


def test_every_whole_number_key_has_an_upper_bound():
    seen: set = set()
    unbounded = [key for where, model in _config_models() for key, field in _whole_number_keys(model, where, seen)
                 if not any(isinstance(m, (annotated_types.Le, annotated_types.Lt)) for m in field.metadata)]
    assert unbounded == []


@pytest.mark.parametrize("edit, refusal", [
    (lambda c: c["sources"][0].update(freshness_hours=99999999999999999999),
     "sources[0].freshness_hours: must be at most 87600, not 99999999999999999999"),
    (lambda c: c.update(inventory=[{"name": "tags", "kind": "aws-tags", "path": "t.json", "freshness_hours": 10**9}]),
     "inventory[0].freshness_hours: must be at most 87600, not 1000000000"),
    (lambda c: c.update(rules={"checkpoint-sprawl": {"hot_days": 1000000}}),
     "rules.checkpoint-sprawl.hot_days: must be at most 36500, not 1000000"),
])
def test_a_number_too_big_for_a_date_is_refused_by_config_validate(tmp_path, edit, refusal):
    path = one_line_config_file(tmp_path)
    config = yaml.safe_load(path.read_text())
    edit(config)
    path.write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert result.exit_code == 2, result.output
    assert refusal in result.output


def test_the_bounds_keep_the_largest_values_working(tmp_path):
    """At the bound a command still runs: `status --sources` with a ten-year freshness limit and
    `rules run` with a hundred-year hot_days (each a timedelta back from now)."""
    path = one_line_config_file(tmp_path)
    config = yaml.safe_load(path.read_text())
    config["sources"][0]["freshness_hours"] = 24 * 3650
    config["rules"] = {"checkpoint-sprawl": {"hot_days": 36500}}
    path.write_text(yaml.safe_dump(config))
    status = CliRunner().invoke(cli, ["--config", str(path), "status", "--sources"])
    assert status.exit_code == 0, status.output
    assert "87600" in status.output
    run = CliRunner().invoke(cli, ["--config", str(path), "rules", "run", "--dry-run", "--rule", "checkpoint-sprawl"])
    assert run.exit_code in (0, 1), run.output
