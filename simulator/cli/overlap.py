"""``python -m simulator overlap predict|fit|synth``: the routing-overlap model from the command line.

Parses flags, calls :mod:`simulator.overlap`, prints. Warnings become ``warning: ...`` lines on stderr.
"""

from __future__ import annotations

import argparse
import sys
import warnings

from ..overlap import DEFAULT_PLACEMENT, METHODS, PLACEMENTS, POOLING_RULES, TREE_METHODS
from ..render.textable import fill
from ..specs.routing_profile import SPLITS
from ..traces import PREDICTORS
from ..traces.formats import DEFAULT_SEQ_TOKENS
from ..traces.formats import FORMATS as TRACE_FORMATS
from ._common import OneLineParser, add_json_flag, add_tree_choice, csv_list, print_json, tree_choice
from ._table import WIDTH, Col, add_wide_flag, render, wide

_PREDICT_EPILOG = """\
examples:
  python -m simulator overlap predict --experts 128 --top-k 8 --tokens 4 \\
      --overlap 0.381,0.329,0.301,0.299 --popularity skew:0.118
  python -m simulator overlap predict --experts 128 --top-k 8 --tokens 4 --batch 16 --ranks 8 --json
Overlaps are fractions (0.381, not 38.1). Popularity: uniform, zipf:S, skew:X (X = Σπ²/k, the independent-routing
overlap, in [k/E, 1]) or a file of E weights. Without --overlap the tokens are independent."""

_FIT_EPILOG = """\
examples:
  python -m simulator overlap fit trace.npz --tokens 2,4,8 --batch 1,4,16
  python -m simulator overlap fit trace.jsonl --tokens 4 --window 3 --layer 0 --json
Predictors (each a choice of trace statistics and a model, or a baseline): pairs (per-expert pair probabilities, all
lags, max-ent), pooled (pooled overlaps, lift rule, max-ent), latent (pooled overlaps, latent-score model), lag1
(lag 1 only), window (M-token patterns), independent, uniform. Relative error = prediction / empirical - 1. Traces
(--format, default auto: by extension and content): npy/npz integer arrays [sequences, tokens, layers, k] or
[sequences, tokens, k]; jsonl records {"seq": .., "token": .., "layer": .., "experts": [..]}; sglang: SGLang's
per-token expert-distribution dump (.pt, or its .npz export); vllm: vLLM's routed_experts arrays [tokens, layers, k]
per request (.npz of arrays, .pt list, or .jsonl with "routed_experts"). Engine dumps are cut into windows of
--seq-tokens tokens. Without --experts the expert count is the largest id + 1, refused when fewer than half of the
ids up to it occur (docs/MODEL.md §2.9)."""

_SYNTH_EPILOG = """\
example:
  python -m simulator overlap synth --experts 128 --top-k 8 --sequences 256 --tokens 256 \\
      --persistence 0.9 --skew 0.118 --seed 1 --out trace.npz
Hidden state AR(1) with persistence ρ, router logits W h + bias (bias calibrated to a Zipf popularity with
Σπ²/k = skew), top-k. Same seed, same trace."""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "overlap",
        help="routing overlap: unique experts touched by B requests of n tokens (max-entropy IPF model)",
        description="Routing-overlap model: predict unique experts from overlap statistics, fit it to a routing "
        "trace, or write a synthetic correlated trace.",
        epilog="subcommands: predict, fit, synth (each has --help with an example)",
    )
    sub = parser.add_subparsers(dest="overlap_command", metavar="SUBCOMMAND", parser_class=OneLineParser)
    parser.set_defaults(func=lambda args: _usage(parser))
    fmt = argparse.RawDescriptionHelpFormatter

    pp = sub.add_parser("predict", help="expected unique experts from overlap statistics", formatter_class=fmt,
                        description="Expected number of distinct experts touched by B requests of N tokens each, "
                        "its standard deviation, the busiest expert-parallel rank, and the independent and uniform "
                        "(MoESD) baselines.", epilog=_PREDICT_EPILOG)
    pp.add_argument("--experts", type=int, required=True, metavar="E", help="routed experts per layer")
    pp.add_argument("--top-k", type=int, required=True, metavar="K", help="experts per token")
    pp.add_argument("--tokens", type=int, default=None, metavar="N", help="tokens per request (verify: γ+1); "
                    "required unless --tree or --tree-parents is given")
    pp.add_argument("--batch", type=int, default=1, metavar="B", help="concurrent requests (default 1)")
    pp.add_argument("--overlap", type=csv_list(float, "--overlap"), default=None, metavar="O1,O2,..",
                    help="lag overlaps o(1),o(2),.. as fractions; omitted: independent tokens")
    pp.add_argument("--popularity", default="uniform", metavar="SPEC",
                    help="uniform (default), zipf:S, skew:X or a file of E weights")
    pp.add_argument("--pooling", default=POOLING_RULES[0], choices=POOLING_RULES,
                    help="rule from pooled overlaps to per-expert pair probabilities (default lift)")
    pp.add_argument("--method", default="auto", choices=METHODS, metavar="METHOD",
                    help="fit method: auto (default), ipf (exact maximum entropy by IPF on the junction tree), "
                    "ipf_table (the same by IPF over the 2^N table), "
                    "markov (lag 1), junction (stationary chain), independent, uniform")
    pp.add_argument("--ranks", type=int, default=None, metavar="R", help="expert-parallel ranks: report the "
                    "busiest rank's expected unique experts")
    pp.add_argument("--placement", default=DEFAULT_PLACEMENT, choices=PLACEMENTS,
                    help=f"expert->rank placement with --ranks: random (expectation over placements), balanced "
                         f"(greedy packing by usage) or contiguous blocks (default {DEFAULT_PLACEMENT})")
    add_tree_choice(pp, "score", " instead of a chain")
    pp.add_argument("--tree-method", default="auto", choices=TREE_METHODS, metavar="METHOD",
                    help="tree model: auto (default: latent, or stationary when the lags look like binary memory), "
                    "latent (thresholded Gaussian latent score along the tree, every lag), ipf (pairwise maximum "
                    "entropy on the junction tree; small cliques only), stationary (tree-indexed stationary chain), "
                    "independent, uniform")
    pp.add_argument("--persistent", type=csv_list(float, "--persistent"), default=None, metavar="FLOOR[,SHARE]",
                    help="per-request working set: FLOOR = lag overlap at long lags (fraction), SHARE = probability "
                    "that an expert is hot in a request (default: the pure working set, Σπ²/(k·FLOOR))")
    add_json_flag(pp)
    pp.set_defaults(func=_predict)

    pf = sub.add_parser("fit", help="statistics of a routing trace and predictions vs empirical counts",
                        formatter_class=fmt, description="Per-layer popularity and lag overlaps of a routing "
                        "trace, and for each window N and batch B the empirical unique experts next to each "
                        f"predictor's value and relative error ({', '.join(PREDICTORS)}).", epilog=_FIT_EPILOG)
    pf.add_argument("trace", metavar="TRACE", help="routing trace (.npy, .npz, .jsonl or an engine dump)")
    pf.add_argument("--format", default="auto", choices=TRACE_FORMATS,
                    help="trace format (default auto: by extension and content)")
    pf.add_argument("--seq-tokens", type=int, default=None, metavar="T",
                    help=f"engine dumps: window length in tokens (default {DEFAULT_SEQ_TOKENS})")
    pf.add_argument("--tokens", type=csv_list(int, "--tokens"), default=[4], metavar="N[,N..]",
                    help="window sizes (default 4)")
    pf.add_argument("--batch", type=csv_list(int, "--batch"), default=[1], metavar="B[,B..]",
                    help="batch sizes (default 1)")
    pf.add_argument("--window", type=int, default=3, metavar="M", help="pattern size of the window predictor "
                    "(default 3)")
    pf.add_argument("--layer", type=csv_list(int, "--layer"), default=None, metavar="L[,L..]",
                    help="layers to evaluate (default all)")
    pf.add_argument("--experts", type=int, default=None, metavar="E",
                    help="expert count: ids outside [0, E) are rejected (default: num_experts in an .npz, the "
                    "SGLang dump's map, or the largest id + 1 when the ids are dense)")
    pf.add_argument("--samples", type=int, default=2000, help="random draws for the empirical mean (default 2000)")
    pf.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    pf.add_argument("--write-profile", metavar="PATH", default=None,
                    help="also write the trace's statistics by depth as a routing profile (routing/v1 YAML with "
                    "by_layer; docs/MODEL.md §3.3) that model specs can reference")
    pf.add_argument("--profile-split", default="thirds", choices=SPLITS,
                    help="with --write-profile: early/middle/final thirds of the layers, or one entry per layer "
                    "(default thirds)")
    add_json_flag(pf)
    add_wide_flag(pf)
    pf.set_defaults(func=_fit)

    ps = sub.add_parser("synth", help="write a synthetic correlated routing trace", formatter_class=fmt,
                        description="Synthetic router with an AR(1) hidden state: writes [sequences, tokens, "
                        "layers, k] expert ids as .npy, .npz or .jsonl (by the extension of --out).",
                        epilog=_SYNTH_EPILOG)
    ps.add_argument("--experts", type=int, required=True, metavar="E")
    ps.add_argument("--top-k", type=int, required=True, metavar="K")
    ps.add_argument("--sequences", type=int, required=True, metavar="S")
    ps.add_argument("--tokens", type=int, required=True, metavar="T", help="tokens per sequence")
    ps.add_argument("--layers", type=int, default=1, metavar="L", help="layers (default 1)")
    ps.add_argument("--persistence", type=float, default=0.8, metavar="P", help="AR(1) coefficient ρ in [0, 1) "
                    "(default 0.8)")
    ps.add_argument("--skew", type=float, default=None, metavar="X", help="independent overlap Σπ²/k of the "
                    "popularity (default: uniform)")
    ps.add_argument("--context", type=float, default=0.0, metavar="C", help="share of a per-sequence constant "
                    "in the hidden state, in [0, 1) (default 0)")
    ps.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    ps.add_argument("--out", required=True, metavar="FILE", help="output path (.npy, .npz or .jsonl)")
    add_json_flag(ps)
    ps.set_defaults(func=_synth)


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _emit_warnings(caught) -> None:
    seen = set()
    for w in caught:
        text = " ".join(str(w.message).split())
        if text not in seen:
            seen.add(text)
            print(f"warning: {text}", file=sys.stderr)


def _predict(args) -> int:
    from ..overlap import OverlapStats, predict

    if args.tree is not None or args.tree_parents is not None or args.persistent is not None:
        return _predict_tree(args)
    if args.tokens is None:
        print("error: overlap predict: give --tokens N (a chain) or --tree B1,B2,.. / --tree-parents FILE (a tree)",
              file=sys.stderr)
        return 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = OverlapStats.from_overlaps(args.experts, args.top_k, tuple(args.overlap or ()), args.popularity,
                                           args.pooling)
        res = predict(stats, args.tokens, args.batch, method=args.method, ranks=args.ranks,
                      placement=args.placement if args.ranks else None)
    _emit_warnings(caught)
    if args.json:
        out = res.to_dict()
        out.update(popularity=args.popularity, overlaps=[float(o) for o in stats.overlaps], pooling=args.pooling,
                   independent_overlap=float(stats.skew))
        print_json(out)
        return 0
    print(f"unique experts for B={args.batch} request(s) of N={args.tokens} tokens "
          f"(E={stats.experts}, k={stats.top_k}, method {res.method}):")
    print(f"  expected            {float(res.unique_experts):9.3f}  (std {float(res.unique_experts_std):.3f})")
    print(f"  independent routing {float(res.independent):9.3f}")
    print(f"  uniform (MoESD)     {float(res.uniform):9.3f}")
    if res.ranks is not None:
        print(f"  busiest of {res.ranks} ranks  {float(res.busiest_rank_experts):9.3f}  ({args.placement})")
    return 0


def _predict_tree(args) -> int:
    from ..errors import ParameterError
    from ..overlap import OverlapStats, Persistent, predict_tree

    if args.tokens is not None and (args.tree is not None or args.tree_parents is not None):
        print("error: overlap predict: --tokens and --tree/--tree-parents both give the tokens; use one",
              file=sys.stderr)
        return 2
    persistent = None
    if args.persistent is not None:
        if len(args.persistent) > 2:
            raise ParameterError(f"--persistent takes FLOOR or FLOOR,SHARE; got {args.persistent}")
        persistent = Persistent(*args.persistent)
    tree = tree_choice(args)
    if tree is not None:
        parents, shape, _ = tree
    else:
        if args.tokens is None or args.tokens < 1:
            print(f"error: overlap predict: --tokens must be an integer >= 1 (tokens per request); got {args.tokens}",
                  file=sys.stderr)
            return 2
        parents, shape = (-1,) + tuple(range(args.tokens - 1)), "chain"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats = OverlapStats.from_overlaps(args.experts, args.top_k, tuple(args.overlap or ()), args.popularity,
                                           args.pooling)
        res = predict_tree(stats, parents, args.batch, method=args.tree_method, persistent=persistent,
                           ranks=args.ranks, placement=args.placement if args.ranks else None)
    _emit_warnings(caught)
    if args.json:
        out = res.to_dict()
        out.update(tree=shape, popularity=args.popularity, overlaps=[float(o) for o in stats.overlaps],
                   pooling=args.pooling, independent_overlap=float(stats.skew))
        print_json(out)
        return 0
    lags = f"lags 1..{res.lags_used} of {res.lags_given}" if res.lags_used else "no lag overlaps given"
    print(f"unique experts for B={args.batch} request(s) verifying a {res.n_tokens}-node tree ({shape}, depth "
          f"{res.depth}):")
    print(f"  E={stats.experts}, k={stats.top_k}, method {res.method}, {lags}")
    print(f"  expected            {float(res.unique_experts):9.3f}  (std {float(res.unique_experts_std):.3f})")
    print(f"  independent routing {float(res.independent):9.3f}")
    print(f"  uniform (MoESD)     {float(res.uniform):9.3f}")
    if res.ranks is not None:
        print(f"  busiest of {res.ranks} ranks  {float(res.busiest_rank_experts):9.3f}  ({args.placement})")
    if res.approximation:
        print("\n".join(fill(f"  approximation: {res.approximation}", WIDTH, "    ")))
    if res.persistent:
        p = res.persistent
        print(f"  persistent working set: floor {p['floor']:.3f}, hot share {p['share']:.3f}")
    return 0


def _fit(args) -> int:
    from ..traces import evaluate_trace, read_trace

    if args.write_profile:  # before any work: a routing profile is a YAML file
        from ..outputs import check_writable

        check_writable(args.write_profile, param="write_profile", suffixes=(".yaml", ".yml"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = read_trace(args.trace, num_experts=args.experts, format=args.format, seq_tokens=args.seq_tokens)
        if args.write_profile:
            from ..traces.layer_profile import check_split

            check_split(args.profile_split, trace.experts.shape[2])
        report = evaluate_trace(trace, args.tokens, args.batch, window=args.window, layers=args.layer,
                                samples=args.samples, seed=args.seed)
    _emit_warnings(caught)
    persistent = _persistent_of(trace, [x.layer for x in report.summaries])
    if args.write_profile:
        from pathlib import Path

        from ..traces.layer_profile import layer_profile_from_trace, write_routing_profile

        prof = layer_profile_from_trace(trace, name=Path(args.write_profile).stem, split=args.profile_split,
                                        source=f"routing trace {args.trace} (python -m simulator overlap fit)")
        write_routing_profile(prof, args.write_profile)
        print(f"wrote routing profile {args.write_profile} ({args.profile_split})", file=sys.stderr)
    if args.json:
        out = report.to_dict()
        if trace.layer_ids:
            out["model_layers"] = list(trace.layer_ids)  # model layer of each trace layer (engine dumps)
        out["persistent"] = persistent
        print_json(out)
        return 0
    say = print if wide(args) else (lambda text: print("\n".join(fill(text, WIDTH, "  "))))
    say(f"trace {report.source}: {report.sequences} sequences x {report.tokens} tokens, {report.layers} layers, "
        f"E={report.experts}, k={report.top_k}; window predictor m={report.window}")
    if trace.layer_ids:
        say(f"trace layers 0..{trace.layers - 1} are model layers {_ranges(trace.layer_ids)} (the others carry no "
            f"routed experts)")
    for s in report.summaries:
        ov = " ".join(f"{o:.3f}" for o in s.overlaps[:8])
        say(f"layer {s.layer}: independent overlap {s.skew:.3f}; overlaps o(1..) {ov}; the lag profile is "
            f"reproduced within {s.latent_misfit:.4f} by the latent model (Gaussian memory, the tree default) and "
            f"{s.binary_misfit:.4f} by binary memory")
    for p in persistent:
        say(f"layer {p['layer']}: persistent working set floor {p['floor']:.3f}, share {p['share']:.3f} "
            f"(overlap predict --persistent {p['floor']:.3f},{p['share']:.3f})")
    cols = [Col("layer"), Col("N"), Col("B"), Col("empirical", short="emp.")]
    cols += [Col(f"{m} (err)", drop=max(0, k - 2), short=m) for k, m in enumerate(report.predictors)]
    rows = [[str(r.layer), str(r.n_tokens), str(r.batch), f"{r.empirical:.2f}"]
            + [f"{r.predictions[m]:.2f} {100 * r.rel_error(m):+.1f}%" for m in report.predictors] for r in report.rows]
    mean = report.mean_abs_error()
    notes = ["mean |relative error|: " + ", ".join(f"{m} {100 * v:.1f}%" for m, v in mean.items())]
    best = report.best()
    if best is not None:
        notes.append(f"the trace is explained best by {best[0]} (mean |relative error| {100 * best[1]:.1f}% over "
                     f"the windows and batches above; latent = the tree default, pooled/pairs = maximum entropy)")
    print(render(cols, rows, notes=notes, wide=wide(args)))
    return 0


def _persistent_of(trace, layers) -> list:
    """The persistent working set of each layer (fit_persistent), when sequences are long enough (else none)."""
    from ..traces import fit_persistent

    if trace.tokens < 48:
        return []
    return [{"layer": int(layer), "floor": float(p.floor), "share": float(p.share)}
            for layer, p in ((layer, fit_persistent(trace, layer)) for layer in layers)]


def _ranges(ids) -> str:
    """3,4,5,7 -> '3-5, 7'."""
    parts, start = [], ids[0]
    for prev, cur in zip(ids, [*ids[1:], None], strict=True):
        if cur is None or cur != prev + 1:
            parts.append(f"{start}-{prev}" if prev > start else f"{start}")
            start = cur
    return ", ".join(parts)


def _synth(args) -> int:
    from ..traces.synth import synth_to_file

    trace = synth_to_file(args.out, args.experts, args.top_k, args.sequences, args.tokens, layers=args.layers,
                          persistence=args.persistence, skew=args.skew, context=args.context, seed=args.seed)
    info = {"out": args.out, "shape": list(trace.experts.shape), "experts": trace.num_experts,
            "persistence": float(args.persistence), "skew": None if args.skew is None else float(args.skew),
            "context": float(args.context), "seed": args.seed}
    if args.json:
        print_json(info)
    else:
        print(f"wrote {args.out}: {trace.sequences} sequences x {trace.tokens} tokens x {trace.layers} layers x "
              f"k={trace.top_k} (E={trace.num_experts}, seed {args.seed})")
    return 0
