"""Bit layouts shared by the maximum-entropy engines: laws over {0,1}^n stored as (G, 2^n) tables, token 0 in the
most significant bit, and windows of w tokens as the transitions of a chain on (w−1)-token states.

- ``table_layout(n, positions)``: the reshape of a (G, 2^n) table that exposes the chosen tokens as axes of size 2
  and merges each run of other tokens into one axis (sum over those axes = the marginal on ``positions``);
- ``marginal(table, n, positions)``: that marginal, shape (G, 2^len(positions));
- ``pattern_index(n, positions)``: for every cell x of the table, the index of its pattern on ``positions``;
- ``window_states(w)``: window j = (x_1..x_w) leads from state ``first[j] = j >> 1`` (its first w−1 tokens) to state
  ``last[j] = j mod 2^(w−1)`` (its last w−1 tokens), with the one-hot maps between states and windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["WindowStates", "marginal", "onto_first", "onto_last", "pattern_index", "table_layout", "window_states"]


def table_layout(n: int, positions: tuple) -> tuple:
    """(shape, axes to sum, shape of a factor on the kept axes) of a (G, 2^n) table viewed as (G,) + shape."""
    shape, sum_axes, fshape = [], [], []
    run = 0
    chosen = set(positions)
    for t in range(n):
        if t in chosen:
            if run:
                sum_axes.append(len(shape) + 1)
                shape.append(1 << run)
                fshape.append(1)
                run = 0
            shape.append(2)
            fshape.append(2)
        else:
            run += 1
    if run:
        sum_axes.append(len(shape) + 1)
        shape.append(1 << run)
        fshape.append(1)
    return tuple(shape), tuple(sum_axes), tuple(fshape)


def marginal(table: np.ndarray, n: int, positions: tuple) -> np.ndarray:
    """Marginal of (G, 2^n) tables on ascending token positions, shape (G, 2^len(positions))."""
    shape, axes, _ = table_layout(n, positions)
    g = table.shape[0]
    return table.reshape((g,) + shape).sum(axis=axes).reshape(g, -1)


def pattern_index(n: int, positions) -> np.ndarray:
    """Index (first position in the most significant bit) of each table cell's pattern on ``positions``, (2^n,)."""
    cells = np.arange(1 << n)
    pattern = np.zeros(1 << n, dtype=np.int64)
    for t in positions:
        pattern = (pattern << 1) | ((cells >> (n - 1 - t)) & 1)
    return pattern


@dataclass(frozen=True)
class WindowStates:
    """Windows of w tokens as transitions between (w−1)-token states (read-only arrays).

    ``first``/``last`` (2^w,): the state of a window's first / last w−1 tokens. ``to_first``/``to_last``
    (2^(w−1), 2^w): one-hot maps, so that ``f @ to_first`` spreads a function of states onto windows (f[j >> 1]);
    ``from_first``/``from_last`` (2^w, 2^(w−1)): their transposes, summing windows onto states.
    """

    first: np.ndarray
    last: np.ndarray
    to_first: np.ndarray
    to_last: np.ndarray
    from_first: np.ndarray
    from_last: np.ndarray


@lru_cache(maxsize=32)
def window_states(w: int) -> WindowStates:
    """The state maps of w-token windows (cached per w)."""
    cells = np.arange(1 << w)
    half = 1 << (w - 1)
    first, last = cells >> 1, cells & (half - 1)
    to_first = np.zeros((half, 1 << w))
    to_first[first, cells] = 1.0
    to_last = np.zeros((half, 1 << w))
    to_last[last, cells] = 1.0
    arrays = (first, last, to_first, to_last, np.ascontiguousarray(to_first.T), np.ascontiguousarray(to_last.T))
    for a in arrays:
        a.setflags(write=False)
    return WindowStates(*arrays)


def onto_first(x: np.ndarray) -> np.ndarray:
    """Σ over the last token of windows x (..., 2^w): a function of their first w−1 tokens (state j >> 1). Each
    state sums exactly two windows, so the result does not depend on the order of summation."""
    return x[..., 0::2] + x[..., 1::2]


def onto_last(x: np.ndarray) -> np.ndarray:
    """Σ over the first token of windows x (..., 2^w): a function of their last w−1 tokens (state j mod 2^(w−1))."""
    half = x.shape[-1] >> 1
    return x[..., :half] + x[..., half:]
