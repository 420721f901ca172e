"""What-if rule: kernel parameters for a GPU that was not measured, derived from a calibrated base profile.

The rule (docs/MODEL.md, "What-if profiles") keeps the *shapes* of the base GPU's kernel-efficiency curves and
rescales them by the target's own spec-sheet numbers; nothing is fitted to measurements of the target GPU:

- memory-efficiency curves over bytes moved: a kernel needs a fixed ramp time before it streams at full rate, so
  the byte count at which a given efficiency is reached scales with peak bandwidth:
  ``η_T(bytes) = η_B(bytes · BW_B / BW_T)``;
- curves over rows / tokens per expert (tile occupancy) are kept as they are;
- fixed costs (launch floors, host overhead, collective latency) are kept: they are set by the driver, the host
  and the kernel's serial prologue, not by bandwidth or FLOP/s;
- the single global efficiency and collective bandwidth efficiencies are kept.

It is arithmetic on spec-sheet numbers and kernel parameters (no cost model), so it lives with the specs: the catalog
applies it when it loads a ``derive_from`` profile, and the sweep's hardware edits re-apply it.
"""

from __future__ import annotations

from types import MappingProxyType

from .hardware import HardwareProfile
from .kernels import Curve, KernelClass, Kernels


def _rescale(curve: Curve | None, bw_ratio: float) -> Curve | None:
    if curve is None or curve.x != "bytes":
        return curve
    return curve.scaled(x_factor=bw_ratio)


def derive_kernels(target: HardwareProfile, base: HardwareProfile) -> Kernels:
    """Kernels of ``target`` from the calibrated ``base`` by the what-if rule above."""
    kb = base.kernels
    ratio = target.hbm_bandwidth / base.hbm_bandwidth
    classes = {
        name: MappingProxyType({v: KernelClass(fixed=c.fixed, memory=_rescale(c.memory, ratio), compute=c.compute,
                                               params=c.params) for v, c in variants.items()})
        for name, variants in kb.classes.items()
    }
    return Kernels(None, kb.global_efficiency, MappingProxyType(classes), kb.collectives, kb.step)
