"""Serving-level speedup priced on the one pricing path (docs/MODEL.md §4.6): :func:`price_serving` turns a served
workload (concurrency C, ISL, OSL, draft length γ) into the decode batches of both arms
(:func:`simulator.specdec.serving.occupancy`), prices them with :func:`.runner.price` (decode step, SD round, and the
step-level speedup at batch C, all at the mean decode context ISL + OSL / 2) and prices one prefill chunk with the
same step-time model (:class:`~simulator.specdec.StepCache`, batch 1, c tokens, at the chunk's mean cached context).

A fractional decode batch B is priced by linear interpolation between ⌊B⌋ and ⌈B⌉ (the mean over iterations of a
batch that moves between them); below one row the iteration that decodes has one row (B is priced at 1).
A prefill chunk's experts are counted with independent routing (the closed form of measured popularity) instead of
the max-ent overlap fit: over hundreds of consecutive tokens both reach nearly every expert, and a fit over n = c
tokens costs seconds per chunk size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.deployment import Deployment, preset
from ..specdec import Acceptance, Drafter, StepCache
from ..specdec.serving import DEFAULT_CHUNK, ServingPoint, occupancy, serving_point
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .runner import price, resolve_acceptance
from .table import Case
from .variants import Variant

__all__ = ["ServingCase", "decode_context", "price_serving"]


def decode_context(isl: float, osl: float) -> int:
    """Mean cached tokens of a decoding request: ISL + OSL / 2 (context grows by one token per output token)."""
    return int(round(isl + osl / 2))


@dataclass(frozen=True)
class ServingCase:
    """A served workload priced with and without SD: the step-level case at batch C next to the serving point."""

    step: Case  # priced at the batches it needed; step speedup at batch C is ``point.step_speedup``
    point: ServingPoint
    isl: float
    osl: float
    gamma: int
    prefill: str

    def as_dict(self) -> dict:
        return {"model": self.step.model.name, "hardware": self.step.hardware.name,
                "deployment": self.step.deployment.label, "engine": self.step.deployment.engine,
                "mode": self.step.mode, "isl": self.isl, "osl": self.osl, "draft_len": self.gamma,
                "prefill": self.prefill, **self.point.as_dict()}


def _interp(batches: np.ndarray, values: np.ndarray, b: float) -> float:
    return float(np.interp(max(b, 1.0), batches, values))


def price_serving(model: ModelSpec, hw: HardwareProfile, dep: Deployment, concurrency: int, gamma: int,
                  isl: float, osl: float, *, mode: str = "refined", variant: Variant | None = None,
                  acceptance: Acceptance | None = None, drafter: str | Drafter = "eagle", chunk: int = DEFAULT_CHUNK,
                  prefill: str = "mixed", cache: StepCache | None = None) -> ServingCase:
    """Throughput and TPOT of C closed-loop requests of ISL → OSL tokens with and without SD at draft length γ
    (aggregated serving, prefill ``mixed`` into decode iterations or ``separate``), and the step-level speedup at
    batch C, at the same decode context."""
    cache = cache or StepCache()
    v = variant or Variant()
    acc = v.acceptance or resolve_acceptance(acceptance)
    al = float(acc.accept_length(np.asarray([int(gamma)]))[0])
    base = occupancy(concurrency, isl, osl, 1.0, chunk)
    sd = occupancy(concurrency, isl, osl, al, chunk)
    bs = {float(concurrency)}
    for b in (float(base.decode_batch), float(sd.decode_batch)):
        bs |= {max(np.floor(b), 1.0), max(np.ceil(b), 1.0)}
    grid = np.asarray(sorted(bs))
    ctx = decode_context(isl, osl)
    case = price(model, hw, dep, grid.astype(int), [int(gamma)], mode=mode, variant=v, acceptance=acc,
                 drafter=drafter, context=ctx, cache=cache)
    r = case.result
    at_c = int(np.searchsorted(grid, float(concurrency)))
    t_dec0 = _interp(grid, r.t_decode, float(base.decode_batch))
    t_rnd = _interp(grid, r.t_round[0], float(sd.decode_batch))
    c_tok = int(base.chunk_tokens)  # both arms chunk a prompt the same way
    t_chunk = t_tok = 0.0
    if c_tok > 0:
        mech = v.mechanisms_for(preset(mode))
        if mech.routing == "overlap":  # a chunk of c consecutive tokens: independent routing (closed form, below)
            mech = mech.with_(routing="independent")
        pctx = int(round((float(base.chunks_per_request) - 1) / 2 * c_tok))  # mean cached tokens before a chunk
        res = cache.step(model, case.hardware, case.deployment, np.ones(2), np.asarray([c_tok, 1.0]), pctx, mech,
                         v.overlap)
        t_chunk, t_tok = float(res.time[0]), float(res.time[1])
    point = serving_point(base, sd, al, t_dec0, t_rnd, t_chunk, t_chunk, t_tok, r.speedup[0, at_c], prefill)
    return ServingCase(case, point, float(isl), float(osl), int(gamma), prefill)
