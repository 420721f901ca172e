"""Serving-level speedup priced on the one pricing path (docs/MODEL.md §4.7): :func:`price_serving` turns a served
workload (concurrency C, ISL, OSL, draft length γ) into the decode batches of both arms
(:func:`simulator.specdec.serving.occupancy`), prices them with :func:`simulator.pricing.price` (decode step, SD
round, and the step-level speedup at batch C, all at the mean decode context ISL + OSL / 2) and prices one prefill
chunk with :func:`simulator.pricing.price_pass` (batch 1, c tokens, at the chunk's mean cached context).

A fractional decode batch B is priced by linear interpolation between ⌊B⌋ and ⌈B⌉ (the mean over iterations of a
batch that moves between them); below one row the iteration that decodes has one row (B is priced at 1).
A prefill chunk's experts are counted with independent routing (the closed form of measured popularity) instead of
the max-ent overlap fit: over hundreds of consecutive tokens both reach nearly every expert, and a fit over n = c
tokens costs seconds per chunk size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import ParameterError
from ..pricing import Case, Scenario, price, price_pass
from ..pricing.deploy import check_context
from ..specdec import StepCache
from ..specdec.serving import (
    DEFAULT_CHUNK,
    ENGINE_SERVING,
    Occupancy,
    ServingPoint,
    expected_rounds,
    occupancy,
    serving_point,
)
from ..specdec.tree import chain_parents, tree_survival

__all__ = ["ServingCase", "decode_context", "plain_step", "price_serving"]


def decode_context(isl: float, osl: float) -> int:
    """Mean cached tokens of a decoding request: ISL + OSL / 2 (context grows by one token per output token)."""
    return int(round(isl + osl / 2))


@dataclass(frozen=True)
class ServingCase:
    """A served workload priced with and without SD: the step-level case over the batches both arms need (``grid``:
    ⌊B⌋, ⌈B⌉ of each arm and C), one prefill chunk, and the serving point."""

    step: Case
    grid: np.ndarray  # the priced batches, sorted
    base: Occupancy
    sd: Occupancy
    accept_length: float  # tokens per round a request gets, OSL / E[rounds] (the last round's excess discarded)
    t_chunk: float  # T(1, c) of one prefill chunk (0 without a prompt)
    t_token: float  # T(1, 1) at the chunk's context
    point: ServingPoint
    isl: float
    osl: float
    gamma: int
    prefill: str
    round_accept_length: float = 0.0  # AL(γ) or AL(tree) of one round, what the step-level speedup uses

    @property
    def at_concurrency(self) -> int:
        """Index of batch C in ``grid``."""
        return int(np.searchsorted(self.grid, float(self.base.concurrency)))

    def point_for(self, t_step, t_round, step_speedup) -> ServingPoint:
        """The serving point from other step times over ``grid`` (a plain step ``t_step`` and an SD round
        ``t_round``, e.g. with other engine host times): both arms interpolated at their decode batches."""
        t0 = _interp(self.grid, t_step, float(self.base.decode_batch))
        t1 = _interp(self.grid, t_round, float(self.sd.decode_batch))
        return serving_point(self.base, self.sd, self.accept_length, t0, t1, self.t_chunk, self.t_chunk, self.t_token,
                             step_speedup, self.prefill)

    def as_dict(self) -> dict:
        return {"model": self.step.model.name, "hardware": self.step.hardware.name,
                "deployment": self.step.deployment.label, "engine": self.step.deployment.engine,
                "mode": self.step.mode, "isl": self.isl, "osl": self.osl, "draft_len": self.gamma,
                "prefill": self.prefill, **self.point.as_dict()}


def plain_step(result) -> np.ndarray:
    """A plain decode step over the batch grid: ``t_step`` (with the engine's exposed host time) where the result
    prices one, else ``t_decode``."""
    return np.asarray(getattr(result, "t_step", result.t_decode), dtype=float)


def _interp(batches: np.ndarray, values, b: float) -> float:
    return float(np.interp(max(b, 1.0), batches, np.asarray(values, dtype=float)))


def price_serving(sc: Scenario, concurrency: int, isl: float, osl: float, gamma: int | None = None, *,
                  chunk: int = DEFAULT_CHUNK, prefill: str | None = None, caps: tuple | None = None,
                  cache: StepCache | None = None) -> ServingCase:
    """Throughput and TPOT of C closed-loop requests of ISL → OSL tokens with and without SD at draft length
    ``gamma`` (or the scenario's draft tree; ``gamma`` is then its drafted nodes), in aggregated serving (prefill
    ``mixed`` into decode iterations or ``separate``), and the step-level speedup at batch C, at the same decode
    context (the scenario's context is replaced by ISL + OSL / 2). ``caps``: (plain, SD) the most requests each arm
    runs at once (None in a place: all C; the rest queue). ``prefill`` and ``caps`` default to the engine's
    (:data:`simulator.specdec.serving.ENGINE_SERVING`: the SD arm's scheduler limit, none for the plain arm)."""
    cache = cache or StepCache()
    check_context(sc.model, isl, osl, param="isl", added="output tokens", owner="price_serving")  # prompt and output
    if sc.tree is None:
        if gamma is None:
            raise ParameterError("price_serving: a chain needs its draft length (gamma)", owner="price_serving",
                                 param="gamma")
        survival = tree_survival(chain_parents(int(gamma)), sc.accept)
    else:
        survival = tree_survival(sc.tree, sc.accept)
        gamma = len(sc.tree) - 1
    al_round = float(survival.sum())
    al = float(osl) / expected_rounds(survival, osl)  # a request's tokens per round: its last round is cut at OSL
    eng = ENGINE_SERVING.get(sc.engine)
    prefill = prefill or (eng.prefill if eng else "mixed")
    cap_base, cap_sd = caps if caps is not None else (None, eng.cap_sd if eng else None)
    if sc.tree is None and int(gamma) == 0:
        cap_sd = cap_base  # γ = 0 is plain decoding: the same server
    base = occupancy(concurrency, isl, osl, 1.0, chunk, cap_base)
    sd = occupancy(concurrency, isl, osl, al, chunk, cap_sd)
    bs = {float(concurrency)}
    for b in (float(base.decode_batch), float(sd.decode_batch)):
        bs |= {max(np.floor(b), 1.0), max(np.ceil(b), 1.0)}
    grid = np.asarray(sorted(bs))
    s = sc.edit(context=decode_context(isl, osl))
    case = price(s, grid.astype(int), None if s.tree is not None else [int(gamma)], cache=cache)
    r = case.result
    c_tok = int(base.chunk_tokens)  # both arms chunk a prompt the same way
    t_chunk = t_tok = 0.0
    if c_tok > 0:
        pctx = int(round((float(base.chunks_per_request) - 1) / 2 * c_tok))  # mean cached tokens before a chunk
        pre = s.edit(context=pctx, tree=None)
        if pre.mechanisms.routing == "overlap":  # a chunk of c consecutive tokens: independent routing (above)
            pre = pre.edit(routing="independent")
        t_chunk = float(price_pass(pre, [1], c_tok, cache=cache, check_fit=False).time[0])
        t_tok = float(price_pass(pre, [1], 1, cache=cache, check_fit=False).time[0])
    out = ServingCase(case, grid, base, sd, al, t_chunk, t_tok, None, float(isl), float(osl), int(gamma), prefill,
                      al_round)
    point = out.point_for(plain_step(r), r.t_round[0], r.speedup[0, out.at_concurrency])
    return replace(out, point=point)
