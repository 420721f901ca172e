"""The one set of scenario flags of ``step``, ``sweep``, ``explain``, ``schedule``, ``serve`` and ``report``, generated
from the knob table (:data:`simulator.pricing.knobs.KNOBS`), the one reader from parsed flags to a
:class:`simulator.pricing.Request` and its inverse (:func:`argv_of`: a request as the flags that ask for it).

Every knob becomes a flag (:attr:`~simulator.pricing.knobs.Knob.flag`) with its declared choices or type; a
:class:`~simulator.cost.deployment.Deployment` or :class:`~simulator.cost.deployment.Mechanisms` field added to the
library is a knob, so a flag of every command, with the same default (None: the deployment rule's or the mode's) and
meaning. A mechanism flag forces that setting in every mode priced (sweep: every mode; explain: every walk step,
coalition and prior reading; step, schedule: the mode). The draft tree's flag (``--tree-parents``) is added by the
commands that price one (``simulator.cli.sweep.add_tree_flags``).
"""

from __future__ import annotations

import argparse

from ..cost.ops import DEFAULT_CONTEXT
from ..errors import ParameterError
from ..params import Interval, Options
from ..pricing.knobs import KNOBS, Knob, by_name, request_knobs
from ._common import any_case, csv_list

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
    "engine": "serving engine: a name (list engines) or an engine file; what it executes and whose measured kernel "
              "parameters price the ops (default trtllm)",
    "engine_version": "the engine release whose execution applies (default: the newest documented; vllm 0.13: no "
                      "async scheduling under SD; show engine NAME)",
    "moe_backend": "the engine's MoE backend setting at launch, e.g. trtllm TRTLLM or CUTLASS (default: the "
                   "release's; show engine NAME lists them)",
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
    "gpus": "GPUs of the deployment (default 8, capped at the scale-up domain; more: whole domains over the "
            "scale-out fabric)",
    "context": f"tokens already in the KV cache per request (default {DEFAULT_CONTEXT})",
    "model_error": "widen the speedup band by the refined model's held-out error on the public SD corpus (off: the "
                   "band of the ranged terms and the acceptance alone)",
}
# Mechanisms whose default is the engine's (docs/MODEL.md §4.6, specdec.engine_round.ENGINE_MODES), not the mode's.
ENGINE_DEFAULT = ("sd_overlap", "decode_overlap")
MECHANISM_FLAGS = tuple(k.name for k in KNOBS if k.home == "mechanisms")


def _dest(k: Knob) -> str:
    return k.flag[2:].replace("-", "_")


def _checked(parse, param):
    """``parse``, then the parameter's declaration: a value it refuses is argparse's one-line error on the flag."""
    def check(text: str):
        value = parse(text)
        if not param.contains(value):
            raise argparse.ArgumentTypeError(f"must be {param.expected()}; got {text!r}")
        return value

    check.__name__ = parse.__name__
    return check


def _add_declared(g, k: Knob) -> None:
    name, param = k.name, k.param
    kw: dict = {}
    opts = next((c for c in param.constraints if isinstance(c, Options)), None)
    span = next((c for c in param.constraints if isinstance(c, Interval)), None)
    other = [c for c in param.constraints if c is not None and c is not opts and c is not span]
    if opts is not None:
        names = [v for v in opts.values if v is not None]
        kw["type"] = any_case(names, name)
        if other:  # a name or something else (an engine file's path): the declaration checks it, with the fix
            kw["type"] = _checked(kw["type"], param)
            kw["metavar"] = "|".join(str(v) for v in names) + "|PATH"
        else:
            kw["choices"] = names
            kw["metavar"] = "|".join(str(v) for v in names) if len(names) <= 4 else None
    elif span is not None:
        kw["type"] = span.kind
    if kw.get("metavar") is None:
        kw.pop("metavar", None)
    default = "the engine's" if name in ENGINE_DEFAULT else "the mode's own"
    g.add_argument(k.flag, default=k.default, help=HELP.get(name, f"{k.home} {name}") +
                   ("" if k.home != "mechanisms" else f": forced in every mode (default: {default})"), **kw)


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
    for k in KNOBS:
        if k.home in ("layout", "deployment") and k.kind != "bool":
            _add_declared(g, k)
    g.add_argument(by_name("cuda_graphs").flag, action="store_true", help="no CUDA graphs (adds the per-kernel eager "
                   "cost)")
    _add_declared(g, by_name("context"))


def add_mechanism_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mechanisms (docs/MODEL.md §3.6, §4.5)")
    for k in KNOBS:
        if k.home == "mechanisms":
            _add_declared(g, k)


def add_routing_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(by_name("lags").flag, type=csv_list(float, "--overlap"), metavar="O1,O2,...",
                   help="routing overlap at lags 1,2,... as fractions (replaces the model's lags; its popularity "
                        "is kept unless --popularity is given)")
    p.add_argument(by_name("popularity").flag,
                   help="expert popularity: uniform, zipf:S or skew:X (replaces the model's)")


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
    acc = p.add_mutually_exclusive_group()
    acc.add_argument(by_name("acceptance").flag, type=csv_list(float, "--acceptance"), metavar="ALPHA|A1,A2,...",
                     help="per-token acceptance α, or per-position acceptances a1,a2,... (default: the drafter "
                          "family's public per-position log for the target's kind, docs/MODEL.md §4.1; ngram has none)")
    acc.add_argument("--accept-length", type=_accept_length, metavar="AL[@GAMMA]",
                     help="mean acceptance length incl. bonus token as engines report it, measured at draft "
                          "length GAMMA (default 3); converted to α")
    d = by_name("drafter")
    p.add_argument(d.flag, default=d.default, metavar="KIND",
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


def _value(args, k: Knob):
    """The value the parsed flags give knob ``k`` (None: not given)."""
    if k.name == "cuda_graphs":
        return False if getattr(args, "eager", False) else None
    if k.name == "acceptance":
        return acceptance_from(args)
    v = getattr(args, _dest(k), None)
    return tuple(v) if isinstance(v, list) else v


def request_from(args, tree: tuple | None = None):
    """The :class:`simulator.pricing.Request` of the parsed flags (``tree``: the one draft tree the command
    prices instead of a chain, if any): every knob of the table, by its flag."""
    from ..pricing import Request, request

    if getattr(args, "eager", False) and getattr(args, "graph_padding", None) == "on":
        # padding to captured graphs, with no graphs captured
        raise ParameterError("--graph-padding: 'on' pads each pass to a captured CUDA-graph batch, but --eager "
                             "captures none; got 'on' with --eager: leave one of them out")
    knobs = {k.name: _value(args, k) for k in KNOBS if k.name != "tree"}
    return request(Request(tree=tree), **knobs)


def argv_of(req) -> list[str]:
    """The flags that ask for ``req`` (:func:`request_from`'s inverse: parsed, they give a request that prices the
    same); the tree as ``--tree-parents=P0,P1,...``."""
    out = []
    for name, v in request_knobs(req).items():
        k = by_name(name)
        out.append("--eager" if k.name == "cuda_graphs" and v is False else f"{k.flag}={k.text(v)}")
    return [a for a in out if a != "--eager=on"]
