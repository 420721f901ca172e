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

from dataclasses import dataclass, fields, replace

import numpy as np

from ..cost.engine import op_times
from ..cost.ops import Workload
from ..cost.step import head_ops
from ..errors import ParameterError
from ..pricing import Case, Scenario, price, price_pass
from ..pricing.deploy import check_context
from ..specdec import StepCache
from ..specdec.serving import DEFAULT_CHUNK, Occupancy, ServingPoint, occupancy, served_accept_length, serving_point
from ..specdec.tree import chain_parents, tree_survival

__all__ = ["ServingCase", "ServingGrid", "decode_context", "plain_step", "price_serving", "price_serving_grid"]


def decode_context(isl: float, osl: float) -> int:
    """Mean cached tokens of a decoding request: ISL + OSL / 2 (context grows by one token per output token)."""
    return int(round(isl + osl / 2))


def chunk_costs(s: Scenario, base: Occupancy, decode_tokens, prefill: str, cache) -> tuple:
    """The cost of one prefill chunk of ``c`` tokens (``base.chunk_tokens``, the same in both arms) in an
    iteration, per arm: ``decode_tokens`` is a list (plain arm, SD arm) of the tokens each iteration's pass already
    carries (B, or B·(γ + 1) of a round's verify), scalars or arrays. Returns ΔT_chunk per arm, shaped alike.

    separate: its own pass, T(1, c);
    mixed:    the chunk rides in the pass of n tokens, whose weights are read once for both:
              T(n + c) − T(n) (the projections, experts, norms and collectives of c more rows, both at context 0 so
              the decode attention cancels; less those rows' once-per-step ops, LM head and sampling above all: a
              prompt chunk's tokens produce no logits) + the chunk's own attention (that of T(1, c) at its context)
    (docs/MODEL.md §4.7). A chunk's c consecutive tokens are routed independently (no overlap statistics)."""
    c_tok = int(np.max(base.chunk_tokens))
    if c_tok <= 0:
        return tuple(np.zeros_like(np.asarray(n, dtype=float)) for n in decode_tokens)
    pctx = int(round((float(np.max(base.chunks_per_request)) - 1) / 2 * c_tok))  # mean cached tokens before a chunk
    pre = s.edit(context=pctx, tree=None)
    if pre.mechanisms.routing == "overlap":
        pre = pre.edit(routing="independent")
    alone = price_pass(pre, [1], c_tok, cache=cache, check_fit=False)
    if prefill == "separate":
        return tuple(np.full(np.shape(n), float(alone.time[0])) for n in decode_tokens)
    attn = float(alone.breakdown["attention"][0])
    flat = [np.maximum(np.rint(np.ravel(np.asarray(n, dtype=float))), 1.0) for n in decode_tokens]
    ns = np.unique(np.concatenate(flat))
    both = np.concatenate([ns + c_tok, ns])
    flat0 = pre.edit(context=0)
    rows = price_pass(flat0, both, 1, cache=cache, check_fit=False).time - _head_time(flat0, both)
    delta = dict(zip(ns, rows[:ns.size] - rows[ns.size:], strict=True))
    return tuple(np.reshape([delta[x] + attn for x in f], np.shape(n)) for f, n in zip(flat, decode_tokens,
                                                                                       strict=True))


def _head_time(sc: Scenario, batch: np.ndarray) -> np.ndarray:
    """Seconds of the once-per-step ops (embedding, final norm, LM head, logits gather, sampling) of a pass of
    ``batch`` one-token rows."""
    ops = head_ops(sc.model, sc.deployment, Workload(batch, np.ones_like(batch), 0))
    return sum((c.time for c in op_times(ops, sc.hw, sc.mechanisms, sc.deployment.cuda_graphs, batch.shape)),
               np.zeros_like(batch))


@dataclass(frozen=True)
class ServingCase:
    """A served workload priced with and without SD: the step-level case over the batches both arms need (``grid``:
    ⌊B⌋, ⌈B⌉ of each arm and C), one prefill chunk, and the serving point."""

    step: Case
    grid: np.ndarray  # the priced batches, sorted
    base: Occupancy
    sd: Occupancy
    accept_length: float  # tokens per round a request gets, OSL / E[rounds] (the last round's excess discarded)
    t_chunk: float  # ΔT_chunk: a prefill chunk's cost in an iteration of the plain arm (chunk_costs; 0: no prompt)
    point: ServingPoint
    isl: float
    osl: float
    gamma: int
    prefill: str
    t_chunk_sd: float = 0.0  # ... and of the SD arm (mixed: it shares another pass's weight reads)
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
        return serving_point(self.base, self.sd, self.accept_length, t0, t1, self.t_chunk, self.t_chunk_sd,
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
    (``serving`` of the engine release the scenario binds: the SD arm's scheduler limit, none for the plain arm)."""
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
    al = served_accept_length(survival, osl)  # a request's tokens per round: its last round is cut at OSL
    eng = sc.hw.engine_spec.serving
    prefill = prefill or eng.prefill
    cap_base, cap_sd = caps if caps is not None else (None, eng.sd_running_cap)
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
    per_pass = len(s.tree) if s.tree is not None else int(gamma) + 1  # tokens a request brings to an SD pass
    t_chunk, t_chunk_sd = chunk_costs(s, base, [float(base.decode_batch), float(sd.decode_batch) * per_pass],
                                      prefill, cache)
    out = ServingCase(case, grid, base, sd, al, float(t_chunk), None, float(isl), float(osl), int(gamma), prefill,
                      float(t_chunk_sd), al_round)
    point = out.point_for(plain_step(r), r.t_round[0], r.speedup[0, out.at_concurrency])
    return replace(out, point=point)


@dataclass(frozen=True)
class ServingGrid:
    """Served workloads at every (draft length, concurrency) of one scenario, from ONE :func:`price` call over the
    decode batches all of them need and one prefill chunk (docs/MODEL.md §4.7, "Serving grid"). Arrays are
    (draft lengths, concurrencies); γ = 0 is plain decoding (the plain server: no SD cap)."""

    case: Case
    gammas: np.ndarray
    concurrency: np.ndarray
    point: ServingPoint  # broadcast over (γ, C)
    ttft: np.ndarray  # seconds to the first token, queueing included: (C/N − 1)(R + n_p)·T_iter + n_p·T_iter

    @property
    def tokens_per_s_user(self) -> np.ndarray:
        """Output tokens/s of one request while it decodes, 1 / TPOT."""
        return 1.0 / self.point.tpot_sd

    def tokens_per_s_gpu(self, gpus: int) -> np.ndarray:
        return self.point.throughput_sd / gpus


def price_serving_grid(sc: Scenario, concurrency, isl: float, osl: float, gammas, *, chunk: int = DEFAULT_CHUNK,
                       cache: StepCache | None = None) -> ServingGrid:
    """:func:`price_serving` at every (γ, C) at once, a chain scenario (the planner's path): the same equations and
    engine defaults, priced once (the union of ⌊B⌋, ⌈B⌉ of every arm and C, all γ, one chunk)."""
    cache = cache or StepCache()
    if sc.tree is not None:
        raise ParameterError("price_serving_grid prices chains; price a tree with price_serving", owner="serving",
                             param="tree")
    g = np.asarray(sorted({0, *(int(x) for x in gammas)}), dtype=int)
    c = np.asarray(concurrency, dtype=float)
    # a request's tokens per round, its last round cut at OSL (as price_serving; γ = 0: 1)
    al = np.asarray([served_accept_length(tree_survival(chain_parents(int(x)), sc.accept), osl) for x in g],
                    dtype=float)[:, None]
    eng = sc.hw.engine_spec.serving
    prefill, cap_sd = eng.prefill, eng.sd_running_cap
    base = occupancy(c, isl, osl, 1.0, chunk, None)
    rows = [occupancy(c, isl, osl, float(a), chunk, None if x == 0 else cap_sd) for x, a in zip(g, al[:, 0],
                                                                                                strict=True)]
    sd = Occupancy(*(np.stack([getattr(o, f.name) for o in rows]) for f in fields(Occupancy)))
    bs = {float(x) for x in c}
    for b in (base.decode_batch.ravel(), sd.decode_batch.ravel()):
        bs |= {max(float(np.floor(x)), 1.0) for x in b} | {max(float(np.ceil(x)), 1.0) for x in b}
    grid = np.asarray(sorted(bs))
    s = sc.edit(context=decode_context(isl, osl))
    case = price(s, grid.astype(int), g, cache=cache)
    r = case.result
    rows = [base.decode_batch.ravel(), (sd.decode_batch * (g + 1)[:, None]).ravel()]
    t_chunk, t_chunk_sd = chunk_costs(s, base, rows, prefill, cache)
    t0 = np.interp(np.maximum(base.decode_batch, 1.0), grid, plain_step(r))
    t1 = np.stack([np.interp(np.maximum(sd.decode_batch[i], 1.0), grid, r.t_round[i]) for i in range(g.size)])
    at_c = np.searchsorted(grid, c)
    point = serving_point(base, sd, al, t0[None, :], t1, np.reshape(t_chunk, base.decode_batch.shape),
                          np.reshape(t_chunk_sd, sd.decode_batch.shape), r.speedup[:, at_c], prefill)
    slot = (sd.rounds + sd.chunks_per_request) * point.t_iter_sd
    ttft = (sd.concurrency / sd.running - 1.0) * slot + sd.chunks_per_request * point.t_iter_sd
    return ServingGrid(case, g, c, point, ttft)
