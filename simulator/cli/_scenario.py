"""The one set of scenario flags of ``step``, ``sweep``, ``explain`` and ``schedule``, generated from the library's
declarations, and the one reader from parsed flags to a :class:`simulator.pricing.Request`.

Every :class:`~simulator.cost.deployment.Deployment` field (but ``moe_tp``, which follows from gpus / ep, and
``cuda_graphs``, which is ``--eager``) and every :class:`~simulator.cost.deployment.Mechanisms` field becomes a
flag with its declared choices or type; a field added to either becomes a flag of every command, with the same
default (None: the deployment rule's or the mode's) and meaning. A mechanism flag forces that setting in every mode
priced (sweep: every mode; explain: every walk step, coalition and prior reading; step, schedule: the mode).
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ..cost.deployment import Deployment, Mechanisms
from ..cost.ops import DEFAULT_CONTEXT
from ..errors import ParameterError
from ..params import Interval, Options, params_of
from ._common import FLAGS, any_case, csv_list

# Help of each generated flag (the CLI's words; the constraint itself is the declaration's).
HELP = {
    "dtype": "expert/linear weight format (default: native, or fp8_block for bf16 checkpoints on GPUs with fp8)",
    "kv_dtype": "KV-cache dtype (default bf16)",
    "tp": "attention tensor parallelism (default: largest valid <= gpus; dp = gpus / tp)",
    "dp": "attention data parallelism (default gpus / tp)",
    "ep": "expert parallelism; moe_tp = gpus / ep (default gcd(experts, gpus))",
    "placement": "expert -> EP rank placement (default random: the expectation over random placements; balanced = "
                 "EPLB-style packing by usage, contiguous = index blocks; docs/MODEL.md §3.2)",
    "redundant_experts": "EPLB-style replicas of the N hottest experts (ep must divide experts + N; default 0)",
    "engine": "serving engine whose measured kernel parameters price the ops (default trtllm)",
    "engine_version": "the engine version whose execution-mode defaults apply (default: the newest documented; "
                      "vllm 0.13: no async scheduling under SD; docs/MODEL.md §4.6)",
    "all_to_all": "MoE dispatch/combine kernels under attention DP (default auto: DeepEP low-latency across "
                  "scale-up domains or beyond 8 GPUs where the profile has it, else nccl; docs/MODEL.md §3.9)",
    "dispatch_dtype": "precision of dispatched tokens (default auto: the all-to-all mode's; combine is bf16)",
    "routing": "unique-expert model: uniform (MoESD), independent (popularity), overlap (max-ent IPF)",
    "kernel_curves": "per-op-class kernel efficiency curves (off: one global bandwidth efficiency)",
    "fixed_costs": "kernel floors, launch/collective latencies, host overhead (per_expert: MoESD's reading)",
    "l2": "re-reads of co-routed experts served from L2",
    "graph_padding": "CUDA-graph padding staircase and eager fallback above the capture cap",
    "round_overheads": "per-round state work (linear-attention state checkpoints)",
    "two_batch_overlap": "two micro-batches, one's dispatch/combine beside the other's compute (auto: as the "
                         "engine deploys it; docs/MODEL.md §3.5)",
    "draft_extend": "one draft pass per round over the gamma+1 verified positions (docs/MODEL.md §4.6)",
    "round_kernels": "sampling/top-k/rejection, tree-building and KV-slot kernels per round",
    "host_time": "engine host work per round and per decode step, exposed where the mode does not hide it",
    "sd_overlap": "CPU scheduling overlapped with GPU work in SD rounds",
    "decode_overlap": "CPU scheduling overlapped with GPU work in plain decoding",
    "model_error": "widen the speedup band by the refined model's held-out error on the public SD corpus (off: the "
                   "band of the ranged terms and the acceptance alone)",
}
# Mechanisms whose default is the engine's (docs/MODEL.md §4.6, specdec.engine_round.ENGINE_MODES), not the mode's.
ENGINE_DEFAULT = ("sd_overlap", "decode_overlap")
LAYOUT_FIELDS = tuple(f.name for f in fields(Deployment) if f.name not in ("moe_tp", "cuda_graphs"))
MECHANISM_FLAGS = tuple(f.name for f in fields(Mechanisms))
LAYOUT_CORE = ("dtype", "kv_dtype", "tp", "ep", "dp")  # Layout's own fields; the others travel as options


def _flag(name: str) -> str:
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def _add_declared(g, owner, name: str, what: str) -> None:
    param = params_of(owner)[name]
    kw: dict = {}
    opts = next((c for c in param.constraints if isinstance(c, Options)), None)
    span = next((c for c in param.constraints if isinstance(c, Interval)), None)
    if opts is not None:
        kw["choices"] = [v for v in opts.values if v is not None]
        kw["type"] = any_case(kw["choices"], name)
        kw["metavar"] = "|".join(str(v) for v in kw["choices"]) if len(kw["choices"]) <= 4 else None
    elif span is not None:
        kw["type"] = span.kind
    if kw.get("metavar") is None:
        kw.pop("metavar", None)
    default = "the engine's" if name in ENGINE_DEFAULT else "the mode's own"
    g.add_argument(_flag(name), default=None, help=HELP.get(name, f"{what} {name}") +
                   ("" if owner is Deployment else f": forced in every mode (default: {default})"), **kw)


def add_model_flags(p: argparse.ArgumentParser, single: bool) -> None:
    if single:
        p.add_argument("--model", required=True, metavar="NAME|PATH", help="target model (bundled name or YAML)")
        p.add_argument("--hardware", default="h100-sxm", metavar="NAME|PATH", help="GPU (default h100-sxm)")
    else:
        p.add_argument("--model", action="append", metavar="NAME|PATH[,...]",
                       help="target models, repeatable or comma list (default: every bundled MoE target that fits)")
        p.add_argument("--hardware", action="append", metavar="NAME|PATH[,...]",
                       help="GPUs, repeatable or comma list (default h100-sxm)")


def add_deployment_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("deployment (default: the deployment rule, docs/MODEL.md §4)")
    g.add_argument("--gpus", type=int, help="GPUs of the deployment (default 8, capped at the scale-up domain; "
                   "more: whole domains over the scale-out fabric)")
    for name in LAYOUT_FIELDS:
        _add_declared(g, Deployment, name, "deployment")
    g.add_argument("--eager", action="store_true", help="no CUDA graphs (adds the per-kernel eager cost)")
    g.add_argument("--context", type=int, default=DEFAULT_CONTEXT,
                   help=f"tokens already in the KV cache per request (default {DEFAULT_CONTEXT})")


def add_mechanism_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mechanisms (docs/MODEL.md §3.6, §4.5)")
    for name in MECHANISM_FLAGS:
        _add_declared(g, Mechanisms, name, "mechanism")


def add_routing_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--overlap", type=csv_list(float, "--overlap"), metavar="O1,O2,...",
                   help="routing overlap at lags 1,2,... as fractions (replaces the model's lags; its popularity "
                        "is kept unless --popularity is given)")
    p.add_argument("--popularity", help="expert popularity: uniform, zipf:S or skew:X (replaces the model's)")


def _accept_length(text: str) -> tuple[float, int]:
    al, _, at = text.partition("@")
    try:
        value, gamma = float(al), int(at) if at else 3
        if gamma < 1:
            raise ValueError
        return value, gamma
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--accept-length must be AL or AL@GAMMA (mean accepted tokens per round incl. the bonus token, "
            f"measured at draft length GAMMA >= 1; default 3), e.g. 2.73@3; got {text!r}") from None


def add_speculation_flags(p: argparse.ArgumentParser) -> None:
    from ..pricing import DEFAULT_DRAFTER

    acc = p.add_mutually_exclusive_group()
    acc.add_argument("--acceptance", type=csv_list(float, "--acceptance"), metavar="ALPHA|A1,A2,...",
                     help="per-token acceptance α, or per-position acceptances a1,a2,... (default: the drafter "
                          "family's public per-position log for the target's kind, docs/MODEL.md §4.1; ngram has none)")
    acc.add_argument("--accept-length", type=_accept_length, metavar="AL[@GAMMA]",
                     help="mean acceptance length incl. bonus token as engines report it, measured at draft "
                          "length GAMMA (default 3); converted to α")
    p.add_argument("--drafter", default=DEFAULT_DRAFTER, metavar="KIND",
                   help="eagle (default) | eagle3[:NAME] | mtp | ngram | model:NAME (e.g. model:qwen3-0.6b) | ratio:C")


def add_scenario_flags(p: argparse.ArgumentParser, *, single: bool, speculation: bool = True) -> None:
    """Model/GPU, deployment, mechanism, routing (and, with ``speculation``, drafter/acceptance) flags."""
    add_model_flags(p, single)
    add_deployment_flags(p)
    add_mechanism_flags(p)
    add_routing_flags(p)
    if speculation:
        add_speculation_flags(p)


def acceptance_from(args):
    """The :class:`~simulator.specdec.Acceptance` the flags ask for (None: the default)."""
    from ..specdec import Acceptance

    if getattr(args, "accept_length", None) is not None:
        al, at = args.accept_length
        return Acceptance.from_accept_length(al, at)
    if getattr(args, "acceptance", None) is not None:
        if len(args.acceptance) == 1:
            return Acceptance.from_alpha(args.acceptance[0])
        return Acceptance.from_positions(args.acceptance)
    return None


def forced_mechanisms(args) -> tuple[tuple[str, str], ...]:
    """The (mechanism, setting) pairs the mechanism flags force."""
    return tuple((f, getattr(args, f)) for f in MECHANISM_FLAGS if getattr(args, f, None) is not None)


def request_from(args, tree: tuple | None = None):
    """The :class:`simulator.pricing.Request` of the parsed flags (``tree``: the one draft tree the command
    prices instead of a chain, if any)."""
    from ..pricing import Layout, Request

    opts = tuple((f, getattr(args, f)) for f in LAYOUT_FIELDS
                 if f not in LAYOUT_CORE and getattr(args, f, None) is not None)
    if getattr(args, "eager", False):
        if getattr(args, "graph_padding", None) == "on":  # padding to captured graphs, with no graphs captured
            raise ParameterError("--graph-padding: 'on' pads each pass to a captured CUDA-graph batch, but --eager "
                                 "captures none; got 'on' with --eager: leave one of them out")
        opts += (("cuda_graphs", False),)
    layout = Layout(dtype=args.dtype, kv_dtype=args.kv_dtype or "bf16", tp=args.tp, ep=args.ep, gpus=args.gpus,
                    dp=args.dp, options=opts)
    return Request(layout=layout, mechanisms=forced_mechanisms(args),
                   drafter=getattr(args, "drafter", None) or "eagle", acceptance=acceptance_from(args),
                   context=args.context, lags=tuple(args.overlap) if args.overlap else None,
                   popularity=args.popularity, tree=tree)
