"""A value typed decomposed (NFD: `u` + U+0308 for `ü`, as macOS input methods give it) names
the same team, run, cluster or tag key as the composed (NFC) spelling bills carry: through the
CLI's `--where`, `runs --run`, `findings --team`, and the config's budgets, tag aliases,
virtual-tag rules and cluster owners. Figures: team Zürich spent $10 (Nov 2) and $5 (Nov 3),
team nlp $7."""

from __future__ import annotations

import json
import unicodedata
from decimal import Decimal

import yaml
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import load_config
from tests.attribution_helpers import declared_sources, line, make_lake

ZURICH = unicodedata.normalize("NFC", "Zürich")
TYPED = unicodedata.normalize("NFD", "Zürich")  # what a macOS keyboard sends
ZURICH_TAGS = {"Équipe": ZURICH, "team": ZURICH, "project": ZURICH}
WINDOW = ["--since", "2026-11-01", "--until", "2026-12-01"]
assert TYPED != ZURICH


def lake_config(tmp_path, **settings) -> str:
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags=ZURICH_TAGS),
                                line("2026-11-03 00:00", "5", tags=ZURICH_TAGS),
                                line("2026-11-02 00:00", "7", tags={"Équipe": "nlp", "team": "nlp"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), **settings},
                                   allow_unicode=True))
    return str(path)


def attributed(path: str, *args: str, dim: str = "team") -> dict:
    shown = CliRunner().invoke(cli, ["--config", path, "attribute", *WINDOW, "--format", "json", *args])
    assert shown.exit_code == 0, shown.output
    return {row[dim]: Decimal(row["cost"]) for row in json.loads(shown.stdout)["rows"]}


def test_a_where_value_typed_decomposed_keeps_the_teams_composed_lines(tmp_path):
    path = lake_config(tmp_path)
    assert attributed(path, "--where", f"team={TYPED}") == {ZURICH: Decimal(15)}
    assert attributed(path, "--where", f"team= {TYPED.upper()} ") == {ZURICH: Decimal(15)}


def test_a_tag_alias_typed_decomposed_reads_the_composed_key(tmp_path):
    path = lake_config(tmp_path, attribution={"dimensions": {"team": {"tags": [unicodedata.normalize("NFD", "Équipe")]}}})
    assert attributed(path) == {ZURICH: Decimal(15), "nlp": Decimal(7)}


def test_a_rules_value_typed_decomposed_is_one_value_with_the_lines_composed_one(tmp_path):
    # the rule gives the nlp line (no project tag) the project Zürich typed decomposed: one project of $22
    rule = {"match": {"team": "nlp"}, "value": TYPED}
    path = lake_config(tmp_path, attribution={"dimensions": {"project": {"rules": [rule]}}})
    assert attributed(path, "--by", "project", dim="project") == {ZURICH: Decimal(22)}
    assert attributed(path, "--by", "project", "--where", f"project={ZURICH}", dim="project") == {ZURICH: Decimal(22)}


def test_a_fixed_splits_weight_and_a_default_typed_decomposed_are_the_composed_values(tmp_path):
    # nlp's $7 is split wholly onto Zürich typed decomposed: one team of $22; the projects' default likewise
    shared = [{"match": {"account": "111111111111", "team": "nlp"}, "split": "fixed", "weights": {TYPED: 1}}]
    path = lake_config(tmp_path, attribution={"shared": shared, "dimensions": {"project": {"default": TYPED}}})
    assert attributed(path) == {ZURICH: Decimal(22)}
    assert attributed(path, "--by", "project", dim="project") == {ZURICH: Decimal(22)}


def test_a_budget_typed_decomposed_counts_the_teams_spend(tmp_path):
    path = lake_config(tmp_path, budgets=[{"name": "zurich", "value": TYPED, "amount": 100}])
    shown = CliRunner().invoke(cli, ["--config", path, "budgets", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    [budget] = json.loads(shown.stdout)
    assert budget["actual"] == "15.00"


def test_a_cluster_owner_typed_decomposed_owns_the_composed_cluster(tmp_path):
    owners = {unicodedata.normalize("NFD", "GPU-Zürich"): TYPED}
    path = lake_config(tmp_path, attribution={"clusters": {"owners": owners}})
    clusters = load_config(path).attribution.clusters
    assert clusters.owner(unicodedata.normalize("NFC", "gpu-zürich")) == ZURICH


def test_runs_run_typed_either_way_tells_the_runs_story_as_its_records_spell_it(tmp_path):
    # run Zürich-1 held all 8 GPUs of i-a's $80 hour for 30 minutes: $40, idle $40; recorded composed
    # (typed decomposed, macOS) or recorded decomposed (a scheduler on macOS, typed composed)
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_runs import whole_config

    for recorded, typed in ((ZURICH, TYPED), (TYPED, ZURICH)):
        where = tmp_path / f"recorded-{recorded == ZURICH}"
        where.mkdir()
        lake, _ = setup(where, [gpu_line("i-a")], [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00",
                                                        instance_ids=["i-a"], run_id=f"{recorded}-1")])
        path = where / "spendlake.yaml"
        path.write_text(yaml.safe_dump(whole_config(where, lake)))
        shown = CliRunner().invoke(cli, ["--config", str(path), "runs", *WINDOW, "--run", f"{typed}-1", "--format",
                                         "json"])
        assert shown.exit_code == 0, shown.output
        story = json.loads(shown.stdout)
        assert [(row["run"], Decimal(row["cost"])) for row in story["rows"]] == [(f"{recorded}-1", Decimal(40))]
        assert [(j["job"], Decimal(j["cost"])) for j in story["jobs"]] == [("1", Decimal(40))]
        assert [(i["instance"], Decimal(i["cost"]), Decimal(i["idle"])) for i in story["instances"]] == [
            ("i-a", Decimal(40), Decimal(40))]


def test_findings_team_typed_decomposed_lists_the_composed_teams_findings(tmp_path):
    from rules.base import Finding
    from service.core.lake import Lake
    from service.findings.store import store_findings

    path = lake_config(tmp_path)
    store_findings(Lake(tmp_path / "lake"), [
        Finding(id="a1", rule="idle-gpu", severity="warning", resource_id="i-1", team=ZURICH, category="waste",
                impact_usd=Decimal("120.50"), monthly_waste_usd=Decimal("120.50"), summary="idle for 6 hours")])
    shown = CliRunner().invoke(cli, ["--config", path, "findings", "--team", TYPED, "--format", "json"])
    assert shown.exit_code == 0 and "warning: --team" not in shown.output, shown.output
    assert [f["id"] for f in json.loads(shown.stdout)] == ["a1"]


def test_a_bills_decomposed_value_is_matched_by_either_spelling_beside_the_composed_one(tmp_path):
    # a bill written on macOS: $10 of team Zürich decomposed beside $5 composed; both look alike, both are matched
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"team": TYPED, "project": TYPED}),
                                line("2026-11-02 01:00", "5", tags={"team": ZURICH}),
                                line("2026-11-02 02:00", "1", tags={"team": "nlp"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake), "attribution": {
        "dimensions": {"experiment": {"rules": [{"match": {"project": ZURICH}, "value": "matched"}]}}}}))
    shown = attributed(str(path))
    assert shown == {TYPED: Decimal(10), ZURICH: Decimal(5), "nlp": Decimal(1)}  # two values, as the bill has them
    for typed in (ZURICH, TYPED):
        assert attributed(str(path), "--where", f"team={typed}") == {TYPED: Decimal(10), ZURICH: Decimal(5)}
    assert attributed(str(path), "--by", "experiment", dim="experiment") == {"matched": Decimal(10),
                                                                              "unallocated": Decimal(6)}
    from rules.base import Finding
    from service.core.lake import Lake
    from service.findings.store import store_findings

    store_findings(Lake(lake.root), [
        Finding(id="a1", rule="idle-gpu", severity="warning", resource_id="i-1", team=TYPED, category="waste",
                impact_usd=Decimal(1), monthly_waste_usd=Decimal(1), summary="idle for 6 hours")])
    found = CliRunner().invoke(cli, ["--config", str(path), "findings", "--team", ZURICH, "--format", "json"])
    assert [f["id"] for f in json.loads(found.stdout)] == ["a1"], found.output


def test_a_plans_project_typed_decomposed_or_in_another_case_is_stored_as_the_bills_spell_it(tmp_path):
    # plan vs actual matched the $15 of Zürich either way, but plans.csv and /api/v1/plans showed the
    # project as typed (decomposed, or ZÜRICH), a value no bill carries, so no sheet joined it to them
    from service.core.lake import Lake
    from service.planning.plans import load_plans

    path = lake_config(tmp_path)
    flags = ["--params", "7B", "--tokens", "2T", "--gpu", "H100", "--gpus", "1024", "--mfu", "0.4",
             "--price-per-gpu-hour", "4", "--start", "2026-11-01", "--format", "json"]
    for name, typed, stored in (("a", TYPED, ZURICH), ("b", f" {TYPED.upper()} ", ZURICH),
                                ("c", unicodedata.normalize("NFD", "Genève"), unicodedata.normalize("NFC", "Genève"))):
        shown = CliRunner().invoke(cli, ["--config", path, "estimate", "--register", name, "--project", typed, *flags])
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["plan"]["project"] == stored
        assert f"registered plan {name} for project {stored}:" in shown.stderr
    assert {p.name: p.project for p in load_plans(Lake(tmp_path / "lake"))} == {
        "a": ZURICH, "b": ZURICH, "c": unicodedata.normalize("NFC", "Genève")}  # c: no bill carries it, composed
    plans = CliRunner().invoke(cli, ["--config", path, "plans", "--as-of", "2026-11-03", "--format", "json"])
    assert [(row["project"], Decimal(row["actual_to_date"])) for row in json.loads(plans.stdout)] == [
        (ZURICH, Decimal(15)), (ZURICH, Decimal(15)), (unicodedata.normalize("NFC", "Genève"), Decimal(0))]


def test_a_bills_decomposed_dotted_capital_i_is_matched_by_every_way_of_typing_it(tmp_path):
    # İ decomposed is I + U+0307, which SQL lowers to i + U+0307 where the composed İ lowers to i:
    # typed as İ, decomposed, or as Python lowercases it (i + U+0307), both lines are the team's (a
    # decomposed line is matched with İ where the value has it: İZMİR's second İ is not the bill's)
    decomposed, composed = unicodedata.normalize("NFD", "İzmir"), "İzmir"
    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"team": decomposed}),
                                line("2026-11-02 01:00", "5", tags={"team": composed}),
                                line("2026-11-02 02:00", "1", tags={"team": "nlp"})])
    path = tmp_path / "spendlake.yaml"
    path.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))
    for typed in ("İzmir", decomposed, "i\u0307zmir", " İZMIR "):
        shown = CliRunner().invoke(cli, ["--config", str(path), "attribute", *WINDOW, "--format", "json",
                                         "--where", f"team={typed}"])
        assert shown.exit_code == 0 and "matches nothing" not in shown.stderr, shown.output
        rows = {row["team"]: Decimal(row["cost"]) for row in json.loads(shown.stdout)["rows"]}
        assert rows == {decomposed: Decimal(10), composed: Decimal(5)}, typed


def test_runs_run_finds_a_run_id_recorded_half_composed_as_every_runs_answer_shows_it(tmp_path):
    # SQL compares a run id's lower() with the forms of the one typed, composed or decomposed; an id written
    # half one way, half the other, matches neither, and only Python's folding makes it the run typed
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_runs import write_config

    half = f"{ZURICH}-{TYPED}-1"
    lake, _ = setup(tmp_path, [gpu_line("i-a")], [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00",
                                                       instance_ids=["i-a"], run_id=half)])
    path = write_config(tmp_path, lake)

    def rows(*args: str) -> list[dict]:
        shown = CliRunner().invoke(cli, ["--config", path, "runs", *WINDOW, "--format", "json", *args])
        assert shown.exit_code == 0, shown.output
        return json.loads(shown.stdout)["rows"]

    [row] = rows()
    assert (row["run"], Decimal(row["cost"]), row["jobs"], row["gpu_hours"]) == (half, Decimal(40), 1, "4.000000")
    assert rows("--run", f"{ZURICH}-{ZURICH}-1") == rows("--run", f"{TYPED}-{TYPED}-1") == [row]


def test_every_runs_answer_gives_a_run_id_recorded_half_composed_its_idle_share(tmp_path):
    # runs46: the idle shares were keyed by SQL's lower() of the id, the rows by Python's folding: a run id
    # recorded decomposed or half composed had no idle_share in the answer of every run (its own had one)
    from tests.test_clusters_allocation import gpu_line, job, setup
    from tests.test_runs import write_config

    half = f"{ZURICH}-{TYPED}-1"
    lake, _ = setup(tmp_path, [gpu_line("i-a")], [job("1", 8, "2026-11-02T10:00:00", "2026-11-02T10:30:00",
                                                       instance_ids=["i-a"], run_id=half)])
    path = write_config(tmp_path, lake)
    shown = [json.loads(CliRunner().invoke(cli, ["--config", path, "runs", *WINDOW, "--format", "json", *args]).stdout)
             for args in ((), ("--run", half))]
    [every], [own] = (answer["rows"] for answer in shown)
    assert every["idle_share"] == own["idle_share"] == "0.5000", (every, own)
