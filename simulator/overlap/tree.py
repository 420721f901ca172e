"""Draft trees: unique experts when the verify pass scores every node of a tree of drafted tokens (docs/MODEL.md §2.15).

A tree is a parent list (``parents[v]`` = parent of node v, −1 at the root). Two nodes at tree distance d (edges on
the path through their lowest common ancestor) carry the statistics of chain tokens at lag d: popularity π_e and the
pair law p_e(d). Per expert, a law of x ∈ {0,1}^N over the N nodes with these marginals gives P_e(0…0), and
U(B) = Σ_e [1 − P_e(0…0)^B] as for chains.

Methods (``TREE_METHODS``):

- ``latent`` (the default: ``auto`` with any lag given, unless the lag profile looks like binary memory and the
  stationary chain below is cheap, then that chain): the latent-score model (:mod:`.latent`, §2.16): a
  thresholded Gaussian latent per expert, a per-request component plus a Gaussian Markov (AR(1)) process along the
  tree, solved from π_e and p_e(1..D); P_e(0…0) by message passing over the tree (:mod:`.latent_tree`), linear in N,
  every lag used. It carries correlation among three and more nodes (siblings share their parent's latent score).
  When the two-parameter correlation c + (1 − c)·r^d cannot reproduce all given lags, the result states the largest
  overlap misfit.
- ``ipf``: the exact pairwise maximum-entropy law, by IPF on the junction tree of the L-th power of the tree
  (:mod:`.maxent.tree_ipf`); refused (a one-line error) when the cliques (sets of nodes pairwise within distance L)
  would exceed ``MAX_CLIQUE_NODES`` nodes: no lag is dropped.
- ``stationary``: the tree-indexed maximum-entropy-rate chain: every node, given its L nearest ancestors, follows
  the stationary chain of the statistics (the ``junction`` method's chain); nodes off each other's ancestor line are
  independent given their common ancestors. P_e(0…0) = Π_v q_e(min(depth_v, L)). Exact for lag 1, an approximation
  for siblings otherwise.
- ``independent``, ``uniform``: the baselines.

Fits are cached per (statistics, tree, method, persistent component): one fit per distinct set of statistics.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import InfeasibleError, ParameterError
from ..params import Interval, Options, Param, check_params
from .constraints import lag_problems, pair_table
from .latent_union import clear_latent_cache, latent_union
from .maxent import fit_stationary, window_features
from .maxent.junction import block_marginals
from .maxent.markov import markov_p_zero
from .maxent.tree_ipf import ball_sizes, tree_depths, tree_ipf, tree_junction
from .persistent import Persistent
from .predict import OverlapPrediction
from .stats import OverlapStats
from .unique import busiest_rank_experts, independent_unique, uniform_unique, unique_experts, unique_experts_std

__all__ = [
    "MAX_CLIQUE_NODES",
    "MAX_TREE_NODES",
    "TREE_METHODS",
    "Persistent",
    "TreeFit",
    "TreePrediction",
    "check_parents",
    "clear_tree_cache",
    "full_tree",
    "predict_tree",
    "read_parents",
    "tree_p_zero",
]

MAX_TREE_NODES = 4096  # engines verify at most a few hundred draft tokens per request
MAX_CLIQUE_NODES = 12  # ipf: cliques of at most 2^12 cells; a tree and lag set needing more is refused
AUTO_STATIONARY_CELLS = 1 << 13  # auto on binary-memory profiles: stationary when distinct experts × 2^(D+1) <= this
TREE_METHODS = ("auto", "latent", "ipf", "stationary", "independent", "uniform")
BRANCHING = Param(Interval(int, 1, MAX_TREE_NODES), many=True, unit="children per node")


# ---- trees --------------------------------------------------------------------------------------------------------
_VALID: dict[tuple, None] = {}  # parent tuples already checked (a sweep or explain checks one tree hundreds of times)
_VALID_MAX = 256


def check_parents(parents, owner: str = "check_parents") -> tuple:
    """A valid parent list as a tuple of ints: exactly one root (−1), every parent an existing node, no cycles,
    at most MAX_TREE_NODES nodes."""
    if type(parents) is tuple and parents in _VALID:  # checked before (a tuple of plain ints, as returned)
        return parents
    par = _check_parents(parents, owner)
    if len(_VALID) >= _VALID_MAX:
        _VALID.clear()
    _VALID[par] = None
    return par


def _check_parents(parents, owner: str) -> tuple:
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


def _fit_arrays(pi: np.ndarray, pairs: np.ndarray, parents: tuple, method: str, tol: float, max_iter: int,
                top_k: float) -> tuple:
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
    if method in ("auto", "latent"):
        weights = np.bincount(inverse, minlength=first.size).astype(float)
        p0, used, note, misfit, binary = latent_union(gp, gpairs, parents, top_k, weights)
        # the choice depends on the statistics only (every lag given), never on the tree: one model per statistics
        if method == "auto" and binary and given >= 2 and first.size << (given + 1) <= AUTO_STATIONARY_CELLS:
            try:  # the lag profile looks like binary memory: the pairwise chain did better there (§2.16)
                res = _fit_arrays(pi, pairs, parents, "stationary", tol, max_iter, top_k)
                return (*res[:3], f"auto chose the tree-indexed stationary chain (pairwise, every lag): the lag "
                        f"profile looks like binary memory; {note}", 0, 0.0)
            except InfeasibleError:
                pass
        return p0[inverse], "latent", used, note, 0, misfit
    if lags == 1:
        return markov_p_zero(gp, gpairs[:, 0], n)[inverse], method, 1, "", 0, 0.0
    if method == "stationary":
        q = _stationary_q(gp, gpairs, lags, min(tol, 1e-10))
        counts = np.bincount(np.minimum(depth, lags), minlength=lags + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            logq = np.log(q)
        logq[:, counts == 0] = 0.0  # depths no node has add nothing (an always-active expert's q = 0 there: no 0·log 0)
        p0 = np.exp(logq @ counts)
        if not np.all(np.isfinite(p0)):
            raise InfeasibleError(f"the stationary chain of these statistics did not converge with {lags} lags; use "
                                  "method 'latent' (--tree-method latent) or fewer lags")
        return p0[inverse], "stationary", lags, "tree-indexed stationary chain: exact along ancestor lines, siblings " \
            "independent given their common ancestors", 0, 0.0
    used = _largest_lag(parents, lags)
    if used < lags:
        raise ParameterError(f"method 'ipf' would need cliques of more than MAX_CLIQUE_NODES={MAX_CLIQUE_NODES} nodes "
                             f"for lags {used + 1}..{lags} on this {n}-node tree; give at most {used} lags "
                             f"(--overlap) or use method 'latent' (--tree-method latent), which uses every lag",
                             owner="tree_p_zero", param="method")
    targets = {d: pair_table(gp, gpairs[:, d - 1]) for d in range(1, used + 1)}
    res = tree_ipf(parents, used, gp, targets, tol=tol, max_iter=max_iter)
    if not res.converged:
        raise InfeasibleError(f"IPF on the tree did not converge in {res.iterations} sweeps (largest pair error "
                              f"{res.max_error:.2e}); the statistics may be jointly infeasible, or raise max_iter")
    return res.p_zero[inverse], "ipf", used, "", res.iterations, res.max_error


def tree_p_zero(stats: OverlapStats, parents, *, method: str = "auto", persistent: Persistent | None = None,
                tol: float = 1e-9, max_iter: int = 2000) -> TreeFit:
    """P_e(no node of the tree uses e) per expert, for one request whose verify pass scores every node (cached per
    statistics, tree, method and persistent component; the returned array is read-only)."""
    check_params("tree_p_zero", {"method": method, "tol": tol, "max_iter": max_iter},
                 {"method": [Options(TREE_METHODS)], "tol": [Interval(float, 0, 1, closed="neither")],
                  "max_iter": [Interval(int, 1, None)]})
    parents = check_parents(parents, "tree_p_zero")
    return _tree_fit(stats, parents, method, persistent, float(tol), int(max_iter))


@lru_cache(maxsize=512)
def _tree_fit(stats: OverlapStats, parents: tuple, method: str, persistent: Persistent | None, tol: float,
              max_iter: int) -> TreeFit:
    n = len(parents)
    pi = stats.popularity
    if method == "uniform":
        return _frozen(TreeFit(np.full(pi.size, (1 - stats.top_k / stats.experts) ** n), "uniform", n, 0,
                               stats.max_lag))
    pairs = stats.pair_probs
    problems = lag_problems(pi, pairs)
    if problems:
        raise InfeasibleError(f"no process has these lag statistics: {problems[0]}; check the overlaps")
    k = float(stats.top_k)
    if persistent is None:
        p0, used_method, used, note, it, err = _fit_arrays(pi, pairs, parents, method, tol, max_iter, k)
        return _frozen(TreeFit(np.clip(p0, 0, 1), used_method, n, used, stats.max_lag, note, it, err))
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
                                                       method, tol, max_iter, 2 * k)
    p0 = np.clip(p0, 0, 1).reshape(2, -1)
    notes = [note] + notes if note else notes
    return _frozen(TreeFit(weights @ p0, used_method, n, used, stats.max_lag, "; ".join(notes), it, err))


def _frozen(fit: TreeFit) -> TreeFit:
    fit.p_zero.setflags(write=False)
    return fit


def clear_tree_cache() -> None:
    """Forget cached tree fits, subtree shapes, junction trees and chain fits (for timing)."""
    _tree_fit.cache_clear()
    clear_latent_cache()
    tree_junction.cache_clear()
    _Q_CACHE.clear()


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
