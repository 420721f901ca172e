"""Routing-overlap model: how many distinct experts do B requests of n tokens touch? (docs/MODEL.md §2)

Per expert e, x ∈ {0,1}^n says which of n consecutive tokens of a request use e. The maximum-entropy law of x
under the popularity π_e and lag-d pair marginals p_e(d) (or m-token pattern frequencies) gives
P_e(x = 0…0), and with B independent requests U(B, n) = Σ_e [1 − P_e(0…0)^B].

Modules: statistics (``stats``, ``popularity``), the constraint set of an n-token fit (``constraints``), the
maximum-entropy engines (``maxent``: IPF on the junction tree and over the 2^n table, the Markov closed form, the
stationary chain), the fit methods and their cache (``fit``), unique experts and placements (``unique``), the
one-call prediction (``predict``). Traces, the synthetic routers and trace evaluation are :mod:`simulator.traces`
(built on this package, which never imports it).

Statistics
    ``OverlapStats(popularity, top_k, overlaps=(), pooling="lift", pair_probs=None, window=None)``
    ``OverlapStats.from_overlaps(experts, top_k, overlaps=(), popularity="uniform", pooling="lift")``
    ``parse_popularity(spec, experts, top_k) -> ndarray``  (``uniform``, ``zipf:S``, ``skew:X``, file, weights)
    ``independent_overlap(popularity, top_k) -> float``  (Σπ²/k)
    ``pool_pairs(popularity, top_k, overlaps, rule="lift") -> ndarray (E, D)``
Fits (cached per statistics and n; hashable statistics)
    ``fit_window(stats, n_tokens, method="auto", *, tol=1e-9, max_iter=5000) -> WindowFit``
        (``.p_zero`` (E,), ``.method``, ``.iterations``, ``.max_error``, ``.notes``);
        METHODS: auto, ipf (exact, IPF on the junction tree), ipf_table (the same law by IPF over the 2^n table),
        markov (lag-1 closed form), junction (stationary chain), latent (the tree model on a path), independent,
        uniform
    ``p_zero(stats, n_tokens, method="auto") -> ndarray (E,)``;  ``clear_cache()``
Closed forms of P_e(0…0) and unique experts (U vectorised over an array of batch sizes)
    ``uniform_p_zero(experts, top_k, n_tokens)`` (1 − k/E)^n,  ``independent_p_zero(popularity, n_tokens)`` (1 − π)^n
    ``unique_experts(p_zero, batch)``, ``unique_experts_std(p_zero, batch)``,
    ``busiest_rank_experts(p_zero, batch, ranks=None, placement=None)``, ``rank_placement(experts, ranks, kind)``
        (PLACEMENTS: balanced, contiguous, random; DEFAULT_PLACEMENT random; replicas=, groups=),
    ``eplb_replicas(load, redundant, ranks)``, ``replica_p_zero(p_zero, replicas)`` (EPLB replicas, .placement),
    ``independent_unique(popularity, n_tokens, batch)``, ``uniform_unique(experts, top_k, n_tokens, batch)``
    ``predict(stats, n_tokens, batch=1, *, method="auto", ranks=None, placement=None, check=True)
        -> OverlapPrediction``;  ``realisability_warnings(stats, n_tokens, method)``
Draft trees and the persistent working set (``tree``; docs/MODEL.md §2.15)
    ``full_tree(branching) -> parents``, ``read_parents(path)``, ``check_parents(parents)`` (root −1, ≤ 4096 nodes),
    ``tree_p_zero(stats, parents, *, method="auto", persistent=None) -> TreeFit`` (TREE_METHODS: auto, latent,
    ipf, stationary, independent, uniform; auto = latent, the latent-score model of ``latent``/``latent_tree``),
    ``predict_tree(stats, parents, batch=1, *, method, persistent, ranks, placement) -> TreePrediction``,
    ``Persistent(floor, share=None)`` (estimated from a trace by ``simulator.traces.fit_persistent``),
    ``clear_tree_cache()``
"""

from .fit import METHODS, WindowFit, clear_cache, fit_window, p_zero, resolve_method
from .persistent import Persistent
from .placement import eplb_replicas, replica_p_zero
from .popularity import independent_overlap, parse_popularity, water_fill
from .predict import OverlapPrediction, RealisabilityWarning, predict, realisability_warnings
from .stats import POOLING_RULES, OverlapStats, pool_pairs
from .tree import (
    TREE_METHODS,
    TreeFit,
    TreePrediction,
    check_parents,
    clear_tree_cache,
    full_tree,
    predict_tree,
    read_parents,
    tree_p_zero,
)
from .unique import (
    DEFAULT_PLACEMENT,
    PLACEMENTS,
    busiest_rank_experts,
    independent_p_zero,
    independent_unique,
    rank_placement,
    uniform_p_zero,
    uniform_unique,
    unique_experts,
    unique_experts_std,
)

__all__ = [
    "TREE_METHODS",
    "Persistent",
    "TreeFit",
    "TreePrediction",
    "check_parents",
    "clear_tree_cache",
    "full_tree",
    "predict_tree",
    "read_parents",
    "tree_p_zero",
    "DEFAULT_PLACEMENT",
    "METHODS",
    "PLACEMENTS",
    "POOLING_RULES",
    "OverlapPrediction",
    "OverlapStats",
    "RealisabilityWarning",
    "WindowFit",
    "busiest_rank_experts",
    "clear_cache",
    "eplb_replicas",
    "fit_window",
    "independent_overlap",
    "independent_p_zero",
    "independent_unique",
    "p_zero",
    "parse_popularity",
    "pool_pairs",
    "predict",
    "rank_placement",
    "realisability_warnings",
    "replica_p_zero",
    "resolve_method",
    "uniform_p_zero",
    "uniform_unique",
    "unique_experts",
    "unique_experts_std",
    "water_fill",
]
