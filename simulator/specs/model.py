"""Model specs: frozen in-memory form and strict reader. Derived quantities live in :mod:`.derived`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..errors import ConfigError
from .dtypes import WEIGHT_DTYPES
from .routing_profile import ByLayer, RoutingProfile, read_by_layer, read_lags, read_popularity
from .schema import Provenance, Reader

SCHEMA = "model/v1"
ROLES = ("target", "drafter")
ATTENTION_KINDS = ("mha", "gqa", "mla")
LAYER_KINDS = ("full", "sliding", "chunked", "linear")
ROUTERS = ("softmax", "sigmoid")
QK_NORM_TYPES = ("per_head", "per_layer")
TOP_KEYS = ("schema", "name", "display_name", "aliases", "hf_id", "role", "head_of", "description", "sources",
            "official", "max_context", "architecture", "attention", "ffn", "routing_overlap")
ATTN_KEYS = ("source", "kind", "q_heads", "kv_heads", "head_dim", "qk_norm", "qk_norm_type", "qkv_bias", "output_gate",
             "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
             "layer_pattern", "window", "chunk", "linear", "indexer_heads", "indexer_head_dim", "indexer_topk")
INDEXER_KEYS = ("indexer_heads", "indexer_head_dim", "indexer_topk")  # DeepSeek Sparse Attention (MLA only)
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
LINEAR_KEYS = ("key_heads", "value_heads", "key_head_dim", "value_head_dim", "conv_kernel")
# How the checkpoint stores a Gated-DeltaNet layer's input projection: 2 matrices (Qwen3-Next: in_proj_qkvz,
# in_proj_ba) or 4 (Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a); engines that run them as they are
# launch that many GEMMs (cost.ops.attention_ops).
IN_PROJECTIONS = (2, 4)
FFN_KEYS = ("source", "gated", "dense_intermediate", "first_dense", "moe_every", "experts", "top_k",
            "expert_intermediate", "shared_experts", "shared_intermediate", "router", "n_group", "topk_group")
# Group-limited routing (DeepSeek): fixed-placement pricing enumerates the 2^n_group activity patterns of the groups.
MAX_GROUPS = 12


@dataclass(frozen=True)
class LinearAttention:
    """Gated-DeltaNet-style linear attention (recurrent state instead of a KV cache)."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    in_projections: int = 2  # input-projection matrices of the checkpoint (IN_PROJECTIONS)


@dataclass(frozen=True)
class Attention:
    kind: str  # mha | gqa | mla
    q_heads: int
    kv_heads: int  # = q_heads for mha; 1 latent "head" for mla (MQA form)
    head_dim: int  # gqa/mha; for mla the q/k head dim nope+rope
    qk_norm: bool = False
    # per_head: one RMSNorm over head_dim (Qwen3); per_layer: one over all heads of the layer (MiniMax-M2 config
    # qk_norm_type), whose sum of squares spans the TP ranks' heads (engines all-reduce it: docs/MODEL.md §3.2)
    qk_norm_type: str = "per_head"
    qkv_bias: bool = False
    output_gate: bool = False  # gated attention output (q projection twice as wide)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    layer_pattern: tuple[str, ...] = ("full",)  # repeated cyclically over layers
    window: int = 0  # sliding-window length (tokens)
    chunk: int = 0  # chunked-attention chunk length (tokens)
    linear: LinearAttention | None = None
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer of indexer_heads x indexer_head_dim scores
    # every cached token; each query then attends to its indexer_topk best tokens only (0: dense attention)
    indexer_heads: int = 0
    indexer_head_dim: int = 0
    indexer_topk: int = 0

    @property
    def sparse(self) -> bool:
        return self.indexer_topk > 0


@dataclass(frozen=True)
class FFN:
    gated: bool = True
    dense_intermediate: int = 0
    first_dense: int = 0  # leading dense layers
    moe_every: int = 1  # after first_dense, layer i is MoE when (i - first_dense + 1) % moe_every == 0
    experts: int = 0  # routed experts (0: dense model)
    top_k: int = 0
    expert_intermediate: int = 0
    shared_experts: int = 0
    shared_intermediate: int = 0
    router: str = "softmax"
    n_group: int = 1  # group-limited routing: experts in n_group contiguous groups, each token picks topk_group
    topk_group: int = 1  # of them (by group score) and its top-k experts inside those (1/1: plain routing)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def group_limited(self) -> bool:
        return self.topk_group < self.n_group


@dataclass(frozen=True)
class OverlapProfile:
    """Routing-overlap statistics of a model (BRIEF §2.2), with provenance: given inline in the model YAML, or a
    named routing profile (``routing/<profile>.yaml``) that it references."""

    lags: tuple[float, ...]  # o(d), d = 1..D, as fractions
    popularity: str  # "uniform", "zipf:S", "skew:X"
    source: str  # citation key (of the model's sources table, or of the profile's)
    note: str = ""
    profile: str = ""  # name of the referenced routing profile ("" when given inline)
    citation: str = ""  # the text of the source
    by_layer: ByLayer | None = None  # statistics by depth (None: the pooled lags/popularity for every MoE layer)


@dataclass(frozen=True)
class OfficialTotals:
    total_params: float
    active_params: float
    counts_input_embedding: bool = True  # does the official *active* figure include the input embedding?
    counts_lm_head: bool = True  # ... and the LM head? (both false: a "non-embedding" count)
    note: str = ""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    display_name: str
    role: str
    description: str
    layers: int
    hidden_size: int
    vocab_size: int
    tied_embeddings: bool
    native_dtype: str
    mtp_layers: int
    attention: Attention
    ffn: FFN
    official: OfficialTotals | None
    overlap: OverlapProfile | None
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    provenance: Mapping[str, Provenance] = field(default_factory=lambda: MappingProxyType({}), repr=False,
                                                 compare=False)
    origin: str = field(default="", compare=False)
    # other names of the model (catalog look-up) and the hub ids of its checkpoints (lower case) with each one's
    # weight format (validate reads a row's dtype from it: a block-FP8 checkpoint runs fp8_block kernels)
    aliases: tuple[str, ...] = field(default=(), compare=False)
    hf_id: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    # a draft head (EAGLE-3) names the target whose hidden states it was trained on ("" for a full model): it drafts
    # for that target, or one of the same width and vocabulary (specdec.drafters.check_head)
    head_of: str = field(default="", compare=False)
    # the weight format of the checkpoint this spec was loaded as, when a hub id stating one named it (e.g.
    # Qwen/Qwen3-30B-A3B-FP8 -> fp8_block; "" otherwise): a format other than bf16 is deployed as given, like --dtype
    checkpoint_dtype: str = field(default="", compare=False)
    # the longest sequence the model serves, in tokens (prompt and output; the config's max_position_embeddings, or
    # the card's documented rope-scaled maximum); 0 = not stated (nothing is checked)
    max_context: int = field(default=0, compare=False)

    def layer_kind(self, i: int) -> str:
        """Attention kind of layer ``i``: full, sliding, chunked or linear."""
        pat = self.attention.layer_pattern
        return pat[i % len(pat)]

    def is_moe_layer(self, i: int) -> bool:
        f = self.ffn
        return f.is_moe and i >= f.first_dense and (i - f.first_dense + 1) % f.moe_every == 0

    @functools.cached_property
    def layer_layout(self) -> tuple[tuple[str, bool], ...]:
        """(:meth:`layer_kind`, :meth:`is_moe_layer`) of every layer, computed once per spec (the cost engine walks
        the layers on every step)."""
        return tuple((self.layer_kind(i), self.is_moe_layer(i)) for i in range(self.layers))

    @functools.cached_property
    def moe_layer_count(self) -> int:
        return sum(moe for _, moe in self.layer_layout)


def _read_attention(r: Reader, obj: object, hidden: int) -> Attention:
    p = "attention"
    a = r.mapping(obj, p, ATTN_KEYS, ("source", "kind", "q_heads"))
    r.source(a, p)
    kind = r.string(a, "kind", p, options=ATTENTION_KINDS)
    qh = r.integer(a, "q_heads", p, low=1)
    pattern = a.get("layer_pattern", ["full"])
    if not isinstance(pattern, list) or not pattern:
        raise r.fail(f"{p}.layer_pattern", f"must be a non-empty list of {LAYER_KINDS}, got {pattern!r}",
                     "e.g. layer_pattern: [sliding, full]")
    for i, kind_i in enumerate(pattern):
        if kind_i not in LAYER_KINDS:
            raise r.fail(f"{p}.layer_pattern[{i}]", f"is {kind_i!r}, not one of {list(LAYER_KINDS)}",
                         "use full, sliding, chunked or linear")
    pattern = tuple(pattern)
    window = r.integer(a, "window", p, low=1, default=0)
    chunk = r.integer(a, "chunk", p, low=1, default=0)
    if "sliding" in pattern and not window:
        raise r.fail(f"{p}.window", "is missing while layer_pattern has sliding layers", "add window: <tokens>")
    if "chunked" in pattern and not chunk:
        raise r.fail(f"{p}.chunk", "is missing while layer_pattern has chunked layers", "add chunk: <tokens>")
    linear = None
    if "linear" in pattern:
        lp = f"{p}.linear"
        lo = r.mapping(a.get("linear"), lp, (*LINEAR_KEYS, "in_projections"), LINEAR_KEYS)
        n_in = r.integer(lo, "in_projections", lp, low=2, high=4, default=2)
        if n_in not in IN_PROJECTIONS:
            raise r.fail(f"{lp}.in_projections", f"must be one of {IN_PROJECTIONS}, got {n_in}",
                         "write 2 (in_proj_qkvz, in_proj_ba) or 4 (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a)")
        linear = LinearAttention(*(r.integer(lo, k, lp, low=1) for k in LINEAR_KEYS), in_projections=n_in)
    elif "linear" in a:
        raise r.fail(f"{p}.linear", "is given but layer_pattern has no linear layers", "add 'linear' to the pattern")
    qk_norm = r.boolean(a, "qk_norm", p, default=False)
    norm_type = r.string(a, "qk_norm_type", p, QK_NORM_TYPES, default="per_head")
    if norm_type != "per_head" and not qk_norm:
        raise r.fail(f"{p}.qk_norm_type", f"is {norm_type!r} but qk_norm is false", "set qk_norm: true or remove it")
    common = dict(qk_norm=qk_norm, qk_norm_type=norm_type, qkv_bias=r.boolean(a, "qkv_bias", p,
                  default=False), output_gate=r.boolean(a, "output_gate", p, default=False),
                  layer_pattern=pattern, window=window, chunk=chunk, linear=linear)
    if kind == "mla":
        for k in ("kv_heads", "head_dim"):
            if k in a:
                raise r.fail(f"{p}.{k}", "is not used by MLA attention", "remove it; MLA uses the *_rank/*_dim fields")
        m = {k: r.integer(a, k, p, low=0 if k == "q_lora_rank" else 1) for k in MLA_KEYS}
        given = [k for k in INDEXER_KEYS if k in a]
        if given and len(given) < len(INDEXER_KEYS):
            missing = [k for k in INDEXER_KEYS if k not in a]
            raise r.fail(f"{p}.{missing[0]}", "is missing while other indexer fields are given",
                         f"give all of {list(INDEXER_KEYS)} (DeepSeek Sparse Attention) or none")
        idx = {k: r.integer(a, k, p, low=1) for k in given}
        return Attention(kind, qh, 1, m["qk_nope_head_dim"] + m["qk_rope_head_dim"], **m, **common, **idx)
    for k in (*MLA_KEYS, *INDEXER_KEYS):
        if k in a:
            raise r.fail(f"{p}.{k}", f"is an MLA field but kind is {kind!r}", "remove it or set kind: mla")
    kvh = r.integer(a, "kv_heads", p, low=1, default=qh if kind == "mha" else ...)
    hd = r.integer(a, "head_dim", p, low=1, default=hidden // qh if hidden % qh == 0 else ...)
    if kind == "mha" and kvh != qh:
        raise r.fail(f"{p}.kv_heads", f"is {kvh} but MHA needs kv_heads == q_heads ({qh})", "use kind: gqa")
    if qh % kvh:
        raise r.fail(f"{p}.q_heads", f"is {qh}, not divisible by kv_heads {kvh}",
                     "q_heads must be a multiple of kv_heads")
    return Attention(kind, qh, kvh, hd, **common)


def _read_ffn(r: Reader, obj: object, layers: int) -> FFN:
    p = "ffn"
    f = r.mapping(obj, p, FFN_KEYS, ("source",))
    r.source(f, p)
    experts = r.integer(f, "experts", p, low=0, default=0)
    gated = r.boolean(f, "gated", p, default=True)
    if experts == 0:
        moe_only = [k for k in ("top_k", "expert_intermediate", "shared_experts", "shared_intermediate",
                                "first_dense", "moe_every") if k in f]
        if moe_only:
            raise r.fail(f"{p}.{moe_only[0]}", "is a MoE field but experts is 0 or missing",
                         "set experts: <routed experts> or remove the MoE fields")
        return FFN(gated, r.integer(f, "dense_intermediate", p, low=1), first_dense=layers)
    top_k = r.integer(f, "top_k", p, low=1)
    if top_k > experts:
        raise r.fail(f"{p}.top_k", f"is {top_k}, more than experts ({experts})", "top_k must be <= experts")
    first_dense = r.integer(f, "first_dense", p, low=0, high=layers - 1, default=0)
    moe_every = r.integer(f, "moe_every", p, low=1, high=layers, default=1)
    needs_dense = first_dense > 0 or moe_every > 1
    dense_i = r.integer(f, "dense_intermediate", p, low=1, default=... if needs_dense else 0)
    shared = r.integer(f, "shared_experts", p, low=0, default=0)
    shared_i = r.integer(f, "shared_intermediate", p, low=1, default=... if shared else 0,
                         fix="shared_intermediate is required when shared_experts > 0")
    if shared == 0 and "shared_intermediate" in f:
        raise r.fail(f"{p}.shared_intermediate", "is given but shared_experts is 0", "remove it or set shared_experts")
    n_group = r.integer(f, "n_group", p, low=1, high=experts, default=1)
    if experts % n_group:
        raise r.fail(f"{p}.n_group", f"is {n_group}, which does not divide the {experts} experts",
                     "n_group must divide experts (groups of equal size)")
    topk_group = r.integer(f, "topk_group", p, low=1, high=n_group, default=n_group if "n_group" in f else 1,
                           fix="topk_group is the number of groups a token picks: 1 <= topk_group <= n_group")
    if topk_group < n_group and n_group > MAX_GROUPS:
        raise r.fail(f"{p}.n_group", f"is {n_group}; group-limited routing is modelled for at most {MAX_GROUPS} "
                     "groups", f"use n_group <= {MAX_GROUPS} or topk_group = n_group (plain routing)")
    if topk_group * (experts // n_group) < top_k:
        raise r.fail(f"{p}.topk_group", f"is {topk_group}: {topk_group} groups of {experts // n_group} experts "
                     f"hold fewer than top_k = {top_k} experts", "raise topk_group")
    return FFN(gated, dense_i, first_dense, moe_every, experts, top_k,
               r.integer(f, "expert_intermediate", p, low=1), shared, shared_i,
               r.string(f, "router", p, options=ROUTERS, default="softmax"), n_group, topk_group)


def _read_overlap(r: Reader, obj: object, ffn: FFN, resolve: Callable[[str], RoutingProfile] | None) -> OverlapProfile:
    p = "routing_overlap"
    o = r.mapping(obj, p, ("profile", "source", "lags", "popularity", "note", "by_layer"))
    if not ffn.is_moe:
        raise r.fail(p, "is given for a dense model", "remove it; overlap statistics are for MoE routing")
    note = r.string(o, "note", p, default="")
    if "profile" in o:
        inline = [k for k in ("source", "lags", "popularity", "by_layer") if k in o]
        if inline:
            raise r.fail(f"{p}.{inline[0]}", "is given together with profile",
                         "either name a routing profile or give source/lags/popularity inline, not both")
        name = r.string(o, "profile", p)
        if resolve is None:
            raise r.fail(f"{p}.profile", f"names routing profile {name!r}, which needs the catalog",
                         "load the model with simulator.specs.load_model")
        try:
            prof = resolve(name)
        except ConfigError as exc:
            raise r.fail(f"{p}.profile", f"is {name!r}: {exc}", "") from None
        if (prof.experts, prof.top_k) != (ffn.experts, ffn.top_k):
            raise r.fail(f"{p}.profile", f"{name!r} was measured on {prof.experts} experts top-{prof.top_k}, but this "
                         f"model routes {ffn.experts} experts top-{ffn.top_k}",
                         "overlap statistics depend on E and k: give statistics of this model inline or none")
        return OverlapProfile(prof.lags, prof.popularity, prof.source, note or prof.note, prof.name, prof.citation,
                              prof.by_layer)
    r.mapping(o, p, o.keys(), ("source", "lags"))
    source = r.source(o, p)
    popularity = read_popularity(r, o, p)
    return OverlapProfile(read_lags(r, o, p), popularity, source, note, "", r.sources.get(source, "assumed"),
                          read_by_layer(r, o, p, popularity))


def _check_depth(r: Reader, overlap: OverlapProfile, moe_layers: int) -> None:
    """A per-layer profile must have one entry per MoE layer of the model."""
    b = overlap.by_layer
    if b is not None and b.split == "per_layer" and len(b.layers) != moe_layers:
        where = f"routing profile {overlap.profile!r}" if overlap.profile else "routing_overlap.by_layer.layers"
        raise r.fail("routing_overlap.by_layer" if not overlap.profile else "routing_overlap.profile",
                     f"{where} has {len(b.layers)} per-layer entries but the model has {moe_layers} MoE layers",
                     "give one entry per MoE layer, or split: thirds")


def read_model(obj: object, where: str, routing_profile: Callable[[str], RoutingProfile] | None = None) -> ModelSpec:
    """A model spec from its YAML mapping. ``routing_profile`` resolves a named routing profile
    (``routing_overlap: {profile: NAME}``); the catalog passes its loader."""
    r = Reader(where)
    top = r.mapping(obj, "", TOP_KEYS, ("schema", "name", "role", "sources", "architecture", "attention", "ffn"))
    r.string(top, "schema", "", options=(SCHEMA,))
    r.read_sources(top)
    name = r.string(top, "name", "")
    ap = "architecture"
    arch = r.mapping(top["architecture"], ap, ("source", "layers", "hidden_size", "vocab_size", "tied_embeddings",
                                                "native_dtype", "mtp_layers"),
                     ("source", "layers", "hidden_size", "vocab_size", "native_dtype"))
    r.source(arch, ap)
    layers = r.integer(arch, "layers", ap, low=1, high=1000)
    hidden = r.integer(arch, "hidden_size", ap, low=1)
    attention = _read_attention(r, top["attention"], hidden)
    ffn = _read_ffn(r, top["ffn"], layers)
    official = None
    if "official" in top:
        op = "official"
        o = r.mapping(top["official"], op, ("total_params", "active_params", "counts_input_embedding",
                                            "counts_lm_head", "note"), ("total_params", "active_params"))
        official = OfficialTotals(r.quantity(o, "total_params", op, "parameters", open_low=True),
                                  r.quantity(o, "active_params", op, "parameters", open_low=True),
                                  r.boolean(o, "counts_input_embedding", op, default=True),
                                  r.boolean(o, "counts_lm_head", op, default=True), str(o.get("note", "")))
    overlap = _read_overlap(r, top["routing_overlap"], ffn, routing_profile) if "routing_overlap" in top else None
    native_dtype = r.string(arch, "native_dtype", ap, options=WEIGHT_DTYPES)
    max_context = int(r.quantity(top, "max_context", "", "tokens", low=1, default=0, integer=True))
    spec = ModelSpec(
        name=name,
        display_name=r.string(top, "display_name", "", default=name),
        role=r.string(top, "role", "", options=ROLES),
        description=r.string(top, "description", "", default=""),
        layers=layers,
        hidden_size=hidden,
        vocab_size=r.integer(arch, "vocab_size", ap, low=1),
        tied_embeddings=r.boolean(arch, "tied_embeddings", ap, default=False),
        native_dtype=native_dtype,
        mtp_layers=r.integer(arch, "mtp_layers", ap, low=0, default=0),
        attention=attention,
        ffn=ffn,
        official=official,
        overlap=overlap,
        sources=MappingProxyType(dict(r.sources)),
        provenance=MappingProxyType(dict(r.provenance)),
        origin=where,
        aliases=r.names(top, "aliases"),
        hf_id=r.hub_ids(top, "hf_id", WEIGHT_DTYPES, native_dtype),
        head_of=r.string(top, "head_of", "", default=""),
        max_context=max_context,
    )
    if spec.head_of and spec.role != "drafter":
        raise r.fail("head_of", f"is {spec.head_of!r} but role is {spec.role!r}", "a draft head has role: drafter")
    if overlap is not None:
        _check_depth(r, overlap, spec.moe_layer_count)
    return spec
