"""Ops of a layer as a DAG; the layer's time is its critical path (vectorised over the batch grid).

An op's ``after`` names its predecessors; an empty ``after`` means "the previous op in the list". Two ops with a
common predecessor and no path between them run concurrently (e.g. the MoE combine collective beside the shared
experts), so the longest path decides the layer time. The graph's structure depends only on op names and
dependencies, so it is built once per layer shape and cached. The DAG is a few plain dicts (Kahn's algorithm in
networkx's generation order, so ties on the critical path resolve as they did with networkx; importing networkx
cost ~0.2 s per run).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .ops import Op


@dataclass(frozen=True)
class Structure:
    order: tuple[str, ...]  # topological order
    preds: tuple[tuple[str, ...], ...]  # predecessors of order[i]
    sinks: tuple[str, ...]


def layer_graph(ops: tuple[Op, ...] | list[Op]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(predecessors, successors)`` of each op, keyed by op name in list order; each list in edge order."""
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise ValueError(f"op names within a layer must be unique: {names}")
    for i, op in enumerate(ops):
        after = list(dict.fromkeys(op.after if op.after else ((ops[i - 1].name,) if i else ())))
        for p in after:
            if p not in preds:
                raise ValueError(f"op {op.name!r} depends on {p!r}, which is not an earlier op")
            succs[p].append(op.name)
        preds[op.name], succs[op.name] = after, []
    return preds, succs


def topological_order(preds: dict[str, list[str]], succs: dict[str, list[str]]) -> tuple[str, ...]:
    """Kahn's algorithm by generations (the order of ``networkx.topological_sort``)."""
    indegree = {n: len(p) for n, p in preds.items() if p}
    generation = [n for n, p in preds.items() if not p]
    order: list[str] = []
    while generation:
        order.extend(generation)
        nxt = []
        for node in generation:
            for child in succs[node]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    nxt.append(child)
                    del indegree[child]
        generation = nxt
    return tuple(order)


@functools.lru_cache(maxsize=256)
def _structure(key: tuple[tuple[str, tuple[str, ...]], ...]) -> Structure:
    ops = [Op(name, "elementwise", after=after) for name, after in key]
    preds, succs = layer_graph(ops)
    order = topological_order(preds, succs)
    return Structure(order, tuple(tuple(preds[n]) for n in order), tuple(n for n in order if not succs[n]))


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
    # Walk back from the sinks: a node is on the path where its successor on the path chose it. The 0/1 arrays are
    # never written in place, so a node reached first takes its successor's array as it is (max(0, x) = x for x
    # in {0, 1}) and nodes never reached get zeros at the end.
    on_path: dict[str, np.ndarray] = {}
    if len(st.sinks) == 1:  # one sink (the usual layer: it ends in the residual add) is the path's end everywhere
        total = np.array(finish[st.sinks[0]], dtype=float)
        on_path[st.sinks[0]] = np.ones(total.shape)
    else:
        stack = np.stack([finish[s] for s in st.sinks])
        last = np.argmax(stack, axis=0)
        total = np.take_along_axis(stack, last[None, ...], axis=0)[0]
        for j, s in enumerate(st.sinks):
            on_path[s] = (last == j).astype(float)
    for node, preds in zip(reversed(st.order), reversed(st.preds), strict=True):
        if not preds:
            continue
        mine = on_path.get(node)
        if mine is None:  # not on the path anywhere: adds nothing to its predecessors
            continue
        if choice[node] is None:
            prev = on_path.get(preds[0])
            on_path[preds[0]] = mine if prev is None else np.maximum(prev, mine)
        else:
            for j, p in enumerate(preds):
                part = mine * (choice[node] == j)
                prev = on_path.get(p)
                on_path[p] = part if prev is None else np.maximum(prev, part)
    zero = np.zeros(total.shape)
    return total, {n: on_path.get(n, zero) for n in st.order}
