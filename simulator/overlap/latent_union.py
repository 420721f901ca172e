"""The latent-score model's union over a tree for rows of statistics: parameter cache, grouping of many distinct
experts into bins with a stated check, and the notes a prediction carries (docs/MODEL.md §2.16)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .latent import binary_memory_misfit, fit_latent
from .latent_tree import latent_tree_p_zero, subtree_shapes

__all__ = ["clear_latent_cache", "latent_union"]

MISFIT_NOTE = 1e-4  # the latent model's overlap misfit is stated when larger than this
LATENT_MAX_DISTINCT = 256  # more distinct experts than this are grouped into bins (stated, with a check)
BIN_LOGIT, BIN_LAMBDA = 0.03, 0.003  # finest bin widths: logit π and the lag correlations λ_d (doubled as needed)
MAX_BINS = 96  # binned: at most this many groups
CHECKED = 12  # binned: experts also fitted exactly, to state the binning error


def latent_union(pi: np.ndarray, pairs: np.ndarray, parents: tuple, top_k: float, weights: np.ndarray) -> tuple:
    """(P(0…0) per row, lags used, note, overlap misfit, binary memory fits better) of the latent model on the tree,
    for distinct rows of (π, p(1..D)) standing for ``weights`` experts each; more than LATENT_MAX_DISTINCT rows are
    grouped into bins."""
    if pi.size > LATENT_MAX_DISTINCT:
        return _binned(pi, pairs, parents, top_k, weights)
    return _exact(pi, pairs, parents, top_k, weights)


def clear_latent_cache() -> None:
    _latent_params.cache_clear()
    _shapes.cache_clear()


@lru_cache(maxsize=64)
def _latent_params(pi: bytes, pairs: bytes, lags: int, top_k: float, weights: bytes):
    """The latent model's parameters, cached per statistics: every tree of the same statistics reuses them."""
    p = np.frombuffer(pi)
    return fit_latent(p, np.frombuffer(pairs).reshape(p.size, lags), top_k, np.frombuffer(weights))


def _binned(pi: np.ndarray, pairs: np.ndarray, parents: tuple, top_k: float, weights: np.ndarray) -> tuple:
    """More than LATENT_MAX_DISTINCT distinct experts: experts are grouped by their statistics (logit π in steps of
    BIN_LOGIT, each lag's pair correlation λ_d = (p − π²)/(π − π²) in steps of BIN_LAMBDA, both doubled until at most
    MAX_BINS groups remain), each group's mean
    statistics are fitted for all its members, and CHECKED experts (spread over π) are also fitted exactly: the
    largest |ΔP(0…0)| among them is stated with the union bound it implies."""
    safe = np.clip(pi, 1e-12, 1 - 1e-12)
    lam = (pairs - safe[:, None] ** 2) / (safe - safe ** 2)[:, None]
    logit = np.log(safe / (1 - safe))[:, None]
    width = 1.0
    while True:  # the finest bins (BIN_LOGIT, BIN_LAMBDA times 1, 2, 4, ..) that give at most MAX_BINS groups
        keys = np.concatenate([np.round(logit / (BIN_LOGIT * width)), np.round(lam / (BIN_LAMBDA * width))], 1)
        _, member, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        if counts.size <= MAX_BINS:
            break
        width *= 2
    member = member.ravel()
    mass = np.bincount(member, weights=weights)  # experts per group; its mean statistics are a feasible row
    rep_pi = np.bincount(member, weights=weights * pi) / mass  # (the Fréchet bounds are convex)
    rep_pairs = np.stack([np.bincount(member, weights=weights * pairs[:, d]) / mass
                          for d in range(pairs.shape[1])], 1)
    p0_rep, lags, note, misfit, binary = _exact(rep_pi, rep_pairs, parents, top_k, mass)
    binned = p0_rep[member]
    check = np.argsort(pi, kind="stable")[np.linspace(0, pi.size - 1, CHECKED).round().astype(int)]
    exact = latent_tree_p_zero(fit_latent(pi[check], pairs[check], top_k), parents, _shapes(parents))
    gap = float(np.max(np.abs(exact - binned[check])))
    total = float(weights.sum())
    mean = float(np.mean(exact - binned[check])) * total
    bins = (f"{pi.size} distinct experts grouped into {counts.size} bins (logit π step {BIN_LOGIT * width:g}, lag "
            f"correlations step {BIN_LAMBDA * width:g}); check on {CHECKED} experts fitted exactly: largest "
            f"|ΔP(0…0)| {gap:.1e} (E × that: {gap * total:.2g} experts; E × their mean ΔP: {mean:+.2g})")
    return binned, lags, "; ".join(x for x in (note, bins) if x), misfit, binary


def _exact(pi: np.ndarray, pairs: np.ndarray, parents: tuple, top_k: float, weights: np.ndarray) -> tuple:
    weights = np.asarray(weights, dtype=float)
    params = _latent_params(pi.tobytes(), np.ascontiguousarray(pairs).tobytes(), pairs.shape[1], top_k,
                            weights.tobytes())
    p0 = latent_tree_p_zero(params, parents, _shapes(parents))
    notes, looks_binary = [], False
    if params.misfit > MISFIT_NOTE:
        notes.append(f"latent-score model: its correlation c + (1 - c)·r^d reproduces the given overlaps "
                     f"o(1..{params.lags}) within {params.misfit:.4f} (largest |model - given|)")
        overlaps = weights @ pairs / top_k
        binary, _, _ = binary_memory_misfit(overlaps, float(weights @ pi ** 2) / top_k)
        looks_binary = binary < params.misfit
        if looks_binary:
            notes.append(f"the lag profile looks like binary memory (F + (1 - F)·θ^d fits within {binary:.4f}): "
                         "routers whose expert sets persist as discrete states are under-predicted by the latent "
                         "model (up to 31% in benchmarks/results/overlap_trees.md); compare --tree-method "
                         "stationary")
    return p0, params.lags, "; ".join(notes), params.misfit, looks_binary


@lru_cache(maxsize=256)
def _shapes(parents: tuple) -> tuple:
    return subtree_shapes(parents)
