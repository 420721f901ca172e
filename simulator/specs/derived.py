"""Quantities derived from a model spec by code (never typed in): parameter counts, weight bytes, KV bytes.

Conventions (docs/MODEL.md, "Model specs"): gated FFNs have 3 matrices (gate, up, down), others 2; RMSNorm weights
are counted; biases only where the spec says (``qkv_bias``); MTP modules are excluded from totals (as in the
official DeepSeek-V3 671B figure); the input embedding and LM head are separate matrices unless tied.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .dtypes import FORMATS, KV_BYTES
from .memo import IdentityMemo
from .model import Attention, ModelSpec


def attention_params(a: Attention, hidden: int, kind: str) -> int:
    """Weights of one attention block of layer kind ``kind`` (full/sliding/chunked share the projections)."""
    H = hidden
    if kind == "linear":
        la = a.linear
        qk = la.key_heads * la.key_head_dim
        v = la.value_heads * la.value_head_dim
        proj = H * (2 * qk + 2 * v) + H * 2 * la.value_heads + v * H  # in_proj_qkvz, in_proj_ba, out_proj
        return proj + (2 * qk + v) * la.conv_kernel + la.value_heads * 2 + la.value_head_dim  # conv, A/dt, norm
    if a.kind == "mla":
        qd = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = (H * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.q_heads * qd) if a.q_lora_rank \
            else H * a.q_heads * qd
        kv = H * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank \
            + a.kv_lora_rank * a.q_heads * (a.qk_nope_head_dim + a.v_head_dim)
        # DSA lightning indexer: wq_b (q latent -> heads x dim), wk (+ its norm), per-head weights_proj
        q_in = a.q_lora_rank or H
        indexer = (q_in * a.indexer_heads * a.indexer_head_dim + H * a.indexer_head_dim + 2 * a.indexer_head_dim
                   + H * a.indexer_heads) if a.sparse else 0
        return q + kv + a.q_heads * a.v_head_dim * H + indexer
    q = H * a.q_heads * a.head_dim * (2 if a.output_gate else 1)
    kv = 2 * H * a.kv_heads * a.head_dim
    o = a.q_heads * a.head_dim * H
    bias = (a.q_heads + 2 * a.kv_heads) * a.head_dim if a.qkv_bias else 0
    norm = 2 * a.head_dim if a.qk_norm else 0
    return q + kv + o + bias + norm


def ffn_matrices(gated: bool) -> int:
    return 3 if gated else 2


def expert_params(model: ModelSpec) -> int:
    """Weights of one routed expert."""
    f = model.ffn
    return ffn_matrices(f.gated) * model.hidden_size * f.expert_intermediate


@dataclass(frozen=True)
class ParamCounts:
    embedding: int
    lm_head: int
    attention: int
    dense_ffn: int
    routed_experts: int  # all routed experts, all MoE layers
    routed_active: int  # top_k experts per MoE layer
    shared_experts: int
    router: int
    norms: int
    total: int
    active: int
    moe_layers: int
    dense_layers: int

    def as_dict(self) -> dict:
        return asdict(self)


_COUNTED = IdentityMemo()  # specs are immutable


def param_counts(model: ModelSpec) -> ParamCounts:
    """Parameter counts of ``model`` (memoised per spec object: the sweep's memory checks ask thousands of times)."""
    return _COUNTED.get(model, None, lambda: _param_counts(model))


def _param_counts(model: ModelSpec) -> ParamCounts:
    H, f = model.hidden_size, model.ffn
    m = ffn_matrices(f.gated)
    attn = sum(attention_params(model.attention, H, model.layer_kind(i)) for i in range(model.layers))
    moe_layers = sum(model.is_moe_layer(i) for i in range(model.layers))
    dense_layers = model.layers - moe_layers
    dense = dense_layers * m * H * f.dense_intermediate
    per_expert = m * H * f.expert_intermediate
    routed = moe_layers * f.experts * per_expert
    routed_active = moe_layers * f.top_k * per_expert
    shared = moe_layers * f.shared_experts * m * H * f.shared_intermediate
    router = moe_layers * H * f.experts
    norms = model.layers * 2 * H + H
    emb = model.vocab_size * H
    head = 0 if model.tied_embeddings else model.vocab_size * H
    common = emb + head + attn + dense + shared + router + norms
    return ParamCounts(emb, head, attn, dense, routed, routed_active, shared, router, norms,
                       total=common + routed, active=common + routed_active,
                       moe_layers=moe_layers, dense_layers=dense_layers)


def active_params_official_convention(model: ModelSpec) -> int:
    """Active parameters counted the way the official figure counts them (``official.counts_input_embedding`` and
    ``official.counts_lm_head``)."""
    c = param_counts(model)
    o = model.official
    if o is None:
        return c.active
    return c.active - (0 if o.counts_input_embedding else c.embedding) - (0 if o.counts_lm_head else c.lm_head)


def expert_bytes(model: ModelSpec, dtype: str) -> float:
    """Bytes of one routed expert in weight format ``dtype`` (scales included)."""
    return expert_params(model) * FORMATS[dtype].bytes_per_weight


def weight_bytes(model: ModelSpec, dtype: str) -> float:
    """All weights when linear layers are stored in ``dtype`` and embeddings, LM head, router, norms in bf16."""
    c = param_counts(model)
    b = FORMATS[dtype].bytes_per_weight
    linear = c.attention + c.dense_ffn + c.routed_experts + c.shared_experts
    return linear * b + (c.embedding + c.lm_head + c.router + c.norms) * 2.0


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes one token adds across all layers at full context (sliding/chunked layers counted as full;
    linear-attention layers add nothing per token: they keep a fixed state, see :func:`linear_state_bytes`)."""
    a, e = model.attention, KV_BYTES[kv_dtype]
    total = 0.0
    for i in range(model.layers):
        kind = model.layer_kind(i)
        if kind == "linear":
            continue
        if a.kind == "mla":
            total += (a.kv_lora_rank + a.qk_rope_head_dim) * e
        else:
            total += 2 * a.kv_heads * a.head_dim * e
    return total


def linear_state_bytes(model: ModelSpec) -> float:
    """Recurrent state per request over all linear-attention layers (fp32 state, value_heads × dk × dv)."""
    la = model.attention.linear
    if la is None:
        return 0.0
    n = sum(model.layer_kind(i) == "linear" for i in range(model.layers))
    return n * la.value_heads * la.key_head_dim * la.value_head_dim * 4.0


def derived_summary(model: ModelSpec) -> dict:
    c = param_counts(model)
    out = {
        "total_params": float(c.total),
        "active_params": float(c.active),
        "active_params_official_convention": float(active_params_official_convention(model)),
        "params": {k: float(v) for k, v in c.as_dict().items()},
        "weight_bytes": {d: weight_bytes(model, d) for d in FORMATS},
        "kv_bytes_per_token": {d: kv_bytes_per_token(model, d) for d in KV_BYTES},
        "linear_state_bytes_per_request": linear_state_bytes(model),
    }
    if model.ffn.is_moe:
        out["expert_params"] = float(expert_params(model))
        out["expert_bytes"] = {d: expert_bytes(model, d) for d in FORMATS}
    if model.official is not None:
        o = model.official
        out["official"] = {"total_params": o.total_params, "active_params": o.active_params,
                           "total_error": c.total / o.total_params - 1,
                           "active_error": active_params_official_convention(model) / o.active_params - 1}
    return out
