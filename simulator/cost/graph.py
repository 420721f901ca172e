"""Ops of a layer as a networkx DAG; the layer's time is its critical path (vectorised over the batch grid).

An op's ``after`` names its predecessors; an empty ``after`` means "the previous op in the list". Two ops with a
common predecessor and no path between them run concurrently (e.g. the MoE combine collective beside the shared
expert), so the longest path decides the layer time.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from .ops import Op


def layer_graph(ops: tuple[Op, ...] | list[Op]) -> nx.DiGraph:
    g = nx.DiGraph()
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise ValueError(f"op names within a layer must be unique: {names}")
    for i, op in enumerate(ops):
        g.add_node(op.name)
        preds = op.after if op.after else ((ops[i - 1].name,) if i else ())
        for p in preds:
            if p not in g:
                raise ValueError(f"op {op.name!r} depends on {p!r}, which is not an earlier op")
            g.add_edge(p, op.name)
    return g


def critical_path(g: nx.DiGraph, times: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Elementwise longest path through ``g`` with node weights ``times``.

    Returns the path length and, per node, a 0/1 array saying whether the node lies on the critical path (ties go
    to the first predecessor), so that breakdowns add up to the critical path exactly."""
    finish: dict[str, np.ndarray] = {}
    choice: dict[str, tuple[str | None, np.ndarray]] = {}
    for node in nx.topological_sort(g):
        preds = list(g.predecessors(node))
        if not preds:
            start = np.zeros_like(times[node])
            arg = None
        else:
            stack = np.stack([finish[p] for p in preds])
            idx = np.argmax(stack, axis=0)
            start = np.take_along_axis(stack, idx[None, ...], axis=0)[0]
            arg = (preds, idx)
        finish[node] = start + times[node]
        choice[node] = arg
    sinks = [n for n in g if g.out_degree(n) == 0]
    stack = np.stack([finish[s] for s in sinks])
    last = np.argmax(stack, axis=0)
    total = np.take_along_axis(stack, last[None, ...], axis=0)[0]
    on_path = {n: np.zeros(total.shape) for n in g}
    # Walk back elementwise: `current` holds, per grid point, the index of the node on the path.
    order = list(g)
    index = {n: i for i, n in enumerate(order)}
    current = np.array([index[sinks[j]] for j in last.ravel()]).reshape(total.shape)
    active = np.ones(total.shape, dtype=bool)
    for _ in range(len(order)):
        if not active.any():
            break
        nxt = np.full(total.shape, -1)
        for n in order:
            mask = active & (current == index[n])
            if not mask.any():
                continue
            on_path[n][mask] = 1.0
            arg = choice[n]
            if arg is None:
                continue
            preds, idx = arg
            for j, p in enumerate(preds):
                sel = mask & (idx == j)
                nxt[sel] = index[p]
        active = nxt >= 0
        current = nxt
    return total, on_path
