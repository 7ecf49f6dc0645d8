"""`spendlake plans remove NAME`, and registering onto a plans file registering never wrote."""

from __future__ import annotations

import hashlib
import json

from click.testing import CliRunner

from service.cli.main import cli
from service.core.snapshot_ledger import snapshot_checks
from service.planning.plans import load_plans, register_plan
from test_plans_cli import hand_edit, plan, small_lake, spendlake

ESTIMATE = ("estimate", "--params", "7B", "--tokens", "2T", "--gpu", "H100", "--gpus", "64", "--mfu", "0.4",
            "--price-per-gpu-hour", "4", "--project", "llm-7b", "--start", "2026-11-25")


def names(config_file) -> list[str]:
    return [row["plan"] for row in json.loads(spendlake(config_file, "plans", "--as-of", "2026-11-28",
                                                        "--format", "json").stdout)]


def test_plans_remove_asks_then_removes_one_plan_in_a_recorded_file(tmp_path):
    lake, config_file = small_lake(tmp_path)
    for name in ("known", "typo"):
        register_plan(lake, plan(name, "llm-7b", "5000"))
    declined = CliRunner().invoke(cli, ["--config", config_file, "plans", "remove", "typo"], input="n\n")
    assert declined.exit_code == 2 and "not confirmed: nothing was removed" in declined.stderr, declined.output
    assert "remove plan 'typo' from the lake at" in declined.stderr
    assert names(config_file) == ["known", "typo"]

    out = CliRunner().invoke(cli, ["--config", config_file, "plans", "remove", "typo"], input="y\n")
    assert out.exit_code == 0, out.output
    assert "removed plan 'typo' (llm-7b, from 2026-11-25 00:00 UTC)" in out.stdout
    assert names(config_file) == ["known"]
    assert all(check.ok for check in snapshot_checks(lake, ["plans"]))  # written as registering writes

    last = spendlake(config_file, "plans", "remove", "known", "--yes")
    assert last.exit_code == 0 and load_plans(lake) == [], last.output
    assert spendlake(config_file, "plans", "--format", "table").stdout.startswith("No plans registered")


def test_removing_a_plan_not_registered_is_exit_2_naming_the_name_and_the_registered_plans(tmp_path):
    # an unknown name is usage, as `forget NAME` and `rules run --rule NAME` treat it (was exit 3 naming the plans file)
    lake, config_file = small_lake(tmp_path)
    path = lake.partition_file("plans", [("source", "estimate"), ("snapshot", "current")])
    none = spendlake(config_file, "plans", "remove", "known", "--yes")
    assert none.exit_code == 2, none.output
    assert none.stderr.strip() == ("error: NAME: no plan 'known' is registered — the lake holds no plans: "
                                   "`spendlake estimate ... --register NAME` adds one")

    for name in ("known", "other"):
        register_plan(lake, plan(name, "llm-7b", "5000"))
    before = path.read_bytes()
    out = spendlake(config_file, "plans", "remove", "Known", "--yes")
    assert out.exit_code == 2, out.output
    assert out.stderr.strip() == "error: NAME: no plan 'Known' is registered — closest plans: known", out.stderr
    far = spendlake(config_file, "plans", "remove", "nosuch", "--yes")
    assert far.exit_code == 2, far.output
    assert far.stderr.strip() == "error: NAME: no plan 'nosuch' is registered — known plans: known, other", far.stderr
    assert path.read_bytes() == before
    # looked up before asking: no question whose answer changes nothing
    asked = CliRunner().invoke(cli, ["--config", config_file, "plans", "remove", "Known"], input="y\n")
    assert asked.exit_code == 2 and "remove plan" not in asked.output, asked.output
    assert path.read_bytes() == before


def test_registering_onto_a_bad_row_names_the_file_the_row_and_the_fix_and_keeps_the_file(tmp_path):
    # was: "delete it and run `spendlake estimate --register NAME ... (each plan again)`", every plan lost
    lake, config_file = small_lake(tmp_path)
    for name in ("known", "other"):
        register_plan(lake, plan(name, "llm-7b", "5000"))
    path = hand_edit(lake, tmp_path, "SELECT * REPLACE (CASE WHEN name = 'known' THEN NULL ELSE start END::TIMESTAMP AS start) "
                                     "FROM plans")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    out = spendlake(config_file, *ESTIMATE, "--register", "new")
    assert out.exit_code == 3, out.output
    assert out.stderr.strip() == (
        f"error: {path}: this lake file cannot be read, it is damaged (plan 'known': start: must be a date and time, "
        "e.g. 2026-11-01T06:00:00Z, not nothing) "
        "— remove that plan with `spendlake plans remove known` and register it again (`spendlake estimate "
        "--register NAME ...`); the other plans are kept"), out.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # never written over

    assert spendlake(config_file, "plans", "remove", "known", "--yes").exit_code == 0
    assert spendlake(config_file, *ESTIMATE, "--register", "new").exit_code == 0
    assert names(config_file) == ["new", "other"]


def test_a_plan_twice_in_a_hand_edited_file_is_removed_whole(tmp_path):
    lake, config_file = small_lake(tmp_path)
    register_plan(lake, plan("known", "llm-7b", "5000"))
    hand_edit(lake, tmp_path, "SELECT * FROM plans UNION ALL SELECT * FROM plans")
    out = spendlake(config_file, "plans", "--format", "json")
    assert out.exit_code == 3 and "plan known is in it more than once" in out.stderr, out.output
    assert "`spendlake plans remove known`" in out.stderr
    removed = spendlake(config_file, "plans", "remove", "known", "--yes")
    assert removed.exit_code == 0 and removed.stdout.strip() == "removed plan 'known'", removed.output
    assert load_plans(lake) == []


def test_a_plan_name_differing_from_a_registered_one_only_in_case_is_refused(tmp_path):
    # was: two plans, "llama-70b" and "Llama-70B", both counting the same spend
    lake, config_file = small_lake(tmp_path)
    assert spendlake(config_file, *ESTIMATE, "--register", "llama-70b").exit_code == 0
    out = spendlake(config_file, *ESTIMATE, "--register", "Llama-70B")
    assert out.exit_code == 2, out.output
    assert ("plan 'Llama-70B' differs from the registered plan 'llama-70b' only in case — register it as llama-70b "
            "to replace that plan, or choose another name") in out.stderr, out.stderr
    assert [p.name for p in load_plans(lake)] == ["llama-70b"]
    assert spendlake(config_file, *ESTIMATE, "--register", "llama-70b").exit_code == 0  # replaced, as before
