"""Decode schedules as engines run them (docs/MODEL.md §3.5): how one layer's ops share the GPU when an engine
overlaps them. The engine file says which schedule runs (``schedule:`` of engines/*.yaml); this module prices it.

**Two-batch overlap** (SGLang's decode strategy, ``batch_overlap/operations_strategy.py``
``_compute_moe_deepseek_blog_decode``, ``tbo_delta_stages=2``; DeepSeek's profile-data decode figure). Each layer
runs as two micro-batches of B/2 on one stream, five stages each, the second two stages behind:

    S1 prepare (input norm, QKV/absorb projections, RoPE; the previous layer's output op)   = A0
    S2 core attention, its output projection, post-attention norm, router                    = A1
    S3 dispatch send, shared experts                                                         = S (+ send)
    S4 dispatch receive, routed experts, combine send                                        = X (+ recv, send)
    S5 combine receive                                                                       = (recv)

A micro-batch's dispatch is in flight beside its own shared experts and the other micro-batch's S1; its combine
beside the other's S2; nothing runs beside the routed-expert GEMMs. DeepEP's low-latency kernels in hook mode put
their send and receive kernels on the compute stream (H_d for a dispatch, H_c for a combine: the wire bytes per rank
over the profile's ``hook_dispatch_rate`` / ``hook_combine_rate``, DeepEP's published send/recv split; 0 where the
profile states none); the rest of a whole call's time (D − H_d, C − H_c) is transfer in flight. Per layer, both
micro-batches:

    T_layer = 2 · [max(S + A0, D − H_d) + H_d + X + max(A1, C − H_c) + H_c]

(A layer without dispatch/combine runs its halves in series: 2 × its path.) Pipeline fill and drain across the
whole step are not priced (a stage of the first and last layer).
"""

from __future__ import annotations

import numpy as np

from ..specs.hardware import HardwareProfile
from .engine import OpCost
from .graph import critical_path, structure

COMM = ("moe_dispatch", "moe_combine")


def _hook(cost: OpCost, op, hw: HardwareProfile, rate: str) -> np.ndarray:
    """The send + receive kernels' SM time of one DeepEP call: wire bytes per rank / the profile's rate."""
    col = hw.kernels.collectives.get(op.collective)
    r = getattr(col, rate, None) if col is not None else None
    if r is None:
        return np.zeros_like(cost.time)
    return np.minimum(np.asarray(op.wire_bytes, dtype=float) / r, cost.time)  # never more than the whole call


def two_batch_layer(ops, costs: list[OpCost], hw: HardwareProfile) -> tuple[np.ndarray, list[np.ndarray]]:
    """Both micro-batches of one layer under two-batch overlap (module docstring), ``costs`` priced at the
    micro-batch. Returns T_layer and each op's weight on the path (the breakdown adds up to T)."""
    names = [c.name for c in costs]
    zero = np.zeros_like(costs[0].time)
    path_len, path = critical_path(structure(ops), {c.name: (zero if c.name in COMM else c.time) for c in costs})
    if not set(COMM) <= set(names):
        return 2.0 * path_len, [2.0 * path[n] for n in names]
    t = {c.name: c.time for c in costs}
    by_name = {op.name: op for op in ops}
    first_core = names.index("attention") if "attention" in names else len(names)
    group = {}
    for i, n in enumerate(names):
        group[n] = ("D" if n == "moe_dispatch" else "C" if n == "moe_combine" else "X" if n == "experts"
                    else "S" if n.startswith("shared_") else "A0" if (i < first_core or n == "residual") else "A1")
    X, D, C = t["experts"], t["moe_dispatch"], t["moe_combine"]
    S = sum((t[n] for n in names if group[n] == "S"), zero)
    A0 = sum((path[n] * t[n] for n in names if group[n] == "A0"), zero)
    A = path_len - X - S  # the compute path holds every compute op in series
    A1 = A - A0
    cost = dict(zip(names, costs, strict=True))
    Hd = _hook(cost["moe_dispatch"], by_name["moe_dispatch"], hw, "hook_dispatch_rate")
    Hc = _hook(cost["moe_combine"], by_name["moe_combine"], hw, "hook_combine_rate")
    d_wait, c_wait = D - Hd, C - Hc
    compute_d, compute_c = d_wait <= S + A0, c_wait <= A1  # the compute beside the transfer sets the stage
    T = 2.0 * (np.maximum(S + A0, d_wait) + Hd + X + np.maximum(A1, c_wait) + Hc)

    def share(part, whole):
        return np.divide(part, whole, out=np.zeros_like(whole), where=whole > 0)

    weight = {"X": 2.0 + zero, "S": 2.0 * compute_d, "A0": 2.0 * compute_d, "A1": 2.0 * compute_c,
              "D": 2.0 * np.where(compute_d, share(Hd, D), 1.0), "C": 2.0 * np.where(compute_c, share(Hc, C), 1.0)}
    return T, [weight[group[n]] * (path[n] if group[n] in ("A0", "A1") else 1.0) for n in names]


# --- shared experts on a second stream -------------------------------------------------------------------------------
ROUTED = ("router", "experts")


def shared_beside_points(hw: HardwareProfile, model, dep, batch, tokens, graphs) -> np.ndarray | None:
    """Per grid point, whether the engine runs the shared experts on a second stream beside the router and routed
    experts (``schedule.shared_experts`` of the release ``hw`` is bound to; attention TP only): within its token
    limit per rank, in graph-replayed passes where it says so (``graphs``: a flag or a bool per point), and not
    where it fuses the shared expert into the routed kernel. None where no point does."""
    rule = hw.engine_spec.schedule.shared_experts if hw.engine_spec is not None else None
    f = model.ffn
    if rule is None or not rule.concurrent or not f.shared_experts or dep.dp > 1 or dep.gpus != dep.tp:
        return None
    if f.experts in rule.fused_routed_experts and f.shared_experts == 1 and dep.ep == 1:
        return None  # fused into the routed kernel: one kernel, in series
    on = np.ones(np.shape(batch), dtype=bool)
    if rule.max_tokens is not None:
        on &= np.asarray(batch, dtype=float) * np.asarray(tokens, dtype=float) / dep.dp <= rule.max_tokens
    if rule.graph_captured:
        on &= np.broadcast_to(np.asarray(graphs, dtype=bool), on.shape)
    return on if on.any() else None


def shared_beside_routed(costs: list[OpCost], length: np.ndarray, weights: list, on: np.ndarray) -> tuple:
    """A layer's path with its shared experts on a second stream where ``on``: the router + routed experts (R + X)
    and the shared experts (S), in series on the path, become one segment of

        max(R + X, S, Σ (t − F))        (F: each kernel's fixed cost; the two streams hide each other's fixed costs,
                                          not their roofline time: they share the GPU's bandwidth and SMs)

    and their path weights scale by segment / (R + X + S). Layers without shared experts are returned as given."""
    names = [c.name for c in costs]
    shared = [i for i, n in enumerate(names) if n.startswith("shared_")]
    routed = [i for i, n in enumerate(names) if n in ROUTED]
    if not shared or len(routed) != len(ROUTED):
        return length, weights
    rx = sum(costs[i].time for i in routed)
    s = sum(costs[i].time for i in shared)
    roof = sum(costs[i].time - costs[i].fixed for i in routed + shared)
    serial = rx + s
    seg = np.maximum(np.maximum(rx, s), roof)
    scale = np.where(on, np.divide(seg, serial, out=np.ones_like(serial), where=serial > 0), 1.0)
    out = list(weights)
    for i in routed + shared:
        out[i] = scale * (1.0 if out[i] is None else out[i])
    return np.where(on, length - serial + seg, length), out
