"""`sweep`: speculative-decoding speedup vs batch, prior vs refined, as a tidy table, a summary and figures."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..errors import ParameterError
from ..overlap import DEFAULT_PLACEMENT, PLACEMENTS
from ..specs.dtypes import FORMATS, KV_DTYPES
from ..sweep.runner import DEFAULT_CONTEXT, DEFAULT_DRAFTER
from ..sweep.textable import fill
from ._common import add_force_flag, csv_list, progress, run_folder
from ._table import WIDTH, add_wide_flag, wide
from .step import add_engine_flag

DEFAULT_OUT = "results"


def _names(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    out = [x.strip() for v in values for x in v.split(",") if x.strip()]
    return out or None


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


def add_study_options(p: argparse.ArgumentParser, single: bool = False) -> None:
    """Options shared by `sweep` and `explain` (``single``: one model, one GPU, one batch and draft length)."""
    if single:
        p.add_argument("--model", required=True, metavar="NAME|PATH", help="target model (bundled name or YAML)")
        p.add_argument("--hardware", default="h100-sxm", metavar="NAME|PATH", help="GPU (default h100-sxm)")
    else:
        p.add_argument("--model", action="append", metavar="NAME|PATH[,...]",
                       help="target models, repeatable or comma list (default: every bundled MoE target that fits)")
        p.add_argument("--hardware", action="append", metavar="NAME|PATH[,...]",
                       help="GPUs, repeatable or comma list (default h100-sxm)")
    p.add_argument("--dtype", choices=list(FORMATS), help="weight format (default: native, or fp8_block for bf16 "
                   "checkpoints on GPUs with fp8)")
    p.add_argument("--kv-dtype", choices=list(KV_DTYPES), default="bf16", help="KV-cache dtype (default bf16)")
    p.add_argument("--gpus", type=int, help="GPUs of the deployment (default 8, capped at the scale-up domain)")
    p.add_argument("--tp", type=int, help="attention tensor parallelism (default: largest valid ≤ gpus; "
                   "dp = gpus / tp)")
    p.add_argument("--ep", type=int, help="expert parallelism (default gcd(experts, gpus); moe_tp = gpus / ep)")
    acc = p.add_mutually_exclusive_group()
    acc.add_argument("--acceptance", type=csv_list(float, "--acceptance"), metavar="ALPHA|A1,A2,...",
                     help="per-token acceptance α, or per-position acceptances a1,a2,... (default: the decaying "
                          "per-position vector of docs/MODEL.md §4.1, engine-logged rates with a geometric tail)")
    acc.add_argument("--accept-length", type=_accept_length, metavar="AL[@GAMMA]",
                     help="mean acceptance length incl. bonus token as engines report it, measured at draft "
                          "length GAMMA (default 3); converted to α")
    p.add_argument("--drafter", default=DEFAULT_DRAFTER, metavar="KIND",
                   help="eagle (default) | mtp | model:NAME (e.g. model:qwen3-0.6b) | ratio:C")
    p.add_argument("--context", type=int, default=DEFAULT_CONTEXT,
                   help=f"tokens already in the KV cache (default {DEFAULT_CONTEXT})")
    p.add_argument("--overlap", type=csv_list(float, "--overlap"), metavar="O1,O2,...",
                   help="routing overlap at lags 1,2,... as fractions (replaces the models' own statistics)")
    p.add_argument("--popularity", help="expert popularity: uniform, zipf:S or skew:X (with --overlap)")
    add_engine_flag(p)
    p.add_argument("--placement", choices=PLACEMENTS, default=None,
                   help=f"expert -> EP rank placement (default {DEFAULT_PLACEMENT}: the expectation over random "
                        "placements; balanced = greedy packing by popularity, contiguous = index blocks)")
    p.add_argument("--redundant-experts", type=int, default=None, metavar="N",
                   help="EPLB-style replicas of the N hottest experts (ep must divide experts + N; default 0)")
    add_engine_term_flags(p)


# Engine round terms and execution modes (Mechanisms fields; docs/MODEL.md §4.5-4.6): set in every mechanism set
# priced. A flag per field, its choices from the field's declaration.
ENGINE_TERMS = ("graph_padding", "round_overheads", "draft_extend", "round_kernels", "host_time", "sd_overlap",
                "decode_overlap")
ENGINE_TERM_HELP = {"graph_padding": "CUDA-graph padding staircase and eager fallback above the capture cap",
                    "round_overheads": "per-round state work (linear-attention state checkpoints)",
                    "draft_extend": "one draft pass per round over the gamma+1 verified positions",
                    "round_kernels": "sampling/top-k/rejection, tree-building and KV-slot kernels per round",
                    "host_time": "engine host work per round and per decode step, exposed per the mode",
                    "sd_overlap": "CPU scheduling overlapped with GPU work in SD rounds",
                    "decode_overlap": "CPU scheduling overlapped with GPU work in plain decoding"}
MODE_FIELDS = ("sd_overlap", "decode_overlap")  # default: the engine's (specdec.engine_round.ENGINE_MODES)


def add_engine_term_flags(p: argparse.ArgumentParser) -> None:
    """--graph-padding, --round-overheads, --draft-extend, --round-kernels, --host-time, --sd-overlap,
    --decode-overlap on|off: force a switch in every mode (default: each mode's own setting, refined on; the
    overlap modes default to the engine's)."""
    from ..cost.deployment import Mechanisms
    from ._common import FLAGS, choices_of

    for f in ENGINE_TERMS:
        default = "the engine's (docs/MODEL.md §4.6)" if f in MODE_FIELDS else "the mode's own; refined on"
        p.add_argument(FLAGS[f], choices=choices_of(Mechanisms, f), default=None,
                       help=f"{ENGINE_TERM_HELP[f]}: on|off in every mode (default: {default})")


def engine_terms(args) -> tuple[tuple[str, str], ...]:
    """The (mechanism, setting) pairs the engine-term flags force, for a Variant's ``mechanisms``."""
    return tuple((f, getattr(args, f)) for f in ENGINE_TERMS if getattr(args, f, None) is not None)


def add_tree_flags(p: argparse.ArgumentParser) -> None:
    """--tree / --tree-parents (repeatable): draft trees priced beside the chains (docs/MODEL.md §4)."""
    p.add_argument("--tree", action="append", type=csv_list(int, "--tree"), default=None, metavar="B1,B2,..",
                   help="also price a full draft tree (root, B1 children each with B2 children, ...); repeatable")
    p.add_argument("--tree-parents", action="append", default=None, metavar="FILE",
                   help="also price a draft tree given as a parent list (one index per node, root -1); repeatable")


def trees_from(args) -> list[tuple]:
    """The parent lists the tree flags ask for (checked: bad shapes are one-line errors)."""
    from ..overlap import full_tree, read_parents

    return ([full_tree(b) for b in getattr(args, "tree", None) or ()]
            + [read_parents(f) for f in getattr(args, "tree_parents", None) or ()])


def acceptance_from(args):
    """The :class:`~simulator.specdec.Acceptance` the flags ask for (None: the default)."""
    from ..specdec import Acceptance

    if args.accept_length is not None:
        al, at = args.accept_length
        return Acceptance.from_accept_length(al, at)
    if args.acceptance is not None:
        if len(args.acceptance) == 1:
            return Acceptance.from_alpha(args.acceptance[0])
        return Acceptance.from_positions(args.acceptance)
    return None


def check_common(args) -> None:
    for flag in ("tp", "ep", "gpus"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise ParameterError(f"--{flag} must be an integer >= 1; got {v}")
    if args.context < 0:
        raise ParameterError(f"--context must be >= 0 tokens; got {args.context}")


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
    add_study_options(p)
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

    check_common(args)
    trees = trees_from(args)
    terms = engine_terms(args)
    start = time.perf_counter()
    folder = run_folder(args, args.out)  # checked before any work; files appear only when the run completes

    with folder as stage:
        result = run_sweep(
            _names(args.model), _names(args.hardware), dtype=args.dtype, kv_dtype=args.kv_dtype, tp=args.tp,
            ep=args.ep, gpus=args.gpus, batch=args.batch or DEFAULT_BATCH,
            draft_len=args.draft_len or DEFAULT_DRAFT_LEN, acceptance=acceptance_from(args), drafter=args.drafter,
            context=args.context, modes=args.mode or DEFAULT_MODES, overlap=args.overlap,
            popularity=args.popularity, progress=None if args.quiet else progress, placement=args.placement,
            redundant_experts=args.redundant_experts, engine=args.engine, trees=trees,
            variants=[Variant(name=",".join(f"{k}={v}" for k, v in terms), mechanisms=terms)] if terms else ())
        for model, hw, why in result.skipped:
            progress(f"skipped {model} on {hw}: {why}", args.quiet)
        for note in result.notes:
            progress(f"note: {note}", args.quiet)
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
    done = (f"{len(result)} points in {time.perf_counter() - start:.2f} s; wrote {table}"
            + (f" and {shown}" if figures else ""))
    print("\n" + (done if wide(args) else "\n".join(fill(done, WIDTH, "  "))))
    sys.stdout.flush()
    return 0
