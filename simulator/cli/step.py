"""`step`: the time of one target forward pass T(B, s) with its breakdown."""

from __future__ import annotations

import argparse
import sys

from ..cost.deployment import PRESETS, Deployment
from ._common import add_json_flag, add_tree_choice, any_case, choices_of, csv_list, default_of, print_json, tree_choice
from ._scenario import add_scenario_flags, request_from
from ._table import Col, add_wide_flag, render, wide


def add_engine_flag(p: argparse.ArgumentParser) -> None:
    """``--engine`` for commands that price single ops (``op``): the engine's kernel parameters."""
    eng = default_of(Deployment, "engine")
    engines = choices_of(Deployment, "engine")
    p.add_argument("--engine", default=eng, type=any_case(engines, "engine"), choices=engines,
                   help=f"serving engine whose measured kernel parameters are used: "
                        f"{', '.join(choices_of(Deployment, 'engine'))} (default {eng}; case-insensitive)")


def register(sub) -> None:
    p = sub.add_parser(
        "step", help="time of one forward pass T(B, s) with breakdown per op class",
        description=("Predict the wall time of one target forward pass for B requests with s new tokens each "
                     "(s = 1: decode; s = γ+1: verify) and its breakdown per op class, bytes, FLOPs and the bound."),
        epilog=("example: python -m simulator step --model qwen3-235b-a22b --hardware h100-sxm --dtype fp8_block "
                "--tp 8 --ep 8 --batch 1,16 --tokens 4 --mode prior --json"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_flags(p, single=True, speculation=False)
    p.add_argument("--mode", choices=tuple(PRESETS), default="refined",
                   help="mechanism preset (default refined); the mechanism flags override single mechanisms")
    p.add_argument("--batch", type=csv_list(int, "--batch"), required=True, help="batch sizes, e.g. 1,8,64")
    p.add_argument("--tokens", type=int, default=None, help="new tokens per request in this pass (s); required "
                   "unless --tree or --tree-parents is given")
    add_tree_choice(p, "verify", " per request: s = its node count, unique experts from the tree fit")
    add_json_flag(p)
    add_wide_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from dataclasses import asdict

    from ..pricing import price_pass, resolve

    tree = tree_choice(args)
    if tree is not None:
        parents, _, flag = tree
        if args.tokens is not None and args.tokens != len(parents):
            print(f"error: step: --tokens {args.tokens} disagrees with the {len(parents)}-node {flag}; give one",
                  file=sys.stderr)
            return 2
        args.tokens = len(parents)
    elif args.tokens is None:
        print("error: step: give --tokens S (tokens per request), --tree B1,B2,.. or --tree-parents FILE",
              file=sys.stderr)
        return 2
    sc = resolve(args.model, args.hardware, request_from(args, tree[0] if tree else None), mode=args.mode)
    model, hw, dep, mech = sc.model, sc.hardware, sc.deployment, sc.mechanisms
    r = price_pass(sc, args.batch, args.tokens)
    records = []
    for i in range(len(r.batch)):
        records.append({
            "model": model.name, "hardware": hw.name, "grounding": hw.grounding, "dtype": dep.dtype,
            "kv_dtype": dep.kv_dtype, "tp": dep.tp, "dp": dep.dp, "ep": dep.ep, "engine": dep.engine,
            "all_to_all": dep.all_to_all, "batch": int(args.batch[i]),
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
    from ..pricing import resolved_line

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
