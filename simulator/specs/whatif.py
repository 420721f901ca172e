"""What-if rule: kernel parameters for a GPU without measurements, derived from a calibrated base profile.

The rule (docs/MODEL.md §3.8) keeps the *shapes* of the base GPU's kernel-efficiency curves and rescales them by the
target's own spec-sheet numbers; nothing is fitted to measurements of the target GPU. Each part is a named rule
(:data:`RULES`) with its physical reason:

- ``bytes``: memory-efficiency curves over bytes moved: a kernel needs a fixed ramp time before it streams at full
  rate, so the byte count at which a given efficiency is reached scales with peak bandwidth:
  ``η_T(bytes) = η_B(bytes · BW_B / BW_T)``;
- ``tiles``: curves over independent work units (``parallel``: GEMM output tiles, attention (request, KV head)
  pairs) fill the GPU when there is about one unit per SM, so their x axis scales with the SM (CU) count:
  ``η_T(p) = η_B(p · SM_B / SM_T)``; curves over ``rows`` (tile occupancy of one unit) are kept;
- ``clock``: kernel fixed costs (launch floor, serial prologue, per-expert and per-token overheads) run at the SM
  clock: ``F_T = F_B · clock_B / clock_T``; activation efficiencies, ``combine_q`` and ``tile_rows`` are kept;
- ``fabric``: collective latencies and efficiencies are the base's when both name the same scale-up fabric;
  across fabrics the latencies scale by the cited per-link latency ratio ``link_latency_T / link_latency_B`` and
  the derivation says the fabric differs;
- ``host``: per-step host costs (host overhead, eager launch, rejection sampling) are the base's (driver and
  engine, not the GPU);
- ``native``: nvfp4 (4-bit weights *and* activations) that the target runs on its own fp4 tensor cores while the
  base has none takes the base's native block-scaled kernel, ``fp8_block`` (same grouped-GEMM pipeline with
  per-block scales); bytes and FLOP/s then come from the format and the target's fp4 peak. mxfp4 is not in this
  rule: its measured kernels (W4A16) take bf16 activations, so they dequantise the weights on Blackwell as on
  Hopper, and the base's own mxfp4 kernel is the nearer one;
- any other format the base has no parameters of is not invented: the base's documented ``VARIANT_FALLBACK`` applies
  unchanged and :func:`derivation` lists it as such; a format the target has no tensor cores for is refused by the
  deployment (``specs.dtypes.compute_dtype``), as on a calibrated profile.

The *base* is the nearest calibrated sibling of the same architecture family (B300 ← B200, GB300 ← GB200); a profile
with no calibrated sibling (Rubin, AMD CDNA) says so in its grounding (``spec-only:<base>``, see
:func:`grounding`). It is arithmetic on spec-sheet numbers and kernel parameters (no cost model), so it lives with
the specs: the catalog applies it when it loads a ``derive_from`` profile, and the sweep's hardware edits re-apply it.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple

from .dtypes import FORMATS
from .hardware import ARCH_FAMILY, HardwareProfile
from .kernels import VARIANT_FALLBACK, Collective, Curve, KernelClass, Kernels

RULES = {
    "bytes": "η(bytes) x-axis × BW_base/BW_target (ramp time before full-rate streaming)",
    "tiles": "η(parallel) x-axis × SM_target/SM_base (about one work unit per SM fills the GPU)",
    "clock": "kernel fixed costs × clock_base/clock_target (serial prologue at the SM clock)",
    "fabric": "collectives: the base's on the same fabric; else latency × link_latency ratio",
    "host": "per-step host costs kept (driver and engine, not the GPU)",
    "native": "nvfp4 native on the target, absent on the base: the base's fp8_block kernel (same block-scaled "
              "grouped-GEMM pipeline)",
    "fallback": "no parameters of this format on the base: the base's VARIANT_FALLBACK, unchanged",
}
NATIVE_FROM = {"nvfp4": "fp8_block"}  # rule "native": format -> base kernel it derives from
FORMAT_CLASSES = ("gemm", "moe")  # op classes keyed by weight format


class Derived(NamedTuple):
    """How one (op class, format) of a derived profile was obtained: from the base's ``source`` variant by
    ``rule`` (a key of :data:`RULES`)."""

    cls: str
    variant: str
    source: str
    rule: str


def family(architecture: str) -> str:
    return ARCH_FAMILY.get(architecture, architecture)


def grounding(target: HardwareProfile, base: HardwareProfile) -> str:
    """``derived:<base>`` when the base is a calibrated profile of the target's architecture family, else
    ``spec-only:<base>`` (only the target's spec sheet is its own)."""
    same = family(target.architecture) == family(base.architecture) and base.grounding == "calibrated"
    return f"{'derived' if same else 'spec-only'}:{base.name}"


def _native(hw: HardwareProfile, fmt: str) -> bool:
    return FORMATS[fmt].compute in hw.peak_flops


def derivation(target: HardwareProfile, base: HardwareProfile) -> tuple[Derived, ...]:
    """Per (op class, format) of the weight-format classes: which base variant the target's parameters come from
    and by which rule. Formats neither the base has nor a rule derives are listed with rule ``fallback``."""
    out = []
    for cls in FORMAT_CLASSES:
        table = base.kernels.classes.get(cls, {})
        for fmt in FORMATS:
            src = NATIVE_FROM.get(fmt)
            if src and _native(target, fmt) and not _native(base, fmt) and src in table:
                out.append(Derived(cls, fmt, src, "native"))
            elif fmt in table:
                out.append(Derived(cls, fmt, fmt, "bytes"))
            else:
                got = next((v for v in VARIANT_FALLBACK.get(fmt, ()) if v in table), "bf16")
                out.append(Derived(cls, fmt, got, "fallback"))
    return tuple(out)


def _curve(curve: Curve | None, bw: float, sm: float) -> Curve | None:
    if curve is None:
        return None
    if curve.x == "bytes":
        return curve.scaled(x_factor=bw)
    if curve.x == "parallel":
        return curve.scaled(x_factor=sm)
    return curve


def _kernel(c: KernelClass, bw: float, sm: float, clk: float) -> KernelClass:
    params = {k: (v * clk if k in ("per_local_expert", "per_token", "per_parallel") else v)
              for k, v in c.params.items()}
    return KernelClass(fixed=c.fixed * clk, memory=_curve(c.memory, bw, sm), compute=_curve(c.compute, bw, sm),
                       params=MappingProxyType(params))


def _collective(c: Collective, lat: float) -> Collective:
    def s(x):
        return None if x is None else x * lat

    return replace(c, latency=c.latency * lat, latency_per_gpu=c.latency_per_gpu * lat,
                   large_latency=s(c.large_latency), fabric_latency=s(c.fabric_latency),
                   fabric_latency_per_doubling=c.fabric_latency_per_doubling * lat)


def same_fabric(target: HardwareProfile, base: HardwareProfile) -> bool:
    return bool(target.fabric) and target.fabric == base.fabric


def derive_kernels(target: HardwareProfile, base: HardwareProfile) -> Kernels:
    """Kernels of ``target`` from the calibrated ``base`` by the what-if rule above."""
    kb = base.kernels
    bw = target.hbm_bandwidth / base.hbm_bandwidth
    sm = target.sm_count / base.sm_count
    clk = base.clock / target.clock
    classes = {name: {v: _kernel(c, bw, sm, clk) for v, c in variants.items()} for name, variants in kb.classes.items()}
    for d in derivation(target, base):
        if d.rule == "native":
            classes[d.cls][d.variant] = classes[d.cls][d.source]
    lat = 1.0 if same_fabric(target, base) or base.link_latency <= 0 else target.link_latency / base.link_latency
    collectives = {n: _collective(c, lat) for n, c in kb.collectives.items()}
    return Kernels(None, kb.global_efficiency,
                   MappingProxyType({n: MappingProxyType(v) for n, v in classes.items()}),
                   MappingProxyType(collectives), kb.step)
