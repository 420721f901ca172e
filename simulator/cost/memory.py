"""KV-cache bytes per GPU for the memory check (docs/MODEL.md §3.1, "Memory").

Per layer, for the requests of one attention group (``batch / dp``):

- full attention keeps ``context + tokens`` cached tokens; sliding-window layers at most ``window`` and chunked
  layers at most ``chunk`` of them (the same lengths the attention op reads, :func:`simulator.cost.ops._kv_len`);
- GQA/MHA: ``2 · ceil(kv_heads / tp) · head_dim`` elements per token: a rank keeps its own KV heads, and when
  ``tp`` exceeds the KV heads each head is replicated on ``tp / kv_heads`` ranks (not divided below one head);
- MLA: ``kv_lora_rank + qk_rope_head_dim`` elements per token on *every* rank of the attention group: the latent
  is shared by all heads, so attention TP replicates it instead of dividing it; an fp8 cache is 576 bytes per token,
  656 in FlashMLA's sparse layout for sparse attention (:func:`simulator.cost.ops.mla_cache_bytes`); DeepSeek
  Sparse Attention adds the indexer's
  fp8 key cache, ``indexer_head_dim`` values with one fp32 scale per 128 (``ops.INDEXER_KEY_BYTES``) per token;
- linear attention: the recurrent state, ``value_heads / tp · key_head_dim · value_head_dim`` fp32 per request.
"""

from __future__ import annotations

from ..specs.dtypes import KV_BYTES
from ..specs.model import ModelSpec
from .deployment import Deployment
from .ops import INDEXER_KEY_BYTES, mla_cache_bytes


def kv_tokens(model: ModelSpec, kind: str, length: float) -> float:
    """Cached tokens per request a layer of ``kind`` keeps at sequence length ``length``."""
    a = model.attention
    if kind == "sliding":
        return min(length, a.window)
    if kind == "chunked":
        return min(length, a.chunk)
    return length


def kv_bytes_per_request(model: ModelSpec, dep: Deployment, length: float) -> float:
    """KV cache + recurrent state bytes one request holds on one GPU at ``length`` cached tokens, all layers."""
    a, e = model.attention, KV_BYTES[dep.kv_dtype]
    if a.kind == "mla":
        per_token = mla_cache_bytes(model, dep.kv_dtype)  # replicated under attention TP
        if a.sparse:  # the DSA indexer's key cache, kept whatever the attention cache's dtype
            per_token += a.indexer_head_dim * INDEXER_KEY_BYTES
    else:
        per_token = 2 * -(-a.kv_heads // dep.tp) * a.head_dim * e  # ceil: heads replicated when tp > kv_heads
    total = 0.0
    for kind, _ in model.layer_layout:
        if kind == "linear":
            la = a.linear
            total += la.value_heads // dep.tp * la.key_head_dim * la.value_head_dim * 4.0
        else:
            total += kv_tokens(model, kind, length) * per_token
    return total


def kv_bytes_per_gpu(model: ModelSpec, dep: Deployment, batch: float, tokens: float, context: int) -> float:
    """KV bytes on the busiest GPU for ``batch`` requests (split over ``dp`` attention groups) of ``context``
    cached plus ``tokens`` new tokens each."""
    return batch / dep.dp * kv_bytes_per_request(model, dep, context + tokens)
