"""Magnitudes a GPU profile may have: a number far outside every GPU's range is a unit slip (an fp8 peak written in
GFLOPS, a bandwidth in Gb/s), refused in one line naming the field, the value and the range, before anything is
priced. The ranges are wide (10x or more beyond the bundled catalog's span, A100 to Rubin, MI300X to MI355X), so a
what-if GPU of another generation passes; they check the unit, not the GPU."""

from __future__ import annotations

from ..errors import ConfigError

# field -> (YAML path, low, high, unit shown, scale from SI to that unit); 0 is allowed where a profile may state
# "none" (no L2, no last-level cache, unknown TDP).
RANGES = {
    "hbm_capacity": ("memory.hbm_capacity", 8e9, 4e12, "GB", 1e-9),
    "hbm_bandwidth": ("memory.hbm_bandwidth", 2e11, 2e14, "TB/s", 1e-12),
    "l2_size": ("cache.l2_size", 1e6, 2e9, "MB", 1e-6),
    "l2_bandwidth": ("cache.l2_bandwidth", 5e11, 1e15, "TB/s", 1e-12),
    "llc_size": ("cache.llc_size", 1e6, 1.6e10, "MB", 1e-6),
    "clock": ("compute.clock", 3e8, 1e10, "MHz", 1e-6),
    "link_bandwidth": ("interconnect.link_bandwidth", 1e9, 1e14, "GB/s", 1e-9),
    "link_latency": ("interconnect.link_latency", 1e-8, 1e-3, "us", 1e6),
    "tdp": ("power.tdp", 50.0, 1e4, "W", 1.0),
}
ZERO_ALLOWED = ("l2_size", "llc_size", "tdp")
PEAK = (1e13, 1e19)  # dense FLOP/s of one GPU, any format: 10 TFLOPS to 10 EFLOPS
PEAK_RATIO = (0.5, 32.0)  # a format's peak over the bf16 peak (catalog: 1 to 6.2)


def _fmt(v: float, unit: str, scale: float) -> str:
    return f"{v * scale:.4g} {unit}"


def check_magnitudes(hw, where: str) -> None:
    """Raise one :class:`~simulator.errors.ConfigError` for the first magnitude of ``hw`` outside :data:`RANGES`,
    :data:`PEAK` or :data:`PEAK_RATIO`."""
    for name, (path, lo, hi, unit, scale) in RANGES.items():
        v = float(getattr(hw, name))
        if (v == 0 and name in ZERO_ALLOWED) or lo <= v <= hi:
            continue
        raise ConfigError(where, path, f"is {_fmt(v, unit, scale)}, far outside any GPU's range "
                          f"({_fmt(lo, unit, scale)} to {_fmt(hi, unit, scale)})",
                          "check the value and its unit")
    peaks = dict(hw.peak_flops)
    bf16 = peaks.get("bf16")
    for dt, v in peaks.items():
        path = f"compute.peak_flops.{dt}"
        if not PEAK[0] <= v <= PEAK[1]:
            raise ConfigError(where, path, f"is {v / 1e12:.4g} TFLOPS, far outside any GPU's range "
                              f"({PEAK[0] / 1e12:g} TFLOPS to {PEAK[1] / 1e18:g} EFLOPS)",
                              "check the value and its unit (TFLOPS, not GFLOPS)")
        if bf16 and dt != "bf16" and not PEAK_RATIO[0] <= v / bf16 <= PEAK_RATIO[1]:
            raise ConfigError(where, path, f"is {v / 1e12:.4g} TFLOPS, {v / bf16:.3g}x the bf16 peak "
                              f"{bf16 / 1e12:.4g} TFLOPS (any GPU: {PEAK_RATIO[0]:g}x to {PEAK_RATIO[1]:g}x)",
                              "check the value and its unit (TFLOPS, not GFLOPS)")
