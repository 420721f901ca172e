"""The scipy-free Brent root finder returns scipy.optimize.brentq's root bit for bit (same iteration), so popularity
and overlap statistics do not move; the layer DAG's order and sinks are networkx's."""

from __future__ import annotations

import math
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq as scipy_brentq

from simulator.cost.graph import _structure
from simulator.cost.ops import Op
from simulator.overlap.brent import brentq
from simulator.overlap.popularity import skew_popularity, water_fill


def _cases():
    return st.tuples(st.floats(-50, 50), st.floats(0.05, 5), st.sampled_from(["cubic", "exp", "tanh", "log"]),
                     st.sampled_from([(2e-12, 8.9e-16, 100), (1e-15, 1e-15, 100), (1e-13, 1e-14, 300),
                                      (1e-3, 1e-6, 50)]))


def _func(kind: str, root: float, scale: float):
    return {"cubic": lambda x: scale * (x - root) ** 3 + (x - root),
            "exp": lambda x: math.expm1(scale * (x - root)),
            "tanh": lambda x: math.tanh(scale * (x - root)) - 1e-3 * (x - root),
            "log": lambda x: math.log1p(abs(x - root)) * math.copysign(1.0, x - root) * scale}[kind]


@settings(max_examples=200, deadline=None)
@given(_cases(), st.floats(0.01, 40), st.floats(0.01, 40))
def test_same_root_as_scipy(case, left, right):
    root, scale, kind, (xtol, rtol, maxiter) = case
    f = _func(kind, root, scale)
    a, b = root - left, root + right
    assert brentq(f, a, b, xtol=xtol, rtol=rtol, maxiter=maxiter) == scipy_brentq(f, a, b, xtol=xtol, rtol=rtol,
                                                                                 maxiter=maxiter)
    assert brentq(f, b, a, xtol=xtol, rtol=rtol) == scipy_brentq(f, b, a, xtol=xtol, rtol=rtol)


def test_errors_like_scipy():
    with pytest.raises(ValueError, match="different signs"):
        brentq(lambda x: x * x + 1, -1.0, 1.0)
    with pytest.raises(RuntimeError, match="converge"):
        brentq(lambda x: x ** 3 - 2, 0.0, 5.0, maxiter=3)
    with pytest.raises(ValueError, match="NaN"):
        brentq(lambda x: math.nan if x > 0.5 else x - 1, 0.0, 2.0)
    assert brentq(lambda x: x, 0.0, 1.0) == 0.0


def test_popularity_unchanged_against_scipy(monkeypatch):
    import simulator.overlap.popularity as pop

    ours = [skew_popularity(128, 8, x) for x in (0.07, 0.118, 0.3, 0.9)] + [
        water_fill([5.0, 1.0, 1.0, 0.5, 0.2, 0.1], 2)]
    monkeypatch.setattr(pop, "brentq", scipy_brentq)
    theirs = [skew_popularity(128, 8, x) for x in (0.07, 0.118, 0.3, 0.9)] + [
        water_fill([5.0, 1.0, 1.0, 0.5, 0.2, 0.1], 2)]
    for a, b in zip(ours, theirs, strict=True):
        assert (a == b).all()


def _nx_structure(ops):
    g = nx.DiGraph()
    for i, op in enumerate(ops):
        g.add_node(op.name)
        for p in op.after if op.after else ((ops[i - 1].name,) if i else ()):
            g.add_edge(p, op.name)
    order = tuple(nx.topological_sort(g))
    return order, tuple(tuple(g.predecessors(n)) for n in order), tuple(n for n in order if g.out_degree(n) == 0)


def test_layer_dag_order_is_networkx_order():
    rng = random.Random(7)
    for _ in range(500):
        names = [f"op{j}" for j in rng.sample(range(40), rng.randint(1, 12))]
        ops = [Op(n, "elementwise", after=tuple(rng.choice(names[:i]) for _ in range(rng.randint(0, 3))) if i else ())
               for i, n in enumerate(names)]
        st_ = _structure(tuple((op.name, tuple(op.after)) for op in ops))
        assert (st_.order, st_.preds, st_.sinks) == _nx_structure(ops)
