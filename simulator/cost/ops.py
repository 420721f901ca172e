"""*Describe*: turn (model, deployment, workload) into per-layer ops with bytes, FLOPs and op class.

Nothing here knows about a GPU: an :class:`Op` says how much work one kernel does on the busiest GPU (compulsory
bytes, FLOPs, rows, the format's nominal tensor-core path), arrays over the batch grid. What depends on the GPU's
kernels (weight re-reads per tile of rows, the tensor-core fallback of a format the GPU lacks) is priced by
:mod:`simulator.cost.engine`. The costing
lives in :mod:`simulator.cost.engine`. Layers with the same attention kind and FFN kind share one op list
(a :class:`LayerGroup` with a count).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..params import Interval, Param
from ..specs.derived import ffn_matrices
from ..specs.dtypes import ACTIVATION_BYTES, FORMATS, KV_BYTES, padded_width
from ..specs.model import ModelSpec
from .deployment import Deployment

A = ACTIVATION_BYTES


@dataclass(frozen=True)
class Op:
    """One kernel (or fused kernel group) on the busiest GPU; array fields are over the batch grid."""

    name: str
    cls: str  # gemm | moe | attention | elementwise | router | embedding | sampling | collective
    compute: str = "bf16"  # peak-FLOPS key
    variant: str = "any"  # kernel variant: weight format (gemm, moe), KV dtype (attention), "any"
    weight_bytes: np.ndarray | float = 0.0  # compulsory weight bytes (each unique weight once)
    other_bytes: np.ndarray | float = 0.0  # activations, KV cache, state: compulsory HBM traffic
    act_bytes: np.ndarray | float = 0.0  # MoE per-(token, expert) activation traffic (own efficiency)
    working_set: np.ndarray | float = 0.0  # bytes that must stay in L2 for weight re-reads to hit (one tile's)
    flops: np.ndarray | float = 0.0
    rows: np.ndarray | float = 1.0  # GEMM rows / tokens per active expert
    parallel: np.ndarray | float = 1.0  # independent work units (output tiles; request x KV-head pairs)
    experts: np.ndarray | float = 0.0  # unique experts touched on this GPU (moe)
    local_experts: np.ndarray | float = 0  # experts resident on this GPU (moe)
    pairs: np.ndarray | float = 0.0  # (token, expert) pairs on this GPU (moe)
    tokens: np.ndarray | float = 0.0  # tokens processed by the op
    collective: str = ""  # all_reduce | all_to_all | all_gather
    group: int = 1  # GPUs taking part in the collective
    wire_bytes: np.ndarray | float = 0.0  # message bytes of the collective
    calls: int = 1  # kernel launches the op stands for
    after: tuple[str, ...] = ()  # predecessors in the layer DAG (empty: the previous op in list order)


@dataclass(frozen=True)
class LayerGroup:
    key: str  # e.g. "full/moe"
    count: int
    ops: tuple[Op, ...]


@dataclass(frozen=True)
class ExpertLoad:
    """Expert traffic of one MoE layer on the busiest GPU, arrays over the batch grid."""

    unique: np.ndarray  # unique experts touched on the busiest rank
    pairs: np.ndarray  # (token, expert) pairs routed to that rank
    unique_total: np.ndarray  # unique experts over all ranks (for reporting)


# The declarations of the workload's parameters (simulator.params), checked by the entry points that take them
# (cost.step.step_time, specdec.rounds.speculative, the sweep) and mapped to --batch/--tokens/--context by the CLI.
BATCH = Param(Interval(int, 1, None), unit="requests", many=True)
TOKENS = Param(Interval(int, 1, None), unit="new tokens per request", many=True)
CONTEXT = Param(Interval(int, 0, None), unit="cached tokens per request")
CONTEXTS = Param(*CONTEXT.constraints, unit=CONTEXT.unit, many=True)  # one per grid point (cost.step.step_time)
DEFAULT_CONTEXT = 1024  # cached tokens per request when none is given (sweep, explain, step)


@dataclass(frozen=True)
class Workload:
    batch: np.ndarray  # requests (concurrent sequences), shape (n,): BATCH
    tokens: np.ndarray  # new tokens per request in this pass (1 = decode, γ+1 = verify), shape (n,): TOKENS
    context: int | np.ndarray  # tokens already in the KV cache per request: CONTEXT (or one per point: CONTEXTS)

    @property
    def total_tokens(self) -> np.ndarray:
        return self.batch * self.tokens


GEMM_TILE_N = 128  # output columns per CTA tile (docs/MODEL.md: the "parallel" variable of GEMMs)
MOE_ACT_ELEMS = (7, 9)  # activation elements per (token, expert) pair: 7·H + 9·I_local (docs/MODEL.md)


def gemm(name: str, rows, n, k, dtype: str, compute: str, after=()) -> Op:
    """out[rows, n] = x[rows, k] · W[n, k]^T with W in ``dtype`` (n, k may be arrays)."""
    rows, n, k = (np.asarray(v, dtype=float) for v in (rows, n, k))
    wb = n * k * FORMATS[dtype].bytes_per_weight
    return Op(name, "gemm", compute, dtype, weight_bytes=wb, other_bytes=rows * (n + k) * A,
              flops=2.0 * rows * n * k, rows=rows, parallel=n / GEMM_TILE_N, tokens=rows, after=after)




def _narrow(op: Op) -> Op:
    """A GEMM narrower than one column tile is tiled over its rows (a prefill chunk's thousands of tokens): its
    parallelism is the larger of its column and row tiles, so a 8-column projection of 8192 tokens is not priced at
    the efficiency of 0.06 tiles (the column count alone is what `parallel` means for the other GEMMs)."""
    return replace(op, parallel=np.maximum(op.parallel, np.asarray(op.rows, dtype=float) / GEMM_TILE_N))


def _kv_len(model: ModelSpec, kind: str, wl: Workload) -> np.ndarray:
    """Cached tokens one query attends to, after this pass (upper bound for chunked layers)."""
    n = wl.context + np.asarray(wl.tokens, dtype=float)
    a = model.attention
    if kind == "sliding":
        return np.minimum(n, a.window)
    if kind == "chunked":
        return np.minimum(n, a.chunk)
    return n


def attention_ops(model: ModelSpec, dep: Deployment, wl: Workload, kind: str, in_proj: str = "merged") -> list[Op]:
    """Projections + attention core for one layer of kind full/sliding/chunked/linear. ``in_proj``: how the engine
    lays out a four-matrix gated-delta-net input projection (``ops.linear_attention_in_proj`` of its file: "split"
    into four GEMMs or "merged" into two, one op here)."""
    H, a, tp = model.hidden_size, model.attention, dep.tp
    T = wl.total_tokens / dep.dp  # tokens on this GPU's attention group
    B = wl.batch / dep.dp
    wd = dep.attn_dtype
    cd = FORMATS[wd].compute
    kvb = KV_BYTES[dep.kv_dtype]
    ops: list[Op] = []
    if kind == "linear":
        la = a.linear
        qk, v = la.key_heads * la.key_head_dim // tp, la.value_heads * la.value_head_dim // tp
        vh = la.value_heads // tp
        if la.in_projections == 4 and in_proj == "split":  # four GEMMs (qkv, z in the layer's
            # format; b, a of vh columns unquantised: a 128-wide FP8 block cannot be split into 64/tp columns)
            ops += [gemm("attn_in_proj_qkv", T, 2 * qk + v, H, wd, cd), gemm("attn_in_proj_z", T, v, H, wd, cd),
                    *(_narrow(gemm(f"attn_in_proj_{x}", T, vh, H, "bf16", "bf16")) for x in "ba")]
        else:  # merged: in_proj_qkvz and in_proj_ba as one op (their floors paid once)
            ops.append(gemm("attn_in_proj", T, 2 * qk + 2 * v + 2 * vh, H, wd, cd))
        state = B * vh * la.key_head_dim * la.value_head_dim * 4.0  # fp32 recurrent state per request
        ops.append(Op("linear_attention", "attention", "bf16", "bf16",
                      other_bytes=2.0 * state + T * (2 * qk + 3 * v) * A,
                      flops=4.0 * T * vh * la.key_head_dim * la.value_head_dim, rows=T, parallel=B * vh, tokens=T))
        ops.append(gemm("attn_out_proj", T, H, v, wd, cd))
        return ops
    L = _kv_len(model, kind, wl)
    qh = a.q_heads // tp
    if a.kind == "mla":
        qd = a.qk_nope_head_dim + a.qk_rope_head_dim
        lat = a.kv_lora_rank + a.qk_rope_head_dim
        if a.q_lora_rank:  # the engines fuse the two down-projections of the hidden state into one GEMM (TRT-LLM
            # DeepseekV3 "fused_a", SGLang fused_qkv_a_proj_with_mqa, vLLM fused_qkv_a_proj): one floor, not two
            ops.append(gemm("qkv_a_proj", T, a.q_lora_rank + lat, H, wd, cd))
            ops.append(gemm("q_b_proj", T, qh * qd, a.q_lora_rank, wd, cd))
        else:
            ops.append(gemm("q_proj", T, qh * qd, H, wd, cd))
            ops.append(gemm("kv_a_proj", T, lat, H, wd, cd))
        # Absorbed MLA: W_UK folds into the query and W_UV into the output (MQA over the latent cache).
        ops.append(gemm("k_up_absorb", T, qh * a.kv_lora_rank, a.qk_nope_head_dim, wd, cd))
        if a.sparse:  # DeepSeek Sparse Attention (docs/MODEL.md §7): the indexer scores all L cached tokens,
            ops += _indexer_ops(model, T, B, L, wd, cd)  # the attention core reads only the top indexer_topk
            L = np.minimum(L, a.indexer_topk)
        kv = B * L * mla_cache_bytes(model, dep.kv_dtype)
        flops = 2.0 * T * qh * L * (lat + a.kv_lora_rank)
        # The work unit is (request, KV head) as for GQA: the latent is one KV head shared by all query heads
        # (FlashMLA's grid is batch x kv-heads x splits), so the per-unit floor is paid once per request.
        ops.append(Op("attention", "attention", "bf16", dep.kv_dtype,
                      other_bytes=kv + T * qh * (lat + a.kv_lora_rank) * A,
                      flops=flops, rows=T, parallel=B * MLA_KV_HEADS, tokens=T))
        ops.append(gemm("v_up_absorb", T, qh * a.v_head_dim, a.kv_lora_rank, wd, cd))
        ops.append(gemm("o_proj", T, H, qh * a.v_head_dim, wd, cd))
        return ops
    kvh = -(-a.kv_heads // tp)  # KV heads are replicated when tp exceeds their number
    hd = a.head_dim
    ops.append(gemm("qkv_proj", T, (qh * (2 if a.output_gate else 1) + 2 * kvh) * hd, H, wd, cd))
    if a.qk_norm and a.qk_norm_type == "per_layer" and tp > 1:  # the norm over all heads: q and k sums of squares
        ops.append(collective_op("qk_norm_all_reduce", "all_reduce", T * 2 * 4.0, tp))  # (fp32) summed over TP
    kv = B * L * 2 * kvh * hd * kvb
    ops.append(Op("attention", "attention", "bf16", dep.kv_dtype, other_bytes=kv + 2 * T * qh * hd * A,
                  flops=4.0 * T * qh * hd * L, rows=T, parallel=B * kvh, tokens=T))
    ops.append(gemm("o_proj", T, H, qh * hd, wd, cd))
    return ops


MLA_KV_HEADS = 1  # absorbed MLA attends over one latent KV head (MQA)
# An FP8 MLA KV cache. Dense MLA (DeepSeek-V3/R1, Kimi-K2, GLM-4.7-Flash): the 512-value latent and the 64-value
# RoPE key both in fp8 with one per-tensor scale, 576 bytes per token (SGLang mem_cache/memory_pool.py
# set_mla_kv_buffer; vLLM's fp8 MLA cache the same; TensorRT-LLM per-tensor fp8). Only the sparse (DSA/NSA)
# layout FlashMLA's sparse kernels read (DeepSeek-V3.2, GLM-5: SGLang NSATokenToKVPool / nsa_kv_cache_store_fp8,
# vLLM fp8_ds_mla; deepseek-ai/FlashMLA README "FP8 KV cache") keeps 4 fp32 scales per token (one per 128 values)
# and the RoPE part in bf16: 512 + 16 + 128 = 656 bytes.
MLA_FP8_SCALE_BYTES = 4.0 / 128


def mla_cache_bytes(model: ModelSpec, kv_dtype: str) -> float:
    """Bytes of one cached token of one MLA layer: the latent and the RoPE key in ``kv_dtype`` (dense MLA, 576 B in
    fp8); a sparse-attention model's fp8 cache is FlashMLA's sparse layout (one fp32 scale per 128 latent values,
    the RoPE key in bf16: 656 B)."""
    a = model.attention
    if KV_BYTES[kv_dtype] < A and a.sparse:
        return a.kv_lora_rank * (KV_BYTES[kv_dtype] + MLA_FP8_SCALE_BYTES) + a.qk_rope_head_dim * A
    return (a.kv_lora_rank + a.qk_rope_head_dim) * KV_BYTES[kv_dtype]


INDEXER_KEY_BYTES = 1.0 + 4.0 / 128  # DSA indexer keys: fp8 with one fp32 scale per 128 values (DeepSeek-V3.2)


def _indexer_ops(model: ModelSpec, T, B, L, wd: str, cd: str) -> list[Op]:
    """The DSA lightning indexer of one layer, replicated on every attention-TP rank: its projections (query from
    the q latent, one shared key, per-head weights) and the scoring of every cached token,
    2·T·heads·dim·L FLOPs over B·L·dim fp8 keys."""
    a, H = model.attention, model.hidden_size
    ih, idim = a.indexer_heads, a.indexer_head_dim
    return [gemm("indexer_q_proj", T, ih * idim, a.q_lora_rank or H, wd, cd),
            gemm("indexer_k_proj", T, idim + ih, H, wd, cd),
            Op("indexer_scores", "attention", "bf16", "fp8",
               other_bytes=B * L * idim * INDEXER_KEY_BYTES + T * ih * idim * A,
               flops=2.0 * T * ih * idim * L, rows=T, parallel=B * ih, tokens=T)]


def ffn_ops(model: ModelSpec, dep: Deployment, wl: Workload, moe: bool, load: ExpertLoad | None) -> list[Op]:
    """Dense FFN, or router + routed experts (+ shared experts) for one layer."""
    H, f = model.hidden_size, model.ffn
    computes = {"attn": FORMATS[dep.attn_dtype].compute, "moe": FORMATS[dep.dtype].compute}
    m = ffn_matrices(f.gated)
    T_attn = wl.total_tokens / dep.dp
    if not moe:
        inter = f.dense_intermediate // dep.tp
        return [gemm("ffn_up", T_attn, (m - 1) * inter, H, dep.attn_dtype, computes["attn"]),
                gemm("ffn_down", T_attn, H, inter, dep.attn_dtype, computes["attn"])]
    T = wl.total_tokens  # every MoE rank sees all tokens (after all-gather or under attention TP)
    ops = [Op("router", "router", "bf16", "any", weight_bytes=H * f.experts * 2.0,
              other_bytes=T_attn * (H + f.experts) * A,
              flops=2.0 * T_attn * H * f.experts, rows=T_attn, tokens=T_attn)]
    width = padded_width(f.expert_intermediate // dep.moe_tp, FORMATS[dep.dtype])  # mxfp4 shards are padded
    ops.append(experts_op(H, width, m, dep.dtype, computes["moe"], load.unique, load.pairs, f.experts // dep.ep, T))
    if f.shared_experts:
        inter = f.shared_experts * f.shared_intermediate // dep.tp
        ops.append(gemm("shared_up", T_attn, (m - 1) * inter, H, dep.attn_dtype, computes["attn"]))
        ops.append(gemm("shared_down", T_attn, H, inter, dep.attn_dtype, computes["attn"]))
    return ops


def experts_op(hidden, width, matrices, dtype: str, compute: str, unique, pairs, local_experts, tokens,
               name: str = "experts") -> Op:
    """Routed experts on one rank: ``unique`` experts touched, ``pairs`` (token, expert) pairs.

    Weights: each touched expert once (the re-reads per extra tile of rows are the kernel's, priced by
    :func:`simulator.cost.engine.op_time`; the working set of a re-read is one expert). Activations:
    7·H + 9·I_local elements per pair (permute, GEMM1 out, SwiGLU, GEMM2 out, finalize), of 1 byte in fp8/fp4
    kernels and 2 bytes otherwise."""
    fmt = FORMATS[dtype]
    unique, pairs = np.asarray(unique, dtype=float), np.asarray(pairs, dtype=float)
    e_bytes = matrices * hidden * width * fmt.bytes_per_weight
    rows = pairs / np.maximum(unique, 1e-12)  # tokens per active expert
    act_elem = 1.0 if fmt.compute in ("fp8", "fp4") else A
    return Op(name, "moe", compute, dtype, weight_bytes=unique * e_bytes,
              act_bytes=pairs * (MOE_ACT_ELEMS[0] * hidden + MOE_ACT_ELEMS[1] * width) * act_elem,
              working_set=e_bytes,
              flops=2.0 * pairs * matrices * hidden * width, rows=rows, experts=unique,
              local_experts=local_experts, pairs=pairs, tokens=tokens, calls=2)


def collective_op(name: str, kind: str, wire_bytes, group: int, after=()) -> Op:
    return Op(name, "collective", "bf16", "any", collective=kind, group=group, wire_bytes=np.asarray(wire_bytes, float),
              after=after)
