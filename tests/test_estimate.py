"""`spendlake estimate` and registered plans, against numbers worked out by hand (bc)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from decimal import Decimal

import pytest
from click.testing import CliRunner

from service.cli.main import cli
from service.core.config import parse_config
from service.core.errors import ConfigError, UsageError
from service.core.lake import Lake
from service.planning.estimate import estimate, plan_inputs
from service.planning.plans import load_plans

SEVEN_B = {"params": "7B", "tokens": "2T", "gpu": "H100", "gpus": 1024, "mfu": "0.4", "price_per_gpu_hour": "4"}


def run(inputs, config=None):
    return estimate(plan_inputs(inputs), parse_config(config or {}))


def cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"))


def test_seven_b_on_two_trillion_tokens_on_h100():
    # 6 × 7e9 × 2e12 = 8.4e22 FLOPs; one H100 GPU-hour at MFU 0.4 = 989.5e12 × 0.4 × 3600 = 1.42488e18 FLOPs
    result = run({**SEVEN_B, "debug_overhead": "0.1", "eval_overhead": "5%", "failure_overhead": "0.1"})
    assert result.flops == Decimal("8.4e22")
    assert result.low == result.high
    assert cents(result.low.gpu_hours) == Decimal("58952.33")
    assert cents(result.low.wall_clock_hours) == Decimal("57.57")      # ÷ 1024 GPUs
    assert cents(result.low.run_hours) == Decimal("71.96")             # × 1.25 for the overheads
    assert cents(result.low.compute_cost) == Decimal("294761.66")      # 58,952.33 × $4 × 1.25
    # checkpoints: 7e9 × 16 bytes × 5 kept = 560 GB, held (71.96 h + 30 days) / 730 h at $0.023
    assert result.stored_bytes == Decimal("560e9")
    assert cents(result.low.storage_cost) == Decimal("13.97")
    assert cents(result.low.total_cost) == Decimal("294775.64")


def test_ranges_give_low_and_high_scenarios():
    result = run({**SEVEN_B, "mfu": "0.35-0.45", "failure_overhead": "10%-20%"})
    # low: MFU 0.45 and 10% overhead; high: MFU 0.35 and 20%
    assert cents(result.low.gpu_hours) == Decimal("52402.07")
    assert cents(result.high.gpu_hours) == Decimal("67374.09")
    assert cents(result.low.compute_cost) == Decimal("230569.12")    # 52,402.07 × 4 × 1.1
    assert cents(result.high.compute_cost) == Decimal("323395.65")   # 67,374.09 × 4 × 1.2
    assert result.is_range


@pytest.mark.parametrize("written", ["10-20%", "10%-20%", "0.1-0.2"])
def test_a_range_of_percents_reads_the_same_however_it_is_written(written):
    result = run({**SEVEN_B, "failure_overhead": written})
    assert (result.inputs.failure_overhead.low, result.inputs.failure_overhead.high) == (Decimal("0.1"), Decimal("0.2"))


def test_storage_counts_checkpoints_dataset_versions_and_logs_over_run_and_retention():
    # 6 × 1e9 × 93.6e9 = 5.616e20 FLOPs = 1,000 A100 GPU-hours at MFU 0.5 → 100 h on 10 GPUs, $2,000
    result = run({"params": "1B", "tokens": "93.6B", "gpu": "a100", "gpus": 10, "mfu": "50%",
                  "price_per_gpu_hour": "2", "checkpoints_kept": 3, "dataset_size": "2TB", "dataset_versions": 2,
                  "logs_size": "2GB"})
    assert result.low.gpu_hours == 1000 and result.low.wall_clock_hours == 100
    assert result.low.compute_cost == 2000
    # 16 GB × 3 + 2,000 GB × 2 + 2 GB = 4,050 GB for (100 h + 720 h) / 730 h at $0.023 = $104.63
    assert result.stored_bytes == Decimal("4050e9")
    assert cents(result.low.storage_cost) == Decimal("104.63")


def test_config_extends_the_gpu_table_and_sets_prices():
    config = {"estimate": {"gpus": {"H100": {"price_per_gpu_hour": "3.5"},
                                    "TPU-v5p": {"peak_bf16_tflops": 459, "price_per_gpu_hour": "4.2"}},
                           "storage_price_per_gb_month": "0.0125"}}
    h100 = run({key: value for key, value in SEVEN_B.items() if key != "price_per_gpu_hour"}, config)
    assert h100.price_per_gpu_hour == Decimal("3.5") and h100.storage_price_per_gb_month == Decimal("0.0125")
    tpu = run({**SEVEN_B, "gpu": "tpu-v5p"}, config)
    assert tpu.gpu.peak_bf16_flops == Decimal("459e12")
    assert tpu.price_per_gpu_hour == Decimal("4")  # the flag wins over the config
    with pytest.raises(ConfigError, match=r"estimate\.gpus\.X1\.peak_bf16_tflops"):
        parse_config({"estimate": {"gpus": {"X1": {"price_per_gpu_hour": 1}}}})


def test_a_new_gpu_type_without_its_throughput_is_refused_at_load_naming_the_file(tmp_path):
    """`estimate.gpus: {TPU-x: {price_per_gpu_hour: 4}}` passed `config validate`, then every
    `estimate` failed, its message naming no config file; a built-in name in any case needs none."""
    path = tmp_path / "spendlake.yaml"
    path.write_text(json.dumps({"estimate": {"gpus": {"h100": {"price_per_gpu_hour": 1},
                                                      "TPU-x": {"price_per_gpu_hour": 4}}}}))
    result = CliRunner().invoke(cli, ["--config", str(path), "config", "validate"])
    assert result.exit_code == 2, result.output
    assert (f"{path}: estimate.gpus.TPU-x.peak_bf16_tflops: GPU type 'TPU-x' is not built in, so it needs its peak "
            "throughput: set the dense BF16 TFLOPS from its datasheet") in result.output, result.output
    path.write_text(json.dumps({"estimate": {"gpus": {"h100": {"price_per_gpu_hour": 1}}}}))
    assert CliRunner().invoke(cli, ["--config", str(path), "config", "validate"]).exit_code == 0


@pytest.mark.parametrize("override, where", [
    ({"gpu": "H1000"}, "--gpu"),
    ({"mfu": "1.2"}, "--mfu"),
    ({"mfu": "0.5-0.3"}, "--mfu"),
    ({"params": "seven"}, "--params"),
    ({"debug_overhead": "-0.1"}, "--debug-overhead"),
    ({"price_per_gpu_hour": None}, "--price-per-gpu-hour"),
])
def test_bad_inputs_name_the_flag(override, where):
    inputs = {**SEVEN_B, **override}
    with pytest.raises(UsageError) as info:
        run({k: v for k, v in inputs.items() if v is not None})
    assert where in str(info.value)


def test_yaml_plan_with_flags_overriding(tmp_path):
    plan = tmp_path / "run.yaml"
    plan.write_text("params: 7B\ntokens: 2T\ngpu: H100\ngpus: 512\nmfu: 0.4\nprice_per_gpu_hour: 4\n")
    result = estimate(plan_inputs({"gpus": 1024, "mfu": None}, str(plan)), parse_config({}))
    assert cents(result.low.wall_clock_hours) == Decimal("57.57")
    plan.write_text("params: 7B\ntokens: 2T\ngpu: H100\ngpus: 512\nmfu: 0.4\ncheckpoint_kept: 1\n")
    with pytest.raises(UsageError, match=r"run\.yaml: checkpoint_kept: unknown key; closest keys: checkpoints_kept"):
        plan_inputs({}, str(plan))



@pytest.mark.parametrize("text, message", [
    ("params: 7B\ntokens: 2T\ngpu: H100\ngpus: many\n", "gpus: must be a whole number, not 'many'; mfu: is required"),
    (": : :\n", "not valid YAML at line 1, column 1: did not find expected key"),
    ("- 7B\n", "a plan must be a mapping of inputs"),
    ("params: " + "[" * 100_000, "exceeded maximum nesting depth"),  # was a RecursionError traceback
    ("params: 7B\nparams: 70B\n", "key 'params' appears twice in one mapping: line 1 and line 2"),
])
def test_a_bad_plan_file_is_named_once(tmp_path, text, message):
    plan = tmp_path / "run.yaml"
    plan.write_text(text)
    result = cli_run(tmp_path, "--plan", str(plan))
    assert result.exit_code == 2
    assert message in result.output and "<unicode string>" not in result.output
    assert result.output.count(str(plan)) == 1 and len(result.output.strip().splitlines()) == 1, result.output

def cli_run(tmp_path, *args):
    config = tmp_path / "spendlake.yaml"
    config.write_text(f"lake: {tmp_path / 'lake'}\n")
    return CliRunner().invoke(cli, ["--config", str(config), "estimate", *args], catch_exceptions=False)


SEVEN_B_FLAGS = ["--params", "7B", "--tokens", "2T", "--gpu", "H100", "--gpus", "1024", "--mfu", "0.35-0.45",
                 "--price-per-gpu-hour", "4"]


def test_cli_json_has_both_scenarios(tmp_path):
    result = cli_run(tmp_path, *SEVEN_B_FLAGS, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["low"]["gpu_hours"] == "52402.07" and data["high"]["gpu_hours"] == "67374.09"
    assert data["currency"] == "USD" and data["inputs"]["mfu"] == "0.35-0.45"



@pytest.mark.parametrize("start, reason", [("2026-11-31", "day is out of range for month"),
                                           ("2026-13-01", "month must be in 1..12"), ("2026-1-5", "")])
def test_a_start_date_that_does_not_exist_is_named_invalid_with_the_format(tmp_path, start, reason):
    result = cli_run(tmp_path, *SEVEN_B_FLAGS, "--register", "llm-7b", "--project", "Pretrain", "--start", start)
    assert result.exit_code == 2
    assert f"--start: '{start}' is not a valid date" in result.output and reason in result.output
    assert "YYYY-MM-DD" in result.output and "24h" not in result.output, result.output  # no durations suggested


@pytest.mark.parametrize("start, message", [
    ("2026-12-01T06:00:00Z", "--start: '2026-12-01T06:00:00Z' is a time, not a day — use YYYY-MM-DD: 2026-12-01"),
    ("7d", "--start: cannot read '7d' as a date — use YYYY-MM-DD"),
    ("now", "--start: cannot read 'now' as a date — use YYYY-MM-DD"),
    ("9999-12-31", "--start: a plan starting 9999-12-31 ends past 9999-12-30"),
])
def test_a_start_is_a_day_as_readme_says_not_a_time_or_a_window(tmp_path, start, message):
    """README's `--start DATE` took `7d` (a week before now, to the microsecond) and times, and 9999-12-31
    was a traceback (the plan's end overflowed); each is exit 2 naming --start, nothing registered."""
    result = cli_run(tmp_path, *SEVEN_B_FLAGS, "--register", "llm-7b", "--project", "Pretrain", "--start", start)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert not (tmp_path / "lake").exists() or load_plans(Lake(tmp_path / "lake")) == []

def test_register_stores_a_plan_that_load_plans_reads(tmp_path):
    result = cli_run(tmp_path, *SEVEN_B_FLAGS, "--register", "llm-7b", "--project", "Pretrain",
                     "--experiment", "7b-base", "--start", "2026-12-01", "--format", "json")
    assert result.exit_code == 0, result.output
    (plan,) = load_plans(Lake(tmp_path / "lake"))
    assert (plan.name, plan.project, plan.experiment) == ("llm-7b", "Pretrain", "7b-base")
    assert plan.start == datetime(2026, 12, 1, tzinfo=timezone.utc)
    # stored to DECIMAL(38,12), as the estimate computed it: its figures are rounded once, where shown
    assert plan.compute_cost.low == Decimal("209608.294499653772") and plan.to_json()["compute_cost"] == {
        "low": "209608.29", "high": "269496.38"}
    # the window ends after the pessimistic run: 67,374.09 GPU-hours / 1024 = 65.795 h = 65 h 47 min 42 s
    assert plan.end == datetime(2026, 12, 3, 17, 47, 42, tzinfo=timezone.utc)
    assert plan.in_window(datetime(2026, 12, 3, tzinfo=timezone.utc))
    again = cli_run(tmp_path, *SEVEN_B_FLAGS, "--register", "llm-7b", "--project", "pretrain",
                    "--start", "2026-12-02", "--format", "json")
    assert "replaced plan llm-7b" in again.stderr
    (plan,) = load_plans(Lake(tmp_path / "lake"))
    assert plan.project == "pretrain" and plan.experiment is None
    # what a rule (which may import only service.core) reads: the `plans` view of the lake
    rows = Lake(tmp_path / "lake").query().execute(
        'SELECT name, project, experiment, start, "end", total_cost_high FROM plans').fetchall()
    assert rows == [("llm-7b", "pretrain", None, datetime(2026, 12, 2), datetime(2026, 12, 4, 17, 47, 42),
                     plan.total_cost.high)]


def test_the_registered_plan_it_prints_is_the_plan_stored_not_a_76_digit_run_length(tmp_path):
    """`--register --format json` printed the plan's run_hours as division left them
    ("65.79501953125" is exact, a 405B plan's "290694.33598236023703431485139418439064725..."
    had 76 digits) where the plans file keeps 12 decimals: it prints what `spendlake plans` reads."""
    result = cli_run(tmp_path, "--params", "405B", "--tokens", "15T", "--gpu", "H100", "--gpus", "88", "--mfu", "0.4",
                     "--price-per-gpu-hour", "12.29", "--register", "llama", "--project", "llama-405b",
                     "--start", "2026-11-01", "--format", "json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)["plan"]
    (stored,) = load_plans(Lake(tmp_path / "lake"))
    assert printed["run_hours"] == {"low": "290694.335982360237", "high": "290694.335982360237"}
    assert printed["run_hours"] == stored.to_json()["run_hours"] and printed["end"] == stored.to_json()["end"]


def test_register_needs_project_and_start(tmp_path):
    result = cli_run(tmp_path, *SEVEN_B_FLAGS, "--register", "x")
    assert result.exit_code == 2 and "--project and --start" in result.stderr
    assert load_plans(Lake(tmp_path / "lake")) == []


def test_planned_spend_curve_is_linear_over_run_and_retention(tmp_path):
    result = run({"params": "1B", "tokens": "93.6B", "gpu": "A100", "gpus": 10, "mfu": "0.5",
                  "price_per_gpu_hour": "2", "checkpoints_kept": 0, "dataset_size": "730GB", "retention_days": 0,
                  "storage_price_per_gb_month": "1"})
    from service.planning.plans import plan_from_estimate

    plan = plan_from_estimate(result, name="p", project="x", experiment=None, start="2026-12-01")
    # 100 h run; storage 730 GB × (100/730) months × $1 = $100, spread over the same 100 h
    assert plan.total_cost.low == Decimal("2100.00")
    assert plan.planned_spend(datetime(2026, 11, 30, tzinfo=timezone.utc)).low == 0
    assert plan.planned_spend(datetime(2026, 12, 3, 2, tzinfo=timezone.utc)).low == Decimal("1050")  # 50 h in
    assert plan.planned_spend(datetime(2026, 12, 9, tzinfo=timezone.utc)).high == Decimal("2100.00")


def test_a_registered_plans_total_is_the_estimates_to_the_cent_and_its_low_never_above_its_high(tmp_path):
    # break49b's run: the estimate's high total 2,638,124.20 (the exact sum, rounded once) was 2,638,124.21 as a
    # plan (its compute and storage each in cents, added), and mid-run the plan's low read a cent above its high
    from dataclasses import replace
    from datetime import timedelta

    from service.planning.estimate import Span
    from service.planning.plans import plan_from_estimate
    from service.report.sections.plans import _cents

    result = run({"params": "405B", "tokens": "100B", "gpu": "H100", "gpus": 88, "mfu": "0.35-0.45",
                  "failure_overhead": "0.1", "price_per_gpu_hour": "12.29"})
    plan = plan_from_estimate(result, name="r2", project="llama-405b", experiment=None, start="2026-11-20")
    assert result.to_json()["high"]["total_cost"] == Decimal("2638124.20")
    assert plan.to_json()["total_cost"] == {"low": format(result.to_json()["low"]["total_cost"], "f"),
                                            "high": "2638124.20"}
    assert plan.total_cost.high.quantize(Decimal("0.01")) == Decimal("2638124.20")
    # at MFU 0.3-0.5 the low read 493,638.65 against a high of 493,638.64 on the 19th day (the runs' ends cut to
    # whole seconds parted the scenarios' rates)
    plan = plan_from_estimate(run({"params": "405B", "tokens": "100B", "gpu": "H100", "gpus": 88, "mfu": "0.3-0.5",
                                   "failure_overhead": "0.1", "price_per_gpu_hour": "12.29"}),
                              name="r2", project="llama-405b", experiment=None, start="2026-11-20")
    every_hour = [plan.start + timedelta(hours=h) for h in range(0, 24 * 120)]
    assert all(low <= high for low, high in (_cents(plan.planned_spend(at)) for at in every_hour))
    assert all(plan.planned_spend(at).low <= plan.planned_spend(at).high + Decimal("1e-9") for at in every_hour)
    # a plan registered before, its parts in cents: their rounding still parts the scenarios' rates, by a cent
    in_cents = replace(plan, **{part: Span(getattr(plan, part).low.quantize(Decimal("0.01")),
                                           getattr(plan, part).high.quantize(Decimal("0.01")))
                                for part in ("compute_cost", "storage_cost")})
    assert all(low <= high for low, high in (_cents(in_cents.planned_spend(at)) for at in every_hour))


def test_cli_csv_has_plain_numbers_and_table_has_separators(tmp_path):
    csv_out = cli_run(tmp_path, *SEVEN_B_FLAGS, "--format", "csv").output.splitlines()
    assert csv_out[0] == "quantity,low,high"
    assert "compute cost (USD),209608.29,269496.38" in csv_out
    table = cli_run(tmp_path, *SEVEN_B_FLAGS, "--format", "table").output
    assert "209,608.29" in table and "run days incl. overheads" in table


def test_registering_a_plan_for_a_project_no_cost_line_carries_warns_with_the_closest_values(tmp_path):
    # plan vs actual reads the plan's project as `attribute --where project=…` does: a misspelt
    # project (or experiment) would show zero actual forever, so registering it says so
    import yaml

    from tests.attribution_helpers import declared_sources, line, make_lake

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"project": "llama-405b", "experiment": "r1"})])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))

    def register(*owner):
        return CliRunner().invoke(cli, ["--config", str(config), "estimate", *SEVEN_B_FLAGS, "--register", "p",
                                        *owner, "--start", "2026-12-01", "--format", "json"])

    typo = register("--project", "lama-405b", "--experiment", "r2")
    assert typo.exit_code == 0, typo.output
    assert ("warning: plan p: no cost line in the lake carries project 'lama-405b' yet; closest project values: "
            "llama-405b") in typo.stderr, typo.stderr
    assert "carries experiment 'r2' yet; known experiment values: r1" in typo.stderr
    assert load_plans(Lake(lake.root))[0].project == "lama-405b"  # still registered: it may precede its first bill
    spelt = register("--project", "LLAMA-405B", "--experiment", "r1")
    assert spelt.exit_code == 0 and "warning" not in spelt.stderr, spelt.stderr


def test_a_plan_whose_project_and_experiment_never_meet_warns_is_spelt_as_billed_and_is_unknown_not_under_plan(
        tmp_path):
    # each value is known, but no line carries both: the plan read $0 actual, "under plan", and was
    # stored as typed (LLAMA-70B), its spelling taken only from lines carrying both
    import yaml

    from tests.attribution_helpers import declared_sources, line, make_lake

    lake = make_lake(tmp_path, [line("2026-11-02 00:00", "10", tags={"project": "llama-70b", "experiment": "r1"}),
                                line("2026-11-02 00:00", "20", tags={"project": "sft-chat-v5",
                                                                     "experiment": "sft-chat-v5"})])
    config = tmp_path / "spendlake.yaml"
    config.write_text(yaml.safe_dump({"lake": str(lake.root), "sources": declared_sources(lake)}))

    def invoke(*args):
        return CliRunner().invoke(cli, ["--config", str(config), *args])

    def register(name, *owner):
        return invoke("estimate", *SEVEN_B_FLAGS, "--register", name, *owner, "--start", "2026-11-01",
                      "--format", "json")

    mix = register("mix", "--project", "LLAMA-70B", "--experiment", "SFT-CHAT-V5")
    assert mix.exit_code == 0, mix.output
    assert ("warning: plan mix: no cost line in the lake carries experiment 'sft-chat-v5' with project 'llama-70b' "
            "yet; experiment sft-chat-v5's lines carry project sft-chat-v5") in mix.stderr, mix.stderr
    known = register("known", "--project", "SFT-Chat-V5", "--experiment", "nope")
    assert "carries experiment 'nope' yet; known experiment values: r1, sft-chat-v5" in known.stderr, known.stderr
    assert "with project" not in known.stderr  # an unknown value is said alone
    assert [(p.name, p.project, p.experiment) for p in load_plans(Lake(lake.root))] == [
        ("known", "sft-chat-v5", "nope"), ("mix", "llama-70b", "sft-chat-v5")]
    plans = invoke("plans", "--as-of", "2026-11-02", "--format", "json")
    assert plans.exit_code == 0, plans.output
    status = {row["plan"]: (row["actual_to_date"], row["status"]) for row in json.loads(plans.stdout)}
    assert status == {"known": ("0", "unknown experiment"), "mix": ("0", "unknown experiment")}, status
    assert ("plan mix: no cost line carries experiment 'sft-chat-v5' with project 'llama-70b'; experiment "
            "sft-chat-v5's lines carry project sft-chat-v5.") in plans.stderr, plans.stderr


@pytest.mark.parametrize("flags", [
    ["--params", "1e40", "--tokens", "1e40", "--price-per-gpu-hour", "4"],
    ["--params", "7B", "--tokens", "2T", "--price-per-gpu-hour", "1e30"],
    ["--params", "7B", "--tokens", "2T", "--price-per-gpu-hour", "4", "--dataset-size", "1e40TB",
     "--storage-price-per-gb-month", "0"],
])
def test_an_estimate_too_large_to_state_to_the_cent_is_refused_not_a_traceback(tmp_path, flags):
    # was decimal.InvalidOperation from quantize: past 28 digits, and past the plans table's DECIMAL(38,12)
    result = cli_run(tmp_path, "--gpu", "H100", "--gpus", "8", "--mfu", "0.4", *flags)
    assert result.exit_code == 2 and "the estimate comes to 10^26" in result.output, result.output
