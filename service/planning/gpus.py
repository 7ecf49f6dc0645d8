"""GPU types for `spendlake estimate`: peak dense BF16 throughput per GPU, from vendor datasheets.

Dense means without 2:4 structured sparsity; NVIDIA datasheets often print the sparse figure
first (twice the dense one). The config can add types or set prices:

    estimate:
      gpus:
        H100: {price_per_gpu_hour: 3.90}          # a price for a built-in type
        TPU-v5p: {peak_bf16_tflops: 459, price_per_gpu_hour: 4.20}   # a new type
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from service.core.config import EstimateConfig
from service.core.errors import ConfigError, UsageError


@dataclass(frozen=True)
class GpuType:
    name: str
    peak_bf16_flops: Decimal  # FLOP/s, dense
    price_per_gpu_hour: Decimal | None = None


def _tflops(value: str) -> Decimal:
    return (Decimal(value) * Decimal(10) ** 12).to_integral_value()


# Peak dense BF16 Tensor Core FLOP/s per GPU.
BUILTIN_GPUS: dict[str, Decimal] = {
    # NVIDIA A100 Tensor Core GPU datasheet: BF16 312 TFLOPS (624 with sparsity), SXM and PCIe.
    "A100": _tflops("312"),
    # NVIDIA H100 datasheet, SXM: BF16 1,979 TFLOPS with sparsity -> 989.5 dense.
    "H100": _tflops("989.5"),
    # NVIDIA H100 datasheet, PCIe: BF16 1,513 TFLOPS with sparsity -> 756.5 dense.
    "H100-PCIE": _tflops("756.5"),
    # NVIDIA H200 datasheet, SXM: BF16 1,979 TFLOPS with sparsity -> 989.5 dense (same GH100 die as H100).
    "H200": _tflops("989.5"),
    # NVIDIA HGX B200 datasheet: FP16/BF16 4.5 PFLOPS per GPU with sparsity -> 2.25 PFLOPS dense.
    "B200": _tflops("2250"),
    # NVIDIA L40S datasheet: BF16 Tensor 362.05 TFLOPS dense (733 with sparsity).
    "L40S": _tflops("362.05"),
    # AMD Instinct MI300X datasheet: peak BF16 1,307.4 TFLOPS dense (2,614.9 with sparsity).
    "MI300X": _tflops("1307.4"),
}


def gpu_table(config: EstimateConfig) -> dict[str, GpuType]:
    """The built-in types merged with the config's additions and prices (keys upper-cased)."""
    table = {name: GpuType(name, flops) for name, flops in BUILTIN_GPUS.items()}
    for raw_name, entry in config.gpus.items():
        name = raw_name.upper()
        builtin = table.get(name)
        if entry.peak_bf16_tflops is not None:
            flops = (entry.peak_bf16_tflops * Decimal(10) ** 12).to_integral_value()
        elif builtin is not None:
            flops = builtin.peak_bf16_flops
        else:
            raise ConfigError(f"GPU type {raw_name!r} is not built in, so it needs its peak throughput",
                              where=f"estimate.gpus.{raw_name}.peak_bf16_tflops",
                              hint=f"set the dense BF16 TFLOPS from its datasheet; built in: {', '.join(BUILTIN_GPUS)}")
        table[name] = GpuType(name, flops, entry.price_per_gpu_hour)
    return table


def lookup_gpu(name: str, config: EstimateConfig) -> GpuType:
    table = gpu_table(config)
    gpu = table.get(name.strip().upper())
    if gpu is None:
        raise UsageError(f"unknown GPU type {name!r}", where="--gpu",
                         hint=f"known types: {', '.join(sorted(table))}; add one under estimate.gpus in the config")
    return gpu
