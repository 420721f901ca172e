"""Lag-1 fast path: with only one-token and lag-1 pair marginals, the maximum-entropy distribution over n tokens is
the stationary first-order Markov chain with those marginals (entropy H(x) <= H(x_1) + Σ H(x_t | x_{t-1}), with
equality exactly for the chain). In closed form, with a = P(0 -> 0) = (1 − 2π + p(1)) / (1 − π):

    P(x = 0…0) = (1 − π) · a^(n−1)
"""

from __future__ import annotations

import numpy as np

__all__ = ["markov_p_zero", "markov_table"]


def _stay_zero(pi: np.ndarray, p1: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(pi < 1, (1 - 2 * pi + p1) / np.where(pi < 1, 1 - pi, 1.0), 0.0)
    return np.clip(a, 0.0, 1.0)


def markov_p_zero(pi: np.ndarray, p1: np.ndarray, n_tokens: int) -> np.ndarray:
    """P_e(x = 0…0) for n tokens under the stationary lag-1 chain; pi, p1 of shape (E,)."""
    pi = np.asarray(pi, dtype=float)
    return (1 - pi) * _stay_zero(pi, np.asarray(p1, dtype=float)) ** (int(n_tokens) - 1)


def markov_table(pi: np.ndarray, p1: np.ndarray, n_tokens: int) -> np.ndarray:
    """The whole chain distribution over {0,1}^n, shape (E, 2^n), token 0 in the most significant bit."""
    pi = np.asarray(pi, dtype=float)
    a = _stay_zero(pi, np.asarray(p1, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(pi > 0, np.asarray(p1, dtype=float) / np.where(pi > 0, pi, 1.0), 0.0)  # P(1 -> 1)
    trans = np.stack([np.stack([a, 1 - a], -1), np.stack([1 - b, b], -1)], -2)  # (E, from, to)
    n = int(n_tokens)
    bits = (np.arange(1 << n)[:, None] >> np.arange(n - 1, -1, -1)) & 1
    prob = np.where(bits[:, 0][None, :] == 1, pi[:, None], 1 - pi[:, None])
    for t in range(1, n):
        prob = prob * trans[:, bits[:, t - 1], bits[:, t]]
    return prob
