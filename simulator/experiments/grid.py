"""Expand a study's grid (targets × hardware × formats × variants × modes) and price it through the sweep's one
pricing path (:func:`simulator.pricing.price`); the variant specs of a study file (``grid.variants``, docs/MODEL.md
§6.1) become :class:`~simulator.sweep.Variant` objects here.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..cost.routing import OverlapInput, model_overlap
from ..errors import SimulatorError
from ..overlap import parse_popularity
from ..overlap.lag_profile import profile_lags
from ..overlap.popularity import independent_overlap
from ..params import Interval, Options, Param, param_field
from ..pricing import Case, Request, Scenario, price
from ..pricing import HardwareEdit as ScenarioHardwareEdit
from ..pricing.knobs import KNOBS
from ..specdec import StepCache
from ..specs.catalog import load_hardware, load_model
from ..specs.model import ModelSpec
from ..sweep import Variant
from ..sweep.progress import Meter
from ..sweep.runner import deploy, in_mode
from ..sweep.variants import SCALABLE
from ..traces.synth import TraceSpec, measured_trace
from .schema import AcceptanceSpec, Study, Target, read_settings, target_request

PROFILES = ("cohere", "markov")


@dataclass(frozen=True)
class OverlapSpec:
    lags: tuple[float, ...] = ()
    lag1: tuple[float, ...] = ()
    profile: tuple[str, ...] = param_field(Param(Options(PROFILES)), ("cohere",))
    shape: tuple[float, ...] = ()
    shape_baseline: float | None = param_field(Param(Interval(float, 0.0, 1.0), None), None)
    baseline: float | None = param_field(Param(Interval(float, 0.0, 1.0), None), None)
    popularity: str | None = None
    trace: TraceSpec | None = None


@dataclass(frozen=True)
class HardwareEdit:
    scale: dict | None = None  # field -> factor (fields of sweep.variants.SCALABLE)
    fixed_cost_scale: float | None = param_field(Param(Interval(float, 0.0, 10.0), None), None)


def _variant_fields() -> list:
    """The keys of a study variant: its own (name, the modes it prices, only_without_overlap, an overlap profile, a
    hardware edit, an acceptance), then one key per knob of the knob table a variant may change on a deployed point
    (:data:`simulator.pricing.knobs.KNOBS`: the drafter, every non-layout Deployment field, every mechanism, by the
    knob's name and declaration; the layout, context and tree are the target's, routing statistics ``overlap``'s)."""
    out: list = [("name", str), ("modes", tuple[str, ...], ()), ("only_without_overlap", bool, False),
                 ("overlap", OverlapSpec | None, None), ("hardware", HardwareEdit | None, None),
                 ("acceptance", AcceptanceSpec | None, None)]
    types = {"str": str, "int": int, "bool": bool}
    for k in KNOBS:
        if k.home in ("deployment", "mechanisms"):
            f = param_field(Param(*k.param.constraints, None, unit=k.param.unit), None) if k.param is not None \
                else field(default=None)
            out.append((k.name, types[k.kind] | None, f))
        elif k.name == "drafter":
            out.append((k.name, str | None, None))
    return out


# A study variant: the fields of _variant_fields.
VariantSpec = dataclasses.make_dataclass("VariantSpec", _variant_fields(), frozen=True)
VariantSpec.__module__ = __name__


@dataclass(frozen=True)
class Expanded:
    """One variant after list expansion: its spec, label and the (profile, lag1) it stands for."""

    spec: VariantSpec
    name: str
    profile: str = "cohere"
    lag1: float | None = None


def read_variants(r, study: Study) -> tuple[Expanded, ...]:
    out = []
    for i, raw in enumerate(study.grid.variants):
        p = f"grid.variants[{i}]"
        v = read_settings(r, raw, p, VariantSpec, raw=("scale",))
        if v.hardware and v.hardware.scale is not None:
            sc = r.mapping(v.hardware.scale, f"{p}.hardware.scale", SCALABLE)
            for k in sc:
                r.number(sc, k, f"{p}.hardware.scale", low=0.0)
        o = v.overlap
        if o and o.lag1:
            out += [Expanded(v, f"{v.name} {prof} o(1)={x:g}", prof, x) for prof, x in itertools.product(o.profile,
                                                                                                   o.lag1)]
        else:
            out.append(Expanded(v, v.name))
    names = [e.name for e in out]
    if len(set(names)) != len(names):
        raise r.fail("grid.variants", "has repeated names", "name each variant once")
    return tuple(out)


# -- overlap profiles (their lag shapes: overlap.lag_profile) ----------------------------------------------------------
def baseline(o: OverlapSpec, model: ModelSpec) -> float:
    """The independent overlap s a profile is built on: ``o.baseline``, else the model's independent overlap Σπ²/k
    under the popularity (k/E for uniform)."""
    if o.baseline is not None:
        return o.baseline
    ffn = model.ffn
    pop = parse_popularity(o.popularity or model_overlap(model).popularity, ffn.experts, ffn.top_k)
    return independent_overlap(pop, ffn.top_k)


def overlap_for(o: OverlapSpec, model: ModelSpec, profile: str, lag1: float | None) -> OverlapInput:
    if o.trace is not None:
        st = measured_trace(o.trace)[1]
        return OverlapInput(tuple(float(x) for x in st.overlaps), f"skew:{float(st.skew):.4f}")
    pop = o.popularity or model_overlap(model).popularity
    if o.lags:
        return OverlapInput(tuple(o.lags), pop)
    s = baseline(o, model)
    sb = o.shape_baseline if o.shape_baseline is not None else s
    return OverlapInput(profile_lags(s, o.shape, sb, lag1, profile), pop)


def build_variant(e: Expanded, model: ModelSpec, kernel_base=None) -> Variant | None:
    v = e.spec
    if v.only_without_overlap and model.overlap is not None:
        return None
    hw = v.hardware or HardwareEdit()
    acc = v.acceptance
    return Variant(name=e.name, hardware=ScenarioHardwareEdit(scale=tuple((hw.scale or {}).items()),
                                                              fixed_cost_scale=hw.fixed_cost_scale,
                                                              kernel_base=kernel_base),
                   overlap=overlap_for(v.overlap, model, e.profile, e.lag1) if v.overlap else None,
                   acceptance=acc.build() if acc else None, drafter=v.drafter,
                   mechanisms=_changed(v, "mechanisms"), deployment=_changed(v, "deployment"))


def _changed(v, home: str) -> tuple:
    """(knob, value) of the knobs of ``home`` that variant ``v`` sets, in the table's order."""
    return tuple((k.name, getattr(v, k.name)) for k in KNOBS if k.home == home and getattr(v, k.name) is not None)


# -- pricing -----------------------------------------------------------------------------------------------------
@dataclass
class RunContext:
    """Run-time options that are not part of a study file: the measured-data folder of ``validation`` (None: the
    bundled one), a progress callback, and the step cache shared by every pricing call of a run."""

    data: str | None = None
    progress: Callable[[str], None] | None = None
    cache: StepCache = field(default_factory=StepCache)

    def say(self, msg: str) -> None:
        if self.progress is not None:
            self.progress(msg)


@dataclass(frozen=True)
class Point:
    """A priced grid point; ``dtype`` is the format asked for (None: the default rule)."""

    target: Target
    hardware: str
    dtype: str | None
    variant: str
    mode: str
    case: Case
    note: str = ""


@dataclass
class Priced:
    points: list[Point]
    skipped: list[tuple[str, str, str | None, str]]  # (model, hardware, dtype, why)
    variants: tuple[Expanded, ...] = ()

    def find(self, model: str, mode: str = "refined", variant: str = "", hardware: str | None = None,
             dtype: str | None = "*") -> Point | None:
        for p in self.points:
            if (p.case.model.name, p.mode, p.variant) == (model, mode, variant) and \
                    (hardware is None or p.hardware == hardware) and (dtype == "*" or p.dtype == dtype):
                return p
        return None

    def models(self) -> list[str]:
        return list(dict.fromkeys(p.case.model.name for p in self.points))


@dataclass(frozen=True)
class Deployed:
    """A study target deployed (refined scenario, the batches that fit, a note) and the request it came from."""

    target: Target
    scenario: Scenario
    request: Request
    batch: tuple
    note: str

    @property
    def model(self) -> ModelSpec:
        return self.scenario.model

    @property
    def hw(self):
        return self.scenario.hardware

    @property
    def dep(self):
        return self.scenario.deployment


def deploy_target(study: Study, t: Target, hardware: str | None = None, dtype: str | None = None, batch=None,
                  gammas=None, context: int | None = None, fallbacks=None) -> tuple[Deployed | None, str]:
    """The target's deployment (format ``dtype``, else the target's, else the default rule; then each fallback
    format) that fits the smallest batch; batches that do not fit are dropped with a note."""
    g = study.grid
    batch = tuple(batch or g.batch)
    gammas = tuple(gammas or g.draft_len)
    model = load_model(t.model)
    hw = load_hardware(hardware or t.hardware or "h100-sxm") if not hasattr(hardware, "kernels") else hardware
    first = ""
    for k, d in enumerate((dtype or t.dtype, *(g.fallback_dtypes if fallbacks is None else fallbacks))):
        req = target_request(study, t, d, context)
        try:
            sc, ok, why = deploy(model, hw, req, batch, max(gammas))
        except SimulatorError as exc:
            ok, why = [], str(exc)
        if ok:
            note = f"{d} fallback: the default deployment does not fit ({first})" if k else ""
            if len(ok) < len(batch):
                note = (note + "; " if note else "") + f"batches above {ok[-1]:g} dropped (KV cache does not fit)"
            return Deployed(t, sc, req, tuple(ok), note), ""
        first = first or why
    return None, first


def price_target(study: Study, ctx: RunContext, dd: Deployed, mode: str, variant: Variant | None = None,
                 gammas=None, context: int | None = None) -> Case:
    """One deployed target through :func:`simulator.pricing.price` in ``mode`` with ``variant`` (a target with a
    ``tree`` is priced at the tree's node count, not the grid's draft lengths)."""
    sc = in_mode(dd.scenario, mode, dd.request, variant)
    if context is not None:
        sc = sc.edit(context=int(context))
    return price(sc, dd.batch, None if sc.tree is not None else gammas or study.grid.draft_len, cache=ctx.cache)


def deploy_grid(study: Study, ctx: RunContext) -> tuple[list[tuple[str, str | None, Deployed]], list]:
    """Every target × hardware × format of the grid deployed, not priced: ([(hardware, dtype, Deployed)], skipped
    as (model, hardware, dtype, why))."""
    g = study.grid
    out, skipped = [], []
    targets = g.all_targets
    for i, t in enumerate(targets):
        ctx.say(f"{study.name}: [{i + 1}/{len(targets)}] {t.model}")
        for hw in g.hardware or (t.hardware or "h100-sxm",):
            for d in g.dtype or (t.dtype,):
                dd, why = deploy_target(study, t, hw, d)
                if dd is None:
                    skipped.append((t.model, hw, d, why))
                else:
                    out.append((hw, d, dd))
    return out, skipped


def price_grid(study: Study, ctx: RunContext, variants: tuple[Expanded, ...], grid=None) -> Priced:
    """Every deployed target × hardware × format × variant × mode of the grid (variants: the empty one first).
    ``grid``: :func:`deploy_grid`'s result when the caller already has it."""
    deployed, skipped = grid if grid is not None else deploy_grid(study, ctx)
    points = []
    ng = len(study.grid.draft_len)
    per = [len(dd.batch) * ng * (1 + len(variants)) * len(study.grid.modes) for _, _, dd in deployed]
    meter = Meter(study.name, sum(per), ctx.progress)  # points priced of the upper bound, with the time left
    for (hw, d, dd), most in zip(deployed, per, strict=True):
        priced = 0
        for e in (None, *variants):
            v = None if e is None else build_variant(e, dd.model)
            if e is not None and v is None:
                continue
            for mode in study.grid.modes:
                if e is not None and e.spec.modes and mode not in e.spec.modes:
                    continue
                case = price_target(study, ctx, dd, mode, v)
                points.append(Point(dd.target, hw, d, "" if e is None else e.name, mode, case, dd.note))
                priced += len(dd.batch) * ng
                meter.add(len(dd.batch) * ng, f"{dd.model.name} on {hw}")
        meter.drop(most - priced)  # variants or modes that do not apply to this target
    return Priced(points, skipped, variants)
