"""The model ``auto`` picks for a set of routing statistics, one rule for chains and draft trees alike (docs/MODEL.md
§2.6, §2.15): the latent-score model (§2.16) whenever a lag is given, except where the lag profile is reproduced more
closely by binary memory than by the latent family and the stationary chain's fit is small, then the stationary chain
(on a path: the maximum-entropy-rate chain of method ``junction``; on a tree: method ``stationary``). The choice
depends on the statistics only, never on the chain's length or the tree's shape, so a 1-wide tree of N nodes and a
chain of N tokens are one model's answer, and adding a node never lowers the union."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .latent_union import latent_union
from .stats import OverlapStats

__all__ = ["AUTO_STATIONARY_CELLS", "auto_for", "auto_model", "distinct_rows"]

AUTO_STATIONARY_CELLS = 1 << 13  # stationary when distinct experts × 2^(D+1) <= this (D: lags given; ≤ 0.12 s)


def distinct_rows(pi: np.ndarray, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each distinct (π, p(1..D)) row's first expert, each expert's row)."""
    keys = np.concatenate([pi[:, None], pairs], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def auto_model(stats: OverlapStats) -> str:
    """``independent`` (no lag given), ``stationary`` or ``latent`` (module docstring)."""
    return auto_for(stats.popularity, stats.pair_probs, float(stats.top_k))


def auto_for(pi: np.ndarray, pairs: np.ndarray, top_k: float) -> str:
    """:func:`auto_model` of per-expert rows (π, p(1..D)) (a persistent component's rows, too)."""
    pi = np.ascontiguousarray(pi, dtype=float)
    pairs = np.ascontiguousarray(pairs, dtype=float)
    return _auto(pi.tobytes(), pairs.tobytes(), pairs.shape[1], float(top_k))


@lru_cache(maxsize=256)
def _auto(pi_b: bytes, pairs_b: bytes, given: int, top_k: float) -> str:
    if given == 0:
        return "independent"
    pi = np.frombuffer(pi_b)
    pairs = np.frombuffer(pairs_b).reshape(pi.size, given)
    first, inverse = distinct_rows(pi, pairs)
    weights = np.bincount(inverse, minlength=first.size).astype(float)
    binary = latent_union(pi[first], pairs[first], (-1, 0), top_k, weights)[4]
    if binary and given >= 2 and first.size << (given + 1) <= AUTO_STATIONARY_CELLS:
        return "stationary"
    return "latent"
