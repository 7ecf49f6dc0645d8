"""The `estimate:` config section, and the GPU types `spendlake estimate` knows: peak dense BF16
throughput per GPU, from vendor datasheets.

Dense means without 2:4 structured sparsity; NVIDIA datasheets often print the sparse figure
first (twice the dense one). The config can add types or set prices:

    estimate:
      gpus:
        H100: {price_per_gpu_hour: 3.90}          # a price for a built-in type
        TPU-v5p: {peak_bf16_tflops: 459, price_per_gpu_hour: 4.20}   # a new type
"""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, model_validator

from service.core.config_base import NestedValueError, Strict


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


class GpuTypeConfig(Strict):  # a price for a built-in GPU type of `spendlake estimate`, or a new type
    peak_bf16_tflops: Decimal | None = Field(default=None, gt=0, description="dense, from the datasheet")
    price_per_gpu_hour: Decimal | None = Field(default=None, ge=0)


class EstimateConfig(Strict):
    gpus: dict[str, GpuTypeConfig] = Field(default_factory=dict)
    # S3 Standard, us-east-1, first 50 TB (aws.amazon.com/s3/pricing).
    storage_price_per_gb_month: Decimal = Field(default=Decimal("0.023"), ge=0)

    @model_validator(mode="after")
    def _new_types_have_their_throughput(self) -> EstimateConfig:
        # at load, not at the first `estimate`: a price for a type no datasheet here knows would
        # pass `config validate` and break every estimate, its message naming no config file
        for name, entry in self.gpus.items():
            if entry.peak_bf16_tflops is None and name.upper() not in BUILTIN_GPUS:
                raise NestedValueError(("gpus", name, "peak_bf16_tflops"), (
                    f"GPU type {name!r} is not built in, so it needs its peak throughput: set the dense BF16 TFLOPS "
                    f"from its datasheet, or use a built-in name: {', '.join(BUILTIN_GPUS)}"))
        return self
