"""`plan`: the layout and speculative-decoding setting to deploy for a model, a GPU, a GPU budget and an SLA."""

from __future__ import annotations

import argparse
import json
from textwrap import fill

from ..render.textable import Col, render
from ._common import csv_list, progress
from ._scenario import acceptance_from, add_model_flags, add_speculation_flags
from ._table import add_wide_flag, wide


def register(sub) -> None:
    p = sub.add_parser(
        "plan", help="layouts x SD settings for a GPU budget and SLA: Pareto front and the config to launch",
        description=fill("Search replica layouts (GPUs per replica up to --gpus, attention TP/DP, MoE EP, engine, "
                         "all-to-all) x speculative decoding (off, draft length 1..8) for ISL/OSL requests at "
                         "concurrency 1..512 per replica, each layout priced once on the one pricing path (serving "
                         "level, docs/MODEL.md §4.7, §5.5). Prints the Pareto fronts of tokens/s per GPU against "
                         "tokens/s per user without and with SD, and the configuration of the most tokens/s per "
                         "GPU that meets --tpot/--ttft, with its launch config.", 100),
        epilog="example: python -m simulator plan --model qwen3-235b-a22b --hardware h100-sxm --gpus 8 --isl 1024 "
               "--osl 1024 --tpot 50",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flags(p, single=True)
    p.add_argument("--gpus", type=int, required=True, help="GPU budget (a replica uses at most this many)")
    p.add_argument("--isl", type=float, default=1024, help="prompt tokens per request (default 1024)")
    p.add_argument("--osl", type=float, default=1024, help="output tokens per request (default 1024)")
    p.add_argument("--tpot", type=float, default=None, metavar="MS", help="SLA: most ms per output token")
    p.add_argument("--ttft", type=float, default=None, metavar="MS", help="SLA: most ms to the first token")
    p.add_argument("--engine", type=csv_list(str, "--engine"), default=None, metavar="E1,E2",
                   help="engines to search (default trtllm,sglang,vllm)")
    add_speculation_flags(p)
    p.add_argument("--draft-model", default=None, metavar="PATH", help="draft checkpoint for the launch config")
    p.add_argument("--json", metavar="FILE", help="also write every point, the fronts and the choice as JSON")
    p.add_argument("--html", metavar="FILE", help="also write the plan into a self-contained HTML report")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_wide_flag(p)
    p.set_defaults(func=cmd_plan)


def _rows(points):
    return [[p.engine, p.layout, p.gpus, p.k or "off", p.concurrency, f"{p.tokens_per_s_gpu:.1f}",
             f"{p.tokens_per_s_user:.1f}", f"{p.tpot_ms:.1f}", f"{p.ttft_ms:.0f}", "yes" if p.meets_sla else "no"]
            for p in points]


COLS = (Col("engine", "<"), Col("layout", "<", wrap=True), Col("GPUs"), Col("K"), Col("conc", short="C"),
        Col("tok/s/GPU"), Col("tok/s/user"), Col("TPOT ms", short="TPOT"), Col("TTFT ms", short="TTFT"),
        Col("SLA"))


def cmd_plan(args) -> int:
    from ..outputs import atomic_text, check_writable
    from ..pricing import request
    from ..specs.catalog import ENGINES
    from ..sweep.plan import launch_config, plan

    for path, name in ((args.json, "json"), (args.html, "html")):
        if path:
            check_writable(path, param=name)
    req = request(drafter=args.drafter, acceptance=acceptance_from(args))
    pl = plan(args.model, args.hardware, args.gpus, isl=args.isl, osl=args.osl, tpot_ms=args.tpot, ttft_ms=args.ttft,
              engines=tuple(args.engine or ENGINES), request=req,
              progress=None if args.quiet else (lambda line: progress(line, False)))
    sla = " and ".join(s for s in (f"TPOT <= {args.tpot:g} ms" if args.tpot is not None else "",
                                   f"TTFT <= {args.ttft:g} ms" if args.ttft is not None else "") if s) or "none"
    head = (f"{pl.model} on up to {pl.budget} x {pl.hardware}, ISL {pl.isl:g} / OSL {pl.osl:g}, drafter {pl.drafter}, "
            f"{pl.acceptance}; SLA {sla}; {pl.layouts} layouts priced ({len(pl.skipped)} refused or not priceable), "
            f"{len(pl.points)} points in {pl.seconds:.1f} s")
    print(fill(head, 100, subsequent_indent="  "))
    for sd in (False, True):
        print(render(COLS, _rows(pl.front(sd)), title=f"Pareto front {'with' if sd else 'without'} SD (tokens/s per "
                     f"GPU vs per user; per replica of the layout's GPUs)", wide=wide(args)))
    best, base = pl.best(), pl.best(sd=False)
    if best is None:
        print(f"no configuration meets the SLA ({sla}); the fronts above show what is reachable")
    else:
        gain = f", {best.tokens_per_s_gpu / base.tokens_per_s_gpu:.2f}x the best without SD" if base and best.k else ""
        n = pl.budget // best.gpus
        print(fill(f"best under the SLA: {best.engine} {best.layout}, {'K = ' + str(best.k) if best.k else 'no SD'}, "
                   f"{best.concurrency} requests per replica ({n} replica{'s' if n > 1 else ''} of {best.gpus} GPUs): "
                   f"{best.tokens_per_s_gpu:.1f} tok/s/GPU, {best.tokens_per_s_user:.1f} tok/s/user, TPOT "
                   f"{best.tpot_ms:.1f} ms, TTFT {best.ttft_ms:.0f} ms{gain}", 100, subsequent_indent="  "))
        print(fill("launch config: " + json.dumps(launch_config(best, args.draft_model)), 100,
                   subsequent_indent="  ", break_long_words=False, break_on_hyphens=False))
    if args.json:
        obj = {"plan": {k: getattr(pl, k) for k in ("model", "hardware", "budget", "isl", "osl", "tpot_ms", "ttft_ms",
                                                    "drafter", "acceptance", "layouts", "seconds")},
               "points": [p.as_dict() for p in pl.points], "front_no_sd": [p.as_dict() for p in pl.front(False)],
               "front_sd": [p.as_dict() for p in pl.front(True)], "skipped": list(pl.skipped),
               "best": None if best is None else {**best.as_dict(), "launch": launch_config(best, args.draft_model)}}
        print(f"wrote {atomic_text(args.json, json.dumps(obj, indent=1) + chr(10), param='json')}")
    if args.html:
        from ..sweep.htmlreport import report_html

        print(f"wrote {atomic_text(args.html, report_html(plan=pl), param='html')}")
    return 0
