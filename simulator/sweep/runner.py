"""The one pricing path: :func:`price` prices one grid point (model, GPU, deployment, mode, variant) over batch ×
draft length with the vectorised ``specdec.speculative``; :func:`run_sweep` (``python -m simulator sweep``) and
every study in :mod:`simulator.experiments` are built on it.

Step times are computed once per (model, GPU, deployment, mechanisms, tokens) over the whole batch grid (a shared
:class:`~simulator.specdec.StepCache`), and each draft length adds one verify pass T(B, γ+1). The tidy table is in
:mod:`.table`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ..cost.deployment import Deployment, Mechanisms, preset, validate
from ..cost.ops import BATCH, CONTEXT, DEFAULT_CONTEXT
from ..cost.routing import OverlapInput, model_overlap
from ..errors import InfeasibleError, SimulatorError
from ..overlap.feasible import check_model_statistics, check_overlap_flags
from ..specdec import DEFAULT_ACCEPTANCE, Acceptance, Drafter, StepCache, parse_drafter, speculative
from ..specdec.rounds import DRAFT_LENS
from ..specdec.tree import speculative_tree
from ..specs.catalog import bundled_files, load_hardware, load_model
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from ..validation import params_of
from .deploy import Layout, default_deployment, fitting_batches
from .progress import Meter
from .table import Case, SweepResult, tidy_columns
from .variants import Variant

# The default grid (one home: the sweep CLI, run_sweep and the study schema use these).
DEFAULT_HARDWARE = ("h100-sxm",)
DEFAULT_BATCH = tuple(2**i for i in range(9))  # 1 … 256
DEFAULT_DRAFT_LEN = tuple(range(1, 9))  # 1 … 8
DEFAULT_MODES = ("prior", "refined")
DEFAULT_DRAFTER = "eagle"


def resolve_models(models) -> list[ModelSpec] | None:
    if models is None:
        return None
    out = []
    for m in [models] if isinstance(models, (str, ModelSpec)) else models:
        spec = m if isinstance(m, ModelSpec) else load_model(str(m), role="target")
        check_model_statistics(spec)  # infeasible statistics fail here, naming the file and field
        out.append(spec)
    return out


def resolve_hardware(hardware) -> list[HardwareProfile]:
    if hardware is None:
        hardware = DEFAULT_HARDWARE
    items = [hardware] if isinstance(hardware, (str, HardwareProfile)) else list(hardware)
    return [h if isinstance(h, HardwareProfile) else load_hardware(str(h)) for h in items]


def default_targets() -> list[ModelSpec]:
    """Every bundled MoE model whose role is target (the default study filters them by fit per GPU)."""
    specs = [load_model(n) for n in bundled_files("models")]
    return [m for m in specs if m.role == "target" and m.ffn.is_moe]


def resolve_acceptance(acceptance) -> Acceptance:
    if acceptance is None:
        return DEFAULT_ACCEPTANCE
    if isinstance(acceptance, Acceptance):
        return acceptance
    if isinstance(acceptance, (int, float)):
        return Acceptance.from_alpha(float(acceptance))
    return Acceptance.from_positions(acceptance)


def overlap_input(model: ModelSpec, lags=None, popularity: str | None = None) -> OverlapInput | None:
    """Routing statistics replacing the model's own: ``lags`` o(1..D) and/or a ``popularity`` (None: keep the
    model's)."""
    if lags is None and popularity is None:
        return None
    base = model_overlap(model)
    out = OverlapInput(tuple(float(x) for x in lags) if lags is not None else base.lags,
                       popularity if popularity is not None else base.popularity)
    if model.ffn.is_moe:
        check_overlap_flags(model.ffn.experts, model.ffn.top_k, out.lags, out.popularity)
    return out


def grid_values(values, name: str) -> np.ndarray:
    """A batch or draft-length grid checked against its one declaration (BATCH, DRAFT_LENS), sorted, unique."""
    (BATCH if name == "batch" else DRAFT_LENS).check(list(values), name, "run_sweep")
    return np.asarray(sorted(set(int(v) for v in values)), dtype=int)


def price(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, gammas, *, mode: str = "refined",
          variant: Variant | None = None, acceptance: Acceptance | None = None, drafter: str | Drafter = "eagle",
          context: int = DEFAULT_CONTEXT, cache: StepCache | None = None) -> Case:
    """Speculative decoding of one grid point over (batch, draft length): the mode's preset mechanisms with the
    variant's edits (hardware, overlap, acceptance, drafter, mechanisms, placement). ``hw`` and ``dep`` are already
    resolved; ``variant.hardware(hw)`` and ``variant.deployment(dep)`` are applied here."""
    v = variant or Variant()
    mech: Mechanisms = v.mechanisms_for(preset(mode))
    acc = v.acceptance or resolve_acceptance(acceptance)
    dr = parse_drafter(v.drafter or drafter)
    dep = v.deployment(dep)
    hw2 = v.hardware(hw.for_engine(dep.engine))  # the engine's kernels, then the variant's edits of them
    res = speculative(model, hw2, dep, np.asarray(batch, float), np.asarray(gammas), acc, dr, context, mech,
                      v.overlap, cache)
    return Case(model, hw2, dep, mode, res, dr, acc, int(context), v.name)


def price_tree(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, parents, *, mode: str = "refined",
               variant: Variant | None = None, acceptance: Acceptance | None = None, drafter: str | Drafter = "eagle",
               context: int = DEFAULT_CONTEXT, cache: StepCache | None = None) -> Case:
    """One draft tree (a parent list) priced like :func:`price` (:func:`simulator.specdec.tree.speculative_tree`):
    a one-row case whose draft length is the tree's drafted nodes and whose variant names the tree shape."""
    v = variant or Variant()
    mech: Mechanisms = v.mechanisms_for(preset(mode))
    acc = v.acceptance or resolve_acceptance(acceptance)
    dr = parse_drafter(v.drafter or drafter)
    dep = v.deployment(dep)
    hw2 = v.hardware(hw.for_engine(dep.engine))
    tr = speculative_tree(model, hw2, dep, np.asarray(batch, float), parents, acc, dr, context, mech, v.overlap,
                          cache)
    name = f"{v.name} {tr.label}".strip()
    return Case(model, hw2, dep, mode, tr.as_spec_result(), dr, acc, int(context), name)


def deploy(model: ModelSpec, hw: HardwareProfile, layout: Layout, batch, max_gamma: int,
           context: int, variant: Variant | None = None) -> tuple[Deployment, list[float], str]:
    """(deployment by the default rule, the batches that fit, why the others do not ("" if all fit)); with the
    ``variant``'s placement and redundant experts when given (checked here: replicas need memory and must fit)."""
    dep = default_deployment(model, hw, layout)
    if variant is not None and variant.deployment(dep) is not dep:
        dep = variant.deployment(dep)
        validate(model, hw, dep)
    ok, why = fitting_batches(model, hw, dep, batch, int(max_gamma) + 1, context)
    return dep, ok, why


def run_sweep(models=None, hardware=None, *, dtype: str | None = None, kv_dtype: str = "bf16",
              tp: int | None = None, ep: int | None = None, gpus: int | None = None,
              batch: Sequence[int] = DEFAULT_BATCH, draft_len: Sequence[int] = DEFAULT_DRAFT_LEN,
              acceptance: Acceptance | float | Sequence[float] | None = None, drafter: str | Drafter = DEFAULT_DRAFTER,
              context: int = DEFAULT_CONTEXT, modes: Sequence[str] = DEFAULT_MODES, overlap=None,
              popularity: str | None = None, variants: Sequence[Variant] = (), placement: str | None = None,
              redundant_experts: int | None = None, engine: str | None = None,
              progress: Callable[[str], None] | None = None, trees: Sequence[tuple] = ()) -> SweepResult:
    """Models × GPUs × variants × modes over batch × draft length (all arguments optional; defaults = the default
    study). ``models=None`` runs every bundled MoE target that fits each GPU (those that do not are listed in
    ``result.skipped``); ``overlap`` is a list of lag overlaps o(1..D) replacing the models' own statistics;
    ``variants`` (default: one empty variant) are priced for every model × GPU; ``placement`` and
    ``redundant_experts`` replace the deployment's (docs/MODEL.md §2.7); ``engine`` picks the profile's kernel
    parameters of that serving engine (docs/MODEL.md §3.7; default: the deployment's, trtllm). ``progress``
    receives a line per priced case, at most every :data:`~.progress.EVERY_S` seconds: points priced of the total
    and the time left. ``trees`` (parent lists) add one case per tree, mode and variant (:func:`price_tree`;
    the variant column names the tree, e.g. "tree 2,2,2 (15 nodes)")."""
    t0 = time.perf_counter()
    b = grid_values(batch, "batch")
    g = grid_values(draft_len, "draft_len")
    CONTEXT.check(context, "context", "run_sweep")
    if engine is not None:
        params_of(Deployment)["engine"].check(engine, "engine", "run_sweep")
    modes = list(dict.fromkeys(modes))
    for m in modes:
        preset(m)
    acc = resolve_acceptance(acceptance)
    drafter = parse_drafter(drafter)
    hws = resolve_hardware(hardware)
    targets = resolve_models(models)
    targets = targets if targets is not None else default_targets()
    layout = Layout(dtype=dtype, kv_dtype=kv_dtype, tp=tp, ep=ep, gpus=gpus)
    cache = StepCache()
    cases: list[Case] = []
    skipped: list[tuple[str, str, str]] = []
    notes: list[str] = []
    per_pair = len(b) * (len(g) + len(trees)) * len(modes) * max(1, len(variants))
    meter = Meter("sweep", len(targets) * len(hws) * per_pair, progress)
    for hw, model in ((h, m) for h in hws for m in targets):
        try:
            dep, ok, why = deploy(model, hw, layout, b, max([int(g.max())] + [len(t) - 1 for t in trees]), context,
                                  Variant(placement=placement, redundant_experts=redundant_experts, engine=engine))
        except SimulatorError as exc:
            skipped.append((model.name, hw.name, str(exc)))
            meter.drop(per_pair)
            continue
        if not ok:
            skipped.append((model.name, hw.name, why))
            meter.drop(per_pair)
            continue
        meter.drop(per_pair // len(b) * (len(b) - len(ok)))
        if len(ok) < len(b):
            notes.append(f"{model.name} on {hw.name}: batches above {ok[-1]:g} dropped ({why})")
        if drafter.kind == "model" and load_model(drafter.model).vocab_size != model.vocab_size:
            notes.append(f"{model.name}: draft model {drafter.model} has a different vocabulary "
                         f"({load_model(drafter.model).vocab_size} vs {model.vocab_size} tokens); speculative "
                         f"decoding needs a shared tokenizer, costed anyway")
        base = Variant(overlap=overlap_input(model, overlap, popularity))
        for v in variants or (base,):
            for mode in modes:
                cases.append(price(model, hw, dep, ok, g, mode=mode, variant=v, acceptance=acc, drafter=drafter,
                                   context=context, cache=cache))
                meter.add(len(ok) * len(g), f"{model.name} on {hw.name}")
                for t in trees:
                    cases.append(price_tree(model, hw, dep, ok, t, mode=mode, variant=v, acceptance=acc,
                                            drafter=drafter, context=context, cache=cache))
                    meter.add(len(ok), f"{model.name} on {hw.name}")
    if not cases:
        first = skipped[0][2] if skipped else "nothing to run"
        raise InfeasibleError(f"no model/hardware combination could run: {first}")
    return SweepResult(tidy_columns(cases), cases, drafter, acc, int(context), skipped, notes,
                       time.perf_counter() - t0)


__all__ = ["DEFAULT_BATCH", "DEFAULT_CONTEXT", "DEFAULT_DRAFTER", "DEFAULT_DRAFT_LEN", "DEFAULT_HARDWARE",
           "DEFAULT_MODES", "deploy", "grid_values", "overlap_input", "price", "price_tree", "run_sweep"]
