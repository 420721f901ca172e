"""`sweep`: speculative-decoding speedup vs batch, prior vs refined, as a tidy table, a summary and figures."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from ..render.textable import fill
from ._common import add_force_flag, csv_list, progress, run_folder
from ._scenario import add_scenario_flags, forced_mechanisms, request_from
from ._table import WIDTH, add_wide_flag, wide

DEFAULT_OUT = "results"


def _names(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out = [x.strip() for v in values for x in v.split(",") if x.strip()]
    return out or None


def add_tree_flags(p: argparse.ArgumentParser) -> None:
    """--tree / --tree-parents (repeatable): draft trees priced beside the chains (docs/MODEL.md §4)."""
    p.add_argument("--tree", action="append", type=csv_list(int, "--tree"), default=None, metavar="B1,B2,..",
                   help="also price a full draft tree (root, B1 children each with B2 children, ...); repeatable")
    p.add_argument("--tree-parents", action="append", default=None, metavar="FILE|-1,P1,..",
                   help="also price a draft tree given as a parent list (one index per node, root -1), in a file or "
                        "inline (--tree-parents=-1,0,0,1); repeatable")


def trees_from(args) -> list[tuple]:
    """The parent lists the tree flags ask for (checked: bad shapes are one-line errors; a tree beside a draft length
    of 0 alone, i.e. plain decoding, is refused: the two ask for opposite things)."""
    from ..errors import ParameterError
    from ..overlap import full_tree, read_parents
    from ..overlap.tree import check_parents

    def parents_of(text: str) -> tuple:
        if not os.path.isfile(text) and re.fullmatch(r"-1(,\d+)*", text):  # inline, as the CSV's tree column
            return check_parents([int(x) for x in text.split(",")], "--tree-parents")
        return read_parents(text)

    try:
        parents = [parents_of(f) for f in getattr(args, "tree_parents", None) or ()]
    except ParameterError as exc:
        raise ParameterError(f"--tree-parents: {exc}") from None
    trees = [full_tree(b) for b in getattr(args, "tree", None) or ()] + parents
    g = getattr(args, "draft_len", None)
    if trees and g is not None and all(int(x) == 0 for x in (g if isinstance(g, list) else [g])):
        raise ParameterError(f"--draft-len: 0 is plain decoding (nothing drafted), but --tree/--tree-parents asks for "
                             f"a draft tree; got {g!r}: give a draft length >= 1 for the chain priced beside the "
                             f"tree, or leave the tree out")
    return trees


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="speculative-decoding speedup vs batch, prior vs refined: table, CSV/JSON, figures",
        description=("Sweep speculative decoding over models x GPUs x batch x draft length for the prior (MoESD) "
                     "and refined cost models. With no arguments: every bundled MoE target that fits an 8-GPU "
                     "H100 SXM node (Qwen3-235B-A22B in the study's FP8 TP8+EP8 deployment among them), batch "
                     "1..256, draft length 1..8, EAGLE drafter, the default decaying per-position acceptance. Prints "
                     "a summary and writes sweep.csv "
                     "(or sweep.json) and three PNG figures to --out."),
        epilog=("examples: python -m simulator sweep\n"
                "          python -m simulator sweep --model qwen3-235b-a22b --hardware h100-sxm,b200 "
                "--accept-length 2.73@3\n"
                "          python -m simulator sweep --model mixtral-8x7b --drafter model:qwen2-0.5b --no-plots"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_scenario_flags(p, single=False)
    p.add_argument("--batch", type=csv_list(int, "--batch"), default=None, metavar="B1,B2,...",
                   help="batch sizes (default 1,2,4,...,256)")
    p.add_argument("--draft-len", type=csv_list(int, "--draft-len"), default=None, metavar="G1,G2,...",
                   help="draft lengths γ (default 1..8; 0 = plain decoding)")
    p.add_argument("--mode", type=csv_list(str, "--mode"), default=None, metavar="prior,refined",
                   help="cost-model presets (default prior,refined)")
    add_tree_flags(p)
    p.add_argument("--format", choices=("csv", "json"), default="csv", help="table file format (default csv)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help="output folder (default results/)")
    p.add_argument("--no-plots", action="store_true", help="do not draw figures (matplotlib is not imported)")
    add_force_flag(p)
    p.add_argument("--quiet", action="store_true", help="no progress or notes on stderr")
    add_wide_flag(p)
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args) -> int:
    from ..sweep import (
        DEFAULT_BATCH,
        DEFAULT_DRAFT_LEN,
        DEFAULT_MODES,
        format_table,
        plot_all,
        run_sweep,
        write_csv,
        write_json,
    )
    from ..sweep.variants import Variant

    trees = trees_from(args)
    forced = forced_mechanisms(args)
    start = time.perf_counter()
    folder = run_folder(args, args.out)  # checked before any work; files appear only when the run completes

    with folder as stage:
        # forced mechanisms are priced as a variant named after them (the table's variant column says so)
        result = run_sweep(
            _names(args.model), _names(args.hardware), request_from(args), batch=args.batch or DEFAULT_BATCH,
            draft_len=args.draft_len or DEFAULT_DRAFT_LEN, modes=args.mode or DEFAULT_MODES, trees=trees,
            progress=None if args.quiet else progress,
            variants=[Variant(name=",".join(f"{k}={v}" for k, v in forced), mechanisms=forced)] if forced else ())
        for model, hw, why in result.skipped:
            progress(f"skipped {model} on {hw}: {why}", args.quiet)
        for note in result.notes:
            progress(f"note: {note}", args.quiet)
        from ..cost.deployment import engine_note

        for note in dict.fromkeys(engine_note(c.hardware, c.deployment.engine) for c in result.cases):
            if note:  # an engine on a GPU vendor it does not run on: a what-if profile's documented reading
                progress(note, args.quiet)
        written = [write_json(result, stage / "sweep.json") if args.format == "json"
                   else write_csv(result, stage / "sweep.csv")]
        if not args.no_plots:
            progress("sweep: drawing figures", args.quiet)
            written += plot_all(result, stage)
    out = Path(args.out)
    table, *figures = (str(out / Path(p).relative_to(stage)) for p in written)
    print(format_table(result, wide=wide(args)))
    index = [f for f in figures if f.endswith(".md")]
    shown = (f"{len(figures) - 1} figures (index {index[0]})" if index else ", ".join(figures))
    missed = f" ({result.not_priced:,} not priced: see 'skipped' and 'note' above)" if result.not_priced else ""
    done = (f"{len(result):,} points priced{missed} in {time.perf_counter() - start:.2f} s; wrote {table}"
            + (f" and {shown}" if figures else ""))
    print("\n" + (done if wide(args) else "\n".join(fill(done, WIDTH, "  "))))
    sys.stdout.flush()
    return 0
