"""Draft trees: unique experts when the verify pass scores every node of a tree of drafted tokens (docs/MODEL.md §2.15).

A tree is a parent list (``parents[v]`` = parent of node v, −1 at the root). Two nodes at tree distance d (edges on
the path through their lowest common ancestor) carry the statistics of chain tokens at lag d: popularity π_e and the
pair law p_e(d). Per expert, the law of x ∈ {0,1}^N over the N nodes is fitted by maximum entropy under every pair
constraint up to lag L, and P_e(0…0) gives U(B) = Σ_e [1 − P_e(0…0)^B] as for chains.

Methods (``TREE_METHODS``):

- ``ipf``: the exact maximum-entropy law, by IPF on the junction tree of the L-th power of the tree
  (:mod:`.maxent.tree_ipf`). Approximation rule: L is the largest given lag whose cliques (sets of nodes pairwise
  within distance L) hold at most ``MAX_CLIQUE_NODES`` nodes; longer lags are dropped and named in the result.
- ``stationary``: the tree-indexed maximum-entropy-rate chain: every node, given its L nearest ancestors, follows
  the stationary chain of the statistics (the ``junction`` method's chain), so every root-to-leaf path is that
  chain; nodes off each other's ancestor line are independent given their common ancestors. Closed form:
  P_e(0…0) = Π_v q_e(min(depth_v, L)), q(j) = P(x_t = 0 | the j tokens before are 0). Exact for lag 1 (where it is
  the Markov chain on the tree, and the maximum-entropy law of every tree), an approximation for siblings otherwise.
- ``auto``: lag 1 only → the closed form (exact); otherwise ``ipf`` when the fit is small (junction-tree cells ×
  distinct experts ≤ ``AUTO_IPF_CELLS``), else ``stationary`` (stated in the result).
- ``independent``, ``uniform``: the baselines.

Long range (``Persistent``): beyond lag L the maximum-entropy law assumes conditional independence given the window,
so correlation decays as the fitted chain implies. The persistent component adds a per-request working set: each
request draws, per expert, a latent state (hot with probability h, popularity a·π; cold, b·π; h·a + (1−h)·b = 1);
given it, tokens follow the maximum-entropy law with the lift correlation λ'_d = (o(d) − f)/(1 − f) where f is the
floor (the overlap at long lags): P_e(0…0) = h·P_e(0…0 | hot) + (1 − h)·P_e(0…0 | cold), each request independent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import InfeasibleError, ParameterError
from ..validation import Interval, Options, Param, check_params
from .constraints import lag_problems, pair_table
from .maxent import fit_stationary, window_features
from .maxent.junction import block_marginals
from .maxent.markov import markov_p_zero
from .maxent.tree_ipf import ball_sizes, tree_depths, tree_ipf, tree_junction
from .predict import OverlapPrediction
from .stats import OverlapStats
from .unique import busiest_rank_experts, independent_unique, uniform_unique, unique_experts, unique_experts_std

__all__ = [
    "AUTO_IPF_CELLS",
    "MAX_CLIQUE_NODES",
    "MAX_TREE_NODES",
    "TREE_METHODS",
    "Persistent",
    "TreeFit",
    "TreePrediction",
    "check_parents",
    "fit_persistent",
    "full_tree",
    "predict_tree",
    "read_parents",
    "tree_p_zero",
]

MAX_TREE_NODES = 4096  # engines verify at most a few hundred draft tokens per request
MAX_CLIQUE_NODES = 12  # ipf: cliques of at most 2^12 cells; longer lags are dropped (the approximation rule)
AUTO_IPF_CELLS = 1 << 14  # auto: ipf when Σ clique cells × distinct experts is at most this, else stationary
TREE_METHODS = ("auto", "ipf", "stationary", "independent", "uniform")
BRANCHING = Param(Interval(int, 1, MAX_TREE_NODES), many=True, unit="children per node")
FLOOR = Param(Interval(float, 0, 1, closed="neither"))
SHARE_SLACK = 1.01  # Persistent: a share up to 1% above the bound 1/m2 is taken at the bound (fit_persistent clips
# to the bound under the trace's own popularity; a prediction may use a slightly different one, e.g. uniform)


# ---- trees --------------------------------------------------------------------------------------------------------
def check_parents(parents, owner: str = "check_parents") -> tuple:
    """A valid parent list as a tuple of ints: exactly one root (−1), every parent an existing node, no cycles,
    at most MAX_TREE_NODES nodes."""
    arr = np.asarray(parents)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.number) or np.any(arr != np.round(arr)):
        raise ParameterError(f"the 'parents' parameter of {owner} must be a non-empty list of integer node indices "
                             f"(root -1); got {np.ravel(arr)[:8].tolist()}", owner=owner, param="parents")
    n = arr.size
    if n > MAX_TREE_NODES:
        raise ParameterError(f"the tree has {n} nodes, more than MAX_TREE_NODES={MAX_TREE_NODES}; engines verify at "
                             f"most a few hundred draft tokens: use a smaller tree", owner=owner, param="parents")
    par = tuple(int(p) for p in arr)
    loops = [v for v, p in enumerate(par) if p == v]
    if loops:
        raise ParameterError(f"the parent list has a cycle: node {loops[0]} is its own parent; every node must lead to "
                             f"the root", owner=owner, param="parents")
    bad = [v for v, p in enumerate(par) if p < -1 or p >= n]
    if bad:
        v = bad[0]
        raise ParameterError(f"node {v} has parent {par[v]}, which is not a node of the {n}-node tree (parents are "
                             f"indices 0..{n - 1}, -1 for the root)", owner=owner, param="parents")
    roots = [v for v, p in enumerate(par) if p == -1]
    if len(roots) != 1:
        raise ParameterError(f"a tree has exactly one root (parent -1); got {len(roots)} roots", owner=owner,
                             param="parents")
    depth = np.full(n, -1)
    depth[roots[0]] = 0
    for v in range(n):  # walk up from every node; a walk longer than n nodes is a cycle
        path, u = [], v
        while depth[u] < 0:
            path.append(u)
            u = par[u]
            if len(path) > n:
                raise ParameterError(f"the parent list has a cycle through node {v}; every node must lead to the root",
                                     owner=owner, param="parents")
        for i, w in enumerate(reversed(path)):
            depth[w] = depth[u] + i + 1
    return par


def full_tree(branching) -> tuple:
    """Parents of the full tree: the root, b1 children, each with b2 children, … (breadth-first numbering)."""
    BRANCHING.check(list(branching), "branching", "full_tree")
    parents, level = [-1], [0]
    for b in branching:
        if len(parents) + len(level) * int(b) > MAX_TREE_NODES:
            raise ParameterError(f"the tree with branching {list(branching)} has more than MAX_TREE_NODES="
                                 f"{MAX_TREE_NODES} nodes; use smaller branching factors", owner="full_tree",
                                 param="branching")
        nxt = []
        for p in level:
            for _ in range(int(b)):
                parents.append(p)
                nxt.append(len(parents) - 1)
        level = nxt
    return tuple(parents)


def read_parents(path: str) -> tuple:
    """A parent list from a text file: one parent index per node (whitespace or comma separated), root −1."""
    if not os.path.isfile(path):
        raise ParameterError(f"tree file '{path}' not found; give a text file with one parent index per node",
                             owner="read_parents", param="path")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().replace(",", " ").split()
    except (OSError, UnicodeDecodeError) as exc:
        why = "it is not a UTF-8 text file" if isinstance(exc, UnicodeDecodeError) else (exc.strerror or str(exc))
        raise ParameterError(f"tree file '{path}' cannot be read: {why}; give a text file with one parent index per "
                             "node (root -1)", owner="read_parents", param="path") from None
    try:
        values = [int(t) for t in text]
    except ValueError:
        raise ParameterError(f"tree file '{path}': every entry must be an integer parent index (root -1); got "
                             f"{next(t for t in text if not t.lstrip('-').isdigit())!r}", owner="read_parents",
                             param="path") from None
    return check_parents(values, "read_parents")


# ---- the persistent component ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Persistent:
    """Per-request working set: ``floor`` f = the lag overlap at long lags (fraction), ``share`` h = probability that
    an expert is hot in a request (None: the pure working set, cold experts unused, h = Σπ²/(k·f))."""

    floor: float
    share: float | None = None

    def components(self, pi: np.ndarray, top_k: int) -> tuple:
        """(weights (2,), hot/cold popularity (2, E), m2 = E[r²]) of the two latent states."""
        FLOOR.check(self.floor, "floor", "Persistent")
        skew = float(pi @ pi) / top_k
        m2 = self.floor / skew
        if m2 <= 1 + 1e-12:
            return np.array([1.0, 0.0]), np.stack([pi, pi]), 1.0
        h = 1.0 / m2 if self.share is None else float(self.share)
        if 1.0 / m2 < h <= SHARE_SLACK / m2:  # a fitted share at the bound, the popularity slightly different
            h = 1.0 / m2
        if not 0 < h <= 1.0 / m2 + 1e-12:
            raise ParameterError(f"the 'share' parameter of Persistent must be in (0, {1 / m2:.4g}] for floor "
                                 f"{self.floor:g} (Σπ²/k = {skew:.4g}: cold experts would need a negative popularity)"
                                 f"; got {h:g}", owner="Persistent", param="share")
        gap = np.sqrt((m2 - 1) / (h * (1 - h))) if h < 1 else 0.0
        a, b = 1 + (1 - h) * gap, max(1 - h * gap, 0.0)
        return np.array([h, 1 - h]), np.stack([np.minimum(a * pi, 1.0), b * pi]), m2

    def to_dict(self, pi: np.ndarray, top_k: int) -> dict:
        w, comp, _ = self.components(pi, top_k)
        return {"floor": float(self.floor), "share": float(w[0]),
                "hot_boost": float(comp[0].sum() / top_k), "cold_scale": float(comp[1].sum() / top_k)}


def fit_persistent(trace, layer: int = 0) -> Persistent:
    """Estimate the persistent component of one trace layer: each sequence is cut into three segments; per expert,
    E[f1·f2] and E[f1·f2·f3] of the segment frequencies (far apart: independent given the request's latent state)
    pooled over experts give the moments m2 = E[r²], m3 = E[r³] of the popularity ratio r; a two-point r (mean 1)
    with these moments gives the share h, and the floor is f = m2·Σπ²/k."""
    from .traces import activity

    x = activity(trace, layer).astype(float)  # (sequences, tokens, E)
    t = x.shape[1]
    if t < 48:
        raise ParameterError(f"fit_persistent needs sequences of at least 48 tokens (three segments far apart); the "
                             f"trace has {t}", owner="fit_persistent", param="trace")
    seg = t // 3
    f = [x[:, i * seg:(i + 1) * seg].mean(axis=1) for i in range(3)]  # (S, E) each
    pi = x.mean(axis=(0, 1))
    m2 = float((f[0] * f[1]).mean(axis=0).sum() / (pi @ pi))
    m3 = float((f[0] * f[1] * f[2]).mean(axis=0).sum() / (pi ** 3).sum())
    k = trace.top_k
    floor = min(m2 * float(pi @ pi) / k, 1 - 1e-9)
    v = m2 - 1
    if v <= 1e-9:
        return Persistent(floor=max(floor, 1e-9), share=None)
    mu3 = m3 - 3 * m2 + 2
    gamma = mu3 / v ** 1.5
    h = (1 - gamma / np.sqrt(gamma * gamma + 4)) / 2
    return Persistent(floor=floor, share=float(min(max(h, 1e-6), 1 / m2)))


# ---- fits ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TreeFit:
    """``p_zero`` (E,): P_e(no node uses e). ``lags_used``: the lags constrained; ``approximation``: the rule applied
    (empty when the fit is exact)."""

    p_zero: np.ndarray
    method: str
    nodes: int
    lags_used: int
    lags_given: int
    approximation: str = ""
    iterations: int = 0
    max_error: float = 0.0


def _largest_lag(parents: tuple, lags: int) -> int:
    for d in range(lags, 1, -1):
        if ball_sizes(parents, d, MAX_CLIQUE_NODES) is not None:
            return d
    return min(lags, 1)


_Q_CACHE: dict = {}
_Q_CACHE_SIZE = 64
_SEEDS = 8  # experts fitted first; their θ, interpolated in logit π, warm-starts the fit of the rest


def _stationary_q(pi: np.ndarray, pairs: np.ndarray, lags: int, tol: float) -> np.ndarray:
    """q[:, j] = P(x_t = 0 | the j previous tokens are 0), j = 0..L, of the maximum-entropy-rate chain (G, L+1);
    cached per statistics (the chain fit is the cost of method ``stationary``; every tree reuses it)."""
    key = (pi.tobytes(), pairs[:, :lags].tobytes(), lags, tol)
    if key not in _Q_CACHE:
        if len(_Q_CACHE) >= _Q_CACHE_SIZE:
            _Q_CACHE.pop(next(iter(_Q_CACHE)))
        _Q_CACHE[key] = _fit_q(pi, pairs, lags, tol)
        _Q_CACHE[key].setflags(write=False)
    return _Q_CACHE[key]


def _fit_q(pi: np.ndarray, pairs: np.ndarray, lags: int, tol: float) -> np.ndarray:
    w = lags + 1
    const = (pi <= 0) | (pi >= 1) | (np.abs(pairs[:, 0] - pi) <= 1e-12)
    q = np.ones((pi.size, w))
    q[const] = np.where(pi[const] >= 1, 0.0, 1.0)[:, None]
    q[const, 0] = 1 - pi[const]
    rest = np.flatnonzero(~const)
    if rest.size:
        phi, targets, allowed = window_features(w, tuple(range(1, lags + 1)), 0, pi[rest], pairs[rest], None)
        theta0 = np.zeros((rest.size, phi.shape[1]))
        theta0[:, 0] = np.log(pi[rest] / (1 - pi[rest]))
        if rest.size > 2 * _SEEDS:  # warm start: fit _SEEDS experts spread over logit π, interpolate their θ
            order = np.argsort(theta0[:, 0], kind="stable")
            seeds = order[np.linspace(0, rest.size - 1, _SEEDS).round().astype(int)]
            th = fit_stationary(phi, targets[seeds], allowed[seeds], w, theta0=theta0[seeds], tol=1e-6).theta
            x = theta0[seeds, 0]
            theta0 = np.stack([np.interp(theta0[:, 0], x, th[:, j]) for j in range(th.shape[1])], axis=1)
        window = fit_stationary(phi, targets, allowed, w, theta0=theta0, tol=tol).window
        blocks = block_marginals(window)
        for j in range(w):
            q[rest, j] = blocks[j + 1][:, 0] / np.maximum(blocks[j][:, 0], np.finfo(float).tiny)
    return q


def _fit_arrays(pi: np.ndarray, pairs: np.ndarray, parents: tuple, method: str, tol: float, max_iter: int) -> tuple:
    """P(0…0) per row of (π, p(1..L)) on the tree: (p_zero, method, lags used, approximation, iterations, error)."""
    n = len(parents)
    given = pairs.shape[1]
    if method == "independent" or given == 0 or n == 1:
        return (1 - pi) ** n, "independent" if method == "independent" else method, 0, "", 0, 0.0
    keys = np.concatenate([pi[:, None], pairs], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    gp, gpairs = pi[first], pairs[first]
    depth = tree_depths(parents)
    lags = min(given, int(depth.max()) * 2)  # no two nodes are further apart than twice the depth
    note = ""
    if lags == 1:
        return markov_p_zero(gp, gpairs[:, 0], n)[inverse], "markov", 1, "", 0, 0.0
    if method == "auto":
        used = _largest_lag(parents, lags)
        cells = tree_junction(parents, used).cells() * first.size
        method = "ipf" if cells <= AUTO_IPF_CELLS else "stationary"
    if method == "stationary":
        q = _stationary_q(gp, gpairs, lags, min(tol, 1e-10))
        counts = np.bincount(np.minimum(depth, lags), minlength=lags + 1)
        with np.errstate(divide="ignore"):
            p0 = np.exp(np.log(q) @ counts)
        return p0[inverse], "stationary", lags, "tree-indexed stationary chain: exact along ancestor lines, siblings " \
            "independent given their common ancestors", 0, 0.0
    used = _largest_lag(parents, lags)
    if used < lags:
        note = (f"lags {used + 1}..{lags} dropped: the nodes pairwise within distance {used + 1} exceed "
                f"MAX_CLIQUE_NODES={MAX_CLIQUE_NODES}")
    targets = {d: pair_table(gp, gpairs[:, d - 1]) for d in range(1, used + 1)}
    res = tree_ipf(parents, used, gp, targets, tol=tol, max_iter=max_iter)
    if not res.converged:
        raise InfeasibleError(f"IPF on the tree did not converge in {res.iterations} sweeps (largest pair error "
                              f"{res.max_error:.2e}); the statistics may be jointly infeasible, or raise max_iter")
    return res.p_zero[inverse], "ipf", used, note, res.iterations, res.max_error


def tree_p_zero(stats: OverlapStats, parents, *, method: str = "auto", persistent: Persistent | None = None,
                tol: float = 1e-9, max_iter: int = 2000) -> TreeFit:
    """P_e(no node of the tree uses e) per expert, for one request whose verify pass scores every node."""
    check_params("tree_p_zero", {"method": method, "tol": tol, "max_iter": max_iter},
                 {"method": [Options(TREE_METHODS)], "tol": [Interval(float, 0, 1, closed="neither")],
                  "max_iter": [Interval(int, 1, None)]})
    parents = check_parents(parents, "tree_p_zero")
    n = len(parents)
    pi = stats.popularity
    if method == "uniform":
        return TreeFit(np.full(pi.size, (1 - stats.top_k / stats.experts) ** n), "uniform", n, 0, stats.max_lag)
    pairs = stats.pair_probs
    problems = lag_problems(pi, pairs)
    if problems:
        raise InfeasibleError(f"no process has these lag statistics: {problems[0]}; check the overlaps")
    if persistent is None:
        p0, used_method, used, note, it, err = _fit_arrays(pi, pairs, parents, method, tol, max_iter)
        return TreeFit(np.clip(p0, 0, 1), used_method, n, used, stats.max_lag, note, it, err)
    weights, comp, m2 = persistent.components(pi, stats.top_k)
    floor = persistent.floor
    ov = np.asarray(stats.overlaps, dtype=float)
    lam = np.clip((ov - floor) / (1 - floor), 0.0, 1.0)
    notes = []
    if np.any(ov < floor - 1e-12):
        notes.append(f"overlaps below the floor {floor:g} are raised to it")
    rows_pi, rows_pairs = [], []
    for c in comp:
        rows_pi.append(c)
        rows_pairs.append(c[:, None] ** 2 + lam[None, :] * (c - c ** 2)[:, None])
    p0, used_method, used, note, it, err = _fit_arrays(np.concatenate(rows_pi), np.concatenate(rows_pairs), parents,
                                                       method, tol, max_iter)
    p0 = np.clip(p0, 0, 1).reshape(2, -1)
    notes = [note] + notes if note else notes
    return TreeFit(weights @ p0, used_method, n, used, stats.max_lag, "; ".join(notes), it, err)


@dataclass(frozen=True)
class TreePrediction(OverlapPrediction):
    """:class:`OverlapPrediction` of a tree (``n_tokens`` = nodes) with the lags used and the approximation rule."""

    depth: int = 0
    lags_used: int = 0
    lags_given: int = 0
    approximation: str = ""
    persistent: dict | None = None

    def to_dict(self) -> dict:
        out = super().to_dict()
        out.update(nodes=self.n_tokens, depth=self.depth, lags_used=self.lags_used, lags_given=self.lags_given,
                   approximation=self.approximation or None, persistent=self.persistent)
        return out


def predict_tree(stats: OverlapStats, parents, batch=1, *, method: str = "auto",
                 persistent: Persistent | None = None, ranks: int | None = None, placement=None,
                 tol: float = 1e-9, max_iter: int = 2000) -> TreePrediction:
    """Expected unique experts of ``batch`` requests, each verifying the tree's N nodes (independent requests, each
    with its own latent working-set state when ``persistent`` is given)."""
    check_params("predict_tree", {"ranks": ranks}, {"ranks": [Interval(int, 1, None), None]})
    parents = check_parents(parents, "predict_tree")
    fit = tree_p_zero(stats, parents, method=method, persistent=persistent, tol=tol, max_iter=max_iter)
    n = fit.nodes
    busiest = None
    if ranks is not None:
        busiest = busiest_rank_experts(fit.p_zero, batch, ranks=ranks, placement=placement)
    return TreePrediction(
        experts=stats.experts, top_k=stats.top_k, n_tokens=n, batch=batch, method=fit.method,
        unique_experts=unique_experts(fit.p_zero, batch), unique_experts_std=unique_experts_std(fit.p_zero, batch),
        independent=independent_unique(stats.popularity, n, batch),
        uniform=uniform_unique(stats.experts, stats.top_k, n, batch), busiest_rank_experts=busiest, ranks=ranks,
        iterations=fit.iterations, max_error=fit.max_error,
        warnings=(fit.approximation,) if fit.approximation else (),
        depth=int(tree_depths(parents).max()), lags_used=fit.lags_used, lags_given=fit.lags_given,
        approximation=fit.approximation,
        persistent=None if persistent is None else persistent.to_dict(stats.popularity, stats.top_k),
    )
