"""Exact finite-n maximum-entropy fit by IPF on the junction tree of the constraint graph (fit method ``ipf``):
linear in n. The state of one fit is a ``_CliqueChain``; the stopping and facial-reduction rules are ``convergence``'s.

When every constraint spans at most w consecutive tokens, the maximum-entropy law of x ∈ {0,1}^n is a Gibbs law
on the chain of cliques C_t = {t, …, t+w−1}, t = 0..K−1 (K = n−w+1), with one potential per position:

    P(x) = Π_t ψ_t(x_{C_t}) / Z

IPF started from the uniform table multiplies the whole table by target/current on one constrained marginal; that
factor depends only on tokens of some clique, so it is folded into that clique's potential: the iterates keep this
form and are the iterates of the 2^n-table IPF, without the table. Current clique marginals come from forward and
backward messages over the chain (state: the w−1 tokens two neighbouring cliques share), normalised to sum 1:

    F_0 = 1,       F_{t+1}(x_{t+1..t+w−1}) ∝ Σ_{x_t} F_t(x_{t..t+w−2}) ψ_t(x_{t..t+w−1})
    R_{K−1} = 1,   R_{t−1}(x_{t..t+w−2}) ∝ Σ_{x_{t+w−1}} ψ_t(x_{t..t+w−1}) R_t(x_{t+1..t+w−1})
    μ_t(x_{C_t}) ∝ F_t(x_{t..t+w−2}) ψ_t(x_{C_t}) R_t(x_{t+1..t+w−1})

A step on a constraint inside C_t rescales ψ_t and μ_t by the same factor target/current (0/0 := 0); μ_t stays exact
because F_t and R_t do not depend on ψ_t, so several steps at one clique need no new messages.

Schedule: sweeps alternate forward (t = 0..K−1) and backward. At clique t, μ_t is formed from the message just
passed on by the previous clique and the cached message of the side not yet swept (exact: nothing there changed
since it was computed); up to ``inner`` cyclic passes over every constraint inside C_t follow (none when all are
within tol/10 already), then the message to the next clique. Any number of passes is a sequence of IPF steps, so the
limit is the I-projection of the uniform table onto the constraints: the maximum-entropy law.

Stopping: the largest error met on entering the cliques of a sweep below ``tol``, confirmed by a pass without updates
that gives ``max_error`` of the returned law and P(0^n) = μ_0(0^w) Π_{t>=1} μ_t(0^w) / (μ_t(0^w) + μ_t(0^{w−1}1))
(junction-tree identity, stable in n); ``max_iter`` caps the sweeps. Structural zeros are zero target cells. Boundary
solutions (zeros forced without a zero target: IPF converges like 1/t) get facial reduction by linear programs over
clique marginals consistent on separators (exact on a junction tree). Warm start (``init``): potentials that are
products of functions of constrained marginals (e.g. a shorter chain's, middle clique repeated: ``extend_potentials``)
keep IPF in the same exponential family, hence the same limit; a first pass only measures. Cost per sweep:
O(K · 2^w · constraints per clique · inner) per distinct expert, vectorised over experts (docs/MODEL.md §2.3.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...errors import InfeasibleError, ParameterError
from .convergence import largest_support, stalled, turned_sublinear
from .tables import onto_first, onto_last, pattern_index, table_layout, window_states

__all__ = ["ChainResult", "chain_ipf", "chain_table", "clear_plans", "extend_potentials", "MAX_CHAIN_WIDTH"]

MAX_CHAIN_WIDTH = 20
_MAX_BYTES = 2 << 30
_ONEHOT_MAX_WIDTH = 10  # marginals by one-hot matrix products up to cliques of 2^10 cells, by reshape-sums above
_LP_MAX_CELLS = 1 << 14  # facial reduction by linear programs when K·2^w is at most this
_TINY = np.finfo(float).tiny  # floor of a current marginal in target/current (0/0 := 0)
_LOG_TINY = math.log(_TINY)


@dataclass(frozen=True)
class ChainResult:
    """``p_zero`` (G,): P(x = 0…0). ``potentials`` and ``marginals`` (K, G, 2^w): ψ_t and μ_t, first token of the
    clique in the most significant bit. ``max_error``: the largest constraint violation of the returned law, at
    ``worst`` = (group, constraint index)."""

    p_zero: np.ndarray
    potentials: np.ndarray
    marginals: np.ndarray
    iterations: int
    max_error: float
    converged: bool
    worst: tuple


class _Layout:
    """The constraints inside one clique of w tokens, at given local positions (shared by all cliques with the
    same arrangement): per constraint its cells' pattern index and one-hot map (small cliques) or reshape layout
    (wide cliques); the stacked one-hot map of all of them and their column offsets."""

    def __init__(self, locals_: tuple, w: int):
        cells = np.arange(1 << w)
        self.maps, sizes = [], []
        for local in locals_:
            pattern = pattern_index(w, local)
            if w > _ONEHOT_MAX_WIDTH:
                self.maps.append((pattern, None, table_layout(w, local)))
            else:
                onehot = np.zeros((1 << w, 1 << len(local)))
                onehot[cells, pattern] = 1.0
                self.maps.append((pattern, onehot, None))
            sizes.append(1 << len(local))
        small = w <= _ONEHOT_MAX_WIDTH and locals_
        self.stacked = np.concatenate([m[1] for m in self.maps], axis=1) if small else None
        self.offsets = np.cumsum([0] + sizes)[:-1]

    def marginals(self, mu: np.ndarray) -> np.ndarray:
        """All constrained marginals of clique laws mu (..., G, 2^w), side by side."""
        if self.stacked is not None:
            return mu @ self.stacked
        return np.concatenate([_marginal(mu, m) for m in self.maps], axis=-1)


def _marginal(mu: np.ndarray, entry: tuple) -> np.ndarray:
    _, onehot, layout = entry
    if layout is None:
        return mu @ onehot
    shape, axes, _ = layout
    lead = mu.shape[:-1]
    return mu.reshape(lead + shape).sum(axis=tuple(a + len(lead) - 1 for a in axes)).reshape(lead + (-1,))


def _rescale(mu: np.ndarray, entry: tuple, factor: np.ndarray) -> None:
    """μ times a factor on one constrained marginal, by broadcasting over the reshaped clique (wide cliques)."""
    shape, _, fshape = entry[2]
    mu.reshape((mu.shape[0],) + shape)[...] *= factor.reshape((mu.shape[0],) + fshape)


@lru_cache(maxsize=64)
def _plan(n: int, positions: tuple) -> tuple:
    """Width w, clique count K and, per clique, the indices of the constraints inside it and their shared
    :class:`_Layout`."""
    w = min(max(p[-1] - p[0] + 1 for p in positions), n)
    k = n - w + 1
    inside: list = [[] for _ in range(k)]
    for i, p in enumerate(positions):
        for t in range(max(p[-1] - w + 1, 0), min(p[0], k - 1) + 1):
            inside[t].append(i)
    layouts: dict = {}
    cliques = []
    for t in range(k):
        locals_ = tuple(tuple(q - t for q in positions[i]) for i in inside[t])
        if locals_ not in layouts:
            layouts[locals_] = _Layout(locals_, w)
        cliques.append((tuple(inside[t]), layouts[locals_]))
    return w, k, tuple(cliques)


def _pass_shrink(targets: list) -> float:
    """−log of the factor by which one pass of IPF steps over these constraints can at most shrink a cell (inf if a
    target cell is 0). A step multiplies the cells of pattern p by target_p / m_p with m_p <= Σμ <= max(1, largest
    target row sum); the factor 2 absorbs rounding. So a clique law whose smallest cell is μ_min keeps every cell,
    hence every marginal, above μ_min · exp(−passes · shrink) throughout its passes."""
    smallest = min((float(t.min()) for t in targets), default=1.0)
    mass = max([1.0] + [float(t.sum(axis=1).max()) for t in targets])
    return len(targets) * -math.log(smallest / (2 * mass)) if smallest > 0 else math.inf


def clear_plans() -> None:
    """Forget the cached clique plans (for timing, or to release memory)."""
    _plan.cache_clear()


class _CliqueChain:
    """The finite chain of K clique potentials ψ_t of one fit: forward and backward messages, clique marginals μ_t,
    and the IPF sweeps over it (all distinct experts at once)."""

    def __init__(self, n, positions, targets, tol, inner, init):
        self.w, self.k, self.cliques = _plan(n, positions)
        self.g = targets[0].shape[0]
        cells, self.half = 1 << self.w, 1 << (self.w - 1)
        need = 3 * self.k * self.g * cells * 8
        if self.w > MAX_CHAIN_WIDTH or need > _MAX_BYTES:
            raise ParameterError(f"IPF on the junction tree needs cliques of {self.w} tokens here "
                                 f"({need / 2**30:.1f} GiB for {self.g} distinct experts); use method='junction' "
                                 f"or fewer lags")
        self.positions, self.tol, self.inner = positions, tol, inner
        self.targets = [np.asarray(t, dtype=float) for t in targets]
        # cliques with the same layout and targets (the interior of a stationary constraint set) form one class
        self.classes: dict = {}
        self.of: list = []  # per clique its class: (layout, joined targets, members, cliques, steps, needed, shrink)
        for t, (members, layout) in enumerate(self.cliques):
            key = (id(layout),) + tuple(id(self.targets[i]) for i in members)
            if key not in self.classes:
                joined = np.concatenate([self.targets[i] for i in members], axis=1) if members else None
                # one-hot maps (small cliques): (target, one-hot map, pattern index) per step; else (target, entry)
                steps = [(self.targets[i], entry[1], entry[0]) if layout.stacked is not None else
                         (self.targets[i], entry) for i, entry in zip(members, layout.maps, strict=True)]
                needed = None if joined is None else joined > tol
                shrink = _pass_shrink([self.targets[i] for i in members])
                self.classes[key] = (layout, joined, members, [], steps, needed, shrink)
            self.classes[key][3].append(t)
            self.of.append(self.classes[key])
        states = window_states(self.w)  # F[j >> 1] and R[j mod 2^(w−1)] spread onto windows j by index (exact)
        self.first, self.last = states.first, states.last
        self.passes = inner if self.w <= _ONEHOT_MAX_WIDTH else 1  # wide: checks between passes cost a pass each
        self.psi = np.ones((self.k, self.g, cells)) if init is None else np.array(init, dtype=float)
        self.fwd = np.empty((self.k, self.g, self.half))
        self.fwd[0] = 1.0 / self.half
        self.bwd = np.full((self.k, self.g, self.half), 1.0 / self.half)
        self.mu = np.empty((self.k, self.g, cells))
        if init is not None:
            self.rebuild_backward()

    def rebuild_backward(self) -> None:
        """Backward messages from the current potentials (after a warm start or facial reduction)."""
        self.bwd[-1] = 1.0 / self.half
        for t in range(self.k - 1, 0, -1):
            nxt = onto_first(self.psi[t] * self.bwd[t].take(self.last, axis=1))
            self.bwd[t - 1] = nxt / nxt.sum(axis=1, keepdims=True)

    def _worst(self, t: int, gap: np.ndarray) -> tuple:
        members, layout = self.cliques[t]
        per = np.maximum.reduceat(gap, layout.offsets, axis=1)
        grp, j = np.unravel_index(int(per.argmax()), per.shape)
        return float(per[grp, j]), int(grp), members[j]

    def visit(self, t: int, forward: bool, passes: int) -> float:
        """Form μ_t, run up to ``passes`` IPF passes over the clique's constraints unless they all hold within
        tol/10 already, pass the message on; returns the largest constraint error on entry."""
        layout, joined, members, _, steps, needed, shrink = self.of[t]
        ps = self.psi[t]
        left, right = self.fwd[t].take(self.first, axis=1), self.bwd[t].take(self.last, axis=1)
        mu = ps * left
        mu *= right
        total = mu.sum(axis=1, keepdims=True)
        if not (total > 0).all():
            raise InfeasibleError("the statistics are jointly infeasible: the constraints exclude every activation "
                                  "pattern; check the overlaps and popularity")
        mu /= total
        big = 0.0
        if members:
            marg = layout.marginals(mu)
            big = float(np.abs(marg - joined).max())
        if big >= 0.1 * self.tol:
            low = float(mu.min())  # every cell positive: so is every marginal, none lost
            lost = None if low > 0 else (marg <= 0) & needed
            if lost is not None and lost.any():
                _, grp, ci = self._worst(t, lost.astype(float))
                raise InfeasibleError(
                    f"the statistics are jointly infeasible: tokens {self.positions[ci]} need a pattern that the "
                    f"other constraints exclude (distinct expert group {grp}); check the overlaps and popularity")
            before = mu.copy()
            # no marginal can fall below TINY in these passes: then max(m, TINY) = m, skipped
            clamp = not (low > 0 and math.log(low) - passes * shrink > _LOG_TINY)
            for p in range(passes):
                if layout.stacked is not None:  # one-hot maps: the common case
                    for target, onehot, pattern in steps:
                        m = mu @ onehot
                        if clamp:
                            np.maximum(m, _TINY, out=m)
                        mu *= np.divide(target, m, out=m).take(pattern, axis=1)  # factor[pattern]: exact
                else:
                    for target, entry in steps:
                        _rescale(mu, entry, target / np.maximum(_marginal(mu, entry), _TINY))
                if p + 1 < passes and float(np.abs(layout.marginals(mu) - joined).max()) < 0.1 * self.tol:
                    break
            ps *= mu / before if low > 0 else np.divide(mu, before, out=np.zeros_like(mu), where=before > 0)
        if forward and t + 1 < self.k:
            nxt = onto_last(ps * left)
            self.fwd[t + 1] = nxt / nxt.sum(axis=1, keepdims=True)
        elif not forward and t > 0:
            nxt = onto_first(ps * right)
            self.bwd[t - 1] = nxt / nxt.sum(axis=1, keepdims=True)
        return big

    def sweep(self, forward: bool) -> float:
        """One IPF sweep over the cliques; returns the largest constraint error met on entering them."""
        with np.errstate(invalid="ignore", divide="ignore"):
            big = max(self.visit(t, forward, self.passes) for t in (range(self.k) if forward else
                                                                     range(self.k - 1, -1, -1)))
            np.divide(self.psi, self.psi.max(axis=2, keepdims=True), out=self.psi)
        return big

    def measure(self, forward: bool) -> tuple:
        """Pass messages in one direction without updates (the other side's must be current), then all clique
        marginals μ_t at once. Returns (largest error, per-group largest error, (group, worst constraint))."""
        psi, fwd, bwd = self.psi, self.fwd, self.bwd
        with np.errstate(invalid="ignore", divide="ignore"):
            if forward:
                for t in range(self.k - 1):
                    nxt = onto_last(psi[t] * fwd[t].take(self.first, axis=1))
                    fwd[t + 1] = nxt / nxt.sum(axis=1, keepdims=True)
            else:
                for t in range(self.k - 1, 0, -1):
                    nxt = onto_first(psi[t] * bwd[t].take(self.last, axis=1))
                    bwd[t - 1] = nxt / nxt.sum(axis=1, keepdims=True)
            mu = np.multiply(psi, fwd.take(self.first, axis=2), out=self.mu)
            mu *= bwd.take(self.last, axis=2)
            total = mu.sum(axis=2, keepdims=True)
            if not (total > 0).all():
                raise InfeasibleError("the statistics are jointly infeasible: the constraints exclude every "
                                      "activation pattern; check the overlaps and popularity")
            mu /= total
        group_err, top, worst = np.zeros(self.g), -1.0, (0, 0)
        for layout, joined, _, ts, *_ in self.classes.values():
            if joined is None:
                continue
            gap = np.abs(layout.marginals(mu[ts]) - joined)
            np.maximum(group_err, gap.max(axis=(0, 2)), out=group_err)
            j = int(gap.max(axis=(1, 2)).argmax())
            if float(gap[j].max()) > top:
                top, (_, grp, ci) = float(gap[j].max()), self._worst(ts[j], gap[j])
                worst = (grp, ci)
        return float(group_err.max()), group_err, worst

    def reduce(self, groups) -> None:
        """Facial reduction: zero the clique cells that no distribution with these marginals uses."""
        if self.k << self.w > _LP_MAX_CELLS:
            return
        for grp in groups:
            support = _support(self.w, self.k, self.cliques, [t[grp] for t in self.targets])
            if support is not None:
                self.psi[:, grp] *= support
                self.psi[:, grp] /= self.psi[:, grp].max(axis=1, keepdims=True)
        self.rebuild_backward()


def chain_ipf(n: int, positions, targets, *, tol: float = 1e-9, max_iter: int = 5000, inner: int = 4,
              init=None) -> ChainResult:
    """Fit the maximum-entropy law of n tokens whose marginals on ``positions[i]`` (ascending token tuples) equal
    ``targets[i]`` (G, 2^len, first position in the most significant bit), by IPF on the chain of w-token cliques.
    ``init``: optional starting potentials (K, G, 2^w) inside the exponential family of the constraints."""
    n = int(n)
    positions = tuple(tuple(int(q) for q in p) for p in positions)
    if not positions:
        g = 1 if not len(targets) else targets[0].shape[0]
        ones = np.full((1, g, 2), 0.5)
        return ChainResult(np.full(g, 0.5 ** n), ones, ones, 0, 0.0, True, (0, 0))
    chain = _CliqueChain(n, positions, targets, tol, max(int(inner), 1), init)
    history: list[float] = []
    iterations, forward, converged, reduced = 0, True, False, False
    if init is not None:  # a warm start may already fit
        err = chain.measure(True)
        converged, forward = err[0] < tol, False
    while not converged and iterations < max_iter:
        iterations += 1
        history.append(chain.sweep(forward))
        forward = not forward
        if history[-1] < tol:
            err = chain.measure(forward)
            forward = not forward
            converged = err[0] < tol
        if not converged and not reduced and turned_sublinear(history):
            # the solution lies on the boundary: continue on the largest support any fitting law has
            reduced = True
            chain.reduce(np.flatnonzero(chain.measure(forward)[1] >= tol))
            forward = True
        if stalled(history):
            break
    if not converged:
        err = chain.measure(forward)
    return ChainResult(_zero_pattern(chain.mu), chain.psi, chain.mu, iterations, err[0], bool(err[0] < tol), err[2])


def _zero_pattern(mu: np.ndarray) -> np.ndarray:
    """P(0…0) = μ_0(0^w) Π_{t>=1} μ_t(0^w) / (μ_t(0^w) + μ_t(0^{w−1}1)), the junction-tree factorisation."""
    num = mu[1:, :, 0]
    den = num + mu[1:, :, 1]
    ratio = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    with np.errstate(divide="ignore"):
        return np.exp(np.log(mu[0, :, 0]) + np.log(ratio).sum(axis=0))


def _support(w: int, k: int, cliques, targets) -> np.ndarray | None:
    """0/1 mask (K, 2^w) of the clique cells some distribution with these marginals gives positive probability:
    linear programs over clique marginals consistent on their separators (the local polytope, which on a junction
    tree is the marginal polytope), each maximising the mass on cells not yet known positive. None if infeasible."""
    from scipy.sparse import coo_matrix

    cells, half = 1 << w, 1 << (w - 1)
    j = np.arange(cells)
    rows, cols, vals, rhs = [], [], [], []
    done: set = set()
    for t, (members, layout) in enumerate(cliques):
        for i, (pattern, *_) in zip(members, layout.maps, strict=True):
            if i not in done:
                done.add(i)
                rows.append(len(rhs) + pattern)
                cols.append(t * cells + j)
                vals.append(np.ones(cells))
                rhs.extend(targets[i])
    for t in range(k - 1):  # separator consistency: Σ_b μ_t(b, s) = Σ_b μ_{t+1}(s, b)
        rows += [len(rhs) + (j & (half - 1)), len(rhs) + (j >> 1)]
        cols += [t * cells + j, (t + 1) * cells + j]
        vals += [np.ones(cells), -np.ones(cells)]
        rhs.extend([0.0] * half)
    a_eq = coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(len(rhs), k * cells)).tocsr()
    support = largest_support(a_eq, np.array(rhs))
    return None if support is None else support.reshape(k, cells).astype(float)


def extend_potentials(potentials: np.ndarray, k: int) -> np.ndarray:
    """Potentials (K', G, 2^w) of a shorter chain stretched to K cliques: the first ⌊K'/2⌋ kept at the start, the
    rest at the end, the middle clique repeated in between (a warm start for stationary constraint sets)."""
    kc = potentials.shape[0]
    left = kc // 2
    index = np.concatenate([np.arange(left), np.full(max(k - kc, 0), left), np.arange(left, kc)])[:k]
    return potentials[index]


def chain_table(potentials: np.ndarray) -> np.ndarray:
    """The whole n-token law (G, 2^n) of clique potentials (K, G, 2^w) (for checks; n small)."""
    k, g, cells = potentials.shape
    w = cells.bit_length() - 1
    n = k + w - 1
    x = np.arange(1 << n)
    prob = np.ones((g, 1 << n))
    for t in range(k):
        prob = prob * potentials[t][:, (x >> (n - w - t)) & (cells - 1)]
    return prob / prob.sum(axis=1, keepdims=True)
