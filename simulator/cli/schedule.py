"""`schedule`: the best draft length per batch (and context) as an engine config, plus the throughput view."""

from __future__ import annotations

import argparse
from textwrap import fill

from ..render.textable import Col, render
from ._common import add_force_flag, csv_list
from ._scenario import add_scenario_flags, request_from
from ._table import add_wide_flag, wide
from .explain import FIGURE_SUFFIXES
from .sweep import add_tree_flags, trees_from


def register(sub) -> None:
    p = sub.add_parser(
        "schedule", help="draft length per batch as an engine config (vLLM, TensorRT-LLM, SGLang) + throughput",
        description=fill("Price one deployment at every batch 1..max and write a deployable draft-length table "
                     "(within --tolerance of the per-batch best: fewest ranges, then the smaller K; K = 0 exactly "
                     "where SD loses) in the engine's own form, priced on that engine's kernels and modes: --format "
                     "vllm (SpeculativeConfig fields: method, model, num_speculative_tokens, "
                     "num_speculative_tokens_per_batch_size), trtllm (the speculative_config YAML of "
                     "extra_llm_api_options with draft_len_schedule), sglang (the --speculative-adaptive-config "
                     "file; the launch flags are printed), json (every batch and context, the per-batch best beside "
                     "the table, the best draft tree with --tree). Prints tokens/s per GPU against tokens/s per user "
                     "with and without SD, and on vLLM what the schedule's own cost (vLLM issue #49548) does.", 100),
        epilog=("example: python -m simulator schedule --model qwen3-235b-a22b --format vllm --out sd.json\n"
                "then: vllm serve ... --speculative-config \"$(cat sd.json)\" (give --draft-model or edit model)"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scenario_flags(p, single=True)
    p.add_argument("--batch", type=csv_list(int, "--batch"), default=None, metavar="B1,B2,...",
                   help="batches of the throughput view; the schedule covers every batch 1..max (default 1..256)")
    p.add_argument("--draft-len", type=csv_list(int, "--draft-len"), default=None, metavar="G1,G2,...",
                   help="candidate draft lengths K (default 1..8)")
    p.add_argument("--contexts", type=csv_list(int, "--contexts"), default=None, metavar="C1,C2,...",
                   help="more contexts for the per-context schedule (json); engines take --context's")
    add_tree_flags(p)
    p.add_argument("--mode", default="refined", help="cost-model preset (default refined)")
    p.add_argument("--format", required=True, metavar="vllm|trtllm|sglang|json", help="config format to write")
    p.add_argument("--tolerance", type=float, default=None, metavar="F",
                   help="speedup a deployable table may give up per batch for fewer ranges and smaller K "
                        "(default 0.01 = 1%%; 0 = the per-batch best)")
    p.add_argument("--draft-model", default=None, metavar="PATH",
                   help="the draft checkpoint written into the config (EAGLE heads, draft models)")
    p.add_argument("--out", required=True, metavar="FILE", help="file to write (atomically)")
    p.add_argument("--plot", metavar="PATH", help="also draw the throughput view (.png/.svg/.pdf)")
    add_force_flag(p, file=True)
    add_wide_flag(p)
    eng = next(a for a in p._actions if a.dest == "engine")  # unset unless given: the format picks (engine_for)
    eng.help = eng.help.replace("(default trtllm)", "(default: the format's engine; json: trtllm)")
    p.set_defaults(func=cmd_schedule)


def cmd_schedule(args) -> int:
    from ..outputs import atomic_text, claim
    from ..pricing import resolve_hardware, resolve_models
    from ..sweep import DEFAULT_BATCH, DEFAULT_DRAFT_LEN
    from ..sweep.engine_configs import is_schedule_file
    from ..sweep.schedule import (
        DEFAULT_TOLERANCE,
        FORMAT,
        build_schedule,
        cost_note,
        engine_for,
        launch_flags,
        plot_throughput,
        schedule_cost,
        throughput_rows,
    )
    from ..sweep.schedule import render as render_file

    FORMAT.check(args.format, "format", "schedule")
    engine_for(args.format, args.engine)  # a format for another engine: one line before any work
    claim(args.out, param="out", force=args.force, owned=is_schedule_file)  # before any work
    if args.plot:
        claim(args.plot, param="plot", force=args.force, suffixes=FIGURE_SUFFIXES)
    trees = trees_from(args)
    (model,) = resolve_models([args.model])
    (hw,) = resolve_hardware([args.hardware])
    contexts = list(dict.fromkeys([args.context] + list(args.contexts or ())))
    tol = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    s = build_schedule(model, hw, request_from(args), batch=args.batch or DEFAULT_BATCH,
                       draft_len=args.draft_len or DEFAULT_DRAFT_LEN, contexts=contexts, mode=args.mode, trees=trees,
                       fmt=args.format, tolerance=tol)
    text = render_file(s, args.format, args.draft_model)
    flags = launch_flags(s, args.out, args.draft_model) if args.format == "sglang" else None
    written = atomic_text(args.out, text, param="out")
    c = s.primary
    cols = [Col("batch"), Col("K"), Col("best K", short="K*", drop=1), Col("speedup"),
            Col("tok/s/user SD", short="user SD"), Col("tok/s/user plain", short="user plain"),
            Col("tok/s/GPU SD", short="GPU SD"), Col("tok/s/GPU plain", short="GPU plain")]
    rows = [[r["batch"], r["k"], int(c.k_opt[r["batch"] - 1]), f"{r['speedup']:.3f}",
             f"{r['tokens_per_s_user_sd']:.1f}", f"{r['tokens_per_s_user_plain']:.1f}",
             f"{r['tokens_per_s_gpu_sd']:.1f}", f"{r['tokens_per_s_gpu_plain']:.1f}"] for r in throughput_rows(s)]
    if c.tree:
        cols += [Col("best tree", "<", drop=1), Col("tree speedup", short="tree x", drop=1)]
        for row in rows:
            label, spd = c.tree[int(row[0]) - 1]
            row += [label, f"{spd:.3f}"]
    title = (f"{model.name} on {hw.name}, {s.deployment.label}, engine {s.deployment.engine}, drafter {s.drafter}, "
             f"{s.acceptance}, context {c.context}")
    ranges = ", ".join(f"{lo}-{hi}: {k}" for lo, hi, k in c.ranges())
    from ..sweep.schedule import k_ranges

    n_best = len(k_ranges(c.batch, c.k_opt))
    notes = [f"schedule (batch: K): {ranges}",
             f"deployable table ({args.format} rules): {len(c.ranges())} ranges within {tol:.1%} of the per-batch best "
             f"(largest gap {c.gap.max():.2%}; the per-batch best has {n_best} ranges); K = 0 where SD loses",
             *s.notes]
    cost = cost_note(schedule_cost(s))
    print(render(cols, rows, title=title, notes=[*notes, *([cost] if cost else [])], wide=wide(args)))
    if args.format == "vllm" and len(contexts) > 1:
        print("note: vLLM takes a batch schedule only (the context-length variant is an open PR);\n"
              "  the per-context schedules are in --format json")
    if flags is not None:
        pairs = [" ".join(flags[i:i + 2]) if not flags[i + 1:i + 2] or not flags[i + 1].startswith("--") else flags[i]
                 for i in range(len(flags)) if flags[i].startswith("--")]
        print("launch:\n  python -m sglang.launch_server --model-path MODEL \\\n    " + " \\\n    ".join(pairs))
    if "REPLACE-WITH-DRAFT-CHECKPOINT" in text + " ".join(flags or ()):
        print("note: the draft checkpoint is not known: give --draft-model PATH or edit the file")
    if args.plot:
        print(f"wrote {plot_throughput(s, args.plot)}")
    print(f"wrote {written}")
    return 0
