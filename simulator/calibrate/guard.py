"""Guards on a calibration (issue 18 item 2; docs/MODEL.md §3.7, "Guards"): what a fit may not be written as.

- **Host-timed tables.** A kernel table whose rows sit far above the roofline where the roofline is large enough to
  dominate any launch floor times host work, not the kernel: the median of measured / roofline over the rows whose
  roofline is at least ``HOST_MIN_IDEAL`` exceeds ``HOST_RATIO`` (every GEMM table of the five calibrated GPUs: 1.4–5.2×
  for the kernels, 8.2–79× for the vLLM fp8_block rows). (vLLM 0.24's DeepGEMM fp8_block GEMM rows time a
  4096² GEMM at 155–600 µs where TRT-LLM and SGLang time the same kernel at 9 µs.) The table is left out.
- **Parameters at their bounds.** A least-squares optimum on the box's edge is the box's answer, not the data's:
  every parameter within ``BOUND_TOL`` of its range's end is named (flagged); a fit with ``REFUSE_AT_BOUNDS`` or more
  of them is refused.
- **Floors out of line.** A fitted floor outside ``FLOOR_RATIO`` × the median of the same op's floor under every
  engine the profile states on the same GPU (this one included) is refused: a kernel's latency floor is its launch
  and prologue, which no engine changes by 5×.

A refused fit is left to the documented fallback (the default engine's entry, docs/MODEL.md §3.7) and listed with
its reason in the report; flags are printed beside the errors.
"""

from __future__ import annotations

import numpy as np

from ..cost.ops import Op
from ..specs.dtypes import FALLBACK_COMPUTE
from ..specs.hardware import HardwareProfile
from ..specs.kernels import ENGINES

BOUND_TOL = 1e-3  # fraction of the parameter's range
REFUSE_AT_BOUNDS = 2
FLOOR_RATIO = (0.2, 5.0)
HOST_RATIO = 6.5  # the kernels here: 1.4-5.2x; vLLM 0.24 DeepGEMM fp8_block: 8.2-79x
HOST_MIN_IDEAL = 2e-6  # s: rows whose roofline is not lost in a kernel floor
HOST_MIN_ROWS = 10


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
        table = hw.for_engine(e).kernels.classes.get(cls, {})
        if variant in table:
            floors.append(table[variant].fixed)
    if len(floors) < 2:
        return ""
    ref = float(np.median(floors))
    if ref <= 0 or FLOOR_RATIO[0] <= fixed / ref <= FLOOR_RATIO[1]:
        return ""
    return (f"floor {fixed * 1e6:.1f} us is {fixed / ref:.2g}x the median {ref * 1e6:.1f} us of the engines' "
            f"{cls} {variant} floors on {hw.name} (allowed {FLOOR_RATIO[0]:g}-{FLOOR_RATIO[1]:g}x)")
