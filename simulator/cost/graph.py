"""Ops of a layer as a networkx DAG; the layer's time is its critical path (vectorised over the batch grid).

An op's ``after`` names its predecessors; an empty ``after`` means "the previous op in the list". Two ops with a
common predecessor and no path between them run concurrently (e.g. the MoE combine collective beside the shared
experts), so the longest path decides the layer time. The graph's structure depends only on op names and
dependencies, so it is built once per layer shape and cached.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import networkx as nx
import numpy as np

from .ops import Op


@dataclass(frozen=True)
class Structure:
    order: tuple[str, ...]  # topological order
    preds: tuple[tuple[str, ...], ...]  # predecessors of order[i]
    sinks: tuple[str, ...]


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


@functools.lru_cache(maxsize=256)
def _structure(key: tuple[tuple[str, tuple[str, ...]], ...]) -> Structure:
    ops = [Op(name, "elementwise", after=after) for name, after in key]
    g = layer_graph(ops)
    order = tuple(nx.topological_sort(g))
    return Structure(order, tuple(tuple(g.predecessors(n)) for n in order),
                     tuple(n for n in order if g.out_degree(n) == 0))


def structure(ops) -> Structure:
    return _structure(tuple((op.name, tuple(op.after)) for op in ops))


def critical_path(st: Structure, times: dict[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Elementwise longest path with node weights ``times``.

    Returns the path length and, per node, a 0/1 array saying whether the node lies on the critical path (ties go
    to the first predecessor), so that breakdowns add up to the critical path exactly."""
    finish: dict[str, np.ndarray] = {}
    choice: dict[str, np.ndarray | None] = {}
    for node, preds in zip(st.order, st.preds, strict=True):
        if not preds:
            finish[node] = times[node]
            choice[node] = None
        elif len(preds) == 1:
            finish[node] = finish[preds[0]] + times[node]
            choice[node] = None
        else:
            stack = np.stack([finish[p] for p in preds])
            idx = np.argmax(stack, axis=0)
            finish[node] = np.take_along_axis(stack, idx[None, ...], axis=0)[0] + times[node]
            choice[node] = idx
    stack = np.stack([finish[s] for s in st.sinks])
    last = np.argmax(stack, axis=0)
    total = np.take_along_axis(stack, last[None, ...], axis=0)[0]
    # Walk back from the sinks: a node is on the path where its successor on the path chose it.
    on_path = {n: np.zeros(total.shape) for n in st.order}
    for j, s in enumerate(st.sinks):
        on_path[s] = (last == j).astype(float)
    for node, preds in zip(reversed(st.order), reversed(st.preds), strict=True):
        if not preds:
            continue
        mine = on_path[node]
        if choice[node] is None:
            on_path[preds[0]] = np.maximum(on_path[preds[0]], mine)
        else:
            for j, p in enumerate(preds):
                on_path[p] = np.maximum(on_path[p], mine * (choice[node] == j))
    return total, on_path
