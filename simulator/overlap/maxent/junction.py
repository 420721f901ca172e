"""Junction tree over the chordal constraint graph of an n-token window.

Tokens are nodes; two tokens are joined when a constraint spans both (pairs at lags <= w−1, m-token windows).
The result is a band graph: chordal, with maximal cliques the windows {t, …, t+w−1}. Its junction tree (maximum
spanning tree of the clique graph weighted by separator size) is the chain of windows, with separators the
(w−1)-token overlaps. A distribution whose clique marginals are g_C and separator marginals g_S factorises as

    P(x) = Π_C g_C(x_C) / Π_S g_S(x_S)

(the maximum-entropy distribution with those clique marginals), so log P(0…0) is a sum over the n−w+1 cliques
and n−w separators: linear in n. For the stationary chain every clique marginal is the same window law g and every
separator marginal is g's (w−1)-token marginal.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...errors import ParameterError
from .tables import pattern_index

__all__ = ["JunctionTree", "junction_tree", "log_prob_zero", "junction_table", "block_marginals"]


@dataclass(frozen=True)
class JunctionTree:
    """Cliques and separators (tuples of ascending token positions) of an n-token band constraint graph."""

    n_tokens: int
    width: int
    cliques: tuple
    separators: tuple


@lru_cache(maxsize=128)
def junction_tree(n_tokens: int, width: int) -> JunctionTree:
    """Junction tree of the constraint graph linking tokens at distance < width (cached per (n, width)): the chain
    of windows {t, …, t+w−1}, t = 0..n−w, with separators their (w−1)-token overlaps (none when w = 1). Written
    out, not searched for: it is the unique maximum spanning tree of the band graph's clique graph (consecutive
    windows share w−1 tokens, any other pair fewer), which tests/overlap checks against networkx."""
    n, w = int(n_tokens), max(1, min(int(width), int(n_tokens)))
    cliques = tuple(tuple(range(t, t + w)) for t in range(n - w + 1))
    separators = tuple(tuple(range(t + 1, t + w)) for t in range(n - w)) if w > 1 else ()
    return JunctionTree(n_tokens=n, width=w, cliques=cliques, separators=separators)


def block_marginals(window: np.ndarray) -> list:
    """g_r for r = 0..w: the law of r consecutive tokens implied by a stationary window law g (G, 2^w)."""
    g, cells = window.shape
    w = cells.bit_length() - 1
    out = [np.ones((g, 1))]
    for r in range(1, w + 1):
        out.append(window.reshape(g, 1 << r, 1 << (w - r)).sum(axis=2))
    return out


def _check_consecutive(block: tuple) -> int:
    if block and block[-1] - block[0] + 1 != len(block):  # pragma: no cover - band cliques are consecutive
        raise ParameterError("junction tree blocks must be consecutive tokens for a stationary chain")
    return len(block)


def log_prob_zero(tree: JunctionTree, window: np.ndarray) -> np.ndarray:
    """log P(x = 0…0) per group for the stationary chain with window law g (G, 2^w), by the junction tree."""
    blocks = block_marginals(window)
    with np.errstate(divide="ignore"):
        logs = [np.log(b[:, 0]) for b in blocks]
    total = np.zeros(window.shape[0])
    for clique in tree.cliques:
        total += logs[_check_consecutive(clique)]
    for sep in tree.separators:
        total -= np.where(np.isfinite(total), logs[_check_consecutive(sep)], 0.0)
    return total


def junction_table(tree: JunctionTree, window: np.ndarray) -> np.ndarray:
    """The whole n-token distribution (G, 2^n) of the junction-tree factorisation (for checks; n small)."""
    n = tree.n_tokens
    blocks = block_marginals(window)
    prob = np.ones((window.shape[0], 1 << n))
    for clique in tree.cliques:
        prob = prob * blocks[len(clique)][:, pattern_index(n, clique)]
    for sep in tree.separators:
        den = blocks[len(sep)][:, pattern_index(n, sep)]
        prob = np.divide(prob, den, out=np.zeros_like(prob), where=den > 0)
    return prob
