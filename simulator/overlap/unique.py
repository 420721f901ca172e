"""Unique experts touched by B requests of n tokens, its spread, and the busiest expert-parallel rank.

With P_e = P_e(x = 0…0) for one request's window and B independent requests:

    U(B, n)      = Σ_e [1 − P_e^B]
    std U(B, n)  = sqrt(Σ_e q_e (1 − q_e)),  q_e = 1 − P_e^B     (experts treated as independent Bernoullis)
    busiest rank = E[max_r C_r],  C_r = Σ_{e on rank r} Bernoulli(q_e)   (Poisson-binomial per rank)
                 = Σ_{x >= 0} [1 − Π_r F_r(x)],  F_r the CDF of C_r    (exact under independence across experts)

Comparison baselines, with their closed-form P_e (the one home of these formulas):

    independent routing           P_e = (1 − π_e)^n      U = Σ_e [1 − (1 − π_e)^(nB)]
    uniform independent (MoESD)   P_e = (1 − k/E)^n      U = E·(1 − (1 − k/E)^(nB))

Every U function takes an array of batch sizes and returns one value per batch size.

Expert placement on R expert-parallel ranks (``PLACEMENTS``, default ``balanced``): ``balanced`` deals experts to
ranks round-robin, rank = e mod R (with popularity sorted most popular first, every rank gets a similar mix, as EP
load balancers aim for); ``contiguous`` puts blocks of consecutive experts on each rank, rank = ⌊e·R/E⌋ (with sorted
popularity: the worst case).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..validation import Interval, check_params

__all__ = [
    "DEFAULT_PLACEMENT",
    "PLACEMENTS",
    "independent_p_zero",
    "uniform_p_zero",
    "unique_experts",
    "unique_experts_std",
    "busiest_rank_experts",
    "rank_placement",
    "independent_unique",
    "uniform_unique",
]

PLACEMENTS = ("balanced", "contiguous")
DEFAULT_PLACEMENT = "balanced"


def uniform_p_zero(experts: int, top_k: int, n_tokens):
    """(1 − k/E)^n: probability that n tokens routed uniformly and independently all miss a given expert (MoESD).
    ``n_tokens`` may be an array (e.g. n·B for B requests)."""
    return (1.0 - top_k / experts) ** n_tokens


def independent_p_zero(popularity, n_tokens: int) -> np.ndarray:
    """(1 − π_e)^n per expert: n tokens routed independently with popularity π all miss expert e."""
    return (1.0 - np.asarray(popularity, dtype=float)) ** n_tokens


def _batches(batch) -> np.ndarray:
    b = np.asarray(batch)
    if b.size == 0 or not np.issubdtype(b.dtype, np.number) or np.any(~np.isfinite(b)) or np.any(b < 1) \
            or np.any(b != np.round(b)):
        raise ParameterError(f"batch sizes must be integers >= 1; got {np.ravel(b)[:8].tolist()}")
    return b.astype(float)


def _used(p_zero, batch) -> tuple:
    b = _batches(batch)
    p0 = np.clip(np.asarray(p_zero, dtype=float), 0.0, 1.0)
    q = 1.0 - np.power(p0[None, :], b.reshape(-1, 1))
    return q, b.shape


def _shaped(values: np.ndarray, shape: tuple):
    out = values.reshape(shape)
    return out[()] if out.ndim == 0 else out


def unique_experts(p_zero, batch=1):
    """U(B, n) = Σ_e [1 − p_zero_e^B] for each batch size B."""
    q, shape = _used(p_zero, batch)
    return _shaped(q.sum(axis=1), shape)


def unique_experts_std(p_zero, batch=1):
    """Standard deviation of the unique-expert count, experts treated as independent Bernoullis."""
    q, shape = _used(p_zero, batch)
    return _shaped(np.sqrt((q * (1 - q)).sum(axis=1)), shape)


def rank_placement(experts: int, ranks: int, kind: str = DEFAULT_PLACEMENT) -> np.ndarray:
    """Expert -> rank map: ``balanced`` (rank = e mod R) or ``contiguous`` blocks (rank = e·R // E, i.e. e // (E/R)
    when R divides E)."""
    check_params("rank_placement", {"experts": experts, "ranks": ranks},
                 {"experts": [Interval(int, 1, None)], "ranks": [Interval(int, 1, None)]})
    if ranks > experts:  # at most one rank per expert
        check_params("rank_placement", {"ranks": ranks}, {"ranks": [Interval(int, 1, experts)]})
    e = np.arange(experts)
    if kind == "balanced":
        return e % ranks
    if kind == "contiguous":
        return e * ranks // experts
    raise ParameterError(f"unknown placement '{kind}': use one of {', '.join(PLACEMENTS)} or an array of rank ids")


def busiest_rank_experts(p_zero, batch=1, ranks: int | None = None, placement=None):
    """Expected number of unique experts on the busiest rank, for each batch size.

    ``placement`` is an array of rank ids (one per expert) or a placement name (``PLACEMENTS``; default
    ``balanced``).
    """
    p0 = np.asarray(p_zero, dtype=float)
    if placement is None or isinstance(placement, str):
        if ranks is None:
            raise ParameterError("busiest_rank_experts needs ranks (or an explicit placement array)")
        place = rank_placement(p0.size, int(ranks), placement or DEFAULT_PLACEMENT)
    else:
        place = np.asarray(placement)
        if place.shape != p0.shape or not np.issubdtype(place.dtype, np.integer) or place.min(initial=0) < 0:
            raise ParameterError(f"placement must hold one non-negative rank id per expert ({p0.size})")
    nranks = int(place.max()) + 1
    q, shape = _used(p0, batch)
    order = np.argsort(place, kind="stable")
    sizes = np.bincount(place, minlength=nranks)
    width = int(sizes.max())
    slot = np.arange(p0.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    padded = np.zeros((q.shape[0], nranks, width))
    padded[:, place[order], slot] = q[:, order]
    pmf = np.zeros((q.shape[0], nranks, width + 1))
    pmf[..., 0] = 1.0
    for j in range(width):
        pj = padded[..., j : j + 1]
        shifted = np.concatenate([np.zeros_like(pj), pmf[..., :-1]], axis=-1)
        pmf = pmf * (1 - pj) + shifted * pj
    cdf = np.minimum(np.cumsum(pmf, axis=-1), 1.0)
    below = np.prod(cdf, axis=1)  # P(max <= x), shape (nb, width + 1)
    return _shaped((1.0 - below[:, :width]).sum(axis=1), shape)


def independent_unique(popularity, n_tokens: int, batch=1):
    """Σ_e [1 − (1 − π_e)^(n·B)]: unique experts under independent routing with this popularity."""
    return unique_experts(independent_p_zero(popularity, int(n_tokens)), batch)


def uniform_unique(experts: int, top_k: int, n_tokens: int, batch=1):
    """E·(1 − (1 − k/E)^(n·B)): MoESD's uniform independent routing."""
    b = _batches(batch)
    return _shaped(experts * (1 - uniform_p_zero(experts, top_k, int(n_tokens) * b)), b.shape)
