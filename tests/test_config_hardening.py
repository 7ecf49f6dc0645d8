"""The config file answers every bad input with exit 2 and where (RELIABILITY 47, 48, 50-52)."""

from __future__ import annotations

from decimal import Decimal

import pytest
import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config
from service.core.config_file import MAX_CONFIG_BYTES, MAX_ITEMS

COMMANDS = [["config", "validate"], ["ingest"], ["status"], ["attribute", "--since", "7d"], ["report"],
            ["verify"], ["rules", "run"], ["findings"], ["budgets"], ["inventory"]]


def invoke(*args):
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    return result


def write(path, data) -> str:
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_47_a_lake_that_is_a_file_is_a_config_error_for_every_command(tmp_path, command):
    not_a_dir = tmp_path / "passwd"
    not_a_dir.write_text("root:x:0:0\n")
    config = write(tmp_path / "spendlake.yaml", {"lake": str(not_a_dir)})
    result = invoke("--config", config, *command)
    assert result.exit_code == 2, result.output
    assert "lake: " in result.output and f"{not_a_dir} is a file" in result.output
    assert "must be a directory" in result.output and not_a_dir.read_text() == "root:x:0:0\n"


def test_47_a_lake_below_a_file_is_refused_and_a_missing_lake_is_created(tmp_path):
    (tmp_path / "file").write_text("x")
    below = invoke("--config", write(tmp_path / "a.yaml", {"lake": str(tmp_path / "file" / "lake")}), "config",
                   "validate")
    assert below.exit_code == 2 and f"{tmp_path / 'file'} is a file (on the way to" in below.output
    missing = tmp_path / "new" / "lake"
    fresh = invoke("--config", write(tmp_path / "b.yaml", {"lake": str(missing)}), "config", "validate")
    assert fresh.exit_code == 0, fresh.output
    assert invoke("--config", str(tmp_path / "b.yaml"), "ingest").exit_code == 0
    assert missing.is_dir()


@pytest.mark.parametrize("written", ["relative", "absolute", "below"])
@pytest.mark.parametrize("command", [["config", "validate"], ["ingest"], ["status"]], ids=" ".join)
def test_47_a_lake_that_is_a_dangling_symbolic_link_is_refused_naming_the_link_and_its_target(
        tmp_path, written, command):
    target = tmp_path / "mnt" / "spend" / "lake"  # a volume not mounted
    (tmp_path / "lake").symlink_to(target)
    lake = {"relative": "lake", "absolute": str(tmp_path / "lake"), "below": str(tmp_path / "lake" / "2026")}[written]
    result = invoke("--config", write(tmp_path / "spendlake.yaml", {"lake": lake}), *command)
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'lake'} is a symbolic link to {target}, which does not exist" in result.output
    assert not (tmp_path / "mnt").exists()


@pytest.mark.parametrize("command", [["config", "validate"], ["status"]], ids=" ".join)
def test_47_a_lake_that_is_a_symbolic_link_loop_is_refused_as_a_loop_not_as_missing(tmp_path, command):
    """`ln -s lake2 lake; ln -s lake lake2` was said "a symbolic link to lake2, which does not
    exist" though lake2 is there: the fix is to break the loop, not to create lake2."""
    (tmp_path / "lake").symlink_to(tmp_path / "lake2")
    (tmp_path / "lake2").symlink_to(tmp_path / "lake")
    result = invoke("--config", write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "lake")}), *command)
    assert result.exit_code == 2, result.output
    assert (f"{tmp_path / 'lake'} is a symbolic link to {tmp_path / 'lake2'}, which leads back to itself "
            f"(a loop of symbolic links)") in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("location", ["costs", "costs/focus/2024-09", "_ledger"])
def test_a_source_location_inside_the_lake_is_refused_naming_both(tmp_path, location):
    lake = tmp_path / "lake"
    inside = lake / location
    config = write(tmp_path / "spendlake.yaml", {"lake": str(lake), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": "s3://bucket/prefix"},
        {"name": "focus", "kind": "focus", "location": str(inside)}]})
    for command in (["config", "validate"], ["ingest"]):
        result = invoke("--config", config, *command)
        assert result.exit_code == 2, result.output
        assert f"sources[1].location: {inside} is inside the lake ({lake})" in result.output
    assert not lake.exists()  # refused before anything was written


@pytest.mark.parametrize("lake_at", ["inside", "same"])
def test_48_a_lake_inside_a_source_location_is_refused_naming_both(tmp_path, lake_at):
    export = tmp_path / "export"
    export.mkdir()
    lake = export / "spendlake" / "lake" if lake_at == "inside" else export
    config = write(tmp_path / "spendlake.yaml", {"lake": str(lake), "sources": [
        {"name": "cur", "kind": "aws-cur", "location": "s3://bucket/prefix"},
        {"name": "focus", "kind": "focus", "location": str(export)}]})
    result = invoke("--config", config, "config", "validate")
    assert result.exit_code == 2, result.output
    assert f"lake: {lake} is inside sources[1].location ({export})" in result.output
    inventory = write(tmp_path / "inventory.yaml", {"lake": str(lake), "inventory": [
        {"name": "tags", "kind": "aws-tags", "path": str(export)}]})
    assert "is inside inventory[0].path" in invoke("--config", inventory, "ingest").output
    beside = write(tmp_path / "ok.yaml", {"lake": str(tmp_path / "lake"), "sources": [
        {"name": "focus", "kind": "focus", "location": str(export)}]})
    assert invoke("--config", beside, "config", "validate").exit_code == 0


DUPLICATES = [
    ("lake: /tmp/a\nsources: []\nreport: {top: 5}\nsources:\n  - {name: x, kind: focus, location: /tmp}\n",
     "key 'sources' appears twice in one mapping: line 2 and line 4"),
    ("sources:\n  - name: x\n    kind: focus\n    location: /tmp/a\n    location: /tmp/b\n",
     "key 'location' appears twice in one mapping: line 4 and line 5"),
    ("rules:\n  idle-gpu: {min_idle_hours: 2, min_idle_hours: 3}\n", "key 'min_idle_hours' appears twice"),
]


@pytest.mark.parametrize("text, message", DUPLICATES)
def test_50_duplicate_yaml_keys_are_refused_with_their_lines(tmp_path, text, message):
    result = invoke("--config", write(tmp_path / "spendlake.yaml", text), "config", "validate")
    assert result.exit_code == 2, result.output
    assert message in result.output and "spendlake.yaml" in result.output


def test_a_number_yaml_would_round_is_refused_with_its_line_and_quoted_it_is_read_exactly(tmp_path):
    budget = "budgets:\n  - {name: big, dimension: team, value: pretrain, amount: %s}\n"
    text = f"lake: {tmp_path / 'lake'}\n" + budget % "1234567890123456789.12"
    result = invoke("--config", write(tmp_path / "spendlake.yaml", text), "config", "validate")
    assert result.exit_code == 2, result.output
    assert ("line 3: 1234567890123456789.12 has more digits than a YAML number keeps "
            "(it would be read as 1.2345678901234568e+18)") in result.output
    assert "spendlake.yaml" in result.output and "in quotes" in result.output
    quoted = f"lake: {tmp_path / 'lake'}\n" + budget % "'1234567890123456789.12'"
    config = load_config(write(tmp_path / "quoted.yaml", quoted))
    assert config.budgets[0].amount == Decimal("1234567890123456789.12")
    plain = f"lake: {tmp_path / 'lake'}\n" + budget % "2500.50"  # a float that holds its digits reads as before
    assert load_config(write(tmp_path / "plain.yaml", plain)).budgets[0].amount == Decimal("2500.50")


def test_50_merge_keys_may_still_be_overridden(tmp_path):
    text = (f"lake: {tmp_path / 'lake'}\nbase: &base {{kind: focus, location: {tmp_path}/x}}\n")
    # `base` is not a setting: it fails as an unknown key, not as a duplicate
    result = invoke("--config", write(tmp_path / "a.yaml", text), "config", "validate")
    assert result.exit_code == 2 and "appears twice" not in result.output
    text = (f"lake: {tmp_path / 'lake'}\nsources:\n  - &s {{name: a, kind: focus, location: {tmp_path}/x}}\n"
            f"  - <<: *s\n    name: b\n    location: {tmp_path}/y\n")  # two sources on one folder: refused
    result = invoke("--config", write(tmp_path / "b.yaml", text), "config", "validate")
    assert result.exit_code == 0, result.output


def test_51_a_config_over_the_size_limit_is_refused(tmp_path):
    big = tmp_path / "spendlake.yaml"
    big.write_text("# " + "x" * MAX_CONFIG_BYTES + "\nlake: ./lake\n")
    result = invoke("--config", str(big), "config", "validate")
    assert result.exit_code == 2 and "larger than 10 MB" in result.output


@pytest.mark.parametrize("data, path", [
    ({"sources": [{"name": f"s{i}", "kind": "focus", "location": f"/tmp/{i}"} for i in range(MAX_ITEMS + 1)]},
     "sources: 1,001 entries; a list in the config holds at most 1,000"),
    ({"attribution": {"dimensions": {"team": {"tags": ["team"] * (MAX_ITEMS + 1)}}}},
     "attribution.dimensions.team.tags: 1,001 entries"),
    ({"rules": {f"rule-{i}": {} for i in range(MAX_ITEMS + 5)}}, "rules: 1,005 entries; a mapping"),
])
def test_51_absurdly_long_lists_are_refused_with_the_dotted_path(tmp_path, data, path):
    result = invoke("--config", write(tmp_path / "spendlake.yaml", data), "config", "validate")
    assert result.exit_code == 2, result.output
    assert path in result.output


def test_51_a_yaml_alias_bomb_stops_at_the_value_limit(tmp_path):
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 10)]
    text = "\n".join(lines) + "\n"
    result = invoke("--config", write(tmp_path / "spendlake.yaml", text), "config", "validate")
    assert result.exit_code == 2 and "more than 100,000 values" in result.output


def test_51_a_yaml_alias_that_contains_itself_is_named_in_one_short_line(tmp_path):
    result = invoke("--config", write(tmp_path / "spendlake.yaml", "lake: /tmp/x\nsources: &s [*s]\n"),
                    "config", "validate")
    assert result.exit_code == 2, result.output[:300]
    assert "sources[0][0]" in result.output and "nested deeper than" in result.output
    assert len(result.output) < 400 and "Traceback" not in result.output


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != ["config", "validate"]] + [["config", "validate"]],
                         ids=" ".join)
def test_52_no_config_found_is_exit_2_naming_the_three_places(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    result = invoke(*command)
    assert result.exit_code == 2, result.output
    assert "--config, $SPENDLAKE_CONFIG, ./spendlake.yaml" in result.output
    assert not (tmp_path / "spendlake-data").exists()


def test_52_the_environment_and_the_working_directory_are_found(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "here")})
    assert str(tmp_path / "here") in invoke("config", "validate").output
    monkeypatch.setenv("SPENDLAKE_CONFIG", write(tmp_path / "other.yaml", {"lake": str(tmp_path / "there")}))
    assert str(tmp_path / "there") in invoke("config", "validate").output
    monkeypatch.setenv("SPENDLAKE_CONFIG", str(tmp_path / "missing.yaml"))
    missing = invoke("config", "validate")
    assert missing.exit_code == 2 and "missing.yaml: config file not found" in missing.output
    # a stale variable is named as the one that sent spendlake there, not suggested as a fix
    assert "(named by $SPENDLAKE_CONFIG) — point $SPENDLAKE_CONFIG at the config, or unset it" in missing.output
    monkeypatch.delenv("SPENDLAKE_CONFIG")
    given = invoke("--config", str(tmp_path / "missing.yaml"), "config", "validate")
    assert given.exit_code == 2 and "config file not found — pass --config PATH" in given.output


def test_52_estimate_and_help_need_no_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert invoke("--help").exit_code == 0
    priced = invoke("estimate", "--params", "7B", "--tokens", "2T", "--gpu", "H100", "--gpus", "64", "--mfu", "0.4",
                    "--price-per-gpu-hour", "4", "--format", "json")
    assert priced.exit_code == 0, priced.output
    registered = invoke("estimate", "--params", "7B", "--tokens", "2T", "--gpu", "H100", "--gpus", "64", "--mfu",
                        "0.4", "--price-per-gpu-hour", "4", "--register", "x", "--project", "p", "--start", "2026-12-01")
    assert registered.exit_code == 2 and "no config found" in registered.output


def test_48_a_report_is_never_written_inside_the_lake(tmp_path):
    lake = tmp_path / "lake"
    inside = write(tmp_path / "inside.yaml", {"lake": str(lake), "sources": [],
                                              "report": {"out": str(lake / "costs")}})
    result = invoke("--config", inside, "config", "validate")
    assert result.exit_code == 2, result.output
    assert f"report.out: {lake / 'costs'} is inside the lake ({lake})" in result.output
    config = write(tmp_path / "spendlake.yaml", {"lake": str(lake), "sources": []})
    result = invoke("--config", config, "report", "--out", str(lake / "costs"))
    assert result.exit_code == 2, result.output
    assert f"error: --out: {lake / 'costs'} is inside the lake" in result.output and "Traceback" not in result.output
    assert not (lake / "costs").exists()


@pytest.mark.parametrize("text, says", [
    (b"lake: /tmp/x\nsources:\n\t- x\n", "not valid YAML at line 3, column 1: found character that cannot start any "
                                          "token (while scanning for the next token) — YAML indents with spaces"),
    (b"lake: [unclosed\n", "not valid YAML at line 2, column 1:"),
    (b"\xff\xfe lake", "the config is not UTF-8 text (byte 1 is 0xff) — save it as UTF-8"),
])
def test_50_a_malformed_config_is_one_line_naming_where(tmp_path, text, says):
    path = tmp_path / "spendlake.yaml"
    path.write_bytes(text)
    result = invoke("--config", str(path), "config", "validate")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and says in result.output, result.output


@pytest.mark.parametrize("text", ["", "\n\n", "# lake: /data/lake\n"], ids=["empty", "blank", "comments"])
@pytest.mark.parametrize("command", [["config", "validate"], ["status"], ["ingest"], ["report"]], ids=" ".join)
def test_50_a_config_file_holding_no_settings_is_exit_2_not_a_new_lake(tmp_path, monkeypatch, text, command):
    """An emptied file (a shell's `>`, an editor's save caught halfway, a ConfigMap key left blank)
    read as the defaults: `config ok: 0 source(s) ... lake at ./spendlake-data/lake`, and every
    command made and used that other, empty lake."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "spendlake.yaml"
    path.write_text(text)
    result = invoke("--config", str(path), *command)
    assert result.exit_code == 2, result.output
    assert f"{path}: the config holds no settings" in result.output
    assert not (tmp_path / "spendlake-data").exists()


TYPO_IN_RULES = {"rules": {"idle-gpuu": {}, "idle-gpu": {"sm_active_max_pc": 5}}}


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_57_an_unknown_rule_or_rule_setting_is_exit_2_for_every_command(tmp_path, command):
    config = write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "lake"), **TYPO_IN_RULES})
    result = invoke("--config", config, *command)
    assert result.exit_code == 2, result.output
    assert "spendlake.yaml: rules." in result.output
    assert "rules.idle-gpuu: unknown rule; closest rules: idle-gpu" in result.output
    assert "rules.idle-gpu.sm_active_max_pc: unknown key; closest keys: sm_active_max_pct" in result.output
    assert "rules/idle_gpu.py" in result.output


def test_57_rule_errors_are_named_with_the_rest_of_the_config_at_once(tmp_path):
    config = write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "lake"), "report": {"topp": 3},
                                                 **TYPO_IN_RULES})
    result = invoke("--config", config, "config", "validate")
    assert result.exit_code == 2, result.output
    assert all(path in result.output for path in ("report.topp", "rules.idle-gpuu", "rules.idle-gpu.sm_active_max_pc"))


def test_a_percentage_written_as_a_fraction_is_warned_at_validate_not_refused(tmp_path):
    """`idle-gpu: {sm_active_max_pct: 0.05}` (5 % meant) flagged only GPUs under 0.05 % busy,
    without a word; a percentage at 1 or more, or left at its default, says nothing."""
    config = write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "lake"), "rules": {
        "idle-gpu": {"sm_active_max_pct": 0.05, "gpu_util_max_pct": 10},
        "unallocated-spend": {"max_unallocated_pct": "0.5"}, "spend-anomaly": {"min_impact_pct": 1}}})
    result = CliRunner().invoke(cli, ["--config", config, "config", "validate"])
    assert result.exit_code == 0 and result.stdout.startswith("config ok"), result.output
    assert result.stderr.splitlines() == [
        f"warning: {config}: rules.idle-gpu.sm_active_max_pct: 0.05 is a percentage, 0.05 %; write 5 if 5 % is meant",
        f"warning: {config}: rules.unallocated-spend.max_unallocated_pct: 0.5 is a percentage, 0.5 %; write 50 if "
        "50 % is meant"], result.stderr


def test_ingest_and_inventory_without_sources_say_what_to_add(tmp_path):
    config = write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "lake")})
    ingest = invoke("--config", config, "ingest")
    assert ingest.exit_code == 0 and "no billing sources configured: add a `sources:` list" in ingest.output
    inventory = invoke("--config", config, "inventory")
    assert inventory.exit_code == 0 and "no inventory sources configured: add an `inventory:` list" in inventory.output


@pytest.mark.parametrize("token, kind", [("48151623424815162342", "a number"), ("4815.1623", "a number"),
                                         ("'shortsecret'", None)])
def test_20_config_validate_never_echoes_an_api_token_it_refuses(tmp_path, token, kind):
    """A token of digits reads as a YAML number: the error says so, not what the token is."""
    path = tmp_path / "spendlake.yaml"
    path.write_text(f"lake: {tmp_path / 'lake'}\nservice:\n  api_token: {token}\n")
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert result.exit_code == 2 and "service.api_token: must be" in result.output, result.output
    assert token.strip("'") not in result.output and (kind is None or f"not {kind} (not shown)" in result.output)


def test_a_demo_dir_that_is_a_dangling_symbolic_link_is_refused_naming_the_link_and_its_target(tmp_path):
    target = tmp_path / "mnt" / "demo"
    (tmp_path / "data").symlink_to(target)
    result = invoke("demo", "--dir", str(tmp_path / "data"))
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / 'data'} is a symbolic link to {target}, which does not exist" in result.output
    assert "--dir" in result.output and not (tmp_path / "mnt").exists()


def test_an_optional_percentage_set_to_null_is_no_doubt():
    """A rule's optional `_pct` key (a plug-in's) set to null: `config validate` read it as a
    number (Decimal('None'): InvalidOperation, a traceback)."""
    from rules.base import RuleConfig

    class Plugin(RuleConfig):
        spare_pct: float | None = None
        floor_pct: float = 50

    assert Plugin(spare_pct=None).doubts() == []
    assert Plugin(spare_pct=0.5, floor_pct=0.2).doubts() == [
        ("floor_pct", "0.2 is a percentage, 0.2 %; write 20 if 20 % is meant"),
        ("spare_pct", "0.5 is a percentage, 0.5 %; write 50 if 50 % is meant")]


@pytest.mark.parametrize("misplaced, says", [
    ({"service": {"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG"}}, "service.aws_secret_access_key: unknown key; "),
    ({"session_token": "IQoJb3JpZ2luX2VjEJ"}, "spendlake.yaml: session_token: unknown key; "),
    ({"service": {"x-amz-security-token": "IQoJb3JpZ2luX2VjEJ"}}, "service.x-amz-security-token: unknown key; "),
    ({"sources": [{"name": "a", "kind": "focus", "location": "/tmp", "secret_key": "wJalrXUtnFEMI/K7MDENG"}]},
     "sources[0].secret_key: kind focus takes no such key; "),
])
def test_a_misplaced_aws_secret_key_is_named_in_the_validators_words_and_its_value_shown_nowhere(tmp_path, misplaced,
                                                                                                  says):
    """The log redactor takes what follows an AWS secret's key as its value: it read the validator's
    `unknown key` as one (`service.aws_secret_access_key: <redacted> key`, break53 item 7)."""
    config = write(tmp_path / "spendlake.yaml", {"lake": str(tmp_path / "lake"), **misplaced})
    result = invoke("--config", config, "config", "validate")
    assert result.exit_code == 2 and says in " ".join(result.output.split()), result.output
    assert "wJalr" not in result.output and "IQoJ" not in result.output
