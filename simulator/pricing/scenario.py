"""What to price: one :class:`Scenario` (docs/MODEL.md §5.0).

A scenario is everything one speculative-decoding answer depends on: the target model, the GPU profile (with any
what-if edit), the deployment (formats, tp/dp/ep, engine, placement, redundant experts, all-to-all, CUDA graphs),
the mechanism switches, the drafter and its acceptance, the context, the routing statistics and the draft shape
(a chain, or a tree's parent list). :func:`simulator.pricing.price` prices it; every command and study builds one.

There is one way to change a field, :meth:`Scenario.edit`: a scenario field by name, or a field of its
:class:`~simulator.cost.deployment.Deployment` or :class:`~simulator.cost.deployment.Mechanisms` by *its* name
(``sc.edit(engine="vllm", l2="off", context=8192)``); an unknown name is one error naming it. The engine is held
once (``deployment.engine``, ``engine_version``, ``moe_backend``) and bound in one place, :attr:`Scenario.hw`
(:func:`bound`): the profile then carries the engine release's kernel parameters and what it executes
(``hw.engine_spec``), which everything below pricing reads.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from types import MappingProxyType

from ..cost.deployment import PRESETS, Deployment, Mechanisms, engine_release, validate
from ..cost.ops import DEFAULT_CONTEXT
from ..cost.routing import OverlapInput
from ..errors import ParameterError
from ..specdec import Acceptance, Drafter, acceptance_for, parse_drafter
from ..specs.hardware import HardwareProfile
from ..specs.kernels import TIME_PARAMS, KernelClass, Kernels
from ..specs.model import ModelSpec
from ..specs.whatif import derive_kernels

__all__ = ["DEPLOYMENT_FIELDS", "HardwareEdit", "MECHANISM_FIELDS", "Scenario", "bound", "scale_fixed"]

DEPLOYMENT_FIELDS = tuple(f.name for f in fields(Deployment))
MECHANISM_FIELDS = tuple(f.name for f in fields(Mechanisms))


@dataclass(frozen=True, eq=False)
class HardwareEdit:
    """A what-if edit of the engine-selected profile (all optional): ``copy_fields`` taken from ``copy_from``;
    ``scale``: (field, factor) pairs; ``fixed_cost_scale``: every fixed cost × f; ``kernel_base``: the calibrated
    profile whose byte-indexed curves are re-derived when HBM bandwidth changes (default: the unedited profile).
    Compared by identity (profiles are not hashable)."""

    copy_from: HardwareProfile | None = None
    copy_fields: tuple[str, ...] = ()
    scale: tuple[tuple[str, float], ...] = ()
    fixed_cost_scale: float | None = None
    kernel_base: HardwareProfile | None = None

    @property
    def empty(self) -> bool:
        return not (self.copy_fields or self.scale or self.fixed_cost_scale is not None)

    def apply(self, hw: HardwareProfile) -> HardwareProfile:
        if self.empty:
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


NO_EDIT = HardwareEdit()

# (id(profile), id(release), id(edit)) -> the bound, edited profile; the profiles, releases and edits are kept alive
# with it, so an id is never reused while its entry exists. One object per combination keeps step-cache keys stable.
_BOUND: dict[tuple, tuple] = {}
_BOUND_MAX = 256


def bound(hardware: HardwareProfile, deployment: Deployment, edit: HardwareEdit | None = None) -> HardwareProfile:
    """``hardware`` bound to the engine release ``deployment`` names (its kernel parameters and what it executes,
    :meth:`~simulator.specs.hardware.HardwareProfile.bind`), then the what-if ``edit``: the one place an engine is
    bound (:attr:`Scenario.hw`; commands that price a single op or row without a scenario call it too)."""
    edit = edit or NO_EDIT
    release = engine_release(deployment)
    key = (id(hardware), id(release), id(edit))
    hit = _BOUND.get(key)
    if hit is None:
        if len(_BOUND) >= _BOUND_MAX:
            _BOUND.clear()
        hit = (edit.apply(hardware.bind(release)), hardware, release, edit)
        _BOUND[key] = hit
    return hit[0]


@dataclass(frozen=True, eq=False)
class Scenario:
    """One thing to price (module docstring). ``mode`` names the preset ``mechanisms`` came from (a label for
    tables; the switches themselves are ``mechanisms``); ``name`` labels a variant in tables ("" = none);
    ``acceptance`` None = the default of the drafter's family for the target's kind
    (:func:`simulator.specdec.default_acceptance`; refused for ngram)."""

    model: ModelSpec
    hardware: HardwareProfile
    deployment: Deployment
    mechanisms: Mechanisms = PRESETS["refined"]
    mode: str = "refined"
    drafter: Drafter = Drafter()
    acceptance: Acceptance | None = None
    context: int = DEFAULT_CONTEXT
    overlap: OverlapInput | None = None  # routing statistics replacing the model's own (None: the model's)
    tree: tuple[int, ...] | None = None  # a draft tree's parent list (None: a chain)
    hardware_edit: HardwareEdit = NO_EDIT
    name: str = ""

    @property
    def hw(self) -> HardwareProfile:
        """The profile the ops are priced with: bound to the deployment's engine release, then the what-if edit."""
        return bound(self.hardware, self.deployment, self.hardware_edit)

    @property
    def engine(self) -> str:
        return self.deployment.engine

    @property
    def accept(self) -> Acceptance:
        """The acceptance priced (the given one, else the default of the drafter's family for this target: its own
        public logs, else its kind's; :func:`simulator.specdec.default_acceptance`)."""
        return acceptance_for(self.acceptance, self.drafter.kind, self.model.ffn.is_moe, self.model.name)

    def edit(self, **changes) -> Scenario:
        """A copy with ``changes``: scenario fields, deployment fields or mechanism fields by name (a changed
        deployment is re-validated against the model and GPU; ``drafter`` may be text such as ``mtp``)."""
        own = {f.name for f in fields(self)}
        dep = {k: v for k, v in changes.items() if k in DEPLOYMENT_FIELDS and k not in own}
        mech = {k: v for k, v in changes.items() if k in MECHANISM_FIELDS and k not in own}
        rest = {k: v for k, v in changes.items() if k not in dep and k not in mech}
        bad = sorted(set(rest) - own)
        if bad:
            raise ParameterError(f"Scenario.edit: unknown field {bad[0]!r}; use a field of Scenario "
                                 f"({', '.join(sorted(own))}), Deployment ({', '.join(DEPLOYMENT_FIELDS)}) or "
                                 f"Mechanisms ({', '.join(MECHANISM_FIELDS)})", owner="Scenario.edit", param=bad[0])
        if "drafter" in rest:
            rest["drafter"] = parse_drafter(rest["drafter"])
        out = replace(self, **rest)
        if dep:
            d = replace(out.deployment, **dep)
            validate(out.model, out.hardware, d)
            out = replace(out, deployment=d)
        if mech:
            out = replace(out, mechanisms=replace(out.mechanisms, **mech))
        return out

    def force(self, pairs) -> Scenario:
        """The mechanisms with each (name, setting) of ``pairs`` forced (a variant's or a flag's override)."""
        return replace(self, mechanisms=self.mechanisms.with_(**dict(pairs))) if pairs else self


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
