"""GPU types for `spendlake estimate`: the datasheets' built-in types
(service/core/config_estimate.py) merged with the config's additions and prices."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from service.core.config_estimate import BUILTIN_GPUS, EstimateConfig
from service.core.errors import UsageError


@dataclass(frozen=True)
class GpuType:
    name: str
    peak_bf16_flops: Decimal  # FLOP/s, dense
    price_per_gpu_hour: Decimal | None = None


def gpu_table(config: EstimateConfig) -> dict[str, GpuType]:
    """The built-in types merged with the config's additions and prices (keys upper-cased)."""
    table = {name: GpuType(name, flops) for name, flops in BUILTIN_GPUS.items()}
    for raw_name, entry in config.gpus.items():
        name = raw_name.upper()
        builtin = table.get(name)
        if entry.peak_bf16_tflops is not None:
            flops = (entry.peak_bf16_tflops * Decimal(10) ** 12).to_integral_value()
        else:  # a type not built in without its throughput: the config refused it at load
            flops = builtin.peak_bf16_flops
        table[name] = GpuType(name, flops, entry.price_per_gpu_hour)
    return table


def lookup_gpu(name: str, config: EstimateConfig) -> GpuType:
    table = gpu_table(config)
    gpu = table.get(name.strip().upper())
    if gpu is None:
        raise UsageError(f"unknown GPU type {name!r}", where="--gpu",
                         hint=f"known types: {', '.join(sorted(table))}; add one under estimate.gpus in the config")
    return gpu
