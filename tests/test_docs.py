"""The docs keep up with the code (in the spirit of sqlite-utils' tests/test_docs.py): every
command appears in the README, every option is in the README or explained by `--help`,
every config key (connectors' and rules' included, found through the registry) is in the
README or the rule's docstring, and every metric the service exports is in the README.
And the other way: what README and RUNBOOK show (command lines, their options and choices,
YAML examples, metric and alert names) exists in the code."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import click
import pytest
import yaml
from pydantic import BaseModel

from rules.base import Rule, RuleConfig
from service.cli.main import cli
from service.core.config import Config, ConfigLoader, parse_config
from service.core.registry import CONNECTORS, RULES

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
RUNBOOK = (REPO / "deploy" / "RUNBOOK.md").read_text(encoding="utf-8")
DOCS = README + RUNBOOK
# what an operator reads beside them: the alerts' descriptions and the dashboard's queries
OPERATOR = "".join(p.read_text(encoding="utf-8") for p in [REPO / "deploy" / "prometheus" / "alerts.yml",
                                                            *sorted((REPO / "deploy" / "grafana").rglob("*.json"))])


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root's commands load on first use (main.AREA_COMMANDS)
        command = group.get_command(ctx, name)
        path = (*prefix, name)
        found.append((path, command))
        if isinstance(command, click.Group):
            found += commands(command, path)
    return found


COMMANDS = commands(cli)


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_is_in_the_readme(path):
    assert f"spendlake {' '.join(path)}" in README, f"README.md never mentions `spendlake {' '.join(path)}`"


def test_the_readme_names_the_commands_with_the_output_format_option_and_only_those():
    """README's opening said every command prints a table or JSON with --format to choose, while
    ingest, report, export and others have no such option (break47 #14): it lists those that do."""
    said = re.search(r"the\s+commands that answer a question \(([^)]*)\) print a table", README)
    assert said, "README no longer says which commands take --format csv|json|table"
    listed = {" ".join(name.split()) for name in re.findall(r"`([^`]+)`", said.group(1))}
    have = {" ".join(path) for path, command in [((), cli), *COMMANDS]
            if any(isinstance(p, click.Option) and "--format" in p.opts and set(getattr(p.type, "choices", ()))
                   == {"table", "csv", "json"} for p in command.params)}
    assert listed == have


def test_every_option_is_in_the_readme_or_explained_by_help():
    unexplained = []
    for path, command in [((), cli), *COMMANDS]:
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            flags = [f for f in param.opts + param.secondary_opts if f.startswith("--")]
            if not any(re.search(re.escape(f) + r"(?![\w-])", README) for f in flags) and not (param.help or "").strip():
                unexplained.append(f"spendlake {' '.join(path)} {'/'.join(param.opts)}")
    assert not unexplained, "options neither in README.md nor explained by --help:\n" + "\n".join(unexplained)


def model_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted keys of a config model, nested models and lists/maps of models included."""
    keys = []
    for name, field in model.model_fields.items():
        keys.append(f"{prefix}{name}")
        for inner in nested_models(field.annotation):
            keys += model_keys(inner, f"{prefix}{name}.")
    return keys


def nested_models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in nested_models(arg)]


def config_keys() -> list[str]:
    keys = model_keys(Config) + model_keys(RuleConfig, "rules.<rule>.")
    for kind in CONNECTORS.names():
        connector = CONNECTORS.get(kind)
        section = "sources" if connector.feeds.tables == ("costs",) else "inventory"
        keys += model_keys(connector.config_model, f"{section}.")
    return sorted(set(keys))


def documented(key: str) -> bool:
    """A key is documented when its last part appears as a YAML key or a `code` word."""
    name = key.rsplit(".", 1)[-1]
    return bool(re.search(rf"(^|[\s{{,`(]){re.escape(name)}:|`{re.escape(name)}`", README, re.MULTILINE))


def test_every_config_key_is_in_the_readme():
    missing = [key for key in config_keys() if not documented(key)]
    assert not missing, "config keys README.md never names (as `key:` or `key`):\n" + "\n".join(missing)


def test_the_config_walk_sees_the_connectors_keys():
    """The walk above would pass on nothing: it must reach into the registry's models."""
    keys = config_keys()
    assert {"sources.report_name", "sources.cost_type", "inventory.prometheus_url", "inventory.buckets.prefixes",
            "attribution.dimensions", "service.listen", "budgets.amount"} <= set(keys)


@pytest.mark.parametrize("name", RULES.names())
def test_every_rule_setting_is_in_its_docstring(name):
    rule: type[Rule] = RULES.get(name)
    text = (rule.__module__ and __import__(rule.__module__, fromlist=["_"]).__doc__ or "") + (rule.__doc__ or "")
    own = set(rule.config_model.model_fields) - set(RuleConfig.model_fields)  # the shared ones: README
    missing = [key for key in sorted(own) if not re.search(rf"\b{re.escape(key)}\b", text)]
    assert not missing, f"rules.{name}: settings its module docstring never names: {', '.join(missing)}"


def metric_names() -> list[str]:
    """Every metric the service defines (collector families and instruments)."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "service" / "serve").glob("*.py"))
    names = re.findall(r'(?:MetricFamily|Gauge|Counter|Histogram|Summary|folded_family)\(\s*"(spendlake_[a-z0-9_]+)"', source)
    return sorted(set(names))


def test_the_metric_scan_finds_the_metrics():
    assert {"spendlake_spend_usd", "spendlake_job_duration_seconds", "spendlake_lake_readable"} <= set(metric_names())


@pytest.mark.parametrize("name", metric_names())
def test_every_metric_is_in_the_readme(name):
    exported = name.removesuffix("_total") if name.endswith("_total") else name
    assert re.search(rf"\b{re.escape(exported)}", README), f"README.md never names the metric {name}"


def test_every_field_of_status_sources_json_is_in_the_readme():
    from service.ingest.freshness import SourceFreshness

    row = SourceFreshness("cur", "aws-cur", None, 36, None, 0, None, "not ingested", None)
    line = next(line for line in README.splitlines() if "`spendlake status [--sources]" in line)
    missing = [key for key in row.to_json() if not re.search(rf"\b{key}\b", line)]
    assert not missing, f"README.md's `spendlake status` line omits the JSON fields {missing}"


def command_lines() -> list[str]:
    """Every `spendlake ...` the docs show: in backticks (over line breaks too) and at the start
    of a line in a code block."""
    spans = re.findall(r"`(spendlake [^`]*)`", DOCS + OPERATOR)
    spans += re.findall(r"^(spendlake [^\n#]*)", DOCS, re.MULTILINE)
    return sorted({" ".join(span.split()) for span in spans})


def resolve(line: str) -> tuple[tuple[str, ...], click.Command | None, list[str]]:
    """The command a line runs and the words after it (global options before it skipped)."""
    words, command, path = line.split()[1:], cli, ()
    while words and words[0] in ("-v", "-vv", "--verbose"):
        words = words[1:]
    while words and isinstance(command, click.Group) and (found := command.get_command(click.Context(command), words[0])):
        command, path, words = found, (*path, words[0]), words[1:]
    return path, (command if path else None), words


def test_the_command_line_scan_finds_the_commands_and_their_options():
    lines = command_lines()
    assert "spendlake findings --team <team> --category waste" in lines  # RUNBOOK's
    assert "spendlake findings --rule spend-anomaly --team {{ $labels.team }} --format json" in lines  # an alert's description
    assert any(line.startswith("spendlake attribute --since 30d --by project,job_type")  # a code block's
               for line in lines)
    path, command, words = resolve("spendlake -v rules run --dry-run")
    assert path == ("rules", "run") and command is dict(COMMANDS)[("rules", "run")] and words == ["--dry-run"]


def test_every_option_the_docs_show_is_the_commands_with_its_choices():
    wrong = []
    for line in command_lines():
        path, command, words = resolve(line)
        if command is None:
            continue  # prose that begins with the name ("spendlake reads cloud billing exports ...")
        params = cli.params + command.get_params(click.Context(command))  # --help included
        options = {flag: param for param in params if isinstance(param, click.Option)
                   for flag in param.opts + param.secondary_opts}
        for flag, choices in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?:[ =]((?:[a-z0-9.]+\\?\|)+[a-z0-9.]+))?",
                                        " ".join(words)):
            param = options.get(flag)
            if param is None:
                wrong.append(f"{line}: spendlake {' '.join(path)} has no {flag}")
            elif choices and isinstance(param.type, click.Choice) \
                    and set(choices.replace("\\", "").split("|")) != set(param.type.choices):
                wrong.append(f"{line}: {flag} takes {'|'.join(param.type.choices)}")
    assert not wrong, "command lines in the docs or the alerts that do not run:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", [p for p, c in COMMANDS if not isinstance(c, click.Group)], ids=" ".join)
def test_every_command_has_a_row_in_the_commands_table(path):
    table = README.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    assert re.search(rf"^\| `spendlake {' '.join(path)}[ `]", table, re.MULTILINE), \
        f"README's Commands table has no row for `spendlake {' '.join(path)}`"


def yaml_examples() -> list:
    found = [(README[:m.start()].count("\n") + 1, m.group(1)) for m in re.finditer(r"```yaml\n(.*?)```", README, re.S)]
    return [pytest.param(line, example, id=f"line {line}") for line, example in found]


@pytest.mark.parametrize("line, example", yaml_examples())
def test_every_yaml_example_in_the_readme_is_a_valid_config(line, example, tmp_path):
    data = yaml.load(example, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader subclass, as config files are read
    parse_config({"lake": str(tmp_path / "lake"), **data}, f"README.md:{line}")


def test_every_metric_the_docs_name_is_exported():
    exported = {name.removesuffix("_total") for name in metric_names()}
    named = re.findall(r"\b(spendlake_[a-z0-9_]*[a-z0-9])(_\*)?", DOCS + OPERATOR)  # `spendlake_job_*`: a family
    unknown = sorted({name for name, family in named
                      if not any(e.startswith(f"{name}_") if family else e == name.removesuffix("_total")
                                 for e in exported)})
    assert not unknown, f"metrics the docs, alerts or dashboard name that the service does not export: {unknown}"


def test_every_alert_the_docs_name_is_a_rule():
    groups = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))["groups"]
    alerts = {rule["alert"] for group in groups for rule in group["rules"]}
    unknown = sorted(set(re.findall(r"\b(Spendlake[A-Z][A-Za-z]+)\b", DOCS)) - alerts)
    assert not unknown, f"alerts README.md or deploy/RUNBOOK.md name that deploy/prometheus/alerts.yml lacks: {unknown}"


def python_object(dotted: str):
    """The module or object a dotted name names, None when there is none."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            found = getattr(found, name, None)
        return found
    return None


def test_every_python_name_the_readme_gives_imports():
    """`service.attribution.runs(...)` and the like, for Python callers (config keys such as
    `service.listen` are not packages and are left to the config tests)."""
    names = {dotted for dotted in re.findall(r"`(service\.[a-z_]+(?:\.[A-Za-z_]+)*)", README)
             if (REPO / "service" / dotted.split(".")[1]).is_dir()}
    assert "service.attribution.runs" in names
    missing = sorted(dotted for dotted in names if python_object(dotted) is None)
    assert not missing, f"README.md names Python objects that do not exist: {missing}"
