"""Guards on a calibration (issue 18 item 2; docs/MODEL.md §3.7, "Guards"): what a fit may not be written as.

- **Host-timed tables.** A kernel table whose rows sit far above the roofline where the roofline is large enough to
  dominate any launch floor times host work, not the kernel: the median of measured / roofline over the rows whose
  roofline is at least ``HOST_MIN_IDEAL`` exceeds ``HOST_RATIO`` (every GEMM table of the five calibrated GPUs: 1.4–5.2×
  for the kernels, 8.2–79× for the vLLM fp8_block rows). (vLLM 0.24's DeepGEMM fp8_block GEMM rows time a
  4096² GEMM at 155–600 µs where TRT-LLM and SGLang time the same kernel at 9 µs.) The table is left out.
- **Parameters at their bounds.** A least-squares optimum on the box's edge is the box's answer, not the data's:
  every parameter within ``BOUND_TOL`` of its range's end is named (flagged); a fit with ``REFUSE_AT_BOUNDS`` or more
  of them is refused.
- **One kernel per fit.** Where a format's MoE or attention rows hold more than one kernel, the fit reads the kernel
  the engine selects for the checkpoints it serves (:data:`ENGINE_KERNEL`); the other kernel's rows are left out.
  SGLang's Blackwell tables time ``sglang_flashinfer_trtllm_moe`` for DeepSeek-V3, Qwen3-235B, Qwen3-30B, Qwen3.5,
  GLM and Kimi shapes and ``sglang_fused_moe_triton`` for Mixtral (bf16 and fp8_block); SGLang's ``auto`` MoE runner
  on SM100 is ``flashinfer_trtllm`` for fp8 and ModelOpt-FP4 checkpoints of DeepSeek-V3 and Qwen3-Next-style models
  (sglang ``server_args.py``, ``_handle_model_specific_adjustments``: "Use flashinfer_trtllm as MoE runner backend on
  sm100 for ...").
- **Series above the HBM peak.** A (model, kernel) series of throughput-kernel MoE rows in which a row would stream
  the balanced routing's expert weights faster than the HBM peak does not route as balanced. The rows are left out.
  On the bundled tables this is exactly DeepSeek-V3's shape, under every SGLang and vLLM kernel (up to 1.8× the peak;
  TensorRT-LLM's throughput rows, which take precomputed expert ids, stay below it): DeepSeek-V3 routes with 8
  groups and the top 4 of them (``models/deepseek-v3.yaml``), and the group-limited top-k (in the kernel, or in the
  benchmark's routing step) sends the benchmark's tokens to fewer experts than the balanced plain top-k. (The
  min-latency class keeps its rows: priced with the balanced count as an upper bound, measured/README.)
- **Floors out of line.** A fitted floor outside ``FLOOR_RATIO`` × the median of the same op's floor under every
  engine the profile states on the same GPU (this one included) is refused: a kernel's latency floor is its launch
  and prologue, which no engine changes by 5×.

A refused fit is left to the documented fallback (the default engine's entry, docs/MODEL.md §3.7) and listed with
its reason in the report; flags are printed beside the errors.
"""

from __future__ import annotations

import numpy as np

from ..cost.ops import Op
from ..specs.catalog import ENGINES, list_engines
from ..specs.dtypes import FALLBACK_COMPUTE
from ..specs.hardware import HardwareProfile

BOUND_TOL = 1e-3  # fraction of the parameter's range
REFUSE_AT_BOUNDS = 2
FLOOR_RATIO = (0.2, 5.0)
HOST_RATIO = 6.5  # the kernels here: 1.4-5.2x; vLLM 0.24 DeepGEMM fp8_block: 8.2-79x
HOST_MIN_IDEAL = 2e-6  # s: rows whose roofline is not lost in a kernel floor
HOST_MIN_ROWS = 10
# The kernel each engine's fit reads where an op's rows hold several ((framework label, lower case), op -> kernel): the
# engine files' calibration.kernels (SGLang's MoE runner on SM100 and its default attention backend for MHA models on
# SM100 / SM103, each with its source there); the rows of a kernel no table of another GPU holds are left alone.
ENGINE_KERNEL = {(e.default.calibration["framework"].lower(), op): k for e in list_engines()
                 for op, k in e.default.calibration.items() if op in ("moe", "attention")}


def at_bounds(theta, lo, hi, names) -> tuple[str, ...]:
    """The parameters within ``BOUND_TOL`` of an end of their range (``name=lower`` / ``name=upper``)."""
    out = []
    for t, a, b, n in zip(theta, lo, hi, names, strict=True):
        span = max(b - a, 1e-300)
        if t - a <= BOUND_TOL * span:
            out.append(f"{n}=lower bound {a:g}")
        elif b - t <= BOUND_TOL * span:
            out.append(f"{n}=upper bound {b:g}")
    return tuple(out)


def roofline_seconds(op: Op, hw: HardwareProfile) -> np.ndarray:
    """max(FLOPs / peak, bytes / HBM bandwidth) per row: the time no kernel beats."""
    peak = hw.peak(op.compute) or hw.peak(FALLBACK_COMPUTE)
    flops = np.asarray(op.flops, dtype=float)
    data = np.asarray(op.weight_bytes, dtype=float) + np.asarray(op.other_bytes, dtype=float) + \
        np.asarray(op.act_bytes, dtype=float)
    return np.maximum(flops / peak, data / hw.hbm_bandwidth)


def host_timed(op: Op, measured: np.ndarray, hw: HardwareProfile) -> str:
    """The reason the rows time host work ('' when they do not)."""
    ideal = roofline_seconds(op, hw)
    big = ideal >= HOST_MIN_IDEAL
    if big.sum() < HOST_MIN_ROWS:
        return ""
    ratio = float(np.median(np.asarray(measured, dtype=float)[big] / ideal[big]))
    if ratio <= HOST_RATIO:
        return ""
    return (f"rows time host work: median {ratio:.0f}x the roofline over the {int(big.sum())} rows whose roofline "
            f"is >= {HOST_MIN_IDEAL * 1e6:g} us (limit {HOST_RATIO:g}x)")


def floor_out_of_line(hw: HardwareProfile, engine: str, cls: str, variant: str, fixed: float) -> str:
    """The reason a fitted floor is out of line with the other engines' on the same GPU ('' when it is not)."""
    floors = [fixed]
    for e in ENGINES:
        if e == engine or (e != hw.engine and e not in hw.engine_kernels):
            continue  # this engine's own (refitted) value, or an engine the profile has no block of
        table = hw.kernel_block(e).kernels.classes.get(cls, {})
        if variant in table:
            floors.append(table[variant].fixed)
    if len(floors) < 2:
        return ""
    ref = float(np.median(floors))
    if ref <= 0 or FLOOR_RATIO[0] <= fixed / ref <= FLOOR_RATIO[1]:
        return ""
    return (f"floor {fixed * 1e6:.1f} us is {fixed / ref:.2g}x the median {ref * 1e6:.1f} us of the engines' "
            f"{cls} {variant} floors on {hw.name} (allowed {FLOOR_RATIO[0]:g}-{FLOOR_RATIO[1]:g}x)")


def kernel_rows(rows: list[dict], framework: str, op: str = "moe") -> tuple[list[dict], str]:
    """The rows of the engine's kernel for ``op`` where the rows hold several (:data:`ENGINE_KERNEL`), and what was
    left out ('' when nothing)."""
    kernels = sorted({x["kernel_source"] for x in rows})
    keep = ENGINE_KERNEL.get((framework.lower(), op))
    if len(kernels) < 2 or keep not in kernels:
        return rows, ""
    out = [x for x in rows if x["kernel_source"] == keep]
    dropped = ", ".join(k for k in kernels if k != keep)
    return out, f"{len(rows) - len(out)} rows of {dropped} (the engine runs {keep})"


def over_peak_series(rows: list[dict], weight_bytes, measured, hw: HardwareProfile) -> tuple[np.ndarray, str]:
    """(mask of the rows to keep, what was left out): every (model, kernel) series with a row whose balanced
    expert weights would stream faster than the HBM peak is dropped."""
    bw = np.asarray(weight_bytes, dtype=float) / np.asarray(measured, dtype=float) / hw.hbm_bandwidth
    keys = [(x["model"], x["kernel_source"]) for x in rows]
    worst: dict[tuple, float] = {}
    for k, b in zip(keys, bw, strict=True):
        worst[k] = max(worst.get(k, 0.0), float(b))
    bad = sorted(k for k, b in worst.items() if b > 1.0)
    keep = np.array([k not in bad for k in keys], dtype=bool)
    why = "; ".join(f"{sum(q == k for q in keys)} {k[0]} rows of {k[1]} (balanced weights at up to "
                    f"{worst[k]:.2f}x the HBM peak: not the balanced routing)" for k in bad)
    return keep, why


def select_moe_rows(rows: list[dict], framework: str, weight_bytes_of, hw: HardwareProfile,
                    throughput: bool = True) -> tuple[list, tuple]:
    """The MoE rows a fit reads (:func:`kernel_rows`, then for the throughput kernels :func:`over_peak_series`;
    ``weight_bytes_of(rows)``: their balanced expert weights) and what was left out, one line per rule."""
    rows, left = kernel_rows(rows, framework)
    if not rows or not throughput:
        return rows, (left,) if left else ()
    keep, over = over_peak_series(rows, weight_bytes_of(rows), [float(x["latency_us"]) * 1e-6 for x in rows], hw)
    return [x for x, k in zip(rows, keep, strict=True) if k], tuple(w for w in (left, over) if w)
