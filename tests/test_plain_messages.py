"""Messages in plain words (issue 15, item 7): what a user typed wrong → the sentence they read.
No pydantic wording ("Input should be a valid tuple", "String should match pattern ..."), no
"--since: --since ...", and the HTTP API names its parameters, not CLI flags."""

from __future__ import annotations

import json
import re
import typing
from urllib.parse import parse_qs

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry
from pydantic import BaseModel

from rules.base import configure, registered
from service.cli.main import cli
from service.core.config import Config, ConfigLoader, load_config, parse_config
from service.core.errors import ConfigError, SpendlakeError, UsageError
from service.core.registry import CONNECTORS
from service.core.validation import PATTERNS
from service.planning.estimate import PlanInputs
from service.serve.app import Api
from tests.attribution_helpers import one_line_config_file

# pydantic's and click's own phrasing, which a user should never read
RAW = re.compile(r"Input should|String should|Value error|Field required|valid tuple|match pattern|"
                 r"unable to parse|Unable to extract|discriminator|<class |x>=|<=x|%Y")

CONFIG_CASES = [  # the config as YAML → the sentence its error holds
    ("sources: [{name: Cur!, kind: aws-cur, location: x}]",
     "sources[0].name: must be lowercase letters, digits and hyphens, e.g. cur-main, not 'Cur!'"),
    ("sources: [{name: cur, kind: awscur, location: x}]",
     "sources[0].kind: no billing connector kind 'awscur' is installed; known: aws-cur, aws-cur2, "),
    ("sources: [{name: cur, kind: aws-cur}]", "sources[0].location: is required but missing"),
    ("sources: cur", "sources: must be a list, not the single value 'cur'"),
    ("inventory: [{name: t, kind: aws-tags, regions: us-east-1}]",
     "inventory[0].regions: must be a list, not the single value 'us-east-1' (a list of one is written [us-east-1])"),
    ("inventory: [{name: t, kind: aws-tagz}]",
     "inventory[0].kind: no inventory connector kind 'aws-tagz' is installed; known: aws-tags, "),
    ("inventory: [{name: t}]", "inventory[0].kind: is required but missing"),
    ("inventory: [{name: g, kind: gpu-metrics, path: x, lookback_hours: many}]",
     "inventory[0].lookback_hours: must be a whole number, not 'many'"),
    ("service: {daily_at: '25:00'}",
     "service.daily_at: must be a time of day as HH:MM from 00:00 to 23:59 (UTC), e.g. 06:00, not '25:00'"),
    ("service: {listen: 'x:99999'}", "service.listen: 'x:99999' is not HOST:PORT with a port from 0 to 65535"),
    ("service: {api_token: short}", "service.api_token: must be at least 16 characters long"),
    ("service: {top_n: 0}", "service.top_n: must be at least 1, not 0"),
    ("service: {ingest_every_minutes: 1.5}", "service.ingest_every_minutes: must be a whole number, not the number 1.5"),
    ("service: yes", "service: must be a mapping of settings, not 'yes'"),
    ("budgets: [{name: B, value: x, amount: 10}]",
     "budgets[0].name: must be lowercase letters, digits and hyphens, e.g. pretrain-monthly, not 'B'"),
    ("budgets: [{name: b, value: x, amount: -1}]", "budgets[0].amount: must be greater than 0, not -1"),
    ("budgets: [{name: b, value: x, amount: 1, currency: usd}]",
     "budgets[0].currency: must be a three-letter currency code in capitals, e.g. USD, not 'usd'"),
    ("budgets: [{name: b, value: x, amount: 1, on: [actul]}]",
     "budgets[0].on[0]: must be one of actual or forecast, not 'actul'"),
    ("report: {top: ten}", "report.top: must be a whole number, not 'ten'"),
    ("engine: {kind: spark, endpoint_url: 'minio:9000'}",
     "engine.endpoint_url: must be a URL starting with http:// or https://, without spaces, not 'minio:9000'"),
    ("estimate: {gpus: {H100: {price_per_gpu_hour: cheap}}}",
     "estimate.gpus.H100.price_per_gpu_hour: must be a number, not 'cheap'"),
    ("attribution: {dimensions: {team: {tags: team}}}",
     "attribution.dimensions.team.tags: must be a list, not the single value 'team'"),
    ("lake: [a]", "lake: must be a path, not a list"),
    ("colour: red", "colour: unknown key; known keys: attribution, budgets, engine, estimate, inventory, lake, "),
    # an unknown key with the closest keys taken where it stands (was: "check its spelling")
    ("sourcse: []", "sourcse: unknown key; closest keys: sources"),
    ("serve: {listen: '0.0.0.0:9000'}", "serve: unknown key; closest keys: service"),
    ("service: {listn: '0.0.0.0:9000'}", "service.listn: unknown key; closest keys: listen"),
    ("budgets: [{name: b, value: x, amount: 1, currncy: EUR}]",
     "budgets[0].currncy: unknown key; closest keys: currency"),
    ("estimate: {gpus: {H100: {price_per_gpu_hr: 3}}}",
     "estimate.gpus.H100.price_per_gpu_hr: unknown key; closest keys: price_per_gpu_hour"),
    ("attribution: {dimensions: {team: {tag: [team]}}}",
     "attribution.dimensions.team.tag: unknown key; closest keys: tags"),
    ("sources: [{name: a, kind: focus, location: x, freshness_hour: 3}]",
     "sources[0].freshness_hour: kind focus takes no such key; closest keys: freshness_hours"),
    ("rules: {idle-gpus: {}}", "rules.idle-gpus: unknown rule; closest rules: idle-gpu"),
    ("rules: {idle-gpu: {min_idle_hour: 3}}",
     "rules.idle-gpu.min_idle_hour: unknown key; closest keys: min_idle_hours"),
    ("rules: {checkpoint-sprawl: {prices: {default_clas: STANDARD}}}",  # a rule's nested setting too
     "rules.checkpoint-sprawl.prices.default_clas: unknown key; closest keys: default_class"),
    ("rules: {idle-gpu: {sm_active_max_pct: 500}}", "rules.idle-gpu.sm_active_max_pct: must be at most 100, not 500"),
    ("rules: {spend-anomaly: {dimension: Team X}}", "rules.spend-anomaly.dimension: must be a dimension name: "
                                                    "lowercase letters, digits and _, starting with a letter"),
    ("rules: {unallocated-spend: {dimensions: team}}",
     "rules.unallocated-spend.dimensions: must be a list, not the single value 'team'"),
    ("rules: {idle-gpu: {enabled: maybe}}", "rules.idle-gpu.enabled: must be true or false, not 'maybe'"),
    ("rules: {checkpoint-sprawl: {checkpoints_dir: a/b}}",
     "rules.checkpoint-sprawl.checkpoints_dir: must be one folder name, without /, * or ?, not 'a/b'"),
]


def config_error(text: str) -> str:
    data = yaml.load(text, Loader=ConfigLoader)
    with pytest.raises(ConfigError) as error:
        config = parse_config(data)
        configure(config.rules)
    return str(error.value)


@pytest.mark.parametrize("text, expected", CONFIG_CASES, ids=[c[0][:40] for c in CONFIG_CASES])
def test_config_errors_are_plain_sentences_with_dotted_paths(text, expected):
    message = config_error(text)
    assert expected in message, message
    assert not RAW.search(message), message


@pytest.mark.parametrize("section, billing", [("sources", True), ("inventory", False)])
def test_unknown_kind_lists_only_the_kinds_its_section_takes(section, billing):
    """`sources:` takes billing kinds, `inventory:` the others: an unknown kind's "known:" lists
    those of its own section, every one of them, and none of the other's."""
    message = config_error(f"{section}: [{{name: x, kind: nosuch, location: x}}]")
    listed = re.search(r"known: ([a-z0-9-]+(?:, [a-z0-9-]+)*)", message).group(1).split(", ")
    loaded, _ = CONNECTORS.load_all()
    assert listed == [name for name, c in loaded.items() if (c.feeds.tables == ("costs",)) == billing]
    assert "gcp-billing" in listed if billing else "k8s-pods" in listed


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    return one_line_config_file(tmp_path_factory.mktemp("plain"))


ESTIMATE = ["estimate", "--params", "7B", "--tokens", "2T", "--gpu", "H100", "--mfu", "0.4"]
CLI_CASES = [  # arguments after --config → the line the user reads
    (["attribute"], "error: --since: the window needs a start — e.g. --since 7d"),
    (["attribute", "--since", "7d", "--compare", "--granularity", "day"], "error: --compare needs --granularity total"),
    (["attribute", "--since", "7d", "--top", "0"], "Invalid value for '--top': must be at least 1, not 0"),
    (["demo", "--days", "500"], "Invalid value for '--days': must be from 1 to 400, not 500"),
    (["demo", "--start", "2026-13-01"], "Invalid value for '--start': '2026-13-01' is not a day; use YYYY-MM-DD"),
    (["serve", "--listen", "x:99999"], "'x:99999' is not HOST:PORT with a port from 0 to 65535"),
    ([*ESTIMATE, "--gpus", "0"], "error: --gpus: must be at least 1, not 0"),
    (["estimate", "--tokens", "2T", "--gpu", "H100", "--gpus", "8", "--mfu", "0.4"],
     "error: --params: is required but missing"),
    ([*ESTIMATE[:-2], "--gpus", "8", "--mfu", "1.5"], "error: --mfu: MFU must be above 0 and at most 1"),
    ([*ESTIMATE, "--gpus", "8", "--failure-overhead", "x%"], "error: --failure-overhead: cannot read 'x%'"),
]


@pytest.mark.parametrize("args, expected", CLI_CASES, ids=[" ".join(c[0][:4]) for c in CLI_CASES])
def test_cli_messages_are_plain_and_name_the_option_once(config_file, args, expected):
    result = CliRunner().invoke(cli, ["--config", str(config_file), *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output, result.output
    assert not RAW.search(result.output), result.output
    assert not re.search(r"(--[a-z-]+): \1\b", result.output), "the option is named once"


def test_a_plan_file_error_names_the_file_and_key_in_plain_words(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("params: 7B\ntokens: 2T\ngpu: H100\ngpus: [8]\nmfu: 0.4\n")
    result = CliRunner().invoke(cli, ["estimate", "--plan", str(plan)])
    assert result.exit_code == 2
    assert f"{plan}: gpus: must be a whole number, not a list" in result.output, result.output


def test_an_error_names_its_object_once():
    assert str(UsageError("--top must be at least 1", where="--top")) == "--top must be at least 1"
    assert str(UsageError("must be at least 1", where="--top", hint="e.g. 10")) == "--top: must be at least 1 — e.g. 10"
    assert str(SpendlakeError("--topic is wrong", where="--top")) == "--top: --topic is wrong"


API_CASES = [  # query → (where, message)
    ("by=team", ("since", "the window needs a start")),
    ("since=yesterday-ish", ("since", "cannot read 'yesterday-ish' as a time")),
    ("since=7d&until=soon", ("until", "cannot read 'soon' as a time")),
    ("since=7d&until=mtd", ("until", "'mtd' starts a window (the month to date), it cannot end one")),
    ("since=99999999999999d", ("since", "'99999999999999d' is out of range")),
    ("since=7d&by=nope", ("by", "unknown dimension 'nope'")),
    ("since=7d&where=team", ("where", "cannot read 'team'")),
    ("since=7d&cost=free", ("cost", "unknown cost 'free'")),
    ("since=7d&compare=true&granularity=day", ("compare", "compare needs granularity total")),
    ("since=7d&top=0", ("top", "top must be at least 1")),
]


@pytest.mark.parametrize("query, expected", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_errors_name_api_parameters_not_cli_flags(config_file, query, expected):
    response = Api(load_config(config_file), CollectorRegistry()).handle("/api/v1/attribute", parse_qs(query), None)
    error = json.loads(response.body)["error"]
    assert response.status == 400 and (error.get("where"), error["message"]) == expected
    assert "--" not in json.dumps(error), error


def models() -> list[type[BaseModel]]:
    """Every model that reads what a person wrote: the config and what it nests, every rule's
    settings, every connector's, and estimate plans."""
    roots = [Config, PlanInputs, *(cls.config_model for cls in registered().values())]
    roots += [cls.config_model for cls in CONNECTORS.load_all()[0].values()]
    seen: list[type[BaseModel]] = []

    def visit(annotation) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen:
                seen.append(annotation)
                for field in annotation.model_fields.values():
                    visit(field.annotation)
            return
        for arg in typing.get_args(annotation):
            visit(arg)

    for root in roots:
        visit(root)
    return seen


def patterns(field) -> list[str]:
    """The patterns on a field and on the items it holds (`tuple[Annotated[str, Field(pattern=...)], ...]`)."""
    found = [meta.pattern for meta in field.metadata if getattr(meta, "pattern", None)]

    def visit(annotation) -> None:
        for arg in typing.get_args(annotation):
            found.extend(meta.pattern for meta in getattr(arg, "__metadata__", ())
                         for meta in [meta, *getattr(meta, "metadata", ())] if getattr(meta, "pattern", None))
            visit(arg)

    visit(field.annotation)
    return found


def test_every_pattern_a_model_declares_has_words():
    found = {}
    for model in models():
        for name, field in model.model_fields.items():
            for pattern in patterns(field):
                found[f"{model.__name__}.{name}"] = pattern
    assert found, "the walk finds the config's patterns"
    assert {field: pattern for field, pattern in found.items() if pattern not in PATTERNS} == {}
