"""The attribution section of the config: defaults, and errors with dotted paths."""

from __future__ import annotations

import pytest

from service.core.config import parse_config
from service.core.errors import ConfigError


def test_defaults_declare_team_project_experiment():
    attribution = parse_config({}).attribution
    assert list(attribution.dimensions) == ["team", "project", "experiment"]
    assert all(d.default == "unallocated" and d.rules == () for d in attribution.dimensions.values())
    extra = parse_config({"attribution": {"dimensions": {"cost_center": {"tags": ["cc"]}}}}).attribution
    assert list(extra.dimensions) == ["team", "project", "experiment", "cost_center"]


def test_fingerprint_follows_the_config():
    a = parse_config({"attribution": {"dimensions": {"team": {"tags": ["team"]}}}}).attribution
    b = parse_config({"attribution": {"dimensions": {"team": {"tags": ["team", "owner"]}}}}).attribution
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == parse_config({"attribution": {"dimensions": {"team": {"tags": ["team"]}}}}).attribution.fingerprint()


@pytest.mark.parametrize("attribution, message", [
    ({"shared": [{"match": {"service": "Support"}, "split": "fixed", "weights": {"a": 0.6, "b": 0.3}}]},
     "attribution.shared[0].weights: must sum to 1 exactly, they sum to 0.9"),
    ({"shared": [{"match": {"service": "Support"}, "split": "fixed"}]},
     "attribution.shared[0].weights: split: fixed needs weights"),
    ({"shared": [{"match": {"service": "Support"}, "split": "even", "weights": {"a": 1}}]},
     "attribution.shared[0].weights: only split: fixed takes weights"),
    ({"shared": [{"match": {"service": "S"}, "split": "fixed", "weights": {"a": 1.5, "b": -0.5}}]},
     "attribution.shared[0].weights.b: must be greater than 0"),
    ({"shared": [{"match": {"service": "S"}, "split": "fixed", "weights": {"a": 0.5, "A": 0.5}}]},
     "attribution.shared[0].weights.A: names a value twice"),
    ({"shared": [{"match": {"service": "S"}, "split": "even", "by": "teams"}]},
     "attribution.shared[0].by: unknown dimension 'teams'; declared: team, project, experiment"),
    ({"shared": [{"match": {"service": "S"}, "split": "halves"}]}, "attribution.shared[0].split"),
    ({"shared": [{"match": {}, "split": "even"}]}, "attribution.shared[0].match: needs at least one condition"),
    ({"dimensions": {"team": {"rules": [{"match": {"resource_id": "^arn:(["}, "value": "x"}]}}},
     "attribution.dimensions.team.rules[0].match.resource_id: not a valid regular expression"),
    ({"dimensions": {"team": {"rules": [{"match": {"acount": "1"}, "value": "x"}]}}},
     "attribution.dimensions.team.rules[0].match.acount: unknown match key"),
    ({"dimensions": {"team": {"rules": [{"match": {"team": "a"}, "value": "x"}]}}},
     "attribution.dimensions.team.rules[0].match.team: a dimension's rule cannot match on its own value"),
    ({"dimensions": {"team": {"rules": [{"match": {"project": "a"}, "value": "x"}]},
                     "project": {"rules": [{"match": {"team": "b"}, "value": "y"}]}}},
     "rules depend on each other in a cycle: team → project → team"),
    ({"dimensions": {"team": {"rules": [{"match": {"account": "1"}, "value": " "}]}}},
     "attribution.dimensions.team.rules[0].value"),
    ({"dimensions": {"Team Name": {}}}, "attribution.dimensions.Team Name: a dimension name is lowercase"),
    ({"dimensions": {"currency": {}}}, "attribution.dimensions.currency: a dimension name"),
    ({"dimensions": {"team": {"tag": ["team"]}}}, "attribution.dimensions.team.tag: unknown key"),
])
def test_errors_name_the_dotted_path(attribution, message):
    with pytest.raises(ConfigError) as error:
        parse_config({"attribution": attribution})
    assert message in str(error.value)
