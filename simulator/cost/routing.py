"""Expert traffic of one MoE layer from the overlap model (the cost engine's only link to :mod:`simulator.overlap`).

``routing`` selects the unique-expert model: ``uniform`` (MoESD: every expert equally likely, tokens independent),
``independent`` (the profile's popularity, tokens independent) or ``overlap`` (maximum-entropy fit of the popularity
and lag overlaps). Under expert parallelism the busiest rank sets the pace: the expected maximum over ranks of the
unique experts each rank hosts, and the (token, expert) pairs on that rank in proportion to its share of unique
experts. Placements (``random``, ``balanced``, ``contiguous``), replicas, group-limited routing and the closed forms
of P(0) are the overlap layer's (:mod:`simulator.overlap.unique`, :mod:`simulator.overlap.placement`). A per-layer
routing profile gives each MoE layer its own statistics (:func:`layer_overlaps`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import overlap as ov
from ..errors import ParameterError
from ..overlap.placement import eplb_replicas, replica_p_zero
from ..overlap.popularity import water_fill
from ..specs.model import FFN, ModelSpec
from ..specs.routing_profile import LAGS
from .ops import ExpertLoad


@dataclass(frozen=True)
class OverlapInput:
    """Routing statistics for the cost engine: lag overlaps o(1..D) and a popularity spec. ``tree``: the parent list
    of the draft tree a verify pass scores (empty: a chain); a pass of len(tree) tokens per request then takes its
    unique experts from the tree fit (:func:`simulator.overlap.tree_p_zero`), other passes stay chains."""

    lags: tuple[float, ...] = ()
    popularity: str = "uniform"
    tree: tuple = ()
    tree_method: str = "auto"  # the tree model (overlap.TREE_METHODS): auto = latent; ipf = pairwise maximum entropy

    def __post_init__(self):
        if len(self.lags):  # no lags: independent routing
            LAGS.check(self.lags, "lags", "OverlapInput")
        if self.tree_method not in ov.TREE_METHODS:
            raise ParameterError(f"the 'tree_method' parameter of OverlapInput must be one of "
                                 f"{', '.join(ov.TREE_METHODS)}; got {self.tree_method!r}", owner="OverlapInput",
                                 param="tree_method")
        if self.tree:
            object.__setattr__(self, "tree", ov.check_parents(self.tree, "OverlapInput"))


def model_overlap(model: ModelSpec, override: OverlapInput | None = None) -> OverlapInput:
    """The statistics used for ``model``: the user's override, else the model's shipped profile, else none
    (independent routing with uniform popularity: the IPF model then equals the uniform closed form)."""
    if override is not None:
        return override
    if model.overlap is not None:
        return OverlapInput(tuple(model.overlap.lags), model.overlap.popularity)
    return OverlapInput()


def layer_overlaps(model: ModelSpec, override: OverlapInput | None = None) -> tuple[OverlapInput, ...]:
    """The statistics of each MoE layer, in order: the per-depth entries of a ``by_layer`` profile, else the pooled
    statistics of :func:`model_overlap` for every MoE layer. An override replaces a per-layer profile, except one
    that only adds a draft tree (``tree``) to the model's own pooled statistics: the tree then applies per layer."""
    moe = model.moe_layer_count
    by = model.overlap.by_layer if model.overlap is not None else None
    tree: tuple = ()
    method = "auto"
    if override is not None and by is not None and (override.lags, override.popularity) == \
            (tuple(model.overlap.lags), model.overlap.popularity):
        tree, method = override.tree, override.tree_method  # the model's statistics plus a tree: kept per layer
    elif override is not None:
        by = None
    if by is None:
        return (model_overlap(model, override),) * moe
    stats = tuple(OverlapInput(tuple(x.lags), x.popularity, tree, method) for x in by.layers)
    return tuple(stats[j] for j in by.segments(moe))


@functools.lru_cache(maxsize=512)
def _stats(experts: int, top_k: int, stats: OverlapInput) -> ov.OverlapStats:
    return ov.OverlapStats.from_overlaps(experts=experts, top_k=top_k, overlaps=stats.lags,
                                         popularity=stats.popularity)


LONG_PASS = 96  # chain passes longer than this (prefill) extend the cached fits of LONG_PASS and LONG_PASS + 1 tokens


@functools.lru_cache(maxsize=4096)
def _p_zero(experts: int, top_k: int, stats: OverlapInput, n_tokens: int, routing: str) -> np.ndarray:
    """Per-expert probability that one request's ``n_tokens`` consecutive tokens all miss the expert.

    One fit per distinct statistics for long passes: beyond LONG_PASS tokens the fitted law's interior is
    stationary (its boundary effect decays geometrically, docs/MODEL.md §2.3.1), so P(0^n) = P(0^L)·q^(n−L) with
    q = P(0^(L+1))/P(0^L) from the two cached fits (L = LONG_PASS); measured against direct fits at n = 128, 512 and
    2000 on the published profile and a persistent one (o = 0.75 .. 0.54): identical within 1e-14 in P and U."""
    if routing == "uniform":
        return np.full(experts, ov.uniform_p_zero(experts, top_k, n_tokens))
    st = _stats(experts, top_k, stats)
    if routing == "independent" or not stats.lags or n_tokens == 1:
        return ov.independent_p_zero(st.popularity, n_tokens)
    if len(stats.tree) == n_tokens:  # the verify pass of a draft tree
        return np.asarray(ov.tree_p_zero(st, stats.tree, method=stats.tree_method).p_zero, dtype=float)
    if n_tokens > LONG_PASS + 1:
        base = _p_zero(experts, top_k, stats, LONG_PASS, routing)
        step = np.divide(_p_zero(experts, top_k, stats, LONG_PASS + 1, routing), base, out=np.zeros_like(base),
                         where=base > 0)
        return base * step ** (n_tokens - LONG_PASS)
    fit = ov.fit_window(st, n_tokens=n_tokens, method="auto")
    return np.asarray(fit.p_zero, dtype=float)


@functools.lru_cache(maxsize=4096)
def _group_p_zero(f: FFN, stats: OverlapInput, n_tokens: int, routing: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Group-limited routing: (group of each expert, per-request probability that none of the ``n_tokens`` tokens
    picks the group), or None for plain routing. Groups are contiguous blocks of E/G experts; a group is picked
    with ρ_g = water-filled Σ_{e in g} π_e (Σρ = topk_group), and its lag correlation is the experts' lift λ_d."""
    if not f.group_limited:
        return None
    G, kg = f.n_group, f.topk_group
    gid = np.arange(f.experts) // (f.experts // G)
    if routing == "uniform":
        return gid, np.full(G, ov.uniform_p_zero(G, kg, n_tokens))
    st = _stats(f.experts, f.top_k, stats)
    rho = water_fill(np.bincount(gid, weights=st.popularity, minlength=G), kg)
    if routing == "independent" or not stats.lags or n_tokens == 1:
        return gid, ov.independent_p_zero(rho, n_tokens)
    s_e = float(st.popularity @ st.popularity)
    s_g = float(rho @ rho)
    lam = [max(0.0, (f.top_k * o - s_e) / max(f.top_k - s_e, 1e-12)) for o in stats.lags]
    lags = tuple(min(1.0, (s_g + x * (kg - s_g)) / kg) for x in lam)
    group_stats = ov.OverlapStats(rho, kg, overlaps=lags)
    if len(stats.tree) == n_tokens:  # the verify pass of a draft tree
        return gid, np.asarray(ov.tree_p_zero(group_stats, stats.tree, method=stats.tree_method).p_zero, dtype=float)
    fit = ov.fit_window(group_stats, n_tokens=n_tokens, method="auto")
    return gid, np.asarray(fit.p_zero, dtype=float)


def expert_load(model: ModelSpec, ep: int, batch: np.ndarray, n_tokens, routing: str,
                stats: OverlapInput, placement: str = ov.DEFAULT_PLACEMENT, redundant: int = 0) -> ExpertLoad:
    """Unique experts and (token, expert) pairs on the busiest of ``ep`` ranks; ``batch`` and ``n_tokens`` are
    aligned arrays (one fit per distinct token count). ``redundant``: EPLB replicas of the hottest experts (by
    popularity), a request's tokens for an expert going to one of its copies at random; ``unique_total`` then
    counts physical experts (a weight read per used copy).

    The load depends on the model's FFN, not on the GPU: a sweep over GPUs prices it once (a bounded cache of
    read-only results keyed by every input)."""
    batch = np.asarray(batch, dtype=float)
    n_tokens = np.broadcast_to(np.asarray(n_tokens, dtype=int), batch.shape)
    if not isinstance(placement, str):  # an explicit rank map: not cached
        return _expert_load(model.ffn, int(ep), batch, n_tokens, routing, stats, placement, int(redundant))
    return _cached_load(model.ffn, int(ep), batch.tobytes(), n_tokens.astype(np.int64).tobytes(), batch.shape,
                        routing, stats, placement, int(redundant))


@functools.lru_cache(maxsize=4096)
def _cached_load(f: FFN, ep: int, batch: bytes, n_tokens: bytes, shape: tuple, routing: str, stats: OverlapInput,
                 placement: str, redundant: int) -> ExpertLoad:
    load = _expert_load(f, ep, np.frombuffer(batch).reshape(shape),
                        np.frombuffer(n_tokens, dtype=np.int64).reshape(shape), routing, stats, placement, redundant)
    for a in (load.unique, load.pairs, load.unique_total):
        a.setflags(write=False)
    return load


def _expert_load(f: FFN, ep: int, batch: np.ndarray, n_tokens: np.ndarray, routing: str, stats: OverlapInput,
                 placement, redundant: int) -> ExpertLoad:
    total, busiest = np.empty(batch.shape), np.empty(batch.shape)
    replicas = None
    if redundant:
        load = _stats(f.experts, f.top_k, stats).popularity if routing != "uniform" else np.ones(f.experts)
        replicas = eplb_replicas(load, redundant, ep)
    tokens = np.unique(n_tokens)
    if ep > 1 and placement == "random" and tokens.size > 1 and batch.ndim == 1:
        # every point at once: one row of per-expert miss probabilities per (batch, tokens) point
        rows = np.searchsorted(tokens, n_tokens)
        p0 = np.stack([_p_zero(f.experts, f.top_k, stats, int(n), routing) for n in tokens])[rows]
        groups = None
        if f.group_limited:
            per_n = [_group_p_zero(f, stats, int(n), routing) for n in tokens]
            groups = (per_n[0][0], np.stack([g for _, g in per_n])[rows])
        phys = p0 if replicas is None else replica_p_zero(p0, replicas)[0]
        total = ov.unique_experts(phys, batch)
        busiest = ov.busiest_rank_experts(p0, batch, ranks=ep, placement=placement, replicas=replicas,
                                          groups=groups)
        tokens = ()
    for n in tokens:
        sel = n_tokens == n
        p0 = _p_zero(f.experts, f.top_k, stats, int(n), routing)
        groups = _group_p_zero(f, stats, int(n), routing) if f.group_limited else None
        phys = p0 if replicas is None else replica_p_zero(p0, replicas)[0]
        total[sel] = ov.unique_experts(phys, batch[sel])
        busiest[sel] = total[sel] if ep == 1 else ov.busiest_rank_experts(
            p0, batch[sel], ranks=ep, placement=placement, replicas=replicas, groups=groups)
    pairs_total = batch * n_tokens * f.top_k
    share = np.where(total > 0, busiest / np.maximum(total, 1e-12), 0.0)
    return ExpertLoad(unique=busiest, pairs=pairs_total * share, unique_total=total)


def mean_load(loads: list[ExpertLoad]) -> ExpertLoad:
    """The mean over MoE layers of their expert loads (what a step reports per MoE layer)."""
    if all(x is loads[0] for x in loads):
        return loads[0]
    return ExpertLoad(*(np.mean([getattr(x, f) for x in loads], axis=0) for f in ("unique", "pairs", "unique_total")))
