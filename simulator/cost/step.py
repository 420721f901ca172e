"""*Step*: the wall time of one target forward pass, T(B, s), with a breakdown (docs/MODEL.md, "Step time").

    T(B, s) = Σ_groups count · critical_path(layer DAG) + embedding + final norm + LM head (+ logits gather)
              + sampling + host overhead

Layers with the same (attention kind, FFN kind) share one DAG. Every array is over the batch grid, so one call
costs a whole batch sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import InfeasibleError, ParameterError
from ..params import declare
from ..specs.derived import param_counts, weight_bytes
from ..specs.dtypes import ACTIVATION_BYTES, FORMATS
from ..specs.hardware import HardwareProfile
from ..specs.kernels import A2A_MODES
from ..specs.memo import IdentityMemo
from ..specs.model import ModelSpec
from .deployment import (
    MEMORY_HEADROOM,
    Deployment,
    Mechanisms,
    engine_release,
    resolve_all_to_all,
    two_batch_overlap_on,
    validate,
)
from .engine import OpCost, OpPlan, op_times, plan_ops, step_fixed
from .graph import critical_path, structure
from .imbalance import with_busiest_pairs
from .memory import kv_bytes_per_gpu
from .ops import BATCH, CONTEXT, CONTEXTS, TOKENS, LayerGroup, Op, Workload, attention_ops, collective_op, ffn_ops, gemm
from .routing import OverlapInput, expert_load, layer_overlaps, mean_load
from .schedule import shared_beside_points, shared_beside_routed, two_batch_layer

A = ACTIVATION_BYTES
CLASSES = ("gemm", "moe", "attention", "elementwise", "router", "embedding", "sampling", "collective", "host")


@dataclass(frozen=True)
class StepResult:
    """T(B, s) and its parts, arrays over ``batch`` (seconds, bytes, FLOPs)."""

    batch: np.ndarray
    tokens: np.ndarray  # s per grid point (aligned with batch)
    time: np.ndarray
    breakdown: dict[str, np.ndarray]  # op class -> seconds on the critical path
    hbm_bytes: np.ndarray
    l2_bytes: np.ndarray
    flops: np.ndarray
    compute_bound_time: np.ndarray  # seconds of ops whose compute term exceeds the memory term
    unique_experts: np.ndarray  # per MoE layer (mean over MoE layers), busiest rank
    unique_experts_total: np.ndarray  # per MoE layer (mean over MoE layers), all ranks
    fixed_time: np.ndarray  # seconds of fixed costs on the critical path (floors, host overhead)

    def rows(self, index) -> StepResult:
        """The grid points ``index`` (a slice or an index array) of this result."""
        return StepResult(**{f.name: ({k: v[index] for k, v in x.items()} if isinstance(x, dict) else x[index])
                             for f in fields(self) for x in (getattr(self, f.name),)})

    @property
    def bound(self) -> np.ndarray:
        """'compute', 'memory' or 'fixed' per batch point: the largest share of the critical path."""
        compute = self.compute_bound_time
        memory = self.time - self.fixed_time - compute
        stack = np.stack([compute, memory, self.fixed_time])
        return np.array(["compute", "memory", "fixed"])[np.argmax(stack, axis=0)]


# The Mechanisms fields the step model reads (describe, op_time, step_fixed, the two-batch-overlap stages); the
# others act on a round (padding, round terms, host time, execution modes) and leave T(B, s) unchanged, so a memo of
# step times keys on these alone (simulator.specdec.StepCache; tests/cost/test_step_mechanisms.py checks the rest
# change nothing).
STEP_MECHANISMS = ("routing", "kernel_curves", "fixed_costs", "l2", "two_batch_overlap")


def step_key(mech: Mechanisms) -> tuple:
    """The part of ``mech`` that :func:`step_time` depends on."""
    return tuple(getattr(mech, f) for f in STEP_MECHANISMS)


def describe(model: ModelSpec, dep: Deployment, wl: Workload, mech: Mechanisms,
             overlap: OverlapInput | None = None) -> tuple[list[LayerGroup], list[Op], dict]:
    """Per-layer op groups and the once-per-step ops for this workload (no GPU data: ops describe work; the op
    layout where engines differ is the deployment's engine's, ``ops`` of its release)."""
    in_proj = engine_release(dep).ops.linear_attention_in_proj
    H = model.hidden_size
    T = wl.total_tokens.astype(float)
    T_attn = T / dep.dp
    info: dict = {}
    # MoE layers with the same statistics share one expert load (a pooled profile: one load for every MoE layer)
    distinct, segment, plan = layer_plan(model, overlap)
    loads = [with_busiest_pairs(expert_load(model, dep.ep, wl.batch, wl.tokens, mech.routing, st, dep.placement,
                                            dep.redundant_experts), model.ffn, dep.ep, wl.batch, wl.tokens,
                                mech.routing, st, dep.placement, dep.redundant_experts) for st in distinct]
    if loads:
        info["load"] = mean_load([loads[j] for j in segment])
    groups: dict[str, list] = {}
    for key, count, kind, moe, j in plan:
        load = loads[j] if moe else None
        ops: list[Op] = [Op("pre_norm", "elementwise", other_bytes=2 * T_attn * H * A, tokens=T_attn, calls=2)]
        ops += attention_ops(model, dep, wl, kind, in_proj)
        if dep.tp > 1:
            ops.append(collective_op("attn_all_reduce", "all_reduce", T_attn * H * A, dep.tp))
        ops.append(Op("post_norm", "elementwise", other_bytes=3 * T_attn * H * A, tokens=T_attn, calls=2))
        ffn = ffn_ops(model, dep, wl, moe, load)
        if moe:
            ops += _moe_block(ffn, model, dep, T_attn)
        else:
            ops += ffn
            if dep.tp > 1:
                ops.append(collective_op("ffn_all_reduce", "all_reduce", T_attn * H * A, dep.tp))
        ops.append(Op("residual", "elementwise", other_bytes=3 * T_attn * H * A, tokens=T_attn,
                      after=tuple(_sinks(ops))))
        groups[key] = [count, ops]
    out = [LayerGroup(k, c, tuple(o)) for k, (c, o) in groups.items()]
    return out, head_ops(model, dep, wl), info


_PLANS = IdentityMemo()  # layer_plan's memo per model object and override


def layer_plan(model: ModelSpec, overlap: OverlapInput | None = None) -> tuple:
    """(the distinct statistics of the MoE layers, each MoE layer's index into them, the layer groups in order of
    first appearance as (key, count, attention kind, moe, statistics index)): layers with the same attention kind,
    FFN kind and statistics share one op group (:func:`describe`). Memoised per model object and override (a
    step walks ~100 layers, each compared by its statistics)."""
    return _PLANS.get(model, overlap, lambda: _layer_plan(model, overlap))


def _layer_plan(model: ModelSpec, overlap: OverlapInput | None) -> tuple:
    layer_stats = layer_overlaps(model, overlap) if model.ffn.is_moe else ()
    distinct = list(dict.fromkeys(layer_stats))
    segment = tuple(distinct.index(st) for st in layer_stats)  # which distinct statistics each MoE layer has
    index = iter(segment)
    groups: dict[str, list] = {}
    for kind, moe in model.layer_layout:
        j = next(index) if moe else 0
        key = f"{kind}/{'moe' if moe else 'dense'}" + (f"/stats{j}" if j else "")
        if key in groups:
            groups[key][1] += 1
        else:
            groups[key] = [key, 1, kind, moe, j]
    return tuple(distinct), segment, tuple(tuple(g) for g in groups.values())


def head_ops(model: ModelSpec, dep: Deployment, wl: Workload) -> list[Op]:
    """The once-per-step ops: embedding, final norm, LM head (+ logits gather), sampling."""
    H, V = model.hidden_size, model.vocab_size
    T_attn = wl.total_tokens.astype(float) / dep.dp
    head: list[Op] = [
        Op("embedding", "embedding", other_bytes=T_attn * H * A * 2, tokens=T_attn),
        Op("final_norm", "elementwise", other_bytes=2 * T_attn * H * A, tokens=T_attn),
        gemm("lm_head", T_attn, -(-V // dep.tp), H, "bf16", "bf16"),
    ]
    if dep.tp > 1:
        head.append(collective_op("logits_gather", "all_gather", T_attn * V * A, dep.tp))
    head.append(Op("sampling", "sampling", other_bytes=T_attn * V * 4.0, tokens=T_attn))
    return head


def _moe_block(ffn: list[Op], model: ModelSpec, dep: Deployment, T_attn) -> list[Op]:
    """Router, routed experts and their communication, shared experts.

    Under attention TP (dp = 1) every rank already holds every token: router, routed experts, shared experts, then
    one all-reduce of their sum (the engines' order; their second stream for the shared experts is
    :func:`~.schedule.shared_beside_routed`). Under attention DP tokens are dispatched to, and combined from, the
    expert ranks by all-to-all; the shared experts run after the routed ones, beside the combine."""
    router, experts, *shared = ffn
    H, k = model.hidden_size, model.ffn.top_k
    ops = [router]
    if dep.dp > 1:
        kind = A2A_MODES.get(dep.all_to_all, A2A_MODES["nccl"])  # "auto" unresolved (no profile here): NCCL
        ops += [collective_op("moe_dispatch", kind, T_attn * k * H * dep.dispatch_bytes, dep.gpus),
                experts,
                collective_op("moe_combine", kind, T_attn * k * H * A, dep.gpus, after=("experts",))]
        if shared:
            ops += [replace(shared[0], after=("experts",)), *shared[1:]]
        return ops
    ops += [experts, *shared]
    if dep.gpus > 1:
        ops.append(collective_op("moe_all_reduce", "all_reduce", T_attn * H * A, dep.gpus))
    return ops


def _sinks(ops: list[Op]) -> list[str]:
    return list(structure(ops).sinks)


def resident_weights(model: ModelSpec, dep: Deployment) -> float:
    """Weight bytes per GPU of ``model`` under ``dep``: routed experts (with EPLB replicas) over ep × moe_tp in the
    deployment dtype, everything else over tp (attention and dense layers in ``attn_dtype``; embeddings, LM head,
    router and norms in bf16)."""
    c = param_counts(model)
    fmt = FORMATS[dep.dtype]
    copies = 1 + dep.redundant_experts / model.ffn.experts if model.ffn.experts else 1.0  # EPLB replicas
    experts = (c.routed_experts * copies / dep.ep / dep.moe_tp) * fmt.bytes_per_weight
    rest = weight_bytes(model, dep.attn_dtype) - c.routed_experts * FORMATS[dep.attn_dtype].bytes_per_weight
    return experts + rest / dep.tp


def check_memory(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch_max: float, tokens: float,
                 context: int, extra_weights: float = 0.0) -> dict:
    """Weights + KV of the largest batch must fit in ``MEMORY_HEADROOM`` of HBM on every GPU. ``extra_weights``:
    bytes per GPU resident beside the target's (a drafter's: an MTP module or EAGLE head, which engines load on
    every rank of the target's group; :func:`simulator.specdec.drafters.drafter_weights`)."""
    w = resident_weights(model, dep) + extra_weights
    kv = kv_bytes_per_gpu(model, dep, batch_max, tokens, context)  # window-limited, replicated KV (cost.memory)
    need, have = w + kv, hw.hbm_capacity * MEMORY_HEADROOM
    if need > have:
        drafter = f", drafter {extra_weights / 1e9:.2g} GB of them" if extra_weights else ""
        raise InfeasibleError(
            f"deployment of {model.name} on {dep.gpus}x {hw.name} needs {need / 1e9:.1f} GB per GPU "
            f"(weights {w / 1e9:.1f} GB{drafter} + KV {kv / 1e9:.1f} GB at batch {batch_max:g}, context {context}) "
            f"but {have / 1e9:.1f} GB is usable; use more GPUs (--tp/--ep), a smaller dtype, or a smaller "
            "batch/context")
    return {"weights_per_gpu": w, "kv_per_gpu": kv, "usable": have}


@declare(batch=BATCH, tokens=TOKENS)
def step_time(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, tokens, context=0,
              mech: Mechanisms | None = None, overlap: OverlapInput | None = None,
              check_fit: bool = True) -> StepResult:
    """T(B, s) in seconds, with breakdown, for every grid point.

    ``batch`` and ``tokens`` (s) are scalars or 1-D arrays broadcast against each other: e.g. a batch sweep at one
    s, or a flattened (s, B) grid priced in one call. ``context`` is a scalar, or a 1-D array broadcast with them
    (one cached length per point: `validate tpot` prices a deployment's rows of every context in one call)."""
    (CONTEXTS if np.ndim(context) else CONTEXT).check(context, "context", "step_time")
    mech = mech or Mechanisms()
    hw, dep = resolved(model, hw, dep)
    if check_fit:
        ctx = np.asarray(context)
        check_memory(model, hw, dep, float(np.max(batch)), float(np.max(tokens)), int(ctx.max()))
    return resolved_step(model, hw, dep, batch, tokens, context, mech, overlap)


def resolved(model: ModelSpec, hw: HardwareProfile, dep: Deployment) -> tuple[HardwareProfile, Deployment]:
    """(the profile, the deployment with ``all_to_all`` resolved) after :func:`validate` and the check that ``hw``
    is bound to the deployment's engine release (pricing binds it once, :attr:`simulator.pricing.Scenario.hw`):
    what :func:`resolved_step` takes (a memo of step times does this once per deployment)."""
    validate(model, hw, dep)
    want, have = engine_release(dep), hw.engine_spec  # (an edited release of the same engine and version is fine)
    if have is not want and (have is None or (have.engine, have.version) != (want.engine, want.version)):
        bound = have.label if have is not None else "no engine"
        raise ParameterError(f"the 'hw' parameter of step_time is bound to {bound}, not to the deployment's engine "
                             f"{dep.engine} {dep.engine_version or '(newest)'}; price through a Scenario (its .hw) "
                             "or simulator.pricing.bound(hw, deployment)", owner="step_time", param="hw")
    return hw, resolve_all_to_all(hw, dep)


def resolved_step(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, tokens, context,
                  mech: Mechanisms, overlap: OverlapInput | None = None, eager=None,
                  described: dict | None = None) -> StepResult:
    """:func:`step_time` on inputs already checked, with ``hw, dep`` from :func:`resolved` (no memory check).
    ``eager``: None, or a bool array aligned with the grid whose True points run without CUDA graphs (every
    kernel pays its launch, ``kernels.step.launch_eager``) whatever ``dep.cuda_graphs`` says: a graph-captured
    pass and its eager twin priced in one call. ``described``: a memo of :func:`describe`'s results that the
    caller keeps (and keeps ``model`` alive for: it keys on the model's identity), shared by every GPU a sweep
    prices the same model, deployment and workload on (the ops describe work, not the GPU)."""
    ctx = np.asarray(context)
    batch, tokens = np.broadcast_arrays(np.atleast_1d(np.asarray(batch, dtype=float)),
                                        np.atleast_1d(np.asarray(tokens, dtype=float)))
    if ctx.ndim:  # per-point contexts: every array to one shape
        batch, tokens, ctx = np.broadcast_arrays(batch, tokens, ctx.astype(float))
    batch, tokens = batch.copy(), tokens.copy()
    graphs = dep.cuda_graphs if eager is None or not dep.cuda_graphs else \
        ~np.broadcast_to(np.asarray(eager, dtype=bool), batch.shape)
    wl = Workload(batch, tokens, ctx.copy() if ctx.ndim else int(context))
    groups, head, info = _describe(described, model, dep, wl, mech, overlap)
    # Two-batch overlap: each layer runs as two micro-batches of ⌈B/2⌉ (an odd batch splits one request apart:
    # both priced at the larger half) where every attention rank has two requests to split (elsewhere unsplit: the
    # whole batch stands in for its halves, weighted 0); the once-per-step ops keep the whole batch.
    split = batch / dep.dp >= 2.0 if two_batch_overlap_on(mech, hw, dep) else np.zeros(batch.shape, dtype=bool)
    half = Workload(np.where(split, np.ceil(batch / 2.0), batch), tokens, wl.context)
    halves = _describe(described, model, dep, half, mech, overlap)[0] if split.any() else [None] * len(groups)
    shape = batch.shape
    total = np.zeros(shape)
    breakdown = {c: np.zeros(shape) for c in CLASSES}
    hbm, l2, flops, comp_bound, fixed_sum = (np.zeros(shape) for _ in range(5))

    def account(costs: list[OpCost], weights, count: int, runs=None) -> None:
        """Add each op's path-weighted time, fixed and compute-bound parts (count × weight × part) and its traffic
        (every op, on the path or not: runs × part; ``runs`` defaults to ``count``), op by op. A weight of None is 1
        and a count of 1 is left out: x · 1 is exactly x, so the sums are the same numbers with fewer array
        operations."""
        nonlocal hbm, l2, flops, comp_bound, fixed_sum
        one = isinstance(count, int) and count == 1 and runs is None
        n = count if runs is None else runs
        for c, weight in zip(costs, weights, strict=True):
            w = weight if one else count * weight
            bound = np.where(c.compute > c.memory, c.time - c.fixed, 0.0)
            if w is None:
                breakdown[c.cls] += c.time
                fixed_sum += c.fixed
                comp_bound += bound
            else:
                breakdown[c.cls] += w * c.time
                fixed_sum += w * c.fixed
                comp_bound += w * bound
            if one:
                hbm += c.hbm_bytes
                l2 += c.l2_bytes
                flops += c.flops
            else:
                hbm += n * c.hbm_bytes
                l2 += n * c.l2_bytes
                flops += n * c.flops

    # every op of the step priced in one op_times call (ops of one kernel stacked), then split back per list
    lists = [g.ops for g in groups] + [h.ops for h in halves if h is not None] + [head]
    plan = _plan(described, (id(groups), id(halves) if split.any() else None, id(head), shape), lists, shape)
    priced = iter(op_times(plan.ops, hw, mech, graphs, shape, plan))
    costs_of = {id(ops): [next(priced) for _ in ops] for ops in lists}
    beside = shared_beside_points(hw, model, dep, batch, tokens, graphs)
    for g, half in zip(groups, halves, strict=True):
        costs = costs_of[id(g.ops)]
        length, on_path = critical_path(structure(g.ops), {c.name: c.time for c in costs})
        weights = [on_path[c.name] for c in costs]
        if beside is not None:
            length, weights = shared_beside_routed(costs, length, weights, beside)
        if half is None:
            total += g.count * length
            account(costs, weights, g.count)
            continue
        whole = g.count * (~split)  # points left unsplit, and the split ones: two micro-batches per layer
        total += whole * length
        account(costs, weights, whole)
        half_costs = costs_of[id(half.ops)]
        both, stream = two_batch_layer(half.ops, half_costs, hw)
        total += g.count * split * both
        account(half_costs, stream, g.count * split, runs=2.0 * g.count * split)  # each half-batch op runs twice
    head_costs = costs_of[id(head)]
    for c in head_costs:
        total += c.time
    account(head_costs, [None] * len(head_costs), 1)  # once per step, weight 1
    host = step_fixed(hw, mech, "host_overhead")
    total += host
    breakdown["host"] += host
    fixed_sum += host
    load = info.get("load")
    z = np.zeros(shape)
    return StepResult(batch, tokens, total, breakdown, hbm, l2, flops, comp_bound,  # (copies: a memo keeps load)
                      load.unique.copy() if load is not None else z,
                      load.unique_total.copy() if load is not None else z, fixed_sum)


def _plan(memo: dict | None, key: tuple, lists: list, shape: tuple) -> OpPlan:
    """:func:`~.engine.plan_ops` of the step's ops, through ``memo`` when one is given; ``key``: the identities of
    the memoised describe results the ops come from (alive in the memo, so never recycled) and the grid's shape."""
    hit = memo.get(("plan", *key)) if memo is not None else None
    if hit is None:
        hit = plan_ops([op for ops in lists for op in ops], shape)
        if memo is not None:
            memo[("plan", *key)] = hit
    return hit


def _describe(memo: dict | None, model: ModelSpec, dep: Deployment, wl: Workload, mech: Mechanisms,
              overlap: OverlapInput | None) -> tuple:
    """:func:`describe`, through ``memo`` when one is given (keyed on every input describe reads)."""
    if memo is None:
        return describe(model, dep, wl, mech, overlap)
    ctx = wl.context
    key = (id(model), dep, step_key(mech), overlap, wl.batch.shape, wl.batch.tobytes(), wl.tokens.tobytes(),
           ctx.tobytes() if isinstance(ctx, np.ndarray) else ctx)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = describe(model, dep, wl, mech, overlap)
    return hit
