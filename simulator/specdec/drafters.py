"""Drafters and their step time T_draft(B, 1) (docs/MODEL.md §4, "Drafters").

Every drafter but the fixed ratio is a :class:`~simulator.specs.model.ModelSpec` costed by the same engine
(:func:`simulator.cost.step.step_time`) on the same GPUs as the target:

- ``model:NAME`` — a separate small model (its own spec, e.g. ``qwen3-0.6b``), in its checkpoint dtype, laid out
  with the target's tensor parallelism where its heads allow (else the largest divisor, the remaining GPUs as
  data-parallel replicas), no expert parallelism (dense).
- ``eagle`` — an EAGLE-style head: one decoder layer of the target's width (the target's attention config, full
  attention over the target's context, a dense gated FFN of width ``dense_intermediate`` if the target has one,
  else 3 × hidden) plus the target's LM head, in bf16 (EAGLE checkpoints are released in bf16).
- ``mtp`` — multi-token-prediction modules: one target-style layer (the target's attention and its MoE FFN) plus
  the LM head per drafted token, in the target's deployment dtype (they ship inside the target's checkpoint).
- ``eagle3`` — an EAGLE-3 head: the EAGLE head with EAGLE-3's reduced draft vocabulary (``EAGLE3_DRAFT_VOCAB``
  tokens in its LM head, the ``draft_vocab_size`` of EAGLE-3 checkpoints); ``eagle3:NAME`` uses a bundled head
  YAML instead (its own layer shapes and draft vocabulary, e.g. ``gpt-oss-120b-eagle3``). Its feature-fusion FC
  (``fc``: the target's three aux hidden states, 3·H → H) runs once per round over the verified tokens
  (:func:`input_projection_time`, ``T_fuse``).
- ``mtp`` also pays its input projection (``eh_proj``: [embedding; hidden], 2·H → H) in every MTP pass.
- ``ngram`` — n-gram / suffix lookup in the request's own tokens (vLLM ``ngram``, SGLang lookahead): no GPU pass,
  T_draft = 0 (assumed: the CPU lookup overlaps the GPU); its acceptance must be stated.
- ``ratio:C`` — a fixed cost ratio: T_draft(B, 1) = C · T(B, 1) of the target in the same mode (back-compat).

Every drafter pass goes through :func:`simulator.specdec.overheads.padded_step`: the step model's fixed costs, host
overhead, sampling and KV write, at the engine's captured CUDA-graph batch.

One round drafts γ tokens with γ sequential draft passes of one token each; the target's verify pass scores the
γ drafts plus the bonus position (γ + 1 tokens), so no draft pass follows the last drafted token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..cost.deployment import Deployment, validate
from ..errors import InfeasibleError, ParameterError
from ..params import parameter_error
from ..specs.catalog import load_model
from ..specs.memo import IdentityMemo
from ..specs.model import FFN, ModelSpec

__all__ = ["DRAFTER_KINDS", "Drafter", "check_head", "drafter_deployment", "drafter_spec", "eagle_head_spec",
           "mtp_spec", "parse_drafter", "EAGLE_FFN_RATIO", "EAGLE3_DRAFT_VOCAB", "PROJECTION_INPUTS", "draft_step_time",
           "drafter_weights", "input_projection_time"]

DRAFTER_KINDS = ("eagle", "eagle3", "mtp", "model", "ngram", "ratio")
EAGLE3_DRAFT_VOCAB = 32000  # EAGLE-3 heads' draft_vocab_size (SafeAILab EAGLE-3 and SpecForge configs)
# Input projections of a drafter (docs/MODEL.md §4.2): kind -> (inputs of width H concatenated, when it runs).
# EAGLE-3's fc fuses three target hidden states once per round over the verified tokens (SafeAILab EAGLE-3
# cnets.py / vLLM llama_eagle3.py combine_hidden_states); MTP's eh_proj maps [embedding; hidden] in every pass
# (DeepSeek-V3 MTP module, vLLM deepseek_mtp.py).
PROJECTION_INPUTS = {"eagle3": (3, "round"), "mtp": (2, "pass")}
EAGLE_FFN_RATIO = 3  # FFN width of an EAGLE head when the target has no dense FFN: 3 × hidden (Qwen3-MoE configs'
# intermediate_size is exactly 3 × hidden: 12288 for the 235B, 6144 for the 30B)


@dataclass(frozen=True)
class Drafter:
    """A drafter: ``kind`` in {eagle, mtp, model, ratio}; ``model`` names a draft model (kind model), ``ratio``
    is C (kind ratio)."""

    kind: str = "eagle"
    model: str = ""
    ratio: float = 0.0

    def __post_init__(self):
        if self.kind not in DRAFTER_KINDS:
            raise ParameterError(f"drafter kind {self.kind!r} is unknown; use {DRAFTER_FORMS}")
        if self.kind == "model" and not self.model:
            raise ParameterError("drafter 'model' needs a model name or YAML path, e.g. model:qwen3-0.6b")
        if self.kind == "ratio" and not (math.isfinite(self.ratio) and self.ratio >= 0):
            raise ParameterError(f"drafter ratio C must be a finite number >= 0; got {self.ratio!r}")

    @property
    def label(self) -> str:
        if self.kind in ("model", "eagle3") and self.model:
            return f"{self.kind}:{self.model}"
        if self.kind == "ratio":
            return f"ratio:{self.ratio:g}"
        return self.kind


DRAFTER_FORMS = ("one of eagle, eagle3, eagle3:NAME (e.g. eagle3:gpt-oss-120b-eagle3), mtp, ngram, model:NAME (e.g. "
                 "model:qwen3-0.6b) or ratio:C (e.g. ratio:0.05)")


def parse_drafter(text: str | Drafter) -> Drafter:
    """``eagle`` | ``mtp`` | ``model:NAME`` (a bundled model or a YAML path) | ``ratio:C``."""
    if isinstance(text, Drafter):
        return text
    s = str(text).strip()
    kind, _, arg = s.partition(":")
    if kind in ("eagle", "eagle3", "mtp", "ngram") and not arg:
        return Drafter(kind)
    if kind == "eagle3" and arg:  # a bundled EAGLE-3 head YAML (or a path)
        return Drafter("eagle3", model=arg)
    if kind == "model" and arg:
        return Drafter("model", model=arg)
    if kind == "ratio" and arg:
        try:
            c = float(arg)
        except ValueError:
            c = float("nan")
        if not (math.isfinite(c) and c >= 0):
            raise parameter_error("parse_drafter", "drafter", "ratio:C with C a number >= 0 (draft step / target "
                                  "decode step), e.g. ratio:0.05", s)
        return Drafter("ratio", ratio=c)
    raise parameter_error("parse_drafter", "drafter", DRAFTER_FORMS, s)


def _single_layer(target: ModelSpec, suffix: str, ffn: FFN) -> ModelSpec:
    """A one-layer spec with the target's width, vocabulary and attention config (full attention)."""
    a = target.attention
    attn = replace(a, layer_pattern=("full",), linear=None, window=0, chunk=0)
    return replace(target, name=f"{target.name}+{suffix}", display_name=f"{target.display_name} {suffix}",
                   role="drafter", description=f"synthetic {suffix} of {target.name}", layers=1, mtp_layers=0,
                   attention=attn, ffn=ffn, official=None, origin=f"synthetic:{suffix}:{target.origin or target.name}")


def eagle_head_spec(target: ModelSpec) -> ModelSpec:
    """EAGLE head: one dense decoder layer of the target's width + the target's LM head."""
    width = target.ffn.dense_intermediate or EAGLE_FFN_RATIO * target.hidden_size
    return _single_layer(target, "eagle-head", FFN(gated=True, dense_intermediate=width, first_dense=1))


def mtp_spec(target: ModelSpec) -> ModelSpec:
    """One MTP module: a target-style layer (the target's MoE FFN, or its dense FFN) + the LM head."""
    f = target.ffn
    ffn = replace(f, first_dense=0, moe_every=1) if f.is_moe else f
    return _single_layer(target, "mtp", ffn)


_SPECS = IdentityMemo()  # drafter_spec's memo per target object


def drafter_spec(drafter: Drafter, target: ModelSpec) -> ModelSpec | None:
    """The spec the engine costs for ``drafter`` (None for a fixed ratio or an n-gram lookup); the same object
    for the same drafter and target object (memoised: a sweep asks for it several times per case)."""
    return _SPECS.get(target, drafter, lambda: _drafter_spec(drafter, target))


def _drafter_spec(drafter: Drafter, target: ModelSpec) -> ModelSpec | None:
    if drafter.kind == "eagle":
        return eagle_head_spec(target)
    if drafter.kind == "eagle3" and drafter.model:
        return check_head(load_model(drafter.model, role="drafter"), target, drafter)
    if drafter.kind == "eagle3":
        head = eagle_head_spec(target)
        return replace(head, name=f"{target.name}+eagle3-head", vocab_size=min(EAGLE3_DRAFT_VOCAB, target.vocab_size))
    if drafter.kind == "mtp":
        return mtp_spec(target)
    if drafter.kind == "model":
        return load_model(drafter.model, role="drafter")
    return None


def check_head(head: ModelSpec, target: ModelSpec, drafter: Drafter) -> ModelSpec:
    """``head`` if it can draft for ``target`` as an EAGLE-3 head: a head YAML (``head_of`` names the target it was
    trained on; a full model is a draft model, ``model:NAME``) whose target has ``target``'s width (the head reads
    its hidden states) and vocabulary (its draft ids map to the target's). Else one error naming the drafter."""
    if not head.head_of:
        raise parameter_error("drafter", "drafter", f"an EAGLE-3 head (a model YAML with head_of: its target), e.g. "
                              f"eagle3:gpt-oss-120b-eagle3; {head.name} is a full model of {head.layers} layers: "
                              f"give it as model:{head.name}", drafter.label)
    trained = load_model(head.head_of)
    if (trained.hidden_size, trained.vocab_size) != (target.hidden_size, target.vocab_size):
        raise parameter_error("drafter", "drafter", f"an EAGLE-3 head of {target.name} or of a model of its width "
                              f"{target.hidden_size} and vocabulary {target.vocab_size}; {head.name} reads "
                              f"{trained.name}'s hidden states (width {trained.hidden_size}, vocabulary "
                              f"{trained.vocab_size}): use eagle3 (a head of the target's shape) or another head",
                              drafter.label)
    return head


_LAYOUTS = IdentityMemo()  # drafter_deployment's memo per (drafter spec, GPU profile) object


def drafter_deployment(drafter: Drafter, spec: ModelSpec, target_dep: Deployment, hw) -> Deployment:
    """Layout of the drafter on the target's GPUs (docs/MODEL.md §4, "Drafter deployment").

    MTP modules use the target's deployment unchanged. EAGLE heads and draft models use the target's GPU count with
    the largest tensor parallelism ≤ the target's that the drafter's shapes allow (the rest as data-parallel
    replicas) and no expert parallelism; dtype bf16 for EAGLE, the checkpoint's native dtype for a draft model.
    Memoised per spec and profile object (a sweep asks once per case and pass)."""
    return _LAYOUTS.get_for((spec, hw), (drafter, target_dep),
                            lambda: _drafter_deployment(drafter, spec, target_dep, hw))


def _drafter_deployment(drafter: Drafter, spec: ModelSpec, target_dep: Deployment, hw) -> Deployment:
    if drafter.kind == "mtp":
        validate(spec, hw, target_dep)
        return target_dep
    gpus = target_dep.gpus
    dtype = "bf16" if drafter.kind in ("eagle", "eagle3") else spec.native_dtype
    last: Exception | None = None
    for dt in dict.fromkeys((dtype, "bf16")):  # a checkpoint format the GPU lacks falls back to bf16
        for tp in range(target_dep.tp, 0, -1):
            if gpus % tp:
                continue
            dep = Deployment(dtype=dt, kv_dtype=target_dep.kv_dtype, tp=tp, dp=gpus // tp, ep=1, moe_tp=gpus,
                             cuda_graphs=target_dep.cuda_graphs, engine=target_dep.engine,
                             engine_version=target_dep.engine_version)
            try:
                validate(spec, hw, dep)
                return dep
            except InfeasibleError as exc:
                last = exc
    raise InfeasibleError(f"drafter {drafter.label} cannot be laid out on {gpus} GPUs of {hw.name}: {last}")


def draft_step_time(drafter: Drafter, target: ModelSpec, hw, dep: Deployment, batch, tokens: int, context: int,
                    mech, overlap, cache, t_target=None):
    """(T_draft(B, tokens) over ``batch``, the drafter's deployment or None): one drafter pass over ``tokens`` tokens
    per request (1 for a chain; a tree level's node count; an array aligned with ``batch`` prices several pass
    lengths in one call), as the engine runs it (graph padding included).
    ``t_target``: the target's T(B, tokens) if already priced (used by ``ratio:C``)."""
    from .overheads import padded_step  # overheads imports cost only; local import keeps this module's header small

    b = np.atleast_1d(np.asarray(batch, dtype=float))
    s = np.rint(np.broadcast_to(np.asarray(tokens, dtype=float), b.shape)) if np.ndim(tokens) else int(tokens)
    if drafter.kind == "ngram":
        return np.zeros_like(b), None
    if drafter.kind == "ratio":
        if t_target is None:
            t_target = padded_step(cache, target, hw, dep, b, s, context, mech, overlap, True).time
        return drafter.ratio * np.asarray(t_target, dtype=float), None
    spec = drafter_spec(drafter, target)
    ddep = drafter_deployment(drafter, spec, dep, hw)
    t = padded_step(cache, spec, hw, ddep, b, s, context, mech, overlap, True).time  # a pass of a round
    # a draft pass pays the profile's per-draft-step host cost instead of a target step's (kernels.step)
    t = t + draft_host_delta(hw, ddep, mech)
    if PROJECTION_INPUTS.get(drafter.kind, (0, ""))[1] == "pass":  # MTP's eh_proj in every pass
        t = t + input_projection_time(drafter, target, spec, hw, ddep, b * s, mech)
    return t, ddep


def draft_host_delta(hw, ddep: Deployment, mech) -> float:
    """``kernels.step.draft_host_overhead`` − ``host_overhead`` of the drafter's engine (0 when the profile does not
    state a draft value, or with fixed costs off): what a draft pass's host work differs from a target pass's."""
    from ..cost.engine import step_fixed

    if "draft_host_overhead" not in hw.kernels.step:  # (hw is bound to the target's engine, which the drafter runs on)
        return 0.0
    return step_fixed(hw, mech, "draft_host_overhead") - step_fixed(hw, mech, "host_overhead")


def input_projection_time(drafter: Drafter, target: ModelSpec, spec: ModelSpec | None, hw, ddep: Deployment | None,
                          tokens, mech) -> np.ndarray:
    """T_proj of the drafter's input projection (``PROJECTION_INPUTS``) over ``tokens`` tokens in all (an array
    over the batch grid): one GEMM of k · H_target → H_drafter, its output split over the drafter's tp and its rows
    over the data-parallel replicas, in the drafter's weight format, priced by the engine's GEMM kernel class (0 for
    drafters without one)."""
    from ..cost.engine import op_time
    from ..cost.opviews import gemm_op

    rows = np.atleast_1d(np.asarray(tokens, dtype=float))
    k = PROJECTION_INPUTS.get(drafter.kind, (0, ""))[0]
    if not k or spec is None or ddep is None:
        return np.zeros_like(rows)
    op = gemm_op(np.ceil(rows / ddep.dp), spec.hidden_size // ddep.tp, k * target.hidden_size, ddep.dtype)
    return np.asarray(op_time(op, hw, mech, ddep.cuda_graphs).time, dtype=float)


# What a drafter shares with the target instead of loading its own copy (SGLang eagle_worker.py / eagle_worker_v2.py:
# EAGLE and MTP drafts `set_embed_and_head(embed, head)` from the target; EAGLE-3 heads `set_embed(embed)` only and
# keep their own (draft-vocabulary) LM head, unless the checkpoint asks `load_lm_head_from_target`; vLLM's
# load_eagle_model shares the target's embedding the same way). A draft model shares nothing.
SHARED_WITH_TARGET = {"eagle": ("embedding", "lm_head"), "mtp": ("embedding", "lm_head"), "eagle3": ("embedding",),
                      "model": ()}


def drafter_weights(drafter: Drafter | str, target: ModelSpec, dep: Deployment, hw) -> float:
    """Weight bytes per GPU the drafter adds to the target's (docs/MODEL.md §4, "Drafter deployment"): its spec's
    :func:`~simulator.cost.step.resident_weights` under :func:`drafter_deployment`, less the parts it shares with
    the target (``SHARED_WITH_TARGET``; bf16, split over the drafter's tp like the rest). 0 for an n-gram lookup
    or a fixed ratio (no weights). The drafter's own KV cache (one layer against the target's many) is not counted."""
    from ..cost.step import resident_weights
    from ..specs.derived import param_counts

    d = parse_drafter(drafter)
    spec = drafter_spec(d, target)
    if spec is None:
        return 0.0
    ddep = drafter_deployment(d, spec, dep, hw)
    c = param_counts(spec)
    shared = sum(getattr(c, part) for part in SHARED_WITH_TARGET[d.kind]) * 2.0 / ddep.tp
    return resident_weights(spec, ddep) - shared
