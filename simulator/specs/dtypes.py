"""Number formats: storage bits per weight (scales included) and the tensor-core path each one computes on.

Sources for the scale layouts: fp8_block = e4m3 with one fp32 scale per 128×128 block (DeepSeek-V3 [B11]);
nvfp4 = e2m1 with one fp8 (e4m3) scale per 16 values → 4.5 bits (BRIEF §2.1); mxfp4 = e2m1 with one e8m0 scale per
32 values → 4.25 bits (OCP MX spec; gpt-oss [B16]); int4_wo = int4 with one bf16 scale per group of 128
(AWQ/GPTQ default group size; assumption documented in docs/MODEL.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: float  # storage bits per weight, scales included
    compute: str  # peak-FLOPS key used for its GEMMs when the hardware supports it
    fallback_compute: str | None  # used when the hardware lacks `compute` (weight-only dequant), else None
    block: int  # the weight-matrix dimension must be a multiple of this (0: no constraint)
    description: str
    pad: int = 0  # engines pad a sharded expert width up to a multiple of this (0: no padding)

    @property
    def bytes_per_weight(self) -> float:
        return self.bits / 8.0


FALLBACK_COMPUTE = "bf16"  # tensor cores of weight-only dequantisation (W4A16) where a GPU lacks a format's own

FORMATS: dict[str, WeightFormat] = {
    "bf16": WeightFormat("bf16", 16.0, "bf16", None, 0, "bfloat16"),
    "fp8": WeightFormat("fp8", 8.0, "fp8", None, 0, "fp8 e4m3, per-tensor scale"),
    "fp8_block": WeightFormat("fp8_block", 8.0 + 32.0 / (128 * 128), "fp8", None, 128,
                              "fp8 e4m3, fp32 scale per 128x128 block"),
    "nvfp4": WeightFormat("nvfp4", 4.0 + 8.0 / 16, "fp4", None, 16, "fp4 e2m1, fp8 scale per 16 values"),
    # Engines pad the per-rank expert width of mxfp4 MoE weights to a multiple of 2 × the 32-value scale block
    # (vLLM/SGLang quantization/mxfp4.py: "pad the intermediate size to be a multiple of 2 * mxfp4_block ... to hold
    # non-uniform sharded tensor"; some backends round further, to 128/256) instead of refusing the shard, so
    # gpt-oss runs at moe_tp 4/8 (widths 720/360): no divisibility rule, the padded width is priced.
    "mxfp4": WeightFormat("mxfp4", 4.0 + 8.0 / 32, "fp4", FALLBACK_COMPUTE, 0,
                          "fp4 e2m1, e8m0 scale per 32 values (W4A16 dequant where no fp4 tensor cores)", pad=64),
    "int4_wo": WeightFormat("int4_wo", 4.0 + 16.0 / 128, "bf16", FALLBACK_COMPUTE, 128,
                            "int4 weight-only, bf16 scale per 128-group, bf16 compute"),
}
WEIGHT_DTYPES = tuple(FORMATS)

# KV-cache element sizes (bytes). fp8 KV keeps per-tensor scales (negligible).
KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp8": 1.0}
KV_DTYPES = tuple(KV_BYTES)

ACTIVATION_BYTES = 2.0  # bf16 activations between ops


def padded_width(width: int, fmt: WeightFormat) -> int:
    """The expert width a kernel stores and runs for a per-rank shard of ``width`` (``fmt.pad``)."""
    return -(-width // fmt.pad) * fmt.pad if fmt.pad else width


def compute_dtype(fmt: WeightFormat, peak_flops: dict | None) -> str | None:
    """The peak-FLOPS key this format computes on for a GPU with ``peak_flops``; None if unsupported."""
    if peak_flops is None or fmt.compute in peak_flops:
        return fmt.compute
    return fmt.fallback_compute
