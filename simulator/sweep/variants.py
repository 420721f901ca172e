"""Variants of a grid point: what a study changes besides model × GPU × format × deployment × mode.

A :class:`Variant` edits the hardware profile (copy fields from another profile, scale fields, scale every fixed
cost), replaces the routing-overlap statistics, the acceptance or the drafter, switches mechanisms on top of the
mode's preset, or changes the deployment's expert placement / redundant experts.
:func:`~simulator.sweep.runner.price` applies it; the empty variant (``Variant()``) changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..cost.deployment import Deployment, Mechanisms
from ..cost.routing import OverlapInput
from ..specdec import Acceptance
from ..specs.hardware import HardwareProfile
from ..specs.kernels import TIME_PARAMS, KernelClass, Kernels
from ..specs.whatif import derive_kernels

# Named groups of spec fields a one-change-at-a-time what-if copies together.
HARDWARE_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "HBM bandwidth": ("hbm_bandwidth",), "L2 (size, partitions, bandwidth)": ("l2_size", "l2_partitions",
                                                                             "l2_bandwidth"),
    "peak FLOP/s": ("peak_flops",), "NVLink bandwidth": ("link_bandwidth",), "HBM capacity": ("hbm_capacity",),
})
SCALABLE = ("hbm_bandwidth", "hbm_capacity", "l2_size", "l2_bandwidth", "link_bandwidth", "peak_flops")


@dataclass(frozen=True)
class Variant:
    """One change to a grid point (all fields optional). ``copy_from``/``copy_fields``: spec fields taken from
    another profile; ``scale``: (field, factor) pairs; ``fixed_cost_scale``: every fixed cost × f; ``kernel_base``:
    the calibrated profile whose byte-indexed curves are re-derived when HBM bandwidth changes (default: the
    unedited profile)."""

    name: str = ""
    copy_from: HardwareProfile | None = None
    copy_fields: tuple[str, ...] = ()
    scale: tuple[tuple[str, float], ...] = ()
    fixed_cost_scale: float | None = None
    kernel_base: HardwareProfile | None = None
    dtype: str | None = None
    overlap: OverlapInput | None = None
    acceptance: Acceptance | None = None
    acceptance_label: str = ""
    drafter: str | None = None
    mechanisms: tuple[tuple[str, str], ...] = ()
    placement: str | None = None  # expert placement of the deployment (Deployment.placement)
    redundant_experts: int | None = None  # EPLB replicas (Deployment.redundant_experts)
    engine: str | None = None  # serving engine whose kernel parameters price it (Deployment.engine)

    @property
    def edits_hardware(self) -> bool:
        return bool(self.copy_fields or self.scale or self.fixed_cost_scale is not None)

    def hardware(self, hw: HardwareProfile) -> HardwareProfile:
        if not self.edits_hardware:
            return hw
        changes = {f: getattr(self.copy_from, f) for f in self.copy_fields}
        for f, k in self.scale:
            v = changes.get(f, getattr(hw, f))
            changes[f] = MappingProxyType({d: x * k for d, x in v.items()}) if f == "peak_flops" else v * k
        out = hw.with_changes(**changes)
        if out.hbm_bandwidth != hw.hbm_bandwidth:
            out = out.with_changes(kernels=derive_kernels(out, self.kernel_base or hw))
        if self.fixed_cost_scale is not None:
            out = out.with_changes(kernels=scale_fixed(out.kernels, self.fixed_cost_scale))
        return out

    def deployment(self, dep: Deployment) -> Deployment:
        """``dep`` with the variant's placement, redundant experts and engine (checked when priced)."""
        changes = {f: getattr(self, f) for f in ("placement", "redundant_experts", "engine")
                   if getattr(self, f) is not None}
        return replace(dep, **changes) if changes else dep

    def mechanisms_for(self, base: Mechanisms) -> Mechanisms:
        return base.with_(**dict(self.mechanisms)) if self.mechanisms else base


def scale_fixed(k: Kernels, f: float) -> Kernels:
    """Every fixed cost of a profile (kernel floors, per-expert/token/parallel terms, collective latencies,
    per-step costs) multiplied by ``f``."""
    def kc(c: KernelClass) -> KernelClass:
        params = {n: (v * f if n in TIME_PARAMS else v) for n, v in c.params.items()}
        return replace(c, fixed=c.fixed * f, params=MappingProxyType(params))

    classes = {n: MappingProxyType({v: kc(c) for v, c in vs.items()}) for n, vs in k.classes.items()}
    cols = {n: replace(c, latency=c.latency * f, latency_per_gpu=c.latency_per_gpu * f,
                       large_latency=None if c.large_latency is None else c.large_latency * f,
                       fabric_latency=None if c.fabric_latency is None else c.fabric_latency * f,
                       fabric_latency_per_doubling=c.fabric_latency_per_doubling * f)
            for n, c in k.collectives.items()}
    return replace(k, classes=MappingProxyType(classes), collectives=MappingProxyType(cols),
                   step=MappingProxyType({n: v * f for n, v in k.step.items()}))
