"""`explain`: walk from the prior cost model to the refined one, one mechanism at a time (attribution)."""

from __future__ import annotations

import argparse

from ._common import add_force_flag, add_json_flag, print_json
from ._scenario import add_scenario_flags, request_from
from ._table import add_wide_flag, wide
from .sweep import add_tree_flags, trees_from

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def register(sub) -> None:
    p = sub.add_parser(
        "explain", help="attribute the prior -> refined speedup gap to routing, kernel curves, fixed costs, L2",
        description=("Start from the prior (MoESD) model and switch the mechanisms to their refined setting one "
                     "at a time, in the order routing overlap -> kernel-efficiency curves -> fixed costs -> L2 "
                     "(simulator.cost.deployment.WALK). After each step print T_decode, T_verify, both ratios, "
                     "unique experts, the round time and the speedup. Beside the walk: the order-independent "
                     "Shapley values of the same mechanisms (T_decode/T_verify and speedup; they sum to the "
                     "prior -> refined change) with each mechanism's change when switched first and last, and "
                     "the prior's range over its readings (docs/MODEL.md §3.6, §5.3)."),
        epilog=("examples: python -m simulator explain --model qwen3-235b-a22b\n"
                "          python -m simulator explain --model qwen3-235b-a22b --batch 16 --draft-len 4 "
                "--plot waterfall.png"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_flags(p, single=True)
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--draft-len", type=int, default=3, help="draft length γ >= 1 (default 3)")
    p.add_argument("--plot", metavar="FILE", help="write a waterfall figure to FILE (.png, .svg or .pdf)")
    add_tree_flags(p)
    add_force_flag(p, file=True)
    add_json_flag(p)
    add_wide_flag(p)
    p.set_defaults(func=cmd_explain)


def cmd_explain(args) -> int:
    from ..errors import ParameterError
    from ..outputs import claim
    from ..sweep import explain, format_attribution, plot_waterfall

    trees = trees_from(args)
    if len(trees) > 1:
        raise ParameterError(f"explain takes one draft tree; got {len(trees)} (--tree/--tree-parents): give one")
    if args.plot:  # before any work: exactly this file is written, or one line says why not
        claim(args.plot, param="plot", force=args.force, suffixes=FIGURE_SUFFIXES)
    a = explain(args.model, args.hardware, request_from(args, trees[0] if trees else None), batch=args.batch,
                draft_len=args.draft_len)
    path = plot_waterfall(a, args.plot) if args.plot else None
    if args.json:
        d = a.as_dict()
        if path:
            d["plot"] = path
        print_json(d)
    else:
        from ..cost.deployment import engine_note
        from ..specs.catalog import load_hardware

        print(format_attribution(a, wide=wide(args)))
        if note := engine_note(load_hardware(args.hardware), a.deployment.engine):
            print(note)
        if path:
            print(f"wrote {path}")
    return 0
