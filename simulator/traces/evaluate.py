"""Predictions against a trace: per-layer statistics and, for each window n and batch B, the empirical unique
experts next to every predictor's value and its relative error (prediction / empirical − 1).

A predictor is a choice of statistics taken from the trace, turned into P_e(0…0) by the maximum-entropy law of those
statistics (or a baseline closed form); the fit method that computes the law is named in brackets:

- ``pairs``: per-expert pair marginals p_e(d) at all lags 1..n−1 (fit ``ipf`` up to PAIRS_EXACT_MAX_TOKENS tokens —
  these constraints span the whole window, so its one clique is the 2^n table — and the stationary chain
  ``junction`` beyond);
- ``pooled``: the pooled overlaps o(1..n−1) through the default pooling rule, with the trace popularity (``ipf`` /
  ``junction`` as for ``pairs``);
- ``latent``: the pooled overlaps o(1..n−1) and the trace popularity, turned into P_e(0…0) by the latent-score model
  (``latent``, docs/MODEL.md §2.16: a thresholded Gaussian latent, not maximum entropy);
- ``lag1``: per-expert lag-1 pair marginals only (``markov``, the closed form);
- ``window``: m-token pattern frequencies at every position (``junction``, exact for window patterns);
- ``independent``: the popularity only, tokens independent; ``uniform``: MoESD, k/E for every expert.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..overlap.fit import fit_window
from ..overlap.latent import binary_memory_misfit, fit_latent
from ..overlap.stats import OverlapStats
from ..overlap.unique import independent_unique, uniform_unique, unique_experts
from ..params import Interval, Param, check_params
from .trace import BATCH_DRAWS, SAMPLES, SEED, Trace, empirical_unique, layer_stats

__all__ = ["PREDICTORS", "LayerSummary", "EvalRow", "TraceReport", "evaluate_trace"]

PREDICTORS = ("pairs", "pooled", "latent", "lag1", "window", "independent", "uniform")
BASELINES = ("independent", "uniform")
WINDOW_MAX_TOKENS = 12  # longest window pattern m (the trace statistics count 2^m patterns per expert)
PAIRS_EXACT_MAX_TOKENS = 12  # pairs/pooled: exact finite-n law (ipf) up to here, the stationary chain beyond


@dataclass(frozen=True)
class LayerSummary:
    """Per layer: Σπ²/k, the pooled overlaps, and how closely the two kinds of memory reproduce them (largest
    |model − measured| overlap): the latent-score model (§2.16) and the binary-memory profile F + (1 − F)·θ^d."""

    layer: int
    skew: float
    overlaps: tuple
    latent_misfit: float = 0.0
    binary_misfit: float = 0.0


@dataclass(frozen=True)
class EvalRow:
    layer: int
    n_tokens: int
    batch: int
    empirical: float
    empirical_std: float
    predictions: dict

    def rel_error(self, predictor: str) -> float:
        return self.predictions[predictor] / self.empirical - 1.0


@dataclass(frozen=True)
class TraceReport:
    source: str
    sequences: int
    tokens: int
    layers: int
    experts: int
    top_k: int
    window: int
    predictors: tuple
    summaries: tuple
    rows: tuple

    def mean_abs_error(self) -> dict:
        """Mean |relative error| per predictor over all rows."""
        return {m: float(np.mean([abs(r.rel_error(m)) for r in self.rows])) for m in self.predictors}

    def best(self) -> tuple | None:
        """(predictor, mean |relative error|) of the model that explains the trace best (baselines excluded)."""
        errs = {m: v for m, v in self.mean_abs_error().items() if m not in BASELINES}
        return min(errs.items(), key=lambda kv: kv[1]) if errs else None

    def to_dict(self) -> dict:
        rows = []
        for r in self.rows:
            row = {"layer": r.layer, "tokens": r.n_tokens, "batch": r.batch, "empirical": float(r.empirical),
                   "empirical_std": float(r.empirical_std)}
            for m in self.predictors:
                row[m] = float(r.predictions[m])
                row[f"{m}_rel_error"] = float(r.rel_error(m))
            rows.append(row)
        return {
            "trace": self.source, "sequences": self.sequences, "tokens_per_sequence": self.tokens,
            "layers": self.layers, "experts": self.experts, "top_k": self.top_k, "window": self.window,
            "statistics": [{"layer": s.layer, "independent_overlap": float(s.skew),
                            "overlaps": [float(o) for o in s.overlaps], "latent_misfit": s.latent_misfit,
                            "binary_memory_misfit": s.binary_misfit} for s in self.summaries],
            "predictions": rows,
            "mean_abs_rel_error": self.mean_abs_error(),
            "best": None if self.best() is None else {"predictor": self.best()[0], "mean_abs_rel_error":
                                                      self.best()[1]},
        }


def _predict_layer(stats: OverlapStats, predictor: str, n: int, batch: np.ndarray) -> np.ndarray:
    if predictor == "independent":
        return np.atleast_1d(independent_unique(stats.popularity, n, batch))
    if predictor == "uniform":
        return np.atleast_1d(uniform_unique(stats.experts, stats.top_k, n, batch))
    if predictor == "window":
        win = OverlapStats(stats.popularity, stats.top_k, window=stats.window)
        p0 = fit_window(win, n, "junction").p_zero
    elif predictor == "latent":
        lags = OverlapStats(stats.popularity, stats.top_k, pair_probs=stats.pair_probs[:, :n - 1]).overlaps
        pooled = OverlapStats(stats.popularity, stats.top_k, lags)
        p0 = fit_window(pooled, n, "latent").p_zero
    elif predictor == "lag1":
        p0 = fit_window(OverlapStats(stats.popularity, stats.top_k, pair_probs=stats.pair_probs[:, :1]), n,
                        "markov").p_zero
    else:
        lags = stats.pair_probs[:, : n - 1]
        pairwise = OverlapStats(stats.popularity, stats.top_k, pair_probs=lags)
        if predictor == "pooled":
            pairwise = OverlapStats(stats.popularity, stats.top_k, pairwise.overlaps)
        p0 = fit_window(pairwise, n, "ipf" if n <= PAIRS_EXACT_MAX_TOKENS else "junction").p_zero
    return np.atleast_1d(unique_experts(p0, batch))


def evaluate_trace(trace: Trace, n_tokens=(4,), batch=(1,), *, window: int = 3, layers=None, samples: int = 2000,
                   seed: int = 0, predictors=PREDICTORS) -> TraceReport:
    """Statistics and prediction-vs-empirical rows for each layer, window size and batch size, for each of the
    ``predictors`` (names in PREDICTORS)."""
    lists = {"n_tokens": Param(Interval(int, 1, trace.tokens), many=True), "batch": BATCH_DRAWS,
             "layers": Param(Interval(int, 0, trace.layers - 1), None, many=True)}
    check_params("evaluate_trace", {"n_tokens": n_tokens, "batch": batch, "layers": layers}, lists)
    ns = sorted({int(n) for n in np.atleast_1d(n_tokens)})
    bs = np.array(sorted({int(b) for b in np.atleast_1d(batch)}))
    unknown = [m for m in predictors if m not in PREDICTORS]
    if unknown:
        raise ParameterError(f"the 'predictors' parameter of evaluate_trace must name predictors in "
                             f"{list(PREDICTORS)}. Got {unknown[0]!r} instead.")
    declared = {"window": [Interval(int, 1, min(trace.tokens, WINDOW_MAX_TOKENS))]}
    check_params("evaluate_trace", {"window": window}, declared)
    check_params("evaluate_trace", {"samples": samples, "seed": seed}, {"samples": SAMPLES, "seed": SEED})
    chosen = range(trace.layers) if layers is None else [int(x) for x in np.atleast_1d(layers)]
    summaries, rows = [], []
    for layer in chosen:
        win = window if "window" in predictors else 0
        stats = layer_stats(trace, layer, max_lag=max(ns[-1] - 1, win - 1, 1), window=win)
        pooled = OverlapStats(stats.popularity, stats.top_k, stats.overlaps)
        latent = fit_latent(pooled.popularity, pooled.pair_probs, stats.top_k).misfit
        binary = binary_memory_misfit(stats.overlaps, stats.skew)[0]
        summaries.append(LayerSummary(layer, stats.skew, stats.overlaps, float(latent), float(binary)))
        for n in ns:
            emp, emp_std = empirical_unique(trace, layer, n, bs, samples=samples, seed=seed)
            preds = {m: _predict_layer(stats, m, n, bs) for m in predictors}
            for i, b in enumerate(bs):
                rows.append(EvalRow(layer, n, int(b), float(emp[i]), float(emp_std[i]),
                                    {m: float(preds[m][i]) for m in predictors}))
    return TraceReport(trace.source, trace.sequences, trace.tokens, trace.layers, trace.num_experts, trace.top_k,
                       window, tuple(predictors), tuple(summaries), tuple(rows))
