"""Deployment (how a model is laid out on GPUs) and mechanism switches, with their validation.

Layout: ``gpus = tp · dp`` for attention (tensor parallel inside a group, data parallel across groups) and
``gpus = ep · moe_tp`` for the routed experts. With ``dp = 1`` every GPU sees every token (attention TP), so the
MoE output is combined by an all-reduce; with ``dp > 1`` tokens are split and the MoE needs all-to-all dispatch and
combine. Dense FFN layers and shared experts follow the attention layout.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from ..overlap import DEFAULT_PLACEMENT, PLACEMENTS
from ..params import Interval, Options, Param, Pattern, check_fields, param_field
from ..specs.catalog import ENGINES, list_engines, load_engine
from ..specs.dtypes import FORMATS, KV_DTYPES, compute_dtype
from ..specs.engine import EngineRelease
from ..specs.hardware import HardwareProfile
from ..specs.kernels import A2A_MODES, DEFAULT_ENGINE
from ..specs.model import ModelSpec
from ..specs.wide_ep import (
    A2A_ACROSS_DOMAINS,
    A2A_AUTO,
    A2A_NCCL_MAX_GPUS,
    DISPATCH_BYTES,
    MODE_DISPATCH,
)
from .domains import bad as _bad
from .domains import validate_domains

ROUTING = ("uniform", "independent", "overlap")
FIXED = ("on", "per_expert", "off")
ONOFF = ("on", "off")
MEMORY_HEADROOM = 0.90  # usable fraction of HBM for weights + KV (activations, workspace, fragmentation)


@dataclass(frozen=True)
class Mechanisms:
    """The four switchable mechanisms of BRIEF §1 (docs/MODEL.md, "Presets").

    routing: which unique-expert model counts experts (uniform = MoESD; independent = measured popularity;
        overlap = the maximum-entropy routing-overlap model fitted by IPF).
    kernel_curves: "on" = per-op-class efficiency curves; "off" = one global bandwidth efficiency.
    fixed_costs: "on" = per-kernel floors paid once per kernel, per-step host/launch costs; "per_expert" = the
        MoE kernel's floor is paid once per unique expert on the rank (MoESD's single-expert load time, no
        amortisation); "off" = no fixed costs at all (pure roofline).
    l2: "on" = re-reads of weights that fit the effective L2 are served from L2; "off" = every read from HBM.
    """

    routing: str = param_field(Param(Options(ROUTING)), "overlap")
    kernel_curves: str = param_field(Param(Options(ONOFF)), "on")
    fixed_costs: str = param_field(Param(Options(FIXED)), "on")
    l2: str = param_field(Param(Options(ONOFF)), "on")
    # Engine per-round overheads of speculative decoding (docs/MODEL.md §4.5; simulator.specdec.overheads):
    # graph_padding: "on" = every pass of a round runs the engine's CUDA graph for the next captured batch size
    #     (the padding staircase), eagerly above the largest one; "table" = so, with the capture its engine replays
    #     under a per-batch draft-length table (graphs.per_batch_table); "off" = the batch as given, with graphs.
    # round_overheads: "on" = per-round state work beside the passes (linear-attention state checkpoints per
    #     drafted position); "off" = none.
    graph_padding: str = param_field(Param(Options((*ONOFF, "table"))), "on")
    round_overheads: str = param_field(Param(Options(ONOFF)), "on")
    # two_batch_overlap (docs/MODEL.md §3.5): under attention DP each layer runs as two micro-batches of B/2, one's
    # MoE dispatch/combine beside the other's compute (SGLang's five-stage decode schedule, cost.schedule); "auto" =
    # as the engine deploys it (its file's schedule.two_batch_overlap.auto), "on" = whenever dp > 1, "off" = never.
    two_batch_overlap: str = param_field(Param(Options((A2A_AUTO, *ONOFF))), A2A_AUTO)
    # The round phase by phase as engines run it (docs/MODEL.md §4.6; simulator.specdec.engine_round):
    # draft_extend: "on" = one draft pass per round runs over the γ + 1 verified positions (SGLang's draft-extend
    #     after verify, vLLM's / TRT-LLM's first drafter pass over K + 1 tokens) instead of one token; "off" = γ
    #     one-token draft passes.
    # round_kernels: "on" = sampling / top-k / rejection kernels beyond the step model's sampling op (per drafted
    #     position, over the vocabulary and the batch), tree-building kernels and KV slot allocation/free per round.
    # host_time: "on" = the engine's host work (per round, per GPU->CPU sync, per request, per accepted token, per
    #     draft step; and per plain decode step), exposed where the execution mode does not hide it; "off" = none.
    draft_extend: str = param_field(Param(Options(ONOFF)), "on")
    round_kernels: str = param_field(Param(Options(ONOFF)), "on")
    host_time: str = param_field(Param(Options(ONOFF)), "on")
    # Engine execution mode (docs/MODEL.md §4.6): CPU scheduling overlapped with GPU work in SD rounds (sd_overlap)
    # and plain decoding (decode_overlap)? None = the engine release's default (specdec.engine_round.overlap_modes);
    # "on" hides host work up to the round's (step's) GPU time, "off" runs it in series.
    sd_overlap: str | None = param_field(Param(Options(ONOFF), None), None)
    decode_overlap: str | None = param_field(Param(Options(ONOFF), None), None)
    # model_error (docs/MODEL.md §4.6): "on" = speedup_low/high also carry the refined model's held-out error on the
    # public SD corpus (specdec.engine_round.MODEL_ERROR); "off" = the ranged terms and acceptance alone.
    model_error: str = param_field(Param(Options(ONOFF)), "on")

    def __post_init__(self):
        check_fields(self)

    @property
    def fixed_costs_on(self) -> bool:
        """Whether fixed costs are modelled at all (the one home of this rule): kernel floors, launch and
        collective latencies, host overhead and rejection sampling are all zero when ``fixed_costs`` is off."""
        return self.fixed_costs != "off"

    def with_(self, **kw) -> Mechanisms:
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


_NO_ENGINE_TERMS = dict(graph_padding="off", round_overheads="off", draft_extend="off", round_kernels="off",
                        host_time="off")  # MoESD models no engine round terms
PRESETS = {
    # MoESD's model (docs/MODEL.md §3.6). Its fitted terms read three ways: the default charges the calibrated MoE
    # floor once per unique expert (MoESD's "single-expert load time"); the other two bracket it.
    # MoESD models no engine round overheads: the prior's readings switch them off.
    "prior": Mechanisms(routing="uniform", kernel_curves="off", fixed_costs="per_expert", l2="off",
                        **_NO_ENGINE_TERMS),
    "prior-no-fixed": Mechanisms(routing="uniform", kernel_curves="off", fixed_costs="off", l2="off",
                                 **_NO_ENGINE_TERMS),
    "prior-kernel-floors": Mechanisms(routing="uniform", kernel_curves="off", fixed_costs="on", l2="off",
                                      **_NO_ENGINE_TERMS),
    "refined": Mechanisms(),  # the field defaults above are the refined model
}
# The readings of the prior reported as its range wherever the prior is reported (default first).
PRIOR_READINGS = ("prior", "prior-no-fixed", "prior-kernel-floors")
# The walk from prior to refined used by `explain` (one mechanism per step, in this order).
WALK = tuple((f, getattr(PRESETS["refined"], f)) for f in ("routing", "kernel_curves", "fixed_costs", "l2",
                                                                   "graph_padding", "round_overheads", "draft_extend",
                                                                   "round_kernels", "host_time"))


MODE = Param(Options(PRESETS))  # a mechanism preset by name


def preset(mode: str) -> Mechanisms:
    MODE.check(mode, "mode", "preset")
    return PRESETS[mode]


WAYS = Param(Interval(int, 1, 1024), unit="GPUs")  # ways of one kind of parallelism (tp, dp, ep, moe_tp)
# A user's engine file by path (docs/MODEL.md §3.10): any text naming a YAML file; it must load as an engine spec.
ENGINE_FILE = Pattern(r".+\.ya?ml", "a path to an engine YAML file (engine/v1)")
RELEASE = Pattern(r"\d+(\.\d+)*", "a release number such as '0.14'")
BACKEND = Pattern(r"[A-Za-z0-9][A-Za-z0-9_.-]*", "a backend name the engine's file lists (show engine NAME)")


@dataclass(frozen=True)
class Deployment:
    """How the target runs: formats, parallelism, CUDA graphs."""

    dtype: str = param_field(Param(Options(FORMATS)), "bf16")  # routed/shared expert and dense linear weights
    kv_dtype: str = param_field(Param(Options(KV_DTYPES)), "bf16")
    tp: int = param_field(WAYS, 1)  # attention tensor parallel
    dp: int = param_field(WAYS, 1)  # attention data parallel
    ep: int = param_field(WAYS, 1)  # expert parallel
    moe_tp: int | None = param_field(Param(*WAYS.constraints, None), None)  # inside experts; default gpus / ep
    cuda_graphs: bool = True
    # expert -> rank (docs/MODEL.md §3.2): random (expectation over random placements; the default: expert indices
    # carry no popularity order), balanced (EPLB-style greedy packing by usage) or contiguous index blocks
    placement: str = param_field(Param(Options(PLACEMENTS)), DEFAULT_PLACEMENT)
    # EPLB-style replicas of the hottest experts (extra physical experts; ep must divide experts + replicas)
    redundant_experts: int = param_field(Param(Interval(int, 0, 65536), unit="experts"), 0)
    # serving engine (a catalog name, engines/<name>.yaml, or a path to an engine file): what it executes
    # (simulator.specs.engine) and whose measured kernel parameters price the ops (HardwareProfile.bind)
    engine: str = param_field(Param(Options(ENGINES), ENGINE_FILE), DEFAULT_ENGINE)
    # the engine's release whose execution applies (a version of its file's releases; None = the newest)
    engine_version: str | None = param_field(Param(RELEASE, None), None)
    # the engine's MoE backend setting at launch (a value its file's kernels.moe_backend lists, e.g. TensorRT-LLM's
    # moe_config.backend TRTLLM; None = the release's default): which MoE kernel the experts run
    moe_backend: str | None = param_field(Param(BACKEND, None), None)
    # MoE dispatch/combine kernels under attention DP (docs/MODEL.md §3.9): the engine's all-to-all (nccl), or
    # DeepEP's normal (high-throughput) or low-latency mode (the profile's deepep_* collectives)
    # "auto" (default): the engine's all-to-all inside one scale-up domain, DeepEP low-latency across domains
    # (specs.wide_ep.A2A_ACROSS_DOMAINS) where the profile has it; resolved by resolve_all_to_all
    all_to_all: str = param_field(Param(Options((A2A_AUTO, *A2A_MODES))), A2A_AUTO)
    # precision of the dispatched tokens (combine: bf16); "auto" = the mode's (specs.wide_ep.MODE_DISPATCH)
    dispatch_dtype: str = param_field(Param(Options((A2A_AUTO, *DISPATCH_BYTES))), A2A_AUTO)

    def __post_init__(self):
        check_fields(self)
        if self.moe_tp is None:
            object.__setattr__(self, "moe_tp", max(1, self.gpus // self.ep))

    @property
    def gpus(self) -> int:
        return self.tp * self.dp

    @property
    def label(self) -> str:
        """The one printed form of a deployment, e.g. ``fp8_block tp8 ep8`` (``dp``, kv dtype and placement
        only when they differ from the plain layout)."""
        parts = [self.dtype, f"tp{self.tp}"]
        if self.dp > 1:
            parts.append(f"dp{self.dp}")
        parts.append(f"ep{self.ep}")
        if self.kv_dtype != "bf16":
            parts.append(f"kv {self.kv_dtype}")
        if self.placement != DEFAULT_PLACEMENT:
            parts.append(f"placement {self.placement}")
        if self.redundant_experts:
            parts.append(f"+{self.redundant_experts} redundant experts")
        if self.engine != DEFAULT_ENGINE or self.engine_version is not None:
            parts.append(self.engine + (f" {self.engine_version}" if self.engine_version is not None else ""))
        if self.moe_backend is not None:
            parts.append(f"moe {self.moe_backend}")
        if self.all_to_all not in ("nccl", A2A_AUTO):
            parts.append(self.all_to_all)
        if self.dispatch_dtype != A2A_AUTO:
            parts.append(f"dispatch {self.dispatch_dtype}")
        return " ".join(parts)

    @property
    def dispatch_bytes(self) -> float:
        """Bytes per hidden element of a dispatched token (the mode's precision unless ``dispatch_dtype`` says)."""
        dt = MODE_DISPATCH.get(self.all_to_all, "bf16") if self.dispatch_dtype == A2A_AUTO else self.dispatch_dtype
        return DISPATCH_BYTES[dt]

    @property
    def attn_dtype(self) -> str:
        """Attention and dense-layer weights: the deployment dtype, except weight-only 4-bit formats that
        engines apply to experts only (mxfp4, int4_wo), where the rest stays bf16."""
        return "bf16" if self.dtype in ("mxfp4", "int4_wo") else self.dtype


def resolve_all_to_all(hw: HardwareProfile, dep: Deployment) -> Deployment:
    """``all_to_all = "auto"`` made concrete: DeepEP low-latency when attention DP spans more than one scale-up
    domain, or more than ``A2A_NCCL_MAX_GPUS`` GPUs inside one (NVL72), and the profile has its parameters; else
    the engine's all-to-all (nccl)."""
    if dep.all_to_all != A2A_AUTO:
        return dep
    across = dep.dp > 1 and (dep.gpus > A2A_NCCL_MAX_GPUS or (hw.domain_size > 0 and dep.gpus > hw.domain_size))
    mode = A2A_ACROSS_DOMAINS if across and A2A_MODES[A2A_ACROSS_DOMAINS] in hw.kernels.collectives else "nccl"
    return _with_all_to_all(dep, mode)


@functools.lru_cache(maxsize=4096)
def _with_all_to_all(dep: Deployment, mode: str) -> Deployment:
    return replace(dep, all_to_all=mode)  # memoised: a sweep resolves the same deployment many times


def two_batch_overlap_on(mech: Mechanisms, hw: HardwareProfile, dep: Deployment) -> bool:
    """Whether a step runs as two overlapped micro-batches (needs attention DP: its dispatch/combine is what is
    hidden); ``auto``: the engine's rule (``schedule.two_batch_overlap.auto`` of the release ``hw`` is bound to:
    "scale-out" = a DeepEP dispatch across more than one scale-up domain, "never"). ``dep.all_to_all`` resolved."""
    if dep.dp <= 1 or mech.two_batch_overlap == "off":
        return False
    across = hw.domain_size > 0 and dep.gpus > hw.domain_size
    return mech.two_batch_overlap == "on" or (hw.engine_spec.schedule.tbo_auto == "scale-out" and across
                                             and dep.all_to_all.startswith("deepep"))


def engine_release(dep: Deployment) -> EngineRelease:
    """The engine release ``dep`` names (``engine``, ``engine_version``, launched with its ``moe_backend``; one
    object per combination): what pricing binds a profile to (``HardwareProfile.bind``)."""
    return _release(dep.engine, dep.engine_version, dep.moe_backend)


@functools.lru_cache(maxsize=64)
def _release(engine: str, version: str | None, backend: str | None) -> EngineRelease:
    return load_engine(engine).release(version).with_moe_backend(backend)


def version_key(engine: str, stated: str) -> str | None:
    """The release of ``engine`` whose execution a version ``stated`` as text runs (EngineSpec.version_key)."""
    return load_engine(engine).version_key(stated)


def engine_note(hw: HardwareProfile, engine: str) -> str:
    """'' when ``engine`` runs on ``hw``'s vendor (its file's ``vendors``); for a what-if profile whose kernels are
    another GPU's (its kernels note documents it) a one-line note that the engine's kernels are a what-if there."""
    if hw.vendor in load_engine(engine).vendors:
        return ""
    return f"note: {engine} does not run on {hw.vendor} GPUs: a what-if ({hw.name} kernels: {hw.grounding})"


def validate_options(model: ModelSpec, hw: HardwareProfile, dep: Deployment) -> None:
    """The layout-independent part of :func:`validate_meaning` (placement, replicas, engine, dispatch format): the rule
    checks it once, before searching layouts, so its error is the reason itself."""
    moe = model.ffn.is_moe
    if not moe and dep.placement != DEFAULT_PLACEMENT:
        raise _bad("placement", dep.placement, f"{model.name} is dense (no routed experts), so expert placement has "
                   "no meaning", "leave --placement out")
    if not moe and dep.redundant_experts:
        raise _bad("redundant_experts", dep.redundant_experts, f"{model.name} is dense: no experts to replicate",
                   "leave --redundant-experts out")
    spec = load_engine(dep.engine)
    if dep.engine_version is not None and dep.engine_version not in spec.versions:
        raise _bad("engine_version", dep.engine_version, f"is not a documented release of {spec.name}",
                   f"use one of {list(spec.versions)} or leave --engine-version out (the newest)")
    backends = spec.release(dep.engine_version).kernels.backends
    if dep.moe_backend is not None and dep.moe_backend not in backends:
        raise _bad("moe_backend", dep.moe_backend, f"is not a MoE backend of {spec.name} "
                   f"{spec.release(dep.engine_version).version}", f"use one of {sorted(backends)} or leave "
                   "--moe-backend out (the release's default)")
    dt = dep.dispatch_dtype  # quantised tokens feed the expert GEMMs' tensor cores of that format
    if dt not in (A2A_AUTO, "bf16") and FORMATS[dt].compute not in dict(hw.peak_flops):
        raise _bad("dispatch_dtype", dt, f"needs {FORMATS[dt].compute} tensor cores, which {hw.name} does not have",
                   "use bf16 or leave --dispatch-dtype out")
    if hw.vendor not in spec.vendors and not hw.what_if:
        ok = [e.name for e in list_engines() if hw.vendor in e.vendors]
        raise _bad("engine", dep.engine, f"does not run on {hw.vendor} GPUs ({hw.name})", f"use one of {ok}")


def validate_meaning(model: ModelSpec, hw: HardwareProfile, dep: Deployment) -> None:
    """Reject combinations that are valid layouts but mean nothing physically (docs/MODEL.md §3.9): expert
    placement or replicas on a dense model, DeepEP dispatch where no all-to-all runs (attention TP, one GPU, or no
    routed experts) or in a format the GPU has no tensor cores for, an engine on a GPU vendor it does not run on."""
    validate_options(model, hw, dep)
    moe = model.ffn.is_moe
    # "auto" (the defaults) asks for nothing: it resolves to the engine's all-to-all, and to no dispatch at all here
    stated = [(f, v) for f, v in (("all_to_all", dep.all_to_all), ("dispatch_dtype", dep.dispatch_dtype))
              if v not in (A2A_AUTO, "nccl")]
    if stated and (not moe or dep.dp == 1 or dep.gpus == 1):
        why = (f"{model.name} is dense (no MoE dispatch)" if not moe else "one GPU has no dispatch" if dep.gpus == 1
               else "with attention TP (dp 1) every rank holds every token and the MoE output is combined by an "
                    "all-reduce, so no all-to-all runs")
        field, value = stated[0]
        raise _bad(field, value, why, f"use attention data parallelism (--dp > 1) or leave --{field.replace('_', '-')} "
                   "out")


def validate(model: ModelSpec, hw: HardwareProfile, dep: Deployment) -> None:
    """Reject impossible layouts, unsupported formats and meaningless combinations (:func:`validate_meaning`) with
    one-line errors (no memory check here)."""
    validate_meaning(model, hw, dep)
    a, f = model.attention, model.ffn
    if dep.ep * dep.moe_tp != dep.gpus:
        raise _bad("ep", dep.ep, f"ep × moe_tp = {dep.ep} × {dep.moe_tp} ≠ gpus = tp × dp = {dep.gpus}",
                   "choose ep and moe_tp whose product is the GPU count")
    validate_domains(hw, dep)
    if a.q_heads % dep.tp:
        raise _bad("tp", dep.tp, f"does not divide the {a.q_heads} attention heads of {model.name}",
                   "pick a tp that divides the head count")
    if a.kv_heads % dep.tp and dep.tp % a.kv_heads:  # KV heads are split over tp ranks, or replicated on them
        raise _bad("tp", dep.tp, f"neither divides nor is a multiple of the {a.kv_heads} KV heads of {model.name}",
                   "pick a tp that divides the KV heads or is a multiple of them")
    la = a.linear
    if la is not None and (la.value_heads % dep.tp or la.key_heads % dep.tp):
        raise _bad("tp", dep.tp, f"does not divide the linear-attention heads ({la.key_heads}/{la.value_heads})",
                   "pick a tp that divides them")
    if f.dense_intermediate and f.dense_intermediate % dep.tp:
        raise _bad("tp", dep.tp, f"does not divide the dense FFN width {f.dense_intermediate}", "pick another tp")
    fmt = FORMATS[dep.dtype]
    if f.is_moe:
        n = dep.redundant_experts
        if f.experts % dep.ep and not n:  # with replicas, the slots (experts + n) must fill the ranks: checked below
            raise _bad("ep", dep.ep, f"does not divide the {f.experts} experts of {model.name}",
                       f"pick an ep that divides the expert count, or add {-f.experts % dep.ep} redundant experts "
                       "(expert slots a multiple of ep)")
        if n and (f.experts + n) % dep.ep:
            raise _bad("redundant_experts", n, f"{f.experts} experts + {n} replicas do not fill the {dep.ep} EP ranks "
                       "equally", f"use a multiple of ep = {dep.ep}")
        if n > f.experts * (dep.ep - 1):
            raise _bad("redundant_experts", n, f"more than {f.experts * (dep.ep - 1)} replicas would put two copies of "
                       f"an expert on one of the {dep.ep} ranks", "use fewer redundant experts")
        width = f.expert_intermediate // dep.moe_tp
        if f.expert_intermediate % dep.moe_tp:
            raise _bad("moe_tp", dep.moe_tp, f"does not divide the expert width {f.expert_intermediate}",
                       "raise ep (fewer ways of expert tensor parallelism)")
        if fmt.block and width % fmt.block:  # mxfp4 has none: engines pad its shards (specs.dtypes.padded_width)
            raise _bad("dtype", dep.dtype, f"needs expert widths divisible by {fmt.block}, but "
                       f"{f.expert_intermediate}/{dep.moe_tp} = {width}", "raise ep or use another dtype")
        if f.shared_experts and f.shared_intermediate % dep.tp:
            raise _bad("tp", dep.tp, f"does not divide the shared-expert width {f.shared_intermediate}",
                       "pick another tp")
    validate_op_dtype(hw, dep.dtype)
    validate_op_dtype(hw, dep.attn_dtype)
    key = A2A_MODES[resolve_all_to_all(hw, dep).all_to_all]
    if key not in hw.kernels.collectives:
        raise _bad("all_to_all", dep.all_to_all, f"{hw.name} has no measured parameters for it "
                   f"(kernels.collectives.{key})", "use all_to_all 'nccl', or add the collective with its source")


def validate_op_dtype(hw: HardwareProfile, dtype: str) -> None:
    """A weight format must have a tensor-core path on ``hw`` (directly or by weight-only dequantisation)."""
    peaks = dict(hw.peak_flops)
    if compute_dtype(FORMATS[dtype], peaks) not in peaks:
        ok = [d for d in FORMATS if compute_dtype(FORMATS[d], peaks) in peaks]
        raise _bad("dtype", dtype, f"needs {FORMATS[dtype].compute} tensor cores, which {hw.name} does not have",
                   f"use one of {ok}")
