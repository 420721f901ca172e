"""`step`: the time of one target forward pass T(B, s) with its breakdown."""

from __future__ import annotations

import argparse
import sys

from ..cost.deployment import PRESETS, Deployment, Mechanisms
from ..cost.ops import DEFAULT_CONTEXT
from ._common import add_json_flag, add_tree_choice, choices_of, csv_list, default_of, print_json, tree_choice
from ._table import Col, add_wide_flag, render, wide

MECH_FLAGS = ("routing", "kernel_curves", "fixed_costs", "l2")


def add_deployment_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="bundled model name or path to a model YAML")
    p.add_argument("--hardware", required=True, help="bundled hardware name or path to a profile YAML")
    p.add_argument("--dtype", help="expert/linear weight format (default: the deployment rule of sweep/explain: "
                   "native, or fp8_block for bf16 checkpoints on GPUs with fp8)")
    kv = default_of(Deployment, "kv_dtype")
    p.add_argument("--kv-dtype", default=kv, help=f"KV-cache dtype: {', '.join(choices_of(Deployment, 'kv_dtype'))} "
                                                  f"(default {kv})")
    p.add_argument("--gpus", type=int, help="GPUs of the deployment (default 8, capped at the scale-up domain; more: "
                   "whole domains over the scale-out fabric)")
    for f, what in (("tp", "attention tensor parallelism (default: largest valid ≤ gpus)"),
                    ("dp", "attention data parallelism (default gpus / tp)"),
                    ("ep", "expert parallelism; moe_tp = GPUs / ep (default gcd(experts, gpus))")):
        p.add_argument(f"--{f}", type=int, help=what)
    p.add_argument("--context", type=int, default=DEFAULT_CONTEXT,
                   help=f"cached tokens per request (default {DEFAULT_CONTEXT})")
    p.add_argument("--eager", action="store_true", help="no CUDA graphs (adds the per-kernel eager cost)")
    add_placement_flags(p)
    add_engine_flag(p)
    a2a = default_of(Deployment, "all_to_all")
    p.add_argument("--all-to-all", default=a2a, choices=choices_of(Deployment, "all_to_all"),
                   help=f"MoE dispatch/combine kernels under attention DP (default {a2a}; deepep_*: DeepEP's "
                        "normal / low-latency modes, docs/MODEL.md §3.9)")


def engine_name(text: str) -> str:
    """Engine names are case-insensitive and may be written with a hyphen (TRTLLM, TRT-LLM, SGLang, vLLM)."""
    return text.strip().lower().replace("-", "")


engine_name.__name__ = "engine"


def add_engine_flag(p: argparse.ArgumentParser) -> None:
    eng = default_of(Deployment, "engine")
    p.add_argument("--engine", default=eng, type=engine_name,
                   help=f"serving engine whose measured kernel parameters are used: "
                        f"{', '.join(choices_of(Deployment, 'engine'))} (default {eng}; case-insensitive)")


def add_placement_flags(p: argparse.ArgumentParser) -> None:
    pl = default_of(Deployment, "placement")
    p.add_argument("--placement", default=pl, choices=choices_of(Deployment, "placement"),
                   help=f"expert -> EP rank placement (default {pl}: the expectation over random placements, since "
                        "expert indices carry no popularity order; balanced = an ideal balancer, contiguous = index "
                        "blocks; docs/MODEL.md §3.2)")
    p.add_argument("--redundant-experts", type=int, default=default_of(Deployment, "redundant_experts"),
                   metavar="N", help="EPLB-style replicas of the N hottest experts (ep must divide experts + N)")


def add_mechanism_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=tuple(PRESETS), default="refined",
                   help="mechanism preset (default refined); the flags below override single mechanisms")
    for f in MECH_FLAGS:
        p.add_argument(f"--{f.replace('_', '-')}", choices=choices_of(Mechanisms, f))
    p.add_argument("--overlap", type=csv_list(float, "--overlap"), metavar="o1,o2,..",
                   help="lag overlaps o(1..D) as fractions, replacing the model's profile")
    p.add_argument("--popularity", help="expert popularity with --overlap: uniform, zipf:S or skew:X")


def register(sub) -> None:
    p = sub.add_parser(
        "step", help="time of one forward pass T(B, s) with breakdown per op class",
        description=("Predict the wall time of one target forward pass for B requests with s new tokens each "
                     "(s = 1: decode; s = γ+1: verify) and its breakdown per op class, bytes, FLOPs and the bound."),
        epilog=("example: python -m simulator step --model qwen3-235b-a22b --hardware h100-sxm --dtype fp8_block "
                "--tp 8 --ep 8 --batch 1,16 --tokens 4 --mode prior --json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_deployment_flags(p)
    p.add_argument("--batch", type=csv_list(int, "--batch"), required=True, help="batch sizes, e.g. 1,8,64")
    p.add_argument("--tokens", type=int, default=None, help="new tokens per request in this pass (s); required "
                   "unless --tree or --tree-parents is given")
    add_tree_choice(p, "verify", " per request: s = its node count, unique experts from the tree fit")
    add_mechanism_flags(p)
    add_json_flag(p)
    add_wide_flag(p)
    p.set_defaults(func=run)


def resolve(args):
    """(model, hardware, deployment, mechanisms, overlap) from parsed flags."""
    from ..cost.deployment import preset
    from ..cost.routing import OverlapInput
    from ..errors import ParameterError
    from ..overlap.feasible import check_model_statistics, check_overlap_flags
    from ..specs.catalog import load_hardware, load_model
    from ..sweep.deploy import Layout, default_deployment

    model = load_model(args.model)
    check_model_statistics(model)
    hw = load_hardware(args.hardware)
    opts = (("cuda_graphs", not args.eager), ("engine", args.engine), ("placement", args.placement),
            ("redundant_experts", args.redundant_experts), ("all_to_all", args.all_to_all))
    dep = default_deployment(model, hw, Layout(dtype=args.dtype, kv_dtype=args.kv_dtype, tp=args.tp, ep=args.ep,
                                               gpus=args.gpus, dp=args.dp, options=opts))
    mech = preset(args.mode).with_(**{f: getattr(args, f, None) for f in MECH_FLAGS})
    overlap = None
    if getattr(args, "overlap", None):
        overlap = OverlapInput(tuple(args.overlap), args.popularity or "uniform")
        if model.ffn.is_moe:
            check_overlap_flags(model.ffn.experts, model.ffn.top_k, overlap.lags, overlap.popularity)
    elif getattr(args, "popularity", None):
        raise ParameterError("--popularity needs --overlap; give the lag overlaps too")
    return model, hw, dep, mech, overlap


def run(args) -> int:
    from dataclasses import asdict

    from ..cost.step import step_time

    model, hw, dep, mech, overlap = resolve(args)
    tree = tree_choice(args)
    if tree is not None:
        from dataclasses import replace

        from ..cost.routing import model_overlap

        parents, _, flag = tree
        if args.tokens is not None and args.tokens != len(parents):
            print(f"error: step: --tokens {args.tokens} disagrees with the {len(parents)}-node {flag}; give one",
                  file=sys.stderr)
            return 2
        args.tokens = len(parents)
        overlap = replace(model_overlap(model, overlap), tree=parents)
    elif args.tokens is None:
        print("error: step: give --tokens S (tokens per request), --tree B1,B2,.. or --tree-parents FILE",
              file=sys.stderr)
        return 2
    r = step_time(model, hw, dep, args.batch, args.tokens, args.context, mech, overlap)
    records = []
    for i, b in enumerate(r.batch):
        records.append({
            "model": model.name, "hardware": hw.name, "grounding": hw.grounding, "dtype": dep.dtype,
            "kv_dtype": dep.kv_dtype, "tp": dep.tp, "dp": dep.dp, "ep": dep.ep, "engine": dep.engine,
            "all_to_all": dep.all_to_all, "batch": int(b),
            "tokens": int(r.tokens[i]),
            "context": args.context,
            "mechanisms": asdict(mech),
            "time_us": float(r.time[i] * 1e6),
            "breakdown": {k: float(v[i] * 1e6) for k, v in r.breakdown.items()},
            "hbm_bytes": float(r.hbm_bytes[i]), "l2_bytes": float(r.l2_bytes[i]), "flops": float(r.flops[i]),
            "bound": str(r.bound[i]),
            "placement": dep.placement, "redundant_experts": dep.redundant_experts,
            "unique_experts": float(r.unique_experts[i]), "unique_experts_total": float(r.unique_experts_total[i]),
            "busiest_rank_experts": float(r.unique_experts[i]),
        })
    if args.json:
        print_json(records)
        return 0
    from ..cost.deployment import engine_note
    from ..sweep.deploy import resolved_line

    print(resolved_line(dep, args.context))
    if note := engine_note(hw, dep.engine):
        print(note)
    title = (f"{model.display_name} on {dep.gpus}x {hw.name}, s={args.tokens}; mechanisms {mech.routing}/"
             f"{mech.kernel_curves}/{mech.fixed_costs}/{mech.l2}")
    cols = (Col("batch"), Col("time us"), Col("bound"), Col("U/rank"), Col("breakdown (us)", "<", wrap=True))
    rows = [(str(rec["batch"]), f"{rec['time_us']:.1f}", rec["bound"], f"{rec['unique_experts']:.2f}",
             ", ".join(f"{k} {v:.0f}" for k, v in rec["breakdown"].items() if v > 0.5)) for rec in records]
    print(render(cols, rows, title=title, wide=wide(args)))
    return 0
