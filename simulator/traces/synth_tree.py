"""A seeded synthetic router on draft trees: the ground truth the tree prediction is validated against.

The hidden state is a Gaussian AR(1) process indexed by the tree (docs/MODEL.md §2.15): the root's state
a_root ~ N(0, I); every child's a_child = ρ·a_parent + sqrt(1 − ρ²)·ε, ε ~ N(0, I); a per-sequence persistent
component u ~ N(0, I) (one draw per request: a working set that does not decay with distance) enters as
z = sqrt(c)·u + sqrt(1 − c)·a. Every node routes to the top-k of the logits W z + b, W with N(0, 1/h) entries and
b calibrated so that the popularity is a Zipf profile with Σπ²/k = ``skew`` (uniform when None) — the router of
:func:`simulator.traces.synth_trace`. On a path (a chain of tokens) this is exactly that router, so the lag
statistics of a chain trace (:func:`router_trace`) are the statistics of two tree nodes at the same distance:
corr(a_u, a_v) = ρ^d for nodes at tree distance d, whatever their position in the tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..overlap.maxent.tree_ipf import preorder
from ..overlap.popularity import skew_popularity
from ..params import Interval, check_params
from .synth import _calibrate, _top_k
from .trace import Trace, validate_routing

__all__ = ["SetRouter", "TreeRouter", "route_tree", "router_trace", "set_router", "tree_router",
           "tree_empirical_unique"]


@dataclass(frozen=True, eq=False)
class TreeRouter:
    """Router weights (h, E), bias (E,), top-k, persistence ρ and persistent share c."""

    weight: np.ndarray
    bias: np.ndarray
    top_k: int
    persistence: float
    context: float

    @property
    def experts(self) -> int:
        return int(self.bias.size)


def tree_router(experts: int, top_k: int, *, persistence: float = 0.8, skew: float | None = None,
                context: float = 0.0, hidden: int = 32, seed: int = 0) -> TreeRouter:
    """The synthetic router (weights and calibrated bias); same arguments, same router."""
    check_params(
        "tree_router",
        {"experts": experts, "top_k": top_k, "persistence": persistence, "context": context, "hidden": hidden},
        {"experts": [Interval(int, 1, None)], "top_k": [Interval(int, 1, experts)],
         "persistence": [Interval(float, 0, 1, closed="left")], "context": [Interval(float, 0, 1, closed="left")],
         "hidden": [Interval(int, 1, None)]},
    )
    rng = np.random.default_rng(seed)
    target = np.full(experts, top_k / experts) if skew is None else skew_popularity(experts, top_k, float(skew))
    w = rng.standard_normal((hidden, experts)) / np.sqrt(hidden)
    b = _calibrate(w, target[rng.permutation(experts)], top_k, rng)
    return TreeRouter(w, b, int(top_k), float(persistence), float(context))


@dataclass(frozen=True, eq=False)
class SetRouter:
    """A second kind of ground truth, with no Gaussian latent: a discrete Markov chain on expert *sets* with a
    per-request working set. Each request draws a working set W of ``working`` experts (by popularity, without
    replacement); every node ranks the experts by Gumbel(0, 1) + log π_e + ``stick``·1{e used by the parent}
    + ``boost``·1{e ∈ W} and takes the top k (Plackett–Luce sampling: the root by popularity and W alone)."""

    log_weight: np.ndarray
    top_k: int
    stick: float
    boost: float
    working: int

    @property
    def experts(self) -> int:
        return int(self.log_weight.size)


def set_router(experts: int, top_k: int, *, stick: float = 2.0, boost: float = 1.0, working: int = 16,
               skew: float | None = None) -> SetRouter:
    """The set-Markov router (see :class:`SetRouter`); popularity weights from ``skew`` (Zipf, uniform when None)."""
    check_params("set_router", {"experts": experts, "top_k": top_k, "working": working},
                 {"experts": [Interval(int, 1, None)], "top_k": [Interval(int, 1, experts)],
                  "working": [Interval(int, 0, experts)]})
    target = np.full(experts, top_k / experts) if skew is None else skew_popularity(experts, top_k, float(skew))
    return SetRouter(np.log(np.maximum(target, 1e-12)), int(top_k), float(stick), float(boost), int(working))


def _route_sets(router: SetRouter, parents, samples: int, rng: np.random.Generator) -> np.ndarray:
    e, k = router.experts, router.top_k
    gumbel = -np.log(-np.log(rng.uniform(1e-300, 1.0, (samples, e))))
    work = np.zeros((samples, e))
    if router.working:
        chosen = _top_k(router.log_weight + gumbel, router.working)
        np.put_along_axis(work, chosen, router.boost, axis=1)
    out = np.empty((samples, len(parents), k), dtype=np.int64)
    used = np.zeros((samples, len(parents), e), dtype=bool)
    for v in preorder(parents):
        score = router.log_weight + work - np.log(-np.log(rng.uniform(1e-300, 1.0, (samples, e))))
        if parents[v] >= 0:
            score = score + router.stick * used[:, parents[v]]
        out[:, v] = _top_k(score, k)
        np.put_along_axis(used[:, v], out[:, v], True, axis=1)
    return out


def route_tree(router, parents, samples: int, *, seed: int = 0) -> np.ndarray:
    """Expert ids (samples, N, k) of ``samples`` independent requests whose verify pass scores the tree's N nodes
    (a :class:`TreeRouter` or a :class:`SetRouter`)."""
    rng = np.random.default_rng(seed)
    if isinstance(router, SetRouter):
        return _route_sets(router, parents, samples, rng)
    h = router.weight.shape[0]
    rho, c = router.persistence, router.context
    state = np.empty((samples, len(parents), h))
    for v in preorder(parents):
        noise = rng.standard_normal((samples, h))
        p = parents[v]
        state[:, v] = noise if p < 0 else rho * state[:, p] + np.sqrt(1 - rho * rho) * noise
    u = rng.standard_normal((samples, 1, h))
    z = np.sqrt(c) * u + np.sqrt(1 - c) * state
    return _top_k(z @ router.weight + router.bias, router.top_k)


def router_trace(router, sequences: int, tokens: int, *, seed: int = 0) -> Trace:
    """A chain trace (sequences, tokens, 1, k) of the same router: the source of its lag statistics."""
    path = [-1] + list(range(tokens - 1))
    ids = route_tree(router, path, sequences, seed=seed)
    return validate_routing(ids[:, :, None, :], router.experts, f"tree router chain (seed {seed})")


def tree_empirical_unique(routing: np.ndarray, experts: int, batch: int = 1) -> tuple:
    """Monte-Carlo mean and standard error of the unique experts of ``batch`` requests: the samples of ``routing``
    (samples, N, k) taken ``batch`` at a time (samples // batch draws)."""
    draws = routing.shape[0] // batch
    ids = routing[: draws * batch].reshape(draws, -1)
    hit = np.zeros((draws, experts), dtype=bool)
    hit[np.arange(draws)[:, None], ids] = True
    counts = hit.sum(axis=1)
    return float(counts.mean()), float(counts.std(ddof=1) / np.sqrt(max(draws, 1)))
