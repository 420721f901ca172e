"""The sweep: models × GPUs × variants × modes over batch × draft length (``python -m simulator sweep``), every
point priced through the one pricing path (:func:`simulator.pricing.price` of a :class:`~simulator.pricing.Scenario`).

Step times are computed once per (model, GPU, deployment, mechanisms, tokens) over the whole batch grid (a shared
:class:`~simulator.specdec.StepCache`), and each draft length adds one verify pass T(B, γ+1). The tidy table is in
:mod:`.table`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from ..cost.deployment import preset
from ..cost.ops import BATCH
from ..errors import InfeasibleError, ParameterError, SimulatorError
from ..pricing import (
    Case,
    Request,
    Scenario,
    default_targets,
    fitting_batches,
    price,
    resolve_hardware,
    resolve_models,
)
from ..pricing.deploy import check_context
from ..pricing.resolve import request as make_request
from ..pricing.resolve import scenario_for
from ..specdec import StepCache, default_acceptance, parse_drafter
from ..specdec.rounds import DRAFT_LENS
from ..specs.catalog import load_model
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .progress import Meter
from .table import SweepResult
from .variants import Variant

# The default grid (one home: the sweep CLI, run_sweep and the study schema use these).
DEFAULT_BATCH = tuple(2**i for i in range(9))  # 1 … 256
DEFAULT_DRAFT_LEN = tuple(range(1, 9))  # 1 … 8
DEFAULT_MODES = ("prior", "refined")


BATCH_CHUNK = 512  # batches priced at once: a long batch grid is priced in chunks of about this many (memory)


def price_chunked(sc: Scenario, batch, gammas=None, *, cache: StepCache | None = None) -> Case:
    """:func:`simulator.pricing.price` over a long batch grid in chunks of about :data:`BATCH_CHUNK` batches, joined:
    every point is priced on its own (a batch's price depends on that batch alone), so the result is the same as
    one call's, while the step model's temporaries stay a chunk's size (a sweep over batches 1..3000 stays under
    1 GiB)."""
    b = [float(x) for x in batch]
    k = -(-len(b) // BATCH_CHUNK)
    if k <= 1:
        return price(sc, b, gammas, cache=cache)
    cuts = np.linspace(0, len(b), k + 1).round().astype(int)  # k even chunks of >= BATCH_CHUNK / 2 batches
    parts = [price(sc, b[lo:hi], gammas, cache=cache) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]
    return dataclasses.replace(parts[0], result=_joined([p.result for p in parts]))


def _joined(parts: list) -> object:
    """SpecResults of consecutive batch chunks as one: (nb,) and (ng, nb) arrays joined along the batch axis, the
    per-draft-length (ng,) arrays and the rest from the first chunk (a chunk holds more batches than any grid has
    draft lengths, so the two kinds of 1-D array are told apart by their length)."""
    first = parts[0]
    out = {}
    for f in dataclasses.fields(first):
        vals = [getattr(p, f.name) for p in parts]
        v0 = vals[0]
        if isinstance(v0, np.ndarray) and (v0.ndim == 2 or (v0.ndim == 1 and v0.shape[0] == len(first.batch)
                                                              and f.name != "gammas")):
            out[f.name] = np.concatenate(vals, axis=-1)
        else:
            out[f.name] = v0
    return dataclasses.replace(first, **out)


def grid_values(values, name: str) -> np.ndarray:
    """A batch or draft-length grid checked against its one declaration (BATCH, DRAFT_LENS), sorted, unique."""
    (BATCH if name == "batch" else DRAFT_LENS).check(list(values), name, "run_sweep")
    return np.asarray(sorted(set(int(v) for v in values)), dtype=int)


def in_mode(sc: Scenario, mode: str, request: Request, variant: Variant | None = None) -> Scenario:
    """``sc`` under the preset ``mode``: its mechanisms, then the request's forced ones, then the variant's edits
    (hardware, statistics, acceptance, drafter, forced mechanisms, placement/replicas/engine)."""
    s = sc.edit(mode=mode, mechanisms=preset(mode).with_(**dict(request.mechanisms)))
    return variant.apply(s) if variant is not None else s


def deploy(model: ModelSpec, hw: HardwareProfile, request: Request, batch,
           max_gamma: int) -> tuple[Scenario, list[float], str]:
    """(refined scenario by the default rule, the batches that fit, why the others do not ("" if all fit))."""
    sc = scenario_for(model, hw, request)
    check_context(model, sc.context, int(max_gamma) + 1)  # within the model's longest context, else skipped
    ok, why = fitting_batches(sc, batch, int(max_gamma) + 1)
    return sc, ok, why


def run_sweep(models=None, hardware=None, request: Request | None = None, *,
              batch: Sequence[int] = DEFAULT_BATCH, draft_len: Sequence[int] = DEFAULT_DRAFT_LEN,
              modes: Sequence[str] = DEFAULT_MODES, trees: Sequence[tuple] = (), variants: Sequence[Variant] = (),
              progress: Callable[[str], None] | None = None, **knobs) -> SweepResult:
    """Models × GPUs × variants × modes over batch × draft length (all arguments optional; defaults = the default
    study). ``models=None`` runs every bundled MoE target that fits each GPU (those that do not are listed in
    ``result.skipped``); ``request`` holds every other knob (layout, engine, placement, mechanisms forced in every
    mode, drafter, acceptance, context, routing statistics; :class:`simulator.pricing.Request`), and keyword
    ``knobs`` change it (:func:`simulator.pricing.request`, e.g. ``context=256, engine="vllm", l2="off"``); ``variants``
    (default: one empty variant) are priced for every model × GPU. ``trees`` (parent lists) add one case per tree,
    mode and variant (the variant column names the tree, e.g. "tree 2,2,2 (15 nodes)"). ``progress`` receives a
    line per priced case, at most every :data:`~.progress.EVERY_S` seconds: points priced of the total and the time
    left."""
    t0 = time.perf_counter()
    req = make_request(request, **knobs)
    b = grid_values(batch, "batch")
    g = grid_values(draft_len, "draft_len")
    modes = list(dict.fromkeys(modes))
    for m in modes:
        preset(m)
    hws = resolve_hardware(hardware)
    targets = resolve_models(models)
    targets = targets if targets is not None else default_targets()
    drafter = parse_drafter(req.drafter)
    if req.acceptance is None:
        default_acceptance(drafter.kind)  # refuses a drafter without a default (ngram) before pricing
    cases: list[Case] = []
    skipped: list[tuple[str, str, str]] = []
    refused: list[SimulatorError] = []  # why each skipped pair was refused (the first is raised when none runs)
    notes: list[str] = []
    per_pair = len(b) * (len(g) + len(trees)) * len(modes) * max(1, len(variants))
    meter = Meter("sweep", len(targets) * len(hws) * per_pair, progress)
    max_gamma = max([int(g.max())] + [len(t) - 1 for t in trees])
    for hw, model in ((h, m) for h in hws for m in targets):
        cache = StepCache()  # step times are shared within one model on one GPU, never across: memory stays one pair's
        try:
            sc, ok, why = deploy(model, hw, req, b, max_gamma)
            for v in variants:  # a variant's deployment change is checked before anything is priced
                v.apply(sc)
        except SimulatorError as exc:
            skipped.append((model.name, hw.name, str(exc)))
            refused.append(exc)
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
        for v in variants or (None,):
            for mode in modes:
                s = in_mode(sc, mode, req, v)
                cases.append(price_chunked(s, ok, g, cache=cache))
                meter.add(len(ok) * len(g), f"{model.name} on {hw.name}")
                for t in trees:
                    cases.append(price_chunked(s.edit(tree=t), ok, cache=cache))
                    meter.add(len(ok), f"{model.name} on {hw.name}")
    if not cases:
        if refused and isinstance(refused[0], ParameterError) and len(skipped) == len(refused):
            raise refused[0]  # a knob no target takes (e.g. --drafter): its own one line, naming it
        first = skipped[0][2] if skipped else "nothing to run"
        raise InfeasibleError(f"no model/hardware combination could run: {first}")
    acc = req.acceptance or cases[0].scenario.accept  # the default: the first case's (each case's: .acceptances)
    return SweepResult(cases, drafter, acc, int(req.context), skipped, notes,
                       time.perf_counter() - t0, meter.skipped)


__all__ = ["DEFAULT_BATCH", "DEFAULT_DRAFT_LEN", "DEFAULT_MODES", "deploy", "in_mode", "grid_values",
           "run_sweep"]
