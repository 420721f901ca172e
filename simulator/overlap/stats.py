"""Routing statistics of one MoE layer and the pooling rule from pooled lag overlaps to per-expert pair marginals.

Notation (docs/MODEL.md §2): E experts, top-k k, popularity π_e = P(x_t = 1) with Σπ = k, lag overlap
o(d) = E|S_t ∩ S_{t+d}| / k = Σ_e P(x_t = 1, x_{t+d} = 1) / k, and per-expert pair marginal
p_e(d) = P(x_t = 1, x_{t+d} = 1).

Pooling rules (pooled o(d) -> p_e(d)), both with Σ_e p_e(d) = k·o(d) and the Fréchet bounds
L_e = max(0, 2π_e − 1) <= p_e(d) <= π_e:

- ``lift`` (default): p_e(d) = π_e² + λ_d·(π_e − π_e²) for λ_d >= 0, i.e. the same lag-d correlation (phi
  coefficient) λ_d for every expert; λ_d = (k·o(d) − Σπ²) / (k − Σπ²). Below independence (λ_d < 0) every expert
  moves the same fraction |λ_d| of the way from π_e² to its Fréchet lower bound L_e.
- ``conditional``: p_e(d) = clip(π_e·r_d, L_e, π_e), the same conditional probability r_d = P(x_{t+d}=1 | x_t=1)
  for every expert (r_d = o(d) unless a lower bound binds; then r_d is solved numerically).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..errors import InfeasibleError, ParameterError
from ..params import Interval, Options, Param, check_params
from .popularity import independent_overlap, parse_popularity, root_scalar

MAX_EXPERTS = 65536  # routed experts per layer: above any MoE model (DeepSeek-V3 256, Kimi K2 384), keeps E bounded
NUM_EXPERTS = Param(Interval(int, 1, MAX_EXPERTS), unit="experts")

__all__ = ["OverlapStats", "POOLING_RULES", "pool_pairs", "window_marginal", "SUM_TOL"]

POOLING_RULES = ("lift", "conditional")
SUM_TOL = 1e-6  # tolerance on Σπ = k, on probabilities summing to one and on stationarity of window frequencies
_BOUND_TOL = 1e-9  # tolerance on the Fréchet bounds; values within it are clipped onto the bound


def _lower_bound(pi: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 2.0 * pi - 1.0)


def pool_pairs(popularity: np.ndarray, top_k: int, overlaps, rule: str = "lift") -> np.ndarray:
    """Per-expert pair marginals p_e(d), shape (E, D), from pooled overlaps o(1..D) by the named pooling rule."""
    check_params("pool_pairs", {"rule": rule}, {"rule": [Options(POOLING_RULES)]})
    pi = np.asarray(popularity, dtype=float)
    low = _lower_bound(pi)
    sq = pi * pi
    out = np.empty((pi.size, len(overlaps)))
    for j, o in enumerate(overlaps):
        target = top_k * float(o)
        lo_o, hi_o = low.sum() / top_k, 1.0
        if target < low.sum() - 1e-9 * top_k or target > top_k * (1 + 1e-12):
            raise InfeasibleError(
                f"overlap o({j + 1})={o:g} cannot be realised with this popularity: it must lie in "
                f"[{lo_o:.4g}, {hi_o:g}] (below, the pair probabilities would fall under the Fréchet bound "
                f"max(0, 2π-1)); raise o({j + 1}) or change the popularity"
            )
        if rule == "lift":
            if target >= sq.sum():
                span = top_k - sq.sum()
                lam = 0.0 if span <= 0 else (target - sq.sum()) / span
                out[:, j] = sq + lam * (pi - sq)
            else:
                span = sq.sum() - low.sum()
                lam = 0.0 if span <= 0 else (sq.sum() - target) / span
                out[:, j] = sq - lam * (sq - low)
        else:

            def gap(r: float, target: float = target) -> float:
                return float(np.clip(pi * r, low, pi).sum() - target)

            r = float(o) if abs(gap(float(o))) <= 1e-12 * top_k else root_scalar(gap, 0.0, 1.0, xtol=1e-15, rtol=1e-15)
            out[:, j] = np.clip(pi * r, low, pi)
    return out


def window_marginal(freq: np.ndarray, positions) -> np.ndarray:
    """Marginal of window-pattern frequencies (E, 2^m) on the given token positions (ascending), shape (E, 2^len)."""
    e, cells = freq.shape
    m = cells.bit_length() - 1
    keep = tuple(positions)
    axes = tuple(1 + a for a in range(m) if a not in keep)
    return freq.reshape((e,) + (2,) * m).sum(axis=axes).reshape(e, -1)


def _window_pairs(win: np.ndarray) -> np.ndarray:
    """Pair marginals p_e(d) for lags d = 1..m-1 implied by window frequencies, shape (E, m-1)."""
    m = win.shape[1].bit_length() - 1
    cols = [window_marginal(win, (0, d))[:, 3] for d in range(1, m)]
    return np.stack(cols, axis=1) if cols else np.zeros((win.shape[0], 0))


@dataclass(frozen=True, eq=False)
class OverlapStats:
    """Routing statistics of one layer. Hashable and comparable by value, so fits can be cached.

    Parameters
    ----------
    popularity:
        π_e per expert, shape (E,), each in [0, 1], Σπ = top_k.
    top_k:
        k, experts per token.
    overlaps:
        Pooled lag overlaps o(1..D) as fractions in [0, 1]; empty means no lag constraint (independent tokens).
    pooling:
        Rule turning ``overlaps`` into per-expert pair marginals (``lift`` or ``conditional``); ignored when
        ``pair_probs`` is given.
    pair_probs:
        Optional per-expert pair marginals p_e(d) = P(x_t=1, x_{t+d}=1), shape (E, D), e.g. from a trace.
    window:
        Optional per-expert frequencies of the 2^m activation patterns of m consecutive tokens, shape (E, 2^m),
        oldest token in the most significant bit; they must be stationary (equal first and last m-1 marginals).
    label:
        Free text describing the origin (shown in reports only; not part of the value).
    """

    popularity: np.ndarray
    top_k: int
    overlaps: tuple = ()
    pooling: str = "lift"
    pair_probs: np.ndarray | None = None
    window: np.ndarray | None = None
    label: str = field(default="", compare=False)

    def __post_init__(self):
        check_params(
            "OverlapStats",
            {"top_k": self.top_k, "pooling": self.pooling},
            {"top_k": [Interval(int, 1, None)], "pooling": [Options(POOLING_RULES)]},
        )
        pi = np.array(self.popularity, dtype=float).ravel()
        e = pi.size
        if e < self.top_k:
            raise ParameterError(f"top_k={self.top_k} is larger than the number of experts E={e}; need k <= E")
        if not np.all(np.isfinite(pi)) or pi.min() < -_BOUND_TOL or pi.max() > 1 + _BOUND_TOL:
            raise InfeasibleError(
                "popularity values must be probabilities in [0, 1]; use parse_popularity to normalise weights"
            )
        if abs(pi.sum() - self.top_k) > SUM_TOL * self.top_k:
            raise InfeasibleError(
                f"popularity must sum to top_k={self.top_k} (each token uses k experts); got {pi.sum():.6g}"
            )
        pi = np.clip(pi, 0.0, 1.0)
        ov = tuple(float(o) for o in self.overlaps)
        for d, o in enumerate(ov, start=1):
            if not np.isfinite(o) or o < 0 or o > 1:
                hint = f"; did you mean {o / 100:g}?" if 1 < o <= 100 else ""
                raise ParameterError(f"overlap o({d})={o:g} must be a fraction in [0, 1] (overlaps){hint}")
        pairs = None
        win = None
        if self.window is not None:
            win = self._check_window(np.array(self.window, dtype=float), pi)
        if self.pair_probs is not None:
            pairs = np.array(self.pair_probs, dtype=float)
            if pairs.ndim == 1 and e == 1:
                pairs = pairs[None, :]
            if pairs.ndim != 2 or pairs.shape[0] != e:
                raise ParameterError(f"pair_probs must have shape (E={e}, D); got {pairs.shape}")
        elif win is not None:
            pairs = _window_pairs(win)
        if pairs is not None:
            low = _lower_bound(pi)[:, None]
            bad = (pairs < low - _BOUND_TOL) | (pairs > pi[:, None] + _BOUND_TOL) | ~np.isfinite(pairs)
            if bad.any():
                ex, lag = np.argwhere(bad)[0]
                raise InfeasibleError(
                    f"pair probability P(x_t=1, x_t+{lag + 1}=1)={pairs[ex, lag]:.6g} of expert {ex} is outside "
                    f"[max(0, 2π-1), π]=[{low[ex, 0]:.6g}, {pi[ex]:.6g}] (Fréchet bounds); no process has it"
                )
            pairs = np.clip(pairs, low, pi[:, None])
            derived = tuple(float(x) for x in pairs.sum(axis=0) / self.top_k)
            if ov and (len(ov) != len(derived) or max(abs(a - b) for a, b in zip(ov, derived, strict=True)) > 1e-6):
                raise ParameterError("overlaps disagree with pair_probs; give one of them (overlaps are derived)")
            ov = derived
        else:
            pairs = pool_pairs(pi, self.top_k, ov, self.pooling)
        if win is not None:
            m = win.shape[1].bit_length() - 1
            implied = _window_pairs(win)
            if np.abs(implied - pairs[:, : m - 1]).max(initial=0.0) > SUM_TOL:
                raise ParameterError("pair_probs at lags below the window size disagree with the window frequencies")
        for name, value in (("popularity", pi), ("pair_probs", pairs), ("window", win)):
            if value is not None:
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "overlaps", ov)
        object.__setattr__(self, "top_k", int(self.top_k))

    def _check_window(self, win: np.ndarray, pi: np.ndarray) -> np.ndarray:
        e = pi.size
        cells = win.shape[-1] if win.ndim == 2 else 0
        m = cells.bit_length() - 1
        if win.ndim != 2 or win.shape[0] != e or cells < 2 or cells != 1 << m:
            raise ParameterError(f"window frequencies must have shape (E={e}, 2^m) with m >= 1; got {win.shape}")
        if not np.all(np.isfinite(win)) or win.min() < -_BOUND_TOL:
            raise InfeasibleError("window pattern frequencies must be non-negative")
        win = np.clip(win, 0.0, None)
        sums = win.sum(axis=1)
        if np.abs(sums - 1).max() > SUM_TOL:
            raise InfeasibleError(f"window pattern frequencies of each expert must sum to 1; got {sums.min():.6g}")
        win = win / sums[:, None]
        for pos in range(m):
            single = window_marginal(win, (pos,))[:, 1]
            if np.abs(single - pi).max() > SUM_TOL:
                ex = int(np.abs(single - pi).argmax())
                raise InfeasibleError(
                    f"window frequencies of expert {ex} give P(x=1)={single[ex]:.6g} at position {pos}, but its "
                    f"popularity is {pi[ex]:.6g}; estimate both from the same trace"
                )
        if m >= 2:
            left = window_marginal(win, tuple(range(m - 1)))
            right = window_marginal(win, tuple(range(1, m)))
            gap = np.abs(left - right).max()
            if gap > SUM_TOL:
                raise InfeasibleError(
                    f"window frequencies are not stationary: the first and last {m - 1}-token marginals differ by "
                    f"{gap:.3g}; count windows circularly within each sequence (trace_stats does)"
                )
        return win

    # ---- constructors -------------------------------------------------------------------------------------
    @classmethod
    def from_overlaps(cls, experts: int, top_k: int, overlaps=(), popularity="uniform", pooling: str = "lift"):
        """Statistics from pooled lag overlaps o(1..D) (fractions) and a popularity spec or weights."""
        check_params(
            "OverlapStats.from_overlaps",
            {"experts": experts, "top_k": top_k},
            {"experts": NUM_EXPERTS, "top_k": [Interval(int, 1, None)]},
        )
        if top_k > experts:
            raise ParameterError(f"top_k={top_k} is larger than experts={experts}; need k <= E")
        pi = parse_popularity(popularity, experts, top_k)
        label = popularity if isinstance(popularity, str) else "weights"
        return cls(pi, top_k, tuple(overlaps), pooling=pooling, label=label)

    # ---- derived quantities ------------------------------------------------------------------------------
    @property
    def experts(self) -> int:
        return int(self.popularity.size)

    @property
    def max_lag(self) -> int:
        """D, the largest lag with a pair constraint."""
        return int(self.pair_probs.shape[1])

    @property
    def window_size(self) -> int:
        """m for window-pattern constraints, 0 when there are none."""
        return 0 if self.window is None else int(self.window.shape[1].bit_length() - 1)

    @property
    def skew(self) -> float:
        """Independent-routing overlap Σπ²/k."""
        return independent_overlap(self.popularity, self.top_k)

    @cached_property
    def key(self) -> tuple:
        def b(a):
            return None if a is None else (a.shape, a.tobytes())

        return (self.top_k, b(self.popularity), self.overlaps, b(self.pair_probs), b(self.window))

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, OverlapStats) and self.key == other.key

    def permuted(self, order) -> OverlapStats:
        """The same statistics with expert labels permuted: new expert i is old expert order[i]."""
        order = np.asarray(order)
        return OverlapStats(
            self.popularity[order],
            self.top_k,
            pair_probs=self.pair_probs[order],
            window=None if self.window is None else self.window[order],
            label=self.label,
        )
