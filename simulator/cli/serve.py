"""`serve`: a served workload (C closed-loop requests of ISL -> OSL tokens) with and without speculative decoding:
the serving-level speedup (throughput and TPOT) next to the step-level one (docs/MODEL.md §4.7)."""

from __future__ import annotations

import argparse
from textwrap import fill

from ..render.textable import Col, render
from ._common import add_json_flag, csv_list, print_json
from ._scenario import add_scenario_flags, request_from
from ._table import add_wide_flag, wide
from .sweep import add_tree_flags, trees_from

DEFAULT_CONCURRENCY = (1, 8, 32, 64)


def register(sub) -> None:
    p = sub.add_parser(
        "serve", help="serving-level speedup of a workload (concurrency, ISL, OSL) beside the step-level one",
        description=fill("Price C closed-loop requests of ISL prompt and OSL output tokens in aggregated serving, "
                         "with and without speculative decoding: the decode batch each arm keeps (requests "
                         "finishing and arriving, prefill chunks mixed into decode iterations or run apart, the "
                         "engine's running-request cap under SD), output tokens/s and TPOT of both, and the "
                         "serving-level speedups next to the step-level speedup at batch C. Benchmarks measure "
                         "the serving level; the sweep reports the step level (docs/MODEL.md §4.7).", 100),
        epilog="example: python -m simulator serve --model qwen3-30b-a3b --engine sglang --isl 1024 --osl 512",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scenario_flags(p, single=True)
    p.add_argument("--concurrency", type=csv_list(int, "--concurrency"), default=None, metavar="C1,C2,...",
                   help=f"concurrent requests (default {','.join(map(str, DEFAULT_CONCURRENCY))})")
    p.add_argument("--isl", type=int, default=1024, help="prompt tokens per request (default 1024)")
    p.add_argument("--osl", type=int, default=512, help="output tokens per request (default 512)")
    p.add_argument("--draft-len", type=int, default=3, help="draft length γ (default 3; 0 = plain decoding)")
    p.add_argument("--prefill", default=None, metavar="mixed|separate",
                   help="prefill chunks mixed into decode iterations, or run as iterations of their own "
                        "(default: the engine's)")
    p.add_argument("--mode", default="refined", help="cost-model preset (default refined)")
    add_tree_flags(p)
    add_json_flag(p)
    add_wide_flag(p)
    context = next(a for a in p._actions if a.dest == "context")
    context.help = "not taken: the decode context follows the workload, ISL + OSL / 2 (set --isl and --osl)"
    p.set_defaults(func=cmd_serve, context=None)


def cmd_serve(args) -> int:
    from ..cost.ops import DEFAULT_CONTEXT
    from ..errors import InfeasibleError, ParameterError
    from ..params import Interval, Param
    from ..pricing import fitting_batches, resolve
    from ..pricing.deploy import check_context
    from ..specdec import StepCache
    from ..specdec.rounds import DRAFT_LENS
    from ..specdec.serving import CONCURRENCY, PREFILL
    from ..specdec.tree import tree_label
    from ..sweep.serving import decode_context, price_serving

    conc = list(args.concurrency or DEFAULT_CONCURRENCY)
    CONCURRENCY.check(conc, "concurrency", "serve")
    Param(Interval(int, 0, None), unit="prompt tokens per request").check(args.isl, "isl", "serve")
    Param(Interval(int, 1, None), unit="output tokens per request: a request decodes at least once").check(
        args.osl, "osl", "serve")
    ctx = decode_context(args.isl, args.osl)
    if args.context is not None:
        raise ParameterError(f"--context: serve takes the decode context from the workload (ISL + OSL / 2 = {ctx} "
                             f"tokens here); got {args.context}: give the prompt length as --isl instead")
    args.context = DEFAULT_CONTEXT  # replaced by the workload's below
    if args.prefill is not None:
        PREFILL.check(args.prefill, "prefill", "serve")
    trees = trees_from(args)
    Param(*DRAFT_LENS.constraints, unit=DRAFT_LENS.unit).check(args.draft_len, "draft_len", "serve")
    sc = resolve(args.model, args.hardware, request_from(args), mode=args.mode).edit(context=ctx)
    check_context(sc.model, args.isl, args.osl, param="isl", added="output tokens", owner="serve")  # before memory
    shapes = [(f"γ = {int(args.draft_len)}", sc, int(args.draft_len))] + [
        (tree_label(t), sc.edit(tree=t), None) for t in trees]  # the chain, and each tree beside it
    tokens = max([int(args.draft_len) + 1] + [len(t) for t in trees])
    ok, why = fitting_batches(sc, conc, tokens, context=args.isl + args.osl)  # every request at its longest
    if not ok:
        raise InfeasibleError(f"no concurrency fits: {why}")
    cache = StepCache()
    cases = [(label, c, price_serving(s, int(c), args.isl, args.osl, g, prefill=args.prefill, cache=cache))
             for label, s, g in shapes for c in ok]
    notes = []
    if len(ok) < len(conc):
        notes.append(f"concurrency above {ok[-1]:g} dropped ({why})")
    if args.json:
        print_json({"model": sc.model.name, "hardware": sc.hardware.name, "deployment": sc.deployment.label,
                    "engine": sc.engine, "decode_context": ctx,
                    "points": [{"draft": label, "round_accept_length": c.round_accept_length, **c.as_dict()}
                               for label, _, c in cases], "notes": notes})
        return 0
    cols = [Col("draft", "<", wrap=True), Col("C"), Col("batch plain", short="B plain"),
            Col("batch SD", short="B SD"), Col("step speedup", short="step S"),
            Col("serving tok/s speedup", short="tok/s S"), Col("TPOT speedup", short="TPOT S"),
            Col("AL served", short="AL", drop=3), Col("tok/s plain", drop=2), Col("tok/s SD", drop=2),
            Col("TPOT plain ms", short="TPOT0 ms", drop=1), Col("TPOT SD ms", short="TPOT ms", drop=1)]
    rows = []
    for label, conc_c, c in cases:
        pt = c.point
        rows.append([label, int(conc_c), f"{float(pt.base.decode_batch):.1f}", f"{float(pt.sd.decode_batch):.1f}",
                     f"{float(pt.step_speedup):.3f}", f"{float(pt.speedup_throughput):.3f}",
                     f"{float(pt.speedup_tpot):.3f}", f"{c.accept_length:.2f}", f"{float(pt.throughput_base):.0f}",
                     f"{float(pt.throughput_sd):.0f}", f"{float(pt.tpot_base) * 1e3:.2f}",
                     f"{float(pt.tpot_sd) * 1e3:.2f}"])
    if not trees:
        cols, rows = cols[1:], [r[1:] for r in rows]
    als = ", ".join(dict.fromkeys(f"{label}: AL {c.round_accept_length:.2f}" for label, _, c in cases))
    title = (f"{sc.model.name} on {sc.hardware.name}, {sc.deployment.label}, engine {sc.engine}, drafter "
             f"{sc.drafter.label}, {als}, ISL {args.isl} -> OSL {args.osl}, decode context {ctx}, prefill "
             f"{cases[0][2].prefill}")
    notes = [*notes, "step speedup: the decode step at batch C with a round's AL (what the sweep reports); serving: "
             "output tokens/s and TPOT of the served workload, whose decode batches (B) are what requests finishing, "
             "arriving and prefilling leave, with the engine's running-request cap under SD, and whose tokens per "
             "round (AL served) are OSL / the expected rounds (a request's last round is cut at OSL); central values "
             "(the band of the ranged terms and the model's error is the sweep's, per step)"]
    print(render(cols, rows, title=title, notes=notes, wide=wide(args)))
    return 0
