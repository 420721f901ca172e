"""Routing-overlap model: how many distinct experts do B requests of n tokens touch? (docs/MODEL.md §2)

Per expert e, x ∈ {0,1}^n says which of n consecutive tokens of a request use e. The maximum-entropy law of x
under the popularity π_e and lag-d pair marginals p_e(d) (or m-token pattern frequencies) gives
P_e(x = 0…0), and with B independent requests U(B, n) = Σ_e [1 − P_e(0…0)^B].

Modules: statistics (``stats``, ``popularity``), the constraint set of an n-token fit (``constraints``), the
maximum-entropy engines (``maxent``: IPF on the junction tree and over the 2^n table, the Markov closed form, the
stationary chain), the fit methods and their cache (``fit``), unique experts and placements (``unique``), the
one-call prediction (``predict``), traces, the synthetic router and trace evaluation (``traces``, ``synth``,
``evaluate``).

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
    ``Persistent(floor, share=None)``, ``fit_persistent(trace, layer=0)``, ``clear_tree_cache()``
Traces and the synthetic router
    ``read_trace(path, num_experts=None, *, format="auto", seq_tokens=None) -> Trace`` (TRACE_FORMATS: auto, npy,
    npz, jsonl, sglang, vllm: SGLang / vLLM routing dumps), ``write_trace(trace, path)``,
    ``validate_routing(array, E)``,
    ``layer_stats(trace, layer, *, max_lag=4, window=0) -> OverlapStats``,
    ``empirical_unique(trace, layer, n_tokens, batch, *, samples=2000, seed=0) -> (mean, std)``,
    ``evaluate_trace(trace, n_tokens, batch, *, window=3, layers=None, samples=2000, seed=0,
    predictors=PREDICTORS) -> TraceReport``  (PREDICTORS: pairs, pooled, latent, lag1, window, independent,
    uniform; ``TraceReport.best()``: the model that explains the trace),
    ``synth_trace(experts, top_k, sequences, tokens, *, layers=1, persistence=0.8, skew=None, context=0.0,
    hidden=32, seed=0) -> Trace``
"""

from .evaluate import PREDICTORS, TraceReport, evaluate_trace
from .fit import METHODS, WindowFit, clear_cache, fit_window, p_zero, resolve_method
from .persistent import Persistent, fit_persistent
from .placement import eplb_replicas, replica_p_zero
from .popularity import independent_overlap, parse_popularity, water_fill
from .predict import OverlapPrediction, RealisabilityWarning, predict, realisability_warnings
from .stats import POOLING_RULES, OverlapStats, pool_pairs
from .synth import synth_trace
from .trace_formats import FORMATS as TRACE_FORMATS
from .trace_formats import read_trace
from .traces import Trace, empirical_unique, layer_stats, validate_routing, write_trace
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
    "fit_persistent",
    "full_tree",
    "predict_tree",
    "read_parents",
    "tree_p_zero",
    "DEFAULT_PLACEMENT",
    "METHODS",
    "PLACEMENTS",
    "POOLING_RULES",
    "PREDICTORS",
    "OverlapPrediction",
    "OverlapStats",
    "RealisabilityWarning",
    "TRACE_FORMATS",
    "Trace",
    "TraceReport",
    "WindowFit",
    "busiest_rank_experts",
    "clear_cache",
    "empirical_unique",
    "eplb_replicas",
    "evaluate_trace",
    "fit_window",
    "independent_overlap",
    "independent_p_zero",
    "independent_unique",
    "layer_stats",
    "p_zero",
    "parse_popularity",
    "pool_pairs",
    "predict",
    "rank_placement",
    "read_trace",
    "realisability_warnings",
    "replica_p_zero",
    "resolve_method",
    "synth_trace",
    "uniform_p_zero",
    "uniform_unique",
    "unique_experts",
    "unique_experts_std",
    "validate_routing",
    "water_fill",
    "write_trace",
]
