"""The busiest expert-parallel rank under a placement, EPLB-style replicas and group-limited routing (MODEL.md §3.2).

Notation: E logical experts, R ranks, q_e = P(expert e is used by the batch) = 1 − P_e^B. Experts are treated as
independent Bernoullis (the approximation of :mod:`.unique`), except within groups under group-limited routing.

Fixed placements (``balanced``, ``contiguous``, or an explicit map): C_r = Σ_{e on r} Bernoulli(q_e) and
E[max_r C_r] = Σ_x [1 − Π_r F_r(x)] by one Poisson-binomial per rank (:func:`rank_max`).

Random placement (``random``): the expectation over uniformly random placements of the n physical experts on R
ranks of m = n/R slots each. A uniformly random bijection of experts to slots maps any used set of size u onto a
uniformly random u-subset of slots, whatever the law of the used set; so

    E_placement E[max_r C_r] = Σ_u P(U = u) · M_{n,R}(u),

with U the number of used experts (Poisson-binomial of q) and M_{n,R}(u) = E[max_r C_r | u] under the multivariate
hypergeometric occupancy of R urns of m slots (exact, :func:`random_max_table`, by a recursion over ranks).

Replicas (``replicas`` c_e ≥ 1 copies of expert e, n = Σc_e physical experts): a request sends all its tokens
routed to e to one replica chosen uniformly at random, so a replica's per-request miss probability is
1 − (1 − P_e)/c_e (:func:`replica_p_zero`). :func:`eplb_replicas` gives the N redundant copies by EPLB's greedy
rule: one at a time to the expert with the largest load per copy.

Group-limited routing (DeepSeek ``n_group``/``topk_group``): a latent activity A_g ~ Bernoulli(a_g) per group
(a_g = P(some token of the batch chose group g), groups independent of each other); given A_g = 1 the experts of
g are used independently with q_e / a_g, given A_g = 0 not at all (the marginals q_e are kept). Fixed placements
average over the 2^G activity patterns; random placement convolves the per-group mixtures.
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import ParameterError

__all__ = ["eplb_replicas", "replica_p_zero", "rank_max", "random_max_table", "random_busiest", "group_busiest",
           "MAX_GROUPS"]

MAX_GROUPS = 12  # group-limited routing enumerates the 2^G activity patterns of the groups


def eplb_replicas(load, redundant: int, ranks: int) -> np.ndarray:
    """Copies per expert (≥ 1) after adding ``redundant`` replicas by EPLB's greedy rule: each new replica goes to
    the expert with the largest ``load`` per copy (ties: the lower index), at most ``ranks`` copies per expert."""
    w = np.asarray(load, dtype=float)
    c = np.ones(w.size, dtype=int)
    if redundant > w.size * (ranks - 1):
        raise ParameterError(f"the 'redundant' parameter of eplb_replicas must be at most {w.size * (ranks - 1)} "
                             f"(one copy of each of {w.size} experts per rank on {ranks} ranks). Got {redundant} "
                             "instead.")
    for _ in range(int(redundant)):
        per = np.where(c < ranks, w / c, -np.inf)
        c[int(np.argmax(per))] += 1
    return c


def replica_p_zero(p_zero, replicas) -> tuple[np.ndarray, np.ndarray]:
    """Per-request miss probability of every physical expert, and its logical expert: the originals 0..E−1 in
    index order, then the extra replicas (hottest first). A replica of e misses with 1 − (1 − P_e)/c_e."""
    p0 = np.asarray(p_zero, dtype=float)
    c = np.asarray(replicas, dtype=int)
    first = p0 if p0.ndim == 1 else p0[0]  # rows of p_zero (one per grid point): ordered by the first row
    extra = np.repeat(np.arange(first.size), c - 1)
    extra = extra[np.argsort(first[extra], kind="stable")]
    logical = np.concatenate([np.arange(first.size), extra])
    return 1.0 - (1.0 - p0[..., logical]) / c[logical], logical


def rank_max(q: np.ndarray, place: np.ndarray) -> np.ndarray:
    """E[max_r C_r] for each row of ``q`` (rows × experts), C_r a Poisson-binomial over the experts on rank r."""
    nranks = int(place.max()) + 1
    order = np.argsort(place, kind="stable")
    sizes = np.bincount(place, minlength=nranks)
    width = int(sizes.max())
    slot = np.arange(place.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    padded = np.zeros((q.shape[0], nranks, width))
    padded[:, place[order], slot] = q[:, order]
    pmf = np.zeros((q.shape[0], nranks, width + 1))
    pmf[..., 0] = 1.0
    for j in range(width):
        pj = padded[..., j : j + 1]
        shifted = np.concatenate([np.zeros_like(pj), pmf[..., :-1]], axis=-1)
        pmf = pmf * (1 - pj) + shifted * pj
    cdf = np.minimum(np.cumsum(pmf, axis=-1), 1.0)
    below = np.prod(cdf, axis=1)  # P(max <= x)
    return (1.0 - below[:, :width]).sum(axis=1)


_DIRECT = 8  # pairs of polynomials up to this length are convolved directly, longer ones through the FFT


def poly_product(polys: np.ndarray) -> np.ndarray:
    """Coefficients of the product of the polynomials ``polys[..., j, :]`` (ascending powers), per leading index:
    (..., k, d+1) -> (..., k·d + 1). Pairwise products over a binary tree (log2 k vectorised steps rather than k):
    short pairs by a direct convolution (exact products of non-negative terms), long ones through the real FFT
    (absolute error ~1e-16 of the largest coefficient; the expectations built on these pmfs move by ~1e-15)."""
    p = np.asarray(polys, dtype=float)
    k, d = p.shape[-2], p.shape[-1] - 1
    width = 1 << max(0, (k - 1).bit_length())
    if width > k:  # pad with the identity polynomial 1
        one = np.zeros(p.shape[:-2] + (width - k, d + 1))
        one[..., 0] = 1.0
        p = np.concatenate([p, one], axis=-2)
    while p.shape[-2] > 1:
        a, b = p[..., 0::2, :], p[..., 1::2, :]
        n = a.shape[-1]
        if n <= _DIRECT:  # out[m] = Σ_i a[i] b[m − i]
            p = np.zeros(a.shape[:-1] + (2 * n - 1,))
            for i in range(n):
                p[..., i : i + n] += a[..., i : i + 1] * b
        else:
            size = 1 << (2 * n - 2).bit_length()
            p = np.fft.irfft(np.fft.rfft(a, size, axis=-1) * np.fft.rfft(b, size, axis=-1), size,
                             axis=-1)[..., : 2 * n - 1]
    return p[..., 0, : k * d + 1]


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])


def _count_pmf(q: np.ndarray) -> np.ndarray:
    """P(U = u), u = 0..n, for U = Σ_e Bernoulli(q_e), per row of ``q``: the coefficients of Π_e (1 − q_e + q_e·z);
    a row whose q_e are all equal (uniform routing) is the binomial pmf in closed form."""
    n = q.shape[-1]
    equal = np.all(q == q[..., :1], axis=-1) if n else np.ones(q.shape[:-1], dtype=bool)
    if not equal.any():
        return poly_product(np.stack([1.0 - q, q], axis=-1))
    pmf = np.empty(q.shape[:-1] + (n + 1,))
    if not equal.all():
        pmf[~equal] = poly_product(np.stack([1.0 - q[~equal], q[~equal]], axis=-1))
    p = q[equal][:, :1]
    u = np.arange(n + 1)
    lf = _log_factorials(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        logpmf = lf[n] - lf[u] - lf[n - u] + np.where(u > 0, u * np.log(p), 0.0) + \
            np.where(u < n, (n - u) * np.log1p(-p), 0.0)
    pmf[equal] = np.exp(logpmf)
    return pmf


@functools.lru_cache(maxsize=64)
def random_max_table(n: int, ranks: int) -> np.ndarray:
    """M(u) = E[max_r C_r] when u of n slots (R ranks × m = n/R slots) are used, uniformly at random; u = 0..n.

    P(max ≤ x | u) by a recursion over ranks: f_R(v) = 1[v ≤ x]; f_r(v) = Σ_c H(c; N_r, m, v) f_{r+1}(v − c) with
    N_r = (R − r + 1)·m free slots and H the hypergeometric pmf of c used slots on rank r."""
    m = n // ranks
    if ranks == 1:
        return np.arange(n + 1, dtype=float)
    logfact = _log_factorials(n)

    def lchoose(a, b):
        return logfact[a] - logfact[b] - logfact[a - b]

    xs = np.arange(m)[:, None]  # thresholds x = 0..m−1 (max > x for x >= m is impossible)
    f = (np.arange(m + 1)[None, :] <= xs).astype(float)  # last rank: v used slots of m
    for r in range(2, ranks + 1):  # r ranks left, N = r·m slots
        big = r * m
        v = np.arange(big + 1)[:, None]
        c = np.arange(m + 1)[None, :]
        ok = (c <= v) & (v - c <= big - m)
        logh = np.where(ok, lchoose(m, c) + lchoose(big - m, np.where(ok, v - c, 0)) - lchoose(big, v), -np.inf)
        h = np.exp(logh)  # (N+1, m+1)
        prev = np.zeros((m, big + 1))
        prev[:, : f.shape[1]] = f
        new = np.zeros((m, big + 1))
        # this rank holds cc <= x used slots: only rows x >= cc and columns v >= cc get a term (elsewhere it is an
        # exact 0, so they are left alone: the same numbers as adding the zeros)
        for cc in range(m):
            new[cc:, cc:] += h[cc:, cc][None, :] * prev[cc:, : big + 1 - cc]
        f = new
    return (1.0 - np.clip(f, 0.0, 1.0)).sum(axis=0)


def random_busiest(q: np.ndarray, ranks: int, group_of=None, activity=None) -> np.ndarray:
    """Σ_u P(U = u) M(u): the busiest rank's expected used experts averaged over uniformly random placements
    (rows of ``q``). With groups, U = Σ_g U_g and U_g is 0 with 1 − a_g, else Poisson-binomial of q_e / a_g."""
    n = q.shape[1]
    if group_of is None:
        pmf = _count_pmf(q)
    else:
        groups = activity.shape[1]
        size = int(np.bincount(group_of, minlength=groups).max())
        member = np.zeros((q.shape[0], groups, size))  # each group's q_e / a_g, padded with never-used experts
        slot = np.argsort(group_of, kind="stable")
        sizes = np.bincount(group_of, minlength=groups)
        member[:, group_of[slot], np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)] = q[:, slot]
        a = activity[:, :, None]
        mix = a * _count_pmf(np.divide(member, a, out=np.zeros_like(member), where=a > 0))  # (rows, G, size+1)
        mix[:, :, 0] += 1.0 - activity
        pmf = poly_product(mix)[:, : n + 1]
    return pmf @ random_max_table(n, ranks)


def group_busiest(q: np.ndarray, place: np.ndarray, group_of: np.ndarray, activity: np.ndarray) -> np.ndarray:
    """E[max_r C_r] under group-limited routing for a fixed placement: the average over the 2^G group-activity
    patterns S (groups independent with P(A_g) = a_g) of the Poisson-binomial maximum with q_e / a_g on the active
    groups' experts."""
    rows, groups = activity.shape
    patterns = (np.arange(2 ** groups)[:, None] >> np.arange(groups)[None, :]) & 1  # (P, G)
    weight = np.prod(np.where(patterns[None, :, :] == 1, activity[:, None, :], 1.0 - activity[:, None, :]),
                     axis=2)  # (rows, P)
    cond = np.divide(q, activity[:, group_of], out=np.zeros_like(q), where=activity[:, group_of] > 0)
    qs = cond[:, None, :] * patterns[None, :, group_of]  # (rows, P, n)
    best = rank_max(qs.reshape(rows * patterns.shape[0], -1), place).reshape(rows, -1)
    return (weight * best).sum(axis=1)
