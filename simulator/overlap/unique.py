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

Expert placement on R expert-parallel ranks (``PLACEMENTS``, default ``random``): ``balanced`` packs experts
greedily in order of decreasing usage onto the least-used rank with a free slot (EPLB's balanced packing; a load
balancer that knows the popularity); ``contiguous`` puts blocks of consecutive expert indices on each rank,
rank = ⌊e·R/E⌋ (with an index-sorted popularity: the worst case); ``random`` is the expectation over uniformly
random placements, which is what contiguous placement of a real model is with respect to popularity (expert indices
carry no popularity order). Random placement, replicas and group-limited routing: :mod:`.placement`.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..params import Interval, check_params
from . import placement as pl

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

PLACEMENTS = ("balanced", "contiguous", "random")
DEFAULT_PLACEMENT = "random"


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
    q = 1.0 - np.power(_row_p_zero(p0, b), b.reshape(-1, 1))
    return q, b.shape


def _row_p_zero(p0: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``p_zero`` as (1 or len(batch)) × experts: one vector for every batch size, or one row per batch size."""
    if p0.ndim == 1:
        return p0[None, :]
    if p0.ndim != 2 or p0.shape[0] != b.size:
        raise ParameterError(f"p_zero must be one value per expert, or one row per batch size ({b.size} rows); "
                             f"got shape {p0.shape}")
    return p0


def _shaped(values: np.ndarray, shape: tuple):
    out = values.reshape(shape)
    return out[()] if out.ndim == 0 else out


def unique_experts(p_zero, batch=1):
    """U(B, n) = Σ_e [1 − p_zero_e^B] for each batch size B (``p_zero``: one row per batch size, or one for all)."""
    q, shape = _used(p_zero, batch)
    return _shaped(q.sum(axis=1), shape)


def unique_experts_std(p_zero, batch=1):
    """Standard deviation of the unique-expert count, experts treated as independent Bernoullis."""
    q, shape = _used(p_zero, batch)
    return _shaped(np.sqrt((q * (1 - q)).sum(axis=1)), shape)


def rank_placement(experts: int, ranks: int, kind: str = "balanced") -> np.ndarray:
    """Expert -> rank map by index: ``balanced`` (rank = e mod R) or ``contiguous`` blocks (rank = e·R // E, i.e.
    e // (E/R) when R divides E). ``random`` has no single map (its busiest rank is an expectation)."""
    check_params("rank_placement", {"experts": experts, "ranks": ranks},
                 {"experts": [Interval(int, 1, None)], "ranks": [Interval(int, 1, None)]})
    if ranks > experts:  # at most one rank per expert
        check_params("rank_placement", {"ranks": ranks}, {"ranks": [Interval(int, 1, experts)]})
    e = np.arange(experts)
    if kind == "balanced":
        return e % ranks
    if kind == "contiguous":
        return e * ranks // experts
    raise ParameterError(f"rank_placement: placement '{kind}' has no single map; use balanced or contiguous")


def _order_place(usage: np.ndarray, ranks: int, kind: str, logical: np.ndarray) -> np.ndarray:
    """Rank of every (physical) expert. ``balanced``: EPLB-style greedy packing, in order of decreasing usage (stable)
    each expert goes to the rank with the least usage so far that has a free slot (⌈n/R⌉ slots) and no copy of the
    same logical expert (ties: the lower rank). ``contiguous``: blocks of the index order, rank = ⌊e·R/n⌋."""
    n = usage.size
    if kind == "contiguous":
        return np.arange(n) * ranks // n
    cap = -(-n // ranks)
    load, free = np.zeros(ranks), np.full(ranks, cap)
    held = [set() for _ in range(ranks)]
    place = np.empty(n, dtype=int)
    for e in np.argsort(-usage, kind="stable"):
        ok = (free > 0) & np.array([logical[e] not in h for h in held])
        r = int(np.argmin(np.where(ok if ok.any() else free > 0, load, np.inf)))
        place[e] = r
        load[r] += usage[e]
        free[r] -= 1
        held[r].add(int(logical[e]))
    return place


def busiest_rank_experts(p_zero, batch=1, ranks: int | None = None, placement=None, *, replicas=None,
                         groups=None):
    """Expected number of unique experts on the busiest rank, for each batch size.

    ``placement`` is an array of rank ids (one per expert) or a placement name (``PLACEMENTS``; default
    ``DEFAULT_PLACEMENT``): ``random`` is the exact expectation over uniformly random placements
    (:mod:`.placement`). ``replicas``: copies per expert (EPLB, :func:`.placement.eplb_replicas`); ``groups``:
    (group id per expert, per-request probability that a group is not chosen) for group-limited routing.

    Under the random placement ``p_zero`` (and the groups' probabilities) may hold one row per batch size: every
    point of a (batch, tokens) grid in one vectorised call.
    """
    p0 = np.asarray(p_zero, dtype=float)
    b = _batches(batch)
    name = placement is None or isinstance(placement, str)
    if name and ranks is None:
        raise ParameterError("busiest_rank_experts needs ranks (or an explicit placement array)")
    kind = (placement or DEFAULT_PLACEMENT) if name else None
    if name and kind not in PLACEMENTS:
        raise ParameterError(f"unknown placement '{kind}': use one of {', '.join(PLACEMENTS)} or an array of rank ids")
    if p0.ndim != 1 and kind != "random":
        raise ParameterError("busiest_rank_experts: one p_zero row per batch size needs the random placement")
    logical = np.arange(p0.shape[-1])
    if replicas is not None:
        p0, logical = pl.replica_p_zero(p0, replicas)
    n_phys = p0.shape[-1]
    if name:
        check_params("busiest_rank_experts", {"ranks": ranks}, {"ranks": [Interval(int, 1, n_phys)]})
        if kind == "random" and n_phys % ranks:
            raise ParameterError(f"the 'ranks' parameter of busiest_rank_experts must divide the {n_phys} "
                                 f"(physical) experts for a random placement of equal-sized ranks. Got {ranks} "
                                 f"instead.")
        place = None if kind == "random" else _order_place(1.0 - p0, int(ranks), kind, logical)
    else:
        place = np.asarray(placement)
        if place.shape != p0.shape or not np.issubdtype(place.dtype, np.integer) or place.min(initial=0) < 0:
            raise ParameterError(f"placement must hold one non-negative rank id per expert ({p0.size})")
    q = 1.0 - np.power(_row_p_zero(np.clip(p0, 0.0, 1.0), b), b.reshape(-1, 1))
    group_of = activity = None
    if groups is not None:
        gid, g_zero = (np.asarray(v) for v in groups)
        group_of = gid.astype(int)[logical]
        activity = 1.0 - np.power(_row_p_zero(np.clip(np.asarray(g_zero, dtype=float), 0.0, 1.0), b),
                                  b.reshape(-1, 1))
        for g in range(activity.shape[1]):  # a group is active whenever one of its experts is used
            members = group_of == g
            if members.any():
                activity[:, g] = np.maximum(activity[:, g], q[:, members].max(axis=1))
    if place is None:
        out = pl.random_busiest(q, int(ranks), group_of, activity)
    elif group_of is None:
        out = pl.rank_max(q, place)
    else:
        out = pl.group_busiest(q, place, group_of, activity)
    return _shaped(out, b.shape)


def independent_unique(popularity, n_tokens: int, batch=1):
    """Σ_e [1 − (1 − π_e)^(n·B)]: unique experts under independent routing with this popularity."""
    return unique_experts(independent_p_zero(popularity, int(n_tokens)), batch)


def uniform_unique(experts: int, top_k: int, n_tokens: int, batch=1):
    """E·(1 − (1 − k/E)^(n·B)): MoESD's uniform independent routing."""
    b = _batches(batch)
    return _shaped(experts * (1 - uniform_p_zero(experts, top_k, int(n_tokens) * b)), b.shape)
