"""The registry: an installed package adds a connector or a rule with one entry point, exactly
as the built-ins do; nothing is imported before its name is asked for; a broken package
fails only where its name is asked for.

Each test installs a package the way pip does, as far as importlib.metadata can tell: its
module and a `*.dist-info` (METADATA, entry_points.txt) in a directory on sys.path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from rules.base import configure
from service.cli.main import cli
from service.core.errors import ConfigError
from service.core.registry import CONNECTORS, RULES, PluginError

REPO = Path(__file__).resolve().parent.parent


def install(tmp_path: Path, monkeypatch, modules: dict[str, str], entry_points: dict[str, dict[str, str]]) -> None:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / "acme_spend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-spend\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()) + "\n"
        for group, points in entry_points.items()), encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))


def unique(prefix: str) -> str:
    """A module name no other test imported (sys.modules outlives each test's directory)."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


RULE = '''
"""An installed package's rule."""
from rules.base import Rule, RuleConfig


class QuietConfig(RuleConfig):
    threshold: int = 3


class Quiet(Rule):
    """Flags nothing, from an installed package."""

    name = "acme-quiet"
    category = "waste"
    config_model = QuietConfig

    def evaluate(self, ctx):
        return []
'''


def test_a_rule_from_an_installed_package_is_listed_and_configured(tmp_path, monkeypatch):
    module = unique("acme_rules")
    install(tmp_path, monkeypatch, {module: RULE}, {"spendlake.rules": {"acme-quiet": f"{module}:Quiet"}})
    config = tmp_path / "spendlake.yaml"
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "rules": {"acme-quiet": {"threshold": 5}}}))
    listed = CliRunner().invoke(cli, ["--config", str(config), "rules", "list", "--format", "json"])
    assert listed.exit_code == 0, listed.output
    rows = {row["rule"]: row for row in json.loads(listed.output)}
    assert rows["acme-quiet"] == {"rule": "acme-quiet", "category": "waste", "enabled": True, "about": "Flags nothing, from an installed package."}
    assert {"idle-gpu", "budget", "spend-anomaly"} <= set(rows)  # the built-ins, through the same group
    [quiet] = [rule for rule in configure({"acme-quiet": {"threshold": 5}}) if rule.name == "acme-quiet"]
    assert quiet.config.threshold == 5
    with pytest.raises(ConfigError, match=r"rules\.acme-quiet\.threshold: must be a whole number, not 'many'"):
        configure({"acme-quiet": {"threshold": "many"}})


def test_a_broken_package_fails_only_where_its_name_is_asked_for(tmp_path, monkeypatch):
    module = unique("acme_broken")
    install(tmp_path, monkeypatch, {module: "import acme_missing_dependency\n"},
            {"spendlake.rules": {"acme-broken": f"{module}:Broken"},
             "spendlake.connectors": {"acme-broken": f"{module}:BrokenConnector"}})
    assert {"idle-gpu", "budget"} <= set(rules_named())  # the other rules still load
    with pytest.raises(ConfigError) as error:
        configure({"acme-broken": {}})
    assert "rules.acme-broken: rule 'acme-broken' cannot be loaded" in str(error.value)
    assert f"{module}:Broken from acme-spend 1.0" in str(error.value)
    assert "No module named 'acme_missing_dependency'" in str(error.value)
    with pytest.raises(PluginError, match="connector kind 'acme-broken' cannot be loaded .*acme_missing_dependency"):
        CONNECTORS.get("acme-broken")
    assert CONNECTORS.get("focus").kind == "focus"


def rules_named() -> list[str]:
    loaded, _ = RULES.load_all()
    return list(loaded)


@pytest.mark.parametrize("body, problem", [
    ('class Wrong:\n    kind = "acme-other"\n    config_model = object\n    feeds = COSTS\n',
     "declares kind 'acme-other', not 'acme-wrong'"),
    ('class Wrong:\n    kind = "acme-wrong"\n    feeds = COSTS\n', "declares no config_model"),
    ('class Wrong:\n    kind = "acme-wrong"\n    config_model = object\n'
     '    feeds = Feeds(("gpu_utilization",), "snapshot_date", Disposition.SNAPSHOT)\n',
     "feeds 'gpu_utilization', which is not partitioned by 'snapshot_date'"),
    ('class Wrong:\n    kind = "acme-wrong"\n    config_model = object\n'
     '    feeds = Feeds(("costs",), "day", Disposition.SERIES)\n', "cannot feed 'costs' with time series by day"),
])
def test_a_connector_must_declare_what_it_is(tmp_path, monkeypatch, body, problem):
    module = unique("acme_wrong")
    source = "from connectors.base import COSTS\nfrom service.core.registry import Disposition, Feeds\n" + body
    install(tmp_path, monkeypatch, {module: source}, {"spendlake.connectors": {"acme-wrong": f"{module}:Wrong"}})
    with pytest.raises(PluginError) as error:
        CONNECTORS.get("acme-wrong")
    assert str(error.value) == f"connector kind 'acme-wrong' ({module}:Wrong from acme-spend 1.0) {problem}"


@pytest.mark.parametrize("declared, problem", [
    ("", "declares no category"),
    ('    category = "savings"\n', "declares category 'savings', not one of waste, overspend, ownership"),
])
def test_a_rule_must_declare_what_kind_of_money_it_finds(tmp_path, monkeypatch, declared, problem):
    module = unique("acme_uncategorised")
    source = ("from rules.base import Rule\n\n\nclass Vague(Rule):\n    name = \"acme-vague\"\n" + declared
              + "    def evaluate(self, ctx):\n        return []\n")
    install(tmp_path, monkeypatch, {module: source}, {"spendlake.rules": {"acme-vague": f"{module}:Vague"}})
    with pytest.raises(PluginError) as error:
        RULES.get("acme-vague")
    assert str(error.value) == f"rule 'acme-vague' ({module}:Vague from acme-spend 1.0) {problem}"


def test_asking_for_one_kind_imports_only_its_connector():
    probe = ("import json, sys\nfrom service.core.registry import CONNECTORS\nCONNECTORS.get('aws-tags')\n"
             "print(json.dumps([m for m in sys.modules if m.startswith(('connectors.', 'rules.'))]))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    loaded = set(json.loads(run.stdout))
    assert "connectors.aws_tags" in loaded
    assert not loaded & {"connectors.focus", "connectors.aws_cur", "connectors.gpu_metrics", "connectors.s3_objects"}
    assert not any(name.startswith("rules.") for name in loaded)


def test_the_two_registries_share_one_scan_of_the_installed_entry_points():
    """Each scan reads every installed distribution's entry_points.txt (3-5 ms of every start):
    a config's connectors and rules are found by one (pydantic's own scan for its plugins aside)."""
    probe = ("import importlib.metadata as md\nscans = []\nscan = md.entry_points\n"
             "def counted(**kw):\n    if kw.get('group') != 'pydantic':\n        scans.append(kw)\n    return scan(**kw)\n"
             "md.entry_points = counted\n"
             "from service.core.registry import CONNECTORS, RULES\n"
             "CONNECTORS.get('aws-tags'); RULES.get('idle-gpu'); CONNECTORS.get('focus')\nprint(len(scans))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "1"


CONNECTOR = '''
"""An installed package's billing connector: its own config key, read from memory."""
from pydantic import Field

from connectors.base import COSTS, Delivery
from service.core.config import SourceConfig
from service.core.schema import cost_select_list


class LedgerSource(SourceConfig):
    dollars: str = Field(pattern=r"^[0-9.]+$")


class LedgerConnector:
    kind = "acme-ledger"
    config_model = LedgerSource
    feeds = COSTS

    def __init__(self, config):
        self.config = config

    def local_paths(self):
        return []

    def deliveries(self):
        yield Delivery("acme-1", None, ("memory",))

    def read(self, delivery, con, scratch):
        select = cost_select_list({
            "BillingPeriodStart": "TIMESTAMP '2026-11-01'", "ChargePeriodStart": "TIMESTAMP '2026-11-20'",
            "ChargePeriodEnd": "TIMESTAMP '2026-11-21'", "BillingCurrency": "'USD'", "BilledCost": "d",
            "EffectiveCost": "d", "ServiceName": "'Acme Compute'"})
        return con.sql(f"SELECT {select} FROM (SELECT CAST(? AS DECIMAL(38, 12)) AS d)", params=[self.config.dollars])
'''


def test_a_connector_from_an_installed_package_is_configured_and_ingested(tmp_path, monkeypatch):
    """One file and one entry-point line: the kind validates its own keys through the registry
    (dotted paths kept), `spendlake ingest` commits what it reads and `spendlake report` reports it."""
    module = unique("acme_ledger")
    install(tmp_path, monkeypatch, {module: CONNECTOR},
            {"spendlake.connectors": {"acme-ledger": f"{module}:LedgerConnector"}})
    config = tmp_path / "spendlake.yaml"
    source = {"name": "books", "kind": "acme-ledger", "location": "memory", "dollars": "12.34"}
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [source]}))
    ingested = CliRunner().invoke(cli, ["--config", str(config), "ingest"])
    assert ingested.exit_code == 0, ingested.output
    status = CliRunner().invoke(cli, ["--config", str(config), "status", "--format", "json"])
    assert [(row["source"], row["billed_cost"]) for row in json.loads(status.output)] == [("books", "12.340000000000")]
    report = CliRunner().invoke(cli, ["--config", str(config), "report", "--date", "2026-11-20", "--out",
                                      str(tmp_path / "out")])
    assert report.exit_code == 0, report.output  # the hooks it leaves out (final_when, ...) read as their defaults

    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [{**source, "dollars": "many"}]}))
    invalid = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert invalid.exit_code == 2
    assert "sources[0].dollars: 'many' is not in the form this setting takes" in invalid.output
    config.write_text(json.dumps({"lake": str(tmp_path / "lake"), "sources": [{**source, "report_name": "x"}]}))
    invalid = CliRunner().invoke(cli, ["--config", str(config), "config", "validate"])
    assert "sources[0].report_name: kind acme-ledger takes no such key" in invalid.output


def test_a_kind_goes_under_the_section_of_what_it_feeds(tmp_path):
    from service.core.config import parse_config

    with pytest.raises(ConfigError, match=r"sources\[0\]\.kind: 'aws-tags' is not a billing kind; put it under `inventory:`"):
        parse_config({"sources": [{"name": "t", "kind": "aws-tags", "location": "x"}]})
    with pytest.raises(ConfigError, match=r"inventory\[0\]\.kind: 'focus' is not an inventory kind"):
        parse_config({"inventory": [{"name": "f", "kind": "focus"}]})
    with pytest.raises(ConfigError, match=r"sources\[0\]\.kind: no billing connector kind 'acme-none' is installed"):
        parse_config({"sources": [{"name": "n", "kind": "acme-none", "location": "x"}]})


def test_every_source_kind_states_how_fresh_its_data_must_be():
    """Freshness (status, report, /readyz, the stale alert) reads `freshness_hours` of every
    configured source: a kind whose config lacks it broke the demo's report (slurm-jobs)."""
    from service.core.registry import Disposition

    loaded, broken = CONNECTORS.load_all()
    assert not broken, broken
    for kind, connector in loaded.items():
        field = connector.config_model.model_fields.get("freshness_hours")
        assert field is not None and field.default == 36, kind
        if connector.feeds.disposition is not Disposition.PERIOD:
            assert field.description and "stale" in field.description, kind


def test_a_config_model_is_named_once_by_the_type_parameter():
    from connectors.inventory_base import FileOrApiConnector
    from rules.base import Rule, RuleConfig
    from service.core.config import InventorySource
    from service.core.registry import Disposition, Feeds

    class Settings(InventorySource):
        depth: int = 1

    class Typed(FileOrApiConnector[Settings]):
        kind = "acme-typed"

    class Explicit(FileOrApiConnector[Settings]):
        kind = "acme-explicit"
        config_model = InventorySource  # a model set in the class body wins

    class Plain(Rule):
        name = "acme-plain"

    assert Typed.config_model is Settings and Explicit.config_model is InventorySource
    assert Plain.config_model is RuleConfig  # a rule with no settings of its own
    assert not hasattr(FileOrApiConnector, "config_model")  # no parameter, no model: the registry says so
    assert Feeds.snapshot("jobs") == Feeds(("jobs",), "snapshot_date", Disposition.SNAPSHOT)
    assert Feeds.series("gpu_utilization") == Feeds(("gpu_utilization",), "day", Disposition.SERIES)
    assert Feeds.snapshot("jobs").problem() is None and Feeds.series("gpu_utilization").problem() is None
