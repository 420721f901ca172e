"""Variants of a grid point: what a study changes besides model × GPU × format × deployment × mode.

A :class:`Variant` is an edit of a :class:`~simulator.pricing.Scenario`: it edits the hardware profile (copy fields
from another profile, scale fields, scale every fixed cost: a :class:`~simulator.pricing.HardwareEdit`), replaces the
routing-overlap statistics, the acceptance or the drafter, forces mechanisms on top of the mode's preset, or changes
deployment fields other than the layout (engine, release, MoE backend, placement, replicas, all-to-all, dispatch
format, CUDA graphs: the knob table's ``deployment`` knobs, :data:`simulator.pricing.knobs.KNOBS`).
:meth:`Variant.apply` makes the edited scenario; the empty variant (``Variant()``) changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..cost.routing import OverlapInput
from ..pricing import NO_EDIT, HardwareEdit, Scenario
from ..specdec import Acceptance

# Named groups of spec fields a one-change-at-a-time what-if copies together.
HARDWARE_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "HBM bandwidth": ("hbm_bandwidth",), "L2 (size, partitions, bandwidth)": ("l2_size", "l2_partitions",
                                                                             "l2_bandwidth"),
    "peak FLOP/s": ("peak_flops",), "NVLink bandwidth": ("link_bandwidth",), "HBM capacity": ("hbm_capacity",),
})
SCALABLE = ("hbm_bandwidth", "hbm_capacity", "l2_size", "l2_bandwidth", "link_bandwidth", "peak_flops")


@dataclass(frozen=True)
class Variant:
    """One change to a grid point (all fields optional; module docstring)."""

    name: str = ""
    hardware: HardwareEdit = NO_EDIT
    overlap: OverlapInput | None = None
    acceptance: Acceptance | None = None
    drafter: str | None = None
    mechanisms: tuple[tuple[str, str], ...] = ()
    # (Deployment field, value) pairs: the non-layout deployment knobs this variant changes (re-validated when applied)
    deployment: tuple[tuple[str, object], ...] = ()

    def apply(self, sc: Scenario) -> Scenario:
        """``sc`` with this variant's edits (the deployment change is validated; the name labels the result)."""
        changes: dict = {"name": self.name, **dict(self.deployment)}
        if not self.hardware.empty:
            changes["hardware_edit"] = self.hardware
        for f in ("overlap", "acceptance", "drafter"):
            if getattr(self, f) is not None:
                changes[f] = getattr(self, f)
        return sc.edit(**changes).force(self.mechanisms)

    def with_name(self, name: str) -> Variant:
        return replace(self, name=name)


def one_change_variants(base, target, dtype: str, four_bit: str, fixed_cost_scale: float
                        ) -> list[tuple[str, str, object, str | None, Variant]]:
    """(group, label, hardware profile, format (None: ``dtype``), variant): one change at a time (a group of
    :data:`HARDWARE_GROUPS`) from ``base`` towards ``target`` and from ``target`` back to ``base``, the fixed costs of
    each scaled by ``fixed_cost_scale``, and ``target`` with ``four_bit`` experts. HBM bandwidth changes re-derive the
    byte-indexed kernel curves from ``base``."""
    def one(src, fields):
        return Variant(hardware=HardwareEdit(copy_from=src, copy_fields=fields, kernel_base=base))

    def scaled(f):
        return Variant(hardware=HardwareEdit(fixed_cost_scale=f))

    f = fixed_cost_scale
    out = [("base", f"{base.name} (base)", base, dtype, Variant())]
    out += [("one change", f"{base.name} + {target.name} {n}", base, None, one(target, fl))
            for n, fl in HARDWARE_GROUPS.items()]
    out.append(("hypothetical", f"{base.name}, fixed costs x{f:g}", base, None, scaled(f)))
    out.append(("target", f"{target.name} (all spec changes)", target, None, Variant()))
    out += [("one reverted", f"{target.name} with {base.name} {n}", target, None, one(base, fl))
            for n, fl in HARDWARE_GROUPS.items()]
    out.append(("hypothetical", f"{target.name}, fixed costs x{f:g}", target, None, scaled(f)))
    out.append(("4-bit", f"{target.name} + 4-bit experts ({four_bit})", target, four_bit, Variant()))
    return out
