"""Predictions against a trace: per-layer statistics and, for each window n and batch B, the empirical unique
experts next to every method's prediction and its relative error (prediction / empirical − 1).

Methods: ``ipf`` (per-expert pair marginals at all lags 1..n−1, exact maximum entropy up to IPF_MAX_EVAL_TOKENS
tokens — these constraints span the whole window, so its one clique is the 2^n table — and the stationary junction
chain beyond), ``ipf-pooled`` (pooled overlaps through the default pooling rule, trace popularity),
``markov`` (lag 1 only), ``window`` (m-token pattern frequencies at every position; exact junction-tree chain),
``independent`` and ``uniform``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from .fit import fit_window
from .stats import OverlapStats
from .traces import Trace, empirical_unique, layer_stats
from .unique import independent_unique, uniform_unique, unique_experts

__all__ = ["EVAL_METHODS", "LayerSummary", "EvalRow", "TraceReport", "evaluate_trace"]

EVAL_METHODS = ("ipf", "ipf-pooled", "markov", "window", "independent", "uniform")
IPF_MAX_EVAL_TOKENS = 12


@dataclass(frozen=True)
class LayerSummary:
    layer: int
    skew: float
    overlaps: tuple


@dataclass(frozen=True)
class EvalRow:
    layer: int
    n_tokens: int
    batch: int
    empirical: float
    empirical_std: float
    predictions: dict

    def rel_error(self, method: str) -> float:
        return self.predictions[method] / self.empirical - 1.0


@dataclass(frozen=True)
class TraceReport:
    source: str
    sequences: int
    tokens: int
    layers: int
    experts: int
    top_k: int
    window: int
    methods: tuple
    summaries: tuple
    rows: tuple

    def mean_abs_error(self) -> dict:
        """Mean |relative error| per method over all rows."""
        return {m: float(np.mean([abs(r.rel_error(m)) for r in self.rows])) for m in self.methods}

    def to_dict(self) -> dict:
        rows = []
        for r in self.rows:
            row = {"layer": r.layer, "tokens": r.n_tokens, "batch": r.batch, "empirical": float(r.empirical),
                   "empirical_std": float(r.empirical_std)}
            for m in self.methods:
                row[m] = float(r.predictions[m])
                row[f"{m}_rel_error"] = float(r.rel_error(m))
            rows.append(row)
        return {
            "trace": self.source, "sequences": self.sequences, "tokens_per_sequence": self.tokens,
            "layers": self.layers, "experts": self.experts, "top_k": self.top_k, "window": self.window,
            "statistics": [{"layer": s.layer, "independent_overlap": float(s.skew),
                            "overlaps": [float(o) for o in s.overlaps]} for s in self.summaries],
            "predictions": rows,
            "mean_abs_rel_error": self.mean_abs_error(),
        }


def _predict_layer(stats: OverlapStats, method: str, n: int, batch: np.ndarray) -> np.ndarray:
    if method == "independent":
        return np.atleast_1d(independent_unique(stats.popularity, n, batch))
    if method == "uniform":
        return np.atleast_1d(uniform_unique(stats.experts, stats.top_k, n, batch))
    if method == "window":
        win = OverlapStats(stats.popularity, stats.top_k, window=stats.window)
        p0 = fit_window(win, n, "junction").p_zero
    elif method == "markov":
        p0 = fit_window(OverlapStats(stats.popularity, stats.top_k, pair_probs=stats.pair_probs[:, :1]), n,
                        "markov").p_zero
    else:
        lags = stats.pair_probs[:, : n - 1]
        pairwise = OverlapStats(stats.popularity, stats.top_k, pair_probs=lags)
        if method == "ipf-pooled":
            pairwise = OverlapStats(stats.popularity, stats.top_k, pairwise.overlaps)
        p0 = fit_window(pairwise, n, "ipf" if n <= IPF_MAX_EVAL_TOKENS else "junction").p_zero
    return np.atleast_1d(unique_experts(p0, batch))


def evaluate_trace(trace: Trace, n_tokens=(4,), batch=(1,), *, window: int = 3, layers=None, samples: int = 2000,
                   seed: int = 0, methods=EVAL_METHODS) -> TraceReport:
    """Statistics and prediction-vs-empirical rows for each layer, window size and batch size."""
    ns = sorted({int(n) for n in np.atleast_1d(n_tokens)})
    bs = np.array(sorted({int(b) for b in np.atleast_1d(batch)}))
    unknown = [m for m in methods if m not in EVAL_METHODS]
    if unknown:
        raise ParameterError(f"unknown method '{unknown[0]}': use {', '.join(EVAL_METHODS)}")
    if ns[0] < 1 or bs[0] < 1 or ns[-1] > trace.tokens:
        raise ParameterError(f"tokens must be in [1, {trace.tokens}] and batch sizes >= 1")
    if not 1 <= window <= min(trace.tokens, 12):
        raise ParameterError(f"--window must be in [1, {min(trace.tokens, 12)}]; got {window}")
    chosen = range(trace.layers) if layers is None else [int(x) for x in np.atleast_1d(layers)]
    summaries, rows = [], []
    for layer in chosen:
        win = window if "window" in methods else 0
        stats = layer_stats(trace, layer, max_lag=max(ns[-1] - 1, win - 1, 1), window=win)
        summaries.append(LayerSummary(layer, stats.skew, stats.overlaps))
        for n in ns:
            emp, emp_std = empirical_unique(trace, layer, n, bs, samples=samples, seed=seed)
            preds = {m: _predict_layer(stats, m, n, bs) for m in methods}
            for i, b in enumerate(bs):
                rows.append(EvalRow(layer, n, int(b), float(emp[i]), float(emp_std[i]),
                                    {m: float(preds[m][i]) for m in methods}))
    return TraceReport(trace.source, trace.sequences, trace.tokens, trace.layers, trace.num_experts, trace.top_k,
                       window, tuple(methods), tuple(summaries), tuple(rows))
