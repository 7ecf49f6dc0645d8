"""`spendlake estimate`: what a pretraining run will cost, before it starts.

    training FLOPs  = 6 × parameters × tokens
    GPU-hours       = FLOPs ÷ (peak dense BF16 FLOP/s × MFU × 3600)
    wall-clock      = GPU-hours ÷ GPU count
    compute cost    = GPU-hours × price per GPU-hour × (1 + debug + eval + failure/restart overheads)
    storage         = (checkpoint size × checkpoints kept + dataset size × versions + logs)
                      × months held (the run with its overheads, plus the retention period) × price per GB-month
    checkpoint size = parameters × bytes per parameter (16 by default: BF16 weights and gradients,
                      FP32 master weights and two Adam moments)

MFU and each overhead may be a range (`0.35-0.45`, `10%-20%`): the `low` scenario takes the
high MFU and the low overheads, the `high` scenario the opposite. The overheads also take
time on the same GPUs, so the run (the planned window) lasts GPU-hours × (1 + overheads) ÷ GPUs.
A month is 730 hours and a GB 10^9 bytes, as cloud storage prices are quoted. Money is Decimal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, Field, ValidationError, field_validator

from service.core.config import Config, Strict
from service.core.config_file import ConfigLoader, yaml_error
from service.core.validation import plain_errors
from service.core.errors import UsageError
from service.planning.gpus import GpuType, lookup_gpu

SECONDS_PER_HOUR = Decimal(3600)
HOURS_PER_MONTH = Decimal(730)
BYTES_PER_GB = Decimal(10) ** 9
CENT = Decimal("0.01")
# What a figure of an estimate may reach: a registered plan's money is DECIMAL(38,12) in the lake,
# and a figure this large stated to the cent is past Decimal's 28 digits (it was a traceback)
LARGEST = Decimal("1e26")
# no cluster holds more GPUs (the largest hold a few hundred thousand); above it a typed count
# (`--gpus 100000000000`) priced a run lasting milliseconds, shown as 0.00 hours
MAX_GPUS = 10**7

COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
SIZE_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
              "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40, "PIB": 2**50}
NUMBER = r"(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
COUNT_RE = re.compile(rf"^{NUMBER}\s*([KMBGT]?)$", re.IGNORECASE)
SIZE_RE = re.compile(rf"^{NUMBER}\s*([KMGTP]?I?B)?$", re.IGNORECASE)
FRACTION_RE = re.compile(rf"^{NUMBER}\s*(%?)$")


@dataclass(frozen=True)
class Span:
    """A value or a range of values; low == high for a single value."""

    low: Decimal
    high: Decimal

    def __str__(self) -> str:
        return format(self.low, "f") if self.low == self.high else f"{self.low:f}-{self.high:f}"


def _count(value: Any) -> Any:
    if isinstance(value, str):
        match = COUNT_RE.match(value.strip())
        if not match:
            raise ValueError(f"cannot read {value!r} as a count; use e.g. 7B, 70e9 or 2T")
        return Decimal(match.group(1)) * COUNT_SUFFIXES[match.group(2).upper()]
    return value


def _size(value: Any) -> Any:
    if isinstance(value, str):
        match = SIZE_RE.match(value.strip())
        if not match:
            raise ValueError(f"cannot read {value!r} as a size; use e.g. 500GB, 8TB or 1.5TiB")
        return Decimal(match.group(1)) * SIZE_UNITS[(match.group(2) or "B").upper()]
    return value


def _fraction(text: str) -> Decimal:
    match = FRACTION_RE.match(text.strip())
    if not match:
        raise ValueError(f"cannot read {text!r} as a fraction; use e.g. 0.4, 40% or 0.35-0.45")
    number = Decimal(match.group(1))
    return number / 100 if match.group(2) else number


def _span(value: Any) -> Any:
    if isinstance(value, Span):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError("expected a number, a percentage or a range like 0.35-0.45")
    parts = value.split("-") if "e-" not in value.lower() else [value]
    if len(parts) > 2:
        raise ValueError(f"cannot read {value!r} as a range; use low-high, e.g. 0.35-0.45")
    if len(parts) == 2 and parts[1].strip().endswith("%") and not parts[0].strip().endswith("%"):
        parts[0] += "%"  # `5-10%` is a range of percents, as `5%-10%`
    low, high = _fraction(parts[0]), _fraction(parts[-1])
    if low > high:
        raise ValueError(f"the range {value!r} runs backwards; write the low end first")
    return Span(low, high)


def _check_mfu(span: Span) -> Span:
    if not (0 < span.low and span.high <= 1):
        raise ValueError("MFU must be above 0 and at most 1 (e.g. 0.4 or 40%)")
    return span


def _check_overhead(span: Span) -> Span:
    if span.low < 0:
        raise ValueError("an overhead cannot be negative")
    return span


Count = Annotated[Decimal, BeforeValidator(_count), Field(gt=0)]
Size = Annotated[Decimal, BeforeValidator(_size), Field(ge=0)]
Mfu = Annotated[Span, BeforeValidator(lambda v: _check_mfu(_span(v)))]
Overhead = Annotated[Span, BeforeValidator(lambda v: _check_overhead(_span(v)))]


class PlanInputs(Strict):
    """Everything an estimate depends on; the keys of a YAML plan and the `--flags` of the CLI."""

    params: Count
    tokens: Count
    gpu: str = Field(min_length=1)
    gpus: int = Field(ge=1)
    mfu: Mfu
    price_per_gpu_hour: Decimal | None = Field(default=None, ge=0)
    debug_overhead: Overhead = Span(Decimal(0), Decimal(0))
    eval_overhead: Overhead = Span(Decimal(0), Decimal(0))
    failure_overhead: Overhead = Span(Decimal(0), Decimal(0))
    bytes_per_param: Decimal = Field(default=Decimal(16), gt=0)
    checkpoints_kept: int = Field(default=5, ge=0)
    dataset_size: Size = Decimal(0)
    dataset_versions: int = Field(default=1, ge=0)
    logs_size: Size = Decimal(0)
    retention_days: int = Field(default=30, ge=0)
    storage_price_per_gb_month: Decimal | None = Field(default=None, ge=0)

    @field_validator("gpus")
    @classmethod
    def _a_cluster_holds_them(cls, gpus: int) -> int:
        if gpus > MAX_GPUS:
            raise ValueError(f"{gpus:,} GPUs is more than any cluster holds (at most {MAX_GPUS:,}); "
                             "write the run's GPU count, e.g. 1024")
        return gpus

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values: spans as typed (`0.35-0.45`), decimals as strings."""
        return {key: (str(value) if isinstance(value, Span) else format(value, "f") if isinstance(value, Decimal)
                      else value) for key, value in self}


@dataclass(frozen=True)
class Scenario:
    mfu: Decimal
    overhead: Decimal  # debug + eval + failure, as a fraction of the training GPU-hours
    gpu_hours: Decimal
    wall_clock_hours: Decimal
    run_hours: Decimal  # wall-clock including the overheads: the planned window
    compute_cost: Decimal
    storage_months: Decimal
    storage_cost: Decimal

    @property
    def total_cost(self) -> Decimal:
        return self.compute_cost + self.storage_cost

    def to_json(self) -> dict[str, Decimal]:
        return {
            "mfu": self.mfu, "overhead": self.overhead,
            "gpu_hours": self.gpu_hours.quantize(CENT), "wall_clock_hours": self.wall_clock_hours.quantize(CENT),
            "run_hours": self.run_hours.quantize(CENT), "compute_cost": self.compute_cost.quantize(CENT),
            "storage_months": self.storage_months.quantize(Decimal("0.0001")),
            "storage_cost": self.storage_cost.quantize(CENT), "total_cost": self.total_cost.quantize(CENT),
        }


@dataclass(frozen=True)
class Estimate:
    inputs: PlanInputs
    gpu: GpuType
    price_per_gpu_hour: Decimal
    storage_price_per_gb_month: Decimal
    flops: Decimal
    checkpoint_bytes: Decimal
    stored_bytes: Decimal
    low: Scenario
    high: Scenario

    def to_json(self) -> dict[str, Any]:
        return {
            "inputs": self.inputs.to_json(),
            "gpu": {"name": self.gpu.name, "peak_bf16_flops": self.gpu.peak_bf16_flops},
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "storage_price_per_gb_month": self.storage_price_per_gb_month,
            "flops": self.flops, "checkpoint_bytes": self.checkpoint_bytes, "stored_bytes": self.stored_bytes,
            "currency": "USD", "low": self.low.to_json(), "high": self.high.to_json(),
        }

    def rows(self, *, display: bool = True) -> list[dict[str, Any]]:
        """One row per quantity, low and high side by side: display strings with separators
        for the terminal, plain decimals for CSV."""
        low, high = self.low.to_json(), self.high.to_json()
        for side in (low, high):
            side["run_days"] = (side["run_hours"] / 24).quantize(CENT)
        labels = [("gpu_hours", "GPU-hours (training)"), ("wall_clock_hours", "wall-clock hours (training)"),
                  ("run_hours", "run hours incl. overheads"), ("run_days", "run days incl. overheads"),
                  ("compute_cost", "compute cost (USD)"), ("storage_months", "storage months held"),
                  ("storage_cost", "storage cost (USD)"), ("total_cost", "total cost (USD)")]
        stored = (self.stored_bytes / BYTES_PER_GB).quantize(CENT)
        rows = [{"quantity": "training FLOPs", "low": self.flops, "high": self.flops},
                {"quantity": "stored GB", "low": stored, "high": stored}]
        rows += [{"quantity": label, "low": low[key], "high": high[key]} for key, label in labels]
        for row in rows:
            if display:
                row["low"], row["high"] = _shown(row["quantity"], row["low"]), _shown(row["quantity"], row["high"])
            row["value"] = row["low"] if row["low"] == row["high"] else \
                (f"{row['low']} – {row['high']}" if display else None)
        return rows

    @property
    def is_range(self) -> bool:
        return self.low != self.high


def _shown(quantity: str, value: Decimal) -> str:
    return f"{value:.3e}" if quantity == "training FLOPs" else f"{value:,}"


def scenario(inputs: PlanInputs, gpu: GpuType, price: Decimal, storage_price: Decimal, stored_bytes: Decimal,
             mfu: Decimal, overhead: Decimal) -> Scenario:
    flops = 6 * inputs.params * inputs.tokens
    gpu_hours = flops / (gpu.peak_bf16_flops * mfu * SECONDS_PER_HOUR)
    wall_clock = gpu_hours / inputs.gpus
    run_hours = wall_clock * (1 + overhead)
    storage_months = (run_hours + 24 * inputs.retention_days) / HOURS_PER_MONTH
    return Scenario(mfu=mfu, overhead=overhead, gpu_hours=gpu_hours, wall_clock_hours=wall_clock,
                    run_hours=run_hours, compute_cost=gpu_hours * price * (1 + overhead),
                    storage_months=storage_months,
                    storage_cost=stored_bytes / BYTES_PER_GB * storage_months * storage_price)


def estimate(inputs: PlanInputs, config: Config) -> Estimate:
    gpu = lookup_gpu(inputs.gpu, config.estimate)
    price = inputs.price_per_gpu_hour if inputs.price_per_gpu_hour is not None else gpu.price_per_gpu_hour
    if price is None:
        raise UsageError(f"no price per GPU-hour for {gpu.name}", where="--price-per-gpu-hour",
                         hint=f"pass --price-per-gpu-hour, or set estimate.gpus.{gpu.name}.price_per_gpu_hour "
                              "in the config")
    storage_price = inputs.storage_price_per_gb_month
    if storage_price is None:
        storage_price = config.estimate.storage_price_per_gb_month
    checkpoint = inputs.params * inputs.bytes_per_param
    stored = checkpoint * inputs.checkpoints_kept + inputs.dataset_size * inputs.dataset_versions + inputs.logs_size
    overheads = (inputs.debug_overhead, inputs.eval_overhead, inputs.failure_overhead)
    low_overhead, high_overhead = sum(o.low for o in overheads), sum(o.high for o in overheads)
    common = (inputs, gpu, price, storage_price, stored)
    high = scenario(*common, mfu=inputs.mfu.low, overhead=high_overhead)  # the pessimistic one: every figure larger
    if max(high.gpu_hours, high.run_hours, high.total_cost, high.storage_months, stored / BYTES_PER_GB) >= LARGEST:
        raise UsageError("the estimate comes to 10^26 (GPU-hours, hours, GB or USD) or more, beyond what a plan holds",
                         hint="check the inputs: counts such as 70B params and 2T tokens, the MFU, GPUs, prices, "
                              "sizes and retention")
    return Estimate(inputs=inputs, gpu=gpu, price_per_gpu_hour=price, storage_price_per_gb_month=storage_price,
                    flops=6 * inputs.params * inputs.tokens, checkpoint_bytes=checkpoint, stored_bytes=stored,
                    low=scenario(*common, mfu=inputs.mfu.high, overhead=low_overhead), high=high)


def plan_inputs(values: dict[str, Any], plan_file: str | None = None) -> PlanInputs:
    """Inputs from a YAML plan, overridden by the flags that were given (None = not given)."""
    given = {key: value for key, value in values.items() if value is not None}
    data = {**(_read_plan(plan_file) if plan_file else {}), **given}
    try:
        return PlanInputs.model_validate(data)
    except ValidationError as exc:
        in_plan, in_flags = [], []
        for key, message in plain_errors(exc, data, model=PlanInputs):
            if plan_file and key not in given:
                in_plan.append(f"{key}: {message}")
            else:
                in_flags.append(f"--{key.replace('_', '-')}: {message}")
        # the plan file named once, before all of its keys' problems
        problems = ([f"{plan_file}: " + "; ".join(in_plan)] if in_plan else []) + in_flags
        raise UsageError("; ".join(problems), hint="see `spendlake estimate --help`") from None


def _read_plan(plan_file: str) -> dict[str, Any]:
    try:
        text = Path(plan_file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError("plan file not found", where=plan_file, hint="check the --plan path") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"the plan is not UTF-8 text (byte {exc.start + 1})", where=plan_file,
                         hint="save it as UTF-8") from None
    except OSError as exc:
        raise UsageError(f"cannot read the plan: {exc.strerror or exc}", where=plan_file) from None
    try:
        # libyaml's parser stops at 1,000 levels (PyYAML's own recursed into a RecursionError)
        data = yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:  # PyYAML's message names no file but spans three lines
        raise yaml_error(exc, plan_file, text) from None
    if not isinstance(data, dict):
        raise UsageError("a plan must be a mapping of inputs (params, tokens, gpu, gpus, mfu, ...)",
                         where=plan_file)
    return data
