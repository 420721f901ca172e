"""Speculative rounds: round time, speedup, best draft length (docs/MODEL.md §4, "Round time and speedup").

    G(B, γ)       = γ · T_draft(B, 1) + T_fuse(B, γ) + T_ext(B, γ) + T(B, γ+1) + T_reject + T_gdn(B, γ) + T_kern
    T_round(B, γ) = G(B, γ) + E_round(B, γ)                              (γ ≥ 1)
    T_step(B)     = T(B, 1) + E_decode(B);   T_round(B, 0) = T_step(B)   (plain decoding)
    Speedup(B, γ) = AL(γ) · T_step(B) / T_round(B, γ)
    tokens/s per request = AL(γ) / T_round(B, γ);   aggregate = B · AL(γ) / T_round(B, γ)

T_ext (draft_extend), T_kern (round_kernels) and the exposed host times E (host_time, under the engine's execution
mode) are :mod:`simulator.specdec.engine_round`'s; ``speedup_low``/``speedup_high`` price them (and the acceptance
band, when given) at both ends of their public ranges, widened by the model's demonstrated error on the public SD
corpus (``engine_round.MODEL_ERROR``; γ = 0 stays exactly 1).

T_reject is the profile's ``kernels.step.rejection_sampling``, paid once per round when γ ≥ 1 and fixed costs are
modelled (:attr:`Mechanisms.fixed_costs_on`, the engine's rule for host overhead, via
:func:`simulator.cost.engine.step_fixed`). Every array is over the batch grid
(last axis) and the draft-length grid (first axis); step times come from :func:`simulator.cost.step.step_time`,
memoised per (model, GPU, deployment, mechanisms, overlap, tokens, context, batch grid) in a :class:`StepCache`.
Every pass (decode, verify, draft) runs at the engine's captured CUDA-graph batch when ``graph_padding`` is on, and
T_gdn is the linear-attention state checkpoints of ``round_overheads`` (:mod:`simulator.specdec.overheads`).
T_fuse is an EAGLE-3 head's feature-fusion FC over the B · (γ+1) verified tokens, once per round (0 for other
drafters; :func:`simulator.specdec.drafters.input_projection_time`); it counts as drafting time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.deployment import Deployment, Mechanisms
from ..cost.engine import step_fixed
from ..cost.ops import BATCH, CONTEXT
from ..cost.routing import OverlapInput
from ..cost.step import StepResult, resolved, resolved_step, step_key
from ..errors import ParameterError
from ..params import Interval, Param, declare
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .acceptance import MAX_POSITIONS, Acceptance, default_acceptance
from .drafters import PROJECTION_INPUTS, Drafter, draft_step_time, drafter_spec, input_projection_time, parse_drafter
from .engine_round import RoundTerms, round_terms
from .overheads import gdn_checkpoint_time, padded_step

__all__ = ["DRAFT_LENS", "SpecResult", "StepCache", "acceptance_band_of", "assemble", "best_gamma", "draft_vocab",
           "extend_time", "pays_up_to", "rejection_time", "round_time", "speculative", "speedup"]


class StepCache:
    """Memo of :func:`step_time` results. Keys use object identity for specs and profiles (kept alive here), so a
    cache is meant for one sweep; values are shared, never mutated."""

    def __init__(self):
        self._results: dict = {}
        self._alive: dict = {}
        self._resolved: dict = {}
        self._described: dict = {}  # describe()'s memo: the ops of a (model, deployment, workload) on any GPU
        self.hits = 0
        self.misses = 0

    def step(self, model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch: np.ndarray, tokens,
             context: int, mech: Mechanisms, overlap: OverlapInput | None = None, eager=None) -> StepResult:
        """T(B, s) over aligned ``batch`` and ``tokens`` arrays (or a scalar s), memoised; ``eager``: the points
        priced without CUDA graphs (:func:`~simulator.cost.step.resolved_step`). The deployment is validated and
        resolved once per (model, GPU, deployment)."""
        batch, tokens = np.broadcast_arrays(np.atleast_1d(np.asarray(batch, dtype=float)),
                                            np.atleast_1d(np.asarray(tokens, dtype=float)))
        key = (id(model), id(hw), dep, step_key(mech), overlap, tokens.tobytes(), int(context), batch.tobytes(),
               None if eager is None else np.asarray(eager, dtype=bool).tobytes())
        hit = self._results.get(key)
        if hit is not None:
            self.hits += 1
            return hit
        self.misses += 1
        self._alive[id(model)], self._alive[id(hw)] = model, hw
        where = (id(model), id(hw), dep)
        ready = self._resolved.get(where)
        if ready is None:
            ready = self._resolved[where] = resolved(model, hw, dep)
        res = resolved_step(model, *ready, batch, tokens, int(context), mech, overlap, eager, self._described)
        self._results[key] = res
        return res


class _StepRows:
    """The rows of a flattened-grid :class:`StepResult` that belong to one pass length."""

    def __init__(self, res: StepResult, rows: slice, bound: np.ndarray):
        self.time = res.time[rows]
        self.unique_experts = res.unique_experts[rows]
        self.unique_experts_total = res.unique_experts_total[rows]
        self.bound = bound[rows]


def rejection_time(hw: HardwareProfile, mech: Mechanisms) -> float:
    """T_reject: rejection sampling once per round (0 when fixed costs are off)."""
    return step_fixed(hw, mech, "rejection_sampling")


def round_time(gammas, t_decode, t_verify, t_draft_step, t_reject: float) -> np.ndarray:
    """T_round[γ, B]; ``t_verify[γ, B]`` = T(B, γ+1). Rows with γ = 0 are exactly ``t_decode``."""
    g = np.asarray(gammas, dtype=int)[:, None]
    t_round = g * np.asarray(t_draft_step)[None, :] + np.asarray(t_verify) + t_reject
    return np.where(g == 0, np.asarray(t_decode)[None, :], t_round)


def speedup(accept_len, t_decode, t_round) -> np.ndarray:
    """Speedup[γ, B] = AL(γ) · T(B, 1) / T_round(B, γ); exactly 1 where T_round = T(B, 1) and AL = 1."""
    return np.asarray(accept_len, dtype=float)[:, None] * np.asarray(t_decode)[None, :] / np.asarray(t_round)


def best_gamma(gammas, spd) -> tuple[np.ndarray, np.ndarray]:
    """(best γ, its speedup) per batch among the grid's γ ≥ 1 (γ = 0 only when the grid has nothing else).
    A best speedup ≤ 1 means speculation does not pay at that batch."""
    g = np.asarray(gammas, dtype=int)
    cand = g >= 1 if (g >= 1).any() else np.ones_like(g, dtype=bool)
    s = np.where(cand[:, None], spd, -np.inf)
    idx = np.argmax(s, axis=0)
    return g[idx], s[idx, np.arange(s.shape[1])]


def pays_up_to(batch, best_speedup) -> float | None:
    """Largest batch of the grid where the best speedup is > 1 (None if none): SD stops paying above it."""
    b = np.asarray(batch, dtype=float)
    ok = np.asarray(best_speedup) > 1.0
    return float(b[ok].max()) if ok.any() else None


@dataclass(frozen=True)
class SpecResult:
    """One (target, GPU, deployment, mechanisms, drafter, acceptance) over the (γ, B) grid; times in seconds."""

    batch: np.ndarray  # (nb,)
    gammas: np.ndarray  # (ng,)
    accept_length: np.ndarray  # (ng,)
    alpha: np.ndarray  # (ng,) per-token α equivalent
    t_decode: np.ndarray  # (nb,) T(B, 1)
    t_verify: np.ndarray  # (ng, nb) T(B, γ+1)  (γ = 0: T(B, 1))
    t_draft_step: np.ndarray  # (nb,) T_draft(B, 1)
    t_reject: np.ndarray  # (ng,)
    t_round: np.ndarray  # (ng, nb)
    speedup: np.ndarray  # (ng, nb)
    unique_decode: np.ndarray  # (nb,) unique experts per MoE layer, all ranks
    unique_verify: np.ndarray  # (ng, nb)
    unique_decode_rank: np.ndarray  # (nb,) busiest rank
    unique_verify_rank: np.ndarray  # (ng, nb)
    bound_decode: np.ndarray  # (nb,) compute | memory | fixed
    bound_verify: np.ndarray  # (ng, nb)
    drafter_dep: Deployment | None = None
    t_overhead: np.ndarray | None = None  # (ng, nb) engine round overheads beside T_reject (docs/MODEL.md §4.5)
    t_fuse: np.ndarray | None = None  # (ng, nb) once-per-round drafter input projection (EAGLE-3 fc)
    # Engine terms of the round (docs/MODEL.md §4.6; simulator.specdec.engine_round), central values:
    t_extend: np.ndarray | None = None  # (ng, nb) T_ext: one draft pass over γ + 1 positions instead of 1
    t_kernels: np.ndarray | None = None  # (ng, nb) T_kern: sampling/top-k/rejection, tree building, KV slots
    t_host: np.ndarray | None = None  # (ng, nb) exposed host time of the round
    t_host_decode: np.ndarray | None = None  # (nb,) exposed host time of a plain decode step
    t_round_low: np.ndarray | None = None  # (ng, nb) round time with every ranged term at its low end
    t_round_high: np.ndarray | None = None  # (ng, nb) ... at its high end
    speedup_low: np.ndarray | None = None  # (ng, nb) lowest speedup over the ranged terms and acceptance band
    speedup_high: np.ndarray | None = None  # (ng, nb)
    sd_overlap: str = ""  # the execution mode priced (resolved: the flag or the engine's default)
    decode_overlap: str = ""
    # (q_lo, q_hi): the model-error widening in speedup_low / speedup_high (log; engine_round.model_error)
    model_error: tuple[float, float] = (0.0, 0.0)

    @property
    def t_draft(self) -> np.ndarray:
        """Drafting time per round, γ · T_draft(B, 1) + T_fuse(B, γ) + T_ext(B, γ), (ng, nb)."""
        t = self.gammas[:, None] * self.t_draft_step[None, :]
        t = t if self.t_fuse is None else t + self.t_fuse
        return t if self.t_extend is None else t + self.t_extend

    @property
    def t_step(self) -> np.ndarray:
        """T_step(B): a plain decode step with its exposed host time, (nb,)."""
        return self.t_decode if self.t_host_decode is None else self.t_decode + self.t_host_decode

    @property
    def verify_decode_ratio(self) -> np.ndarray:
        return self.t_verify / self.t_decode[None, :]

    @property
    def tokens_per_s_request(self) -> np.ndarray:
        return self.accept_length[:, None] / self.t_round

    @property
    def tokens_per_s_total(self) -> np.ndarray:
        return self.tokens_per_s_request * self.batch[None, :]

    def best(self) -> tuple[np.ndarray, np.ndarray]:
        return best_gamma(self.gammas, self.speedup)

    def pays_up_to(self) -> float | None:
        return pays_up_to(self.batch, self.best()[1])


# Draft lengths γ of a speculative grid (0 = plain decoding); the declaration checked by speculative() and the sweep.
MAX_DRAFT_LEN = MAX_POSITIONS  # one home: an acceptance describes every position a draft can reach
DRAFT_LENS = Param(Interval(int, 0, MAX_DRAFT_LEN), unit="drafted tokens per round", many=True)


@declare(batch=BATCH, gammas=DRAFT_LENS, context=CONTEXT)
def speculative(target: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, gammas, acceptance: Acceptance,
                drafter: Drafter | str = "eagle", context: int = 0, mech: Mechanisms | None = None,
                overlap: OverlapInput | None = None, cache: StepCache | None = None,
                acceptance_band: tuple[Acceptance, Acceptance] | None = None) -> SpecResult:
    """Round times and speedup of speculative decoding over the batch × draft-length grid. ``acceptance_band``:
    (low, high) acceptances whose ends widen ``speedup_low``/``speedup_high`` (default: the acceptance's own
    ``band`` attribute when it has one, :func:`acceptance_band_of`)."""
    mech = mech or Mechanisms()
    cache = cache or StepCache()
    drafter = parse_drafter(drafter)
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    g = np.atleast_1d(np.asarray(gammas)).astype(int)
    # One engine call prices every pass length: the (s, B) grid is flattened, s = 1 (decode) and γ + 1.
    lengths = np.unique(np.concatenate([[1], g + 1]))
    nb = b.size
    # graph_padding: each pass at the engine's captured batch (or eager above the cap), docs/MODEL.md §4.5; the
    # verify passes (s > 1) are an SD server's, the decode pass (s = 1) the plain-decoding baseline's
    grid = padded_step(cache, target, hw, dep, np.tile(b, lengths.size), np.repeat(lengths, nb), context, mech,
                       overlap, np.repeat(lengths, nb) > 1)
    row = {int(s): slice(i * nb, (i + 1) * nb) for i, s in enumerate(lengths)}
    bound = grid.bound  # computed once for the whole flattened grid
    dec = _StepRows(grid, row[1], bound)
    ver = [_StepRows(grid, row[int(x) + 1], bound) for x in g]
    t_verify = np.stack([v.time for v in ver])
    t_draft_step, t_ext, ddep = draft_passes(drafter, target, hw, dep, b, g, context, mech, overlap, cache, dec.time,
                                             t_verify)
    t_rej = np.where(g > 0, rejection_time(hw, mech), 0.0)
    t_over = gdn_checkpoint_time(target, hw, dep, b, g, mech)  # (ng, nb)
    t_fuse = fusion_time(drafter, target, hw, ddep, b, g, mech)  # (ng, nb)
    gpu = round_time(g, dec.time, t_verify, t_draft_step, t_rej[:, None] + t_over + t_fuse + t_ext)
    al = acceptance.accept_length(g)
    terms = round_terms(hw, dep, mech, b, g, al, gpu, dec.time, draft_vocab(drafter, target), target.vocab_size,
                        drafter.kind, hybrid=target.attention.linear is not None)
    bands = [x.accept_length(g) for x in acceptance_band_of(acceptance, acceptance_band, drafter.kind,
                                                            target.ffn.is_moe, target.name)]
    out = assemble(g, gpu, dec.time, terms, al, bands)
    return SpecResult(
        batch=b, gammas=g, accept_length=al, alpha=acceptance.effective_alpha(g), t_decode=dec.time,
        t_verify=t_verify, t_draft_step=np.asarray(t_draft_step, dtype=float), t_reject=t_rej,
        unique_decode=np.asarray(dec.unique_experts_total, float),
        unique_verify=np.stack([np.asarray(v.unique_experts_total, float) for v in ver]),
        unique_decode_rank=np.asarray(dec.unique_experts, float),
        unique_verify_rank=np.stack([np.asarray(v.unique_experts, float) for v in ver]),
        bound_decode=dec.bound, bound_verify=np.stack([v.bound for v in ver]), drafter_dep=ddep, t_overhead=t_over,
        t_fuse=t_fuse, t_extend=t_ext, **out,
    )


def acceptance_band_of(acceptance: Acceptance, band=None, drafter_kind: str | None = None,
                       target_is_moe: bool = True, target: str = "") -> tuple:
    """The acceptance band's (low, high) ends: ``band`` when given, else the acceptance's own ``band`` attribute
    when it carries one, else, when ``acceptance`` is the default of the drafter's family for this target
    (:func:`~simulator.specdec.acceptance.default_acceptance`'s ``central``), that default's ``low`` / ``high``
    (the band the public logs it uses span); else none (a stated acceptance has no band)."""
    band = band if band is not None else getattr(acceptance, "band", None)
    if band is None and drafter_kind is not None:
        try:
            d = default_acceptance(drafter_kind, target_is_moe, target)
        except ParameterError:  # no default for this drafter (ngram)
            d = None
        if d is not None and acceptance == d.central:
            band = (d.low, d.high)
    return tuple(band) if band else ()


def draft_vocab(drafter: Drafter, target: ModelSpec) -> int:
    """The vocabulary the drafter samples from (0 for an n-gram lookup; the target's for a fixed ratio)."""
    if drafter.kind == "ngram":
        return 0
    spec = drafter_spec(drafter, target)
    return int((spec or target).vocab_size)


def extend_time(drafter: Drafter, target: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, positions,
                context: int, mech: Mechanisms, overlap, cache, t_draft_step) -> np.ndarray:
    """T_ext[γ, B] = T_draft(B, positions) − T_draft(B, 1) (``draft_extend``): the one draft pass per round that runs
    over the verified positions (γ + 1 for a chain, the tree's depth + 1) instead of one token: SGLang's
    draft-extend after verify (its graph captures γ + 1 tokens per request), vLLM's / TRT-LLM's first drafter pass
    over K + 1 tokens. 0 where positions ≤ 1, with draft_extend off, and for n-gram drafters."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    pos = np.atleast_1d(np.asarray(positions, dtype=int))
    out = np.zeros((pos.size, b.size))
    live = pos > 1
    if mech.draft_extend != "on" or drafter.kind == "ngram" or not live.any():
        return out
    n = int(live.sum())
    t, _ = draft_step_time(drafter, target, hw, dep, np.tile(b, n), np.repeat(pos[live], b.size), context, mech,
                           overlap, cache)
    out[live] = np.asarray(t, dtype=float).reshape(n, b.size) - np.asarray(t_draft_step, dtype=float)[None, :]
    return out


def draft_passes(drafter: Drafter, target: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, gammas,
                 context: int, mech: Mechanisms, overlap, cache, t_decode, t_verify):
    """(T_draft(B, 1), T_ext[γ, B], the drafter's deployment) with every pass length priced in one step-model call
    (what :func:`extend_time` gives, without a second call); a fixed ratio reuses the target's passes."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    g = np.atleast_1d(np.asarray(gammas, dtype=int))
    out = np.zeros((g.size, b.size))
    live = g > 0
    if mech.draft_extend != "on" or drafter.kind in ("ngram", "ratio") or not live.any():
        t1, ddep = draft_step_time(drafter, target, hw, dep, b, 1, context, mech, overlap, cache, t_decode)
        if drafter.kind == "ratio" and mech.draft_extend == "on":  # C · (T(B, γ+1) − T(B, 1))
            out[live] = drafter.ratio * (np.asarray(t_verify)[live] - np.asarray(t_decode)[None, :])
        return np.asarray(t1, dtype=float), out, ddep
    pos = np.concatenate([[1], g[live] + 1])
    t, ddep = draft_step_time(drafter, target, hw, dep, np.tile(b, pos.size), np.repeat(pos, b.size), context, mech,
                              overlap, cache)
    t = np.asarray(t, dtype=float).reshape(pos.size, b.size)
    out[live] = t[1:] - t[0][None, :]
    return t[0], out, ddep


def assemble(g, gpu, t_decode, terms: RoundTerms, al, al_band=()) -> dict:
    """T_round, speedup and their bands from the GPU time ``gpu`` (ng, nb) and the engine terms at every level.
    The band is the lowest and highest speedup over the low/high ranged terms × the acceptance band's ends
    (central included, so speedup_low <= speedup <= speedup_high), widened where γ ≥ 1 by the model's demonstrated
    error on the public SD corpus (``terms.model_error`` = (q_lo, q_hi): low × exp(q_lo), high × exp(q_hi);
    :data:`~simulator.specdec.engine_round.MODEL_ERROR`). γ = 0 is plain decoding: its band stays exactly 1."""
    g = np.asarray(g)[:, None]
    t_dec = np.asarray(t_decode, dtype=float)

    def at(level):
        step = t_dec + terms.host_decode[level]
        t_round = np.where(g == 0, step[None, :], gpu + terms.kernels[level] + terms.host[level])
        return t_round, step

    t_round, step = at("central")
    spd = speedup(al, step, t_round)
    lows, highs, rounds = [spd], [spd], []
    for level in ("low", "high"):
        tr, st = at(level)
        rounds.append(tr)
        for a in (al, *al_band):
            s = speedup(a, st, tr)
            lows.append(s)
            highs.append(s)
    q_lo, q_hi = terms.model_error  # the model's demonstrated error, q_lo <= 0 <= q_hi; none at γ = 0
    low = np.where(g > 0, np.minimum.reduce(lows) * np.exp(min(q_lo, 0.0)), np.minimum.reduce(lows))
    high = np.where(g > 0, np.maximum.reduce(highs) * np.exp(max(q_hi, 0.0)), np.maximum.reduce(highs))
    return dict(t_round=t_round, speedup=spd, t_kernels=terms.kernels["central"], t_host=terms.host["central"],
                t_host_decode=terms.host_decode["central"], t_round_low=np.minimum(*rounds),
                t_round_high=np.maximum(*rounds), speedup_low=low, speedup_high=high, sd_overlap=terms.sd_overlap,
                decode_overlap=terms.decode_overlap, model_error=(min(q_lo, 0.0), max(q_hi, 0.0)))


def fusion_time(drafter: Drafter, target: ModelSpec, hw: HardwareProfile, ddep: Deployment | None, batch,
                verified, mech: Mechanisms) -> np.ndarray:
    """T_fuse[γ, B]: a once-per-round drafter input projection (EAGLE-3's fc) over the B · (γ+1) verified tokens
    (``verified`` = the γ grid; a tree passes its node count N − 1); 0 at γ = 0 and for other drafters."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    g = np.atleast_1d(np.asarray(verified, dtype=int))
    out = np.zeros((g.size, b.size))
    if PROJECTION_INPUTS.get(drafter.kind, (0, ""))[1] != "round" or ddep is None:
        return out
    spec = drafter_spec(drafter, target)
    for i, x in enumerate(g):
        if x > 0:
            out[i] = input_projection_time(drafter, target, spec, hw, ddep, b * (x + 1), mech)
    return out
