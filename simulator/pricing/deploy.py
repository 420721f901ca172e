"""The one deployment rule of ``step``, ``sweep``, ``explain`` and every study, and the memory-fit filter
(docs/MODEL.md §4, "Default study"). Every command prints the deployment it resolved with :func:`resolved_line`.

Rule, for ``gpus`` GPUs (default 8, one HGX node, capped at the GPU's scale-up domain):

- dtype: the model's native format when it is not bf16 (fp8_block or mxfp4 checkpoints); for a bf16 checkpoint,
  fp8_block when the GPU has fp8 tensor cores (the study ran FP8 on H100), else bf16. When a format's block
  constraint rejects the layout, the next of fp8_block → fp8 → bf16 is tried. A dtype given by the user is kept.
- attention: the largest tp ≤ min(gpus, 8, the scale-up domain) that divides the heads (and dense widths),
  dp = gpus / tp (dp = 1: TP8); more GPUs run attention data parallel (``ATTENTION_TP_MAX``).
- experts: ep = gcd(experts, gpus) (EP8 when the expert count is divisible by 8), moe_tp = gpus / ep.
- ``dp`` given (``step --dp``): tp = gpus / dp (gpus = tp · dp when both are given).
- a model named by a hub id whose checkpoint format the catalog states (``hf_id``; e.g. Qwen/Qwen3-30B-A3B-FP8:
  fp8_block) is deployed in that format when it is not bf16, as if ``dtype`` were given (an FP8 checkpoint on a GPU
  without fp8 is refused, never priced as bf16).
- KV cache bf16; engine, placement, redundant experts and CUDA graphs as given (library defaults otherwise).
  The first combination :func:`~simulator.cost.deployment.validate` accepts is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..cost.deployment import WAYS, Deployment, validate, validate_options
from ..cost.step import check_memory
from ..errors import InfeasibleError
from ..params import parameter_error
from ..specdec.drafters import drafter_weights
from ..specs.dtypes import FORMATS, compute_dtype
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec

DEFAULT_GPUS = 8
DTYPE_FALLBACK = ("fp8_block", "fp8", "bf16")
# The widest attention tensor parallelism the default rule deploys: the engines' wide-EP recipes run attention data
# parallel beyond one 8-GPU group, inside an NVL72 rack too (LMSYS GB200 NVL72 parts I and II: DP attention over 48
# and 72 GPUs; SGLang's 96xH100 command: --dp-size 96 with --enable-dp-attention, sgl-project/sglang#6017;
# TensorRT-LLM examples/wide_ep: enable_attention_dp) — TP64 attention is a layout no engine deploys.
ATTENTION_TP_MAX = 8


@dataclass(frozen=True)
class Layout:
    """User overrides of the deployment (None = the default rule). ``options``: other :class:`Deployment`
    fields passed through as given, e.g. ``(("engine", "vllm"), ("cuda_graphs", False))``."""

    dtype: str | None = None
    kv_dtype: str = "bf16"
    tp: int | None = None
    ep: int | None = None
    gpus: int | None = None
    dp: int | None = None
    options: tuple[tuple[str, object], ...] = ()


def _supports(hw: HardwareProfile, dtype: str) -> bool:
    return compute_dtype(FORMATS[dtype], dict(hw.peak_flops)) in hw.peak_flops


def default_dtype(model: ModelSpec, hw: HardwareProfile) -> tuple[str, ...]:
    """Candidate dtypes in order of preference."""
    first = model.native_dtype if model.native_dtype != "bf16" else "fp8_block"
    cands = [first] + [d for d in DTYPE_FALLBACK if d != first]
    return tuple(d for d in cands if _supports(hw, d))


def node_gpus(hw: HardwareProfile, gpus: int | None) -> int:
    if gpus is not None:
        d = hw.domain_size
        m = -(-gpus // d) if d > 0 else 1
        if gpus < 1 or (d > 0 and gpus > d and (hw.scale_out_bandwidth <= 0 or gpus % m)):
            fabric = (f"or split evenly over the fewest domains over the scale-out fabric (here a multiple of {m})"
                      if hw.scale_out_bandwidth > 0 else "(the profile states no scale-out fabric)")
            raise parameter_error("default_deployment", "gpus",
                                  f"in [1, {d}] (the {hw.name} scale-up domain) {fabric}", gpus)
        return gpus
    return min(DEFAULT_GPUS, hw.domain_size) if hw.domain_size > 0 else DEFAULT_GPUS


def default_deployment(model: ModelSpec, hw: HardwareProfile, layout: Layout | None = None) -> Deployment:
    """The deployment the rule above picks (user overrides in ``layout`` are kept as given)."""
    lay = layout or Layout()
    for name in ("tp", "ep", "dp", "gpus"):
        if getattr(lay, name) is not None:
            WAYS.check(getattr(lay, name), name, "default_deployment")
    if lay.dp is not None and lay.gpus is None and lay.tp is not None:
        lay = replace(lay, gpus=lay.tp * lay.dp)
    gpus = node_gpus(hw, lay.gpus)
    if lay.dp is not None:
        if gpus % lay.dp or (lay.tp is not None and lay.tp * lay.dp != gpus):
            raise parameter_error("default_deployment", "dp", f"a divisor of the deployment's {gpus} GPUs with "
                                  "tp · dp = GPUs", lay.dp)
        lay = replace(lay, tp=gpus // lay.dp)
    if lay.tp is not None and gpus % lay.tp:
        raise parameter_error("default_deployment", "tp", f"a divisor of the deployment's {gpus} GPUs (the rest run "
                              "as data-parallel attention groups), or change 'gpus'", lay.tp)
    if lay.ep is not None and gpus % lay.ep:
        raise parameter_error("default_deployment", "ep", f"a divisor of the deployment's {gpus} GPUs, or change "
                              "'gpus'", lay.ep)
    # a checkpoint named by a hub id that states a format other than bf16 is deployed in it, as --dtype would be
    asked = lay.dtype or (model.checkpoint_dtype if model.checkpoint_dtype not in ("", "bf16") else None)
    dtypes = (asked,) if asked else default_dtype(model, hw)
    top = min(gpus, hw.domain_size, ATTENTION_TP_MAX) if hw.domain_size > 0 else min(gpus, ATTENTION_TP_MAX)
    tps = (lay.tp,) if lay.tp else tuple(t for t in range(top, 0, -1) if gpus % t == 0)
    e = model.ffn.experts
    if lay.ep:
        eps = (lay.ep,)
    elif e:
        g = math.gcd(e, gpus)
        eps = (g,) + tuple(x for x in range(gpus, 0, -1) if gpus % x == 0 and x < g and e % x == 0)
    else:
        eps = (1,)
    validate_options(model, hw, Deployment(**dict(lay.options)))  # layout-independent: its own reason, at once
    last: Exception | None = None
    for dtype in dtypes:
        for ep in eps:
            for tp in tps:
                try:
                    dep = Deployment(dtype=dtype, kv_dtype=lay.kv_dtype, tp=tp, dp=gpus // tp, ep=ep,
                                     moe_tp=gpus // ep, **dict(lay.options))
                    validate(model, hw, dep)
                    return dep
                except InfeasibleError as exc:
                    last = last or exc  # the preferred layout's reason (a later one's may mislead)
    what = f"dtype={lay.dtype}" if lay.dtype else (f"dtype={asked} (its checkpoint's format)" if asked else
                                                   "dtype=auto")
    raise InfeasibleError(f"no valid deployment of {model.name} on {gpus}x {hw.name} with "
                          f"{what}, tp={lay.tp or 'auto'}, ep={lay.ep or 'auto'}: {last}")


def resolved_line(dep: Deployment, context: int) -> str:
    """The one printed form of a resolved deployment, e.g. ``resolved: 8 GPUs fp8_block tp8 ep8 context 1024`` (the
    GPU count always: tp · dp, e.g. 16 for ``--tp 8 --dp 2``, stated even when no --gpus was given)."""
    return f"resolved: {dep.gpus} GPUs {dep.label} context {int(context)}"


def check_context(model: ModelSpec, context: float, tokens: float = 0, *, param: str = "context",
                  owner: str = "price", added: str = "a pass adds") -> None:
    """``context`` cached tokens plus ``tokens`` new ones per request within the model's longest sequence
    (``ModelSpec.max_context``: its config's positions, or the card's rope-scaled maximum; unchecked when the spec
    states none), else one error naming ``param`` with the most it may be."""
    most = model.max_context
    if most and context + tokens > most:
        room = f"{most - int(tokens):,} tokens" + (f" (its {most:,} less the {int(tokens):,} {added})" if tokens
                                                   else "")
        raise parameter_error(owner, param, f"at most {room} for {model.name}, whose longest context is {most:,} "
                              f"tokens (max_context in its model YAML)", int(context))


def fitting_batches(sc, batch, tokens: int, context: int | None = None) -> tuple[list[float], str]:
    """The batches at which the scenario's SD server fits (ascending): the target's weights and KV plus its
    drafter's weights (:func:`~simulator.specdec.drafters.drafter_weights`) on every GPU, at ``context`` (default
    the scenario's); and a one-line note when some do not ("" if all fit)."""
    model, hw, dep = sc.model, sc.hw, sc.deployment
    context = sc.context if context is None else int(context)
    extra = drafter_weights(sc.drafter, model, dep, hw)
    grid = sorted(float(x) for x in batch)

    def error(b: float) -> str:
        try:
            check_memory(model, hw, dep, b, tokens, context, extra)
        except InfeasibleError as exc:
            return str(exc)
        return ""

    # the need (weights + KV) grows with the batch, so the fitting batches are a prefix: bisect for its end
    lo, hi = 0, len(grid)  # grid[:lo] fit; grid[hi:] do not
    while lo < hi:
        mid = (lo + hi) // 2
        if error(grid[mid]):
            hi = mid
        else:
            lo = mid + 1
    return grid[:lo], (error(grid[lo]) if lo < len(grid) else "")
