"""`op`: price single ops with the columns of the measured CSVs, for row-by-row comparison."""

from __future__ import annotations

import argparse

from ._common import csv_list, print_json
from .step import add_engine_flag


def register(sub) -> None:
    p = sub.add_parser(
        "op", help="price one op (moe, gemm, attention, allreduce) like a measured CSV row",
        description=("Price single ops with the same inputs as the rows of measured/h100-sxm/*.csv and print, per "
                     "input, the simulated time and the pure roofline time (JSON list)."),
        epilog=("examples:\n"
                "  python -m simulator op moe --hardware h100-sxm --hidden 4096 --inter 1536 --experts 128 "
                "--top-k 8 --ep 8 --dtype fp8_block --tokens 1,4,16\n"
                "  python -m simulator op gemm --hardware h100-sxm --m 1,64 --n 4096 --k 4096 --dtype bf16\n"
                "  python -m simulator op attention --hardware h100-sxm --batch 8 --heads 8 --kv-heads 1 "
                "--head-dim 128 --kv-len 2048\n"
                "  python -m simulator op allreduce --hardware h100-sxm --bytes 8192,65536 --gpus 8"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ops = p.add_subparsers(dest="op", metavar="OP", required=True)
    m = ops.add_parser("moe", help="one fused MoE layer on one rank (no communication)",
                       epilog="example: python -m simulator op moe --hardware h100-sxm --hidden 4096 --inter 1536 "
                              "--experts 128 --top-k 8 --ep 8 --dtype fp8_block --tokens 1,4,16")
    m.add_argument("--hidden", type=int, required=True)
    m.add_argument("--inter", type=int, required=True, help="expert width of the full model")
    m.add_argument("--experts", type=int, required=True)
    m.add_argument("--top-k", type=int, required=True)
    m.add_argument("--tp", type=int, default=1, help="moe tensor parallelism")
    m.add_argument("--ep", type=int, default=1, help="expert parallelism")
    m.add_argument("--dtype", required=True)
    m.add_argument("--tokens", type=csv_list(int, "--tokens"), required=True, help="tokens entering the rank")
    m.add_argument("--routing", choices=("balanced", "uniform", "overlap"), default="balanced",
                   help="balanced = the micro-benchmark's pattern; uniform = independent uniform expectation; "
                        "overlap = the routing-overlap model (tokens = requests x --tokens-per-request)")
    m.add_argument("--tokens-per-request", type=int, default=1, help="s for --routing overlap (default 1)")
    m.add_argument("--overlap", type=csv_list(float, "--overlap"), default=[], metavar="o1,o2,..",
                   help="lag overlaps for --routing overlap (fractions)")
    m.add_argument("--popularity", default="uniform", help="popularity for --routing overlap (uniform, zipf:S, skew:X)")
    g = ops.add_parser("gemm", help="dense GEMM out[m,n] = x[m,k]·W[n,k]^T",
                       epilog="example: python -m simulator op gemm --hardware h100-sxm --m 1,64 --n 4096 "
                              "--k 4096 --dtype bf16")
    for f in ("m", "n", "k"):
        g.add_argument(f"--{f}", type=csv_list(int, f"--{f}"), required=True)
    g.add_argument("--dtype", required=True)
    a = ops.add_parser("attention", help="decode attention (heads per GPU)",
                       epilog="example: python -m simulator op attention --hardware h100-sxm --batch 8 --heads 8 "
                              "--kv-heads 1 --head-dim 128 --kv-len 2048")
    for f, h in (("batch", "requests"), ("heads", "query heads per GPU"), ("kv-heads", "KV heads per GPU"),
                 ("head-dim", "head dimension"), ("kv-len", "cached tokens")):
        a.add_argument(f"--{f}", type=csv_list(int, f"--{f}"), required=True, help=h)
    a.add_argument("--kv-dtype", default="bf16")
    r = ops.add_parser("allreduce", help="all-reduce of a message over GPUs",
                       epilog="example: python -m simulator op allreduce --hardware h100-sxm --bytes 8192,65536 "
                              "--gpus 8")
    r.add_argument("--bytes", type=csv_list(int, "--bytes"), required=True)
    r.add_argument("--gpus", type=int, required=True)
    for q in (m, g, a, r):
        q.add_argument("--hardware", required=True, help="bundled hardware name or path")
        add_engine_flag(q)
        q.add_argument("--json", action="store_true", help="(output is always JSON; accepted for symmetry)")
    p.set_defaults(func=run)


def _grid(**lists):
    import numpy as np

    keys = list(lists)
    mesh = np.meshgrid(*[np.asarray(v) for v in lists.values()], indexing="ij")
    return {k: m.ravel() for k, m in zip(keys, mesh, strict=True)}


# The op builders' parameter names (simulator.cost.opviews.OP_PARAMS) that are flags of `op` only.
_OP_FLAGS = {"m": "--m", "n": "--n", "k": "--k", "heads": "--heads", "kv_heads": "--kv-heads",
             "head_dim": "--head-dim", "kv_len": "--kv-len", "message_bytes": "--bytes"}


def run(args) -> int:
    from ..errors import ParameterError

    try:
        return _run(args)
    except ParameterError as exc:
        if exc.param in _OP_FLAGS and exc.expected:
            raise ParameterError(f"{_OP_FLAGS[exc.param]}: must be {exc.expected}; got {exc.value!r}") from None
        raise


def _run(args) -> int:
    import numpy as np

    from ..cost.deployment import Deployment, Mechanisms, validate_op_dtype
    from ..cost.opviews import (
        OP_PARAMS,
        attention_op,
        balanced_routing,
        collective_view,
        gemm_op,
        ideal_kernels,
        moe_op,
        op_views,
    )
    from ..errors import ParameterError
    from ..params import Interval, Param, check_params
    from ..pricing import bound
    from ..specs.catalog import load_hardware

    hw = bound(load_hardware(args.hardware), Deployment(engine=args.engine))
    if args.op == "allreduce":
        size = np.asarray(args.bytes, float)
        t = collective_view("all_reduce", size, args.gpus, hw)
        # the pure roofline, as for the other ops: efficiency 1, no latency (wire bytes over the link bandwidth)
        roof = collective_view("all_reduce", size, args.gpus, hw.with_changes(kernels=ideal_kernels(hw)),
                               Mechanisms(kernel_curves="off", fixed_costs="off", l2="off"))
        print_json([{"message_bytes": b, "num_gpus": args.gpus, "time_us": float(x * 1e6),
                     "roofline_us": float(r * 1e6)} for b, x, r in zip(args.bytes, t, roof, strict=True)])
        return 0
    if args.op == "gemm":
        Deployment(dtype=args.dtype)  # validates the name
        validate_op_dtype(hw, args.dtype)
        grid = _grid(m=args.m, n=args.n, k=args.k)
        op = gemm_op(grid["m"], grid["n"], grid["k"], args.dtype)
        inputs = [{"m": int(a), "n": int(b), "k": int(c), "gemm_dtype": args.dtype}
                  for a, b, c in zip(grid["m"], grid["n"], grid["k"], strict=True)]
    elif args.op == "attention":
        Deployment(kv_dtype=args.kv_dtype)
        grid = _grid(b=args.batch, h=args.heads, kvh=args.kv_heads, hd=args.head_dim, L=args.kv_len)
        op = attention_op(grid["b"], grid["h"], grid["kvh"], grid["hd"], grid["L"], args.kv_dtype)
        inputs = [{"batch_size": int(b), "num_heads": int(h), "num_key_value_heads": int(k), "head_dim": int(d),
                   "kv_len": int(L), "kv_cache_dtype": args.kv_dtype}
                  for b, h, k, d, L in zip(*(grid[x] for x in ("b", "h", "kvh", "hd", "L")), strict=True)]
    else:
        Deployment(dtype=args.dtype, ep=args.ep, moe_tp=args.tp)
        check_params("moe_op", {"hidden": args.hidden, "inter": args.inter, "experts": args.experts,
                                "top_k": args.top_k, "tokens": args.tokens},
                     {k: OP_PARAMS[k] for k in ("hidden", "inter", "experts", "top_k", "tokens")})
        validate_op_dtype(hw, args.dtype)
        T = np.asarray(args.tokens, float)
        unique = pairs = None
        if args.routing == "balanced":
            routed = np.array([balanced_routing(int(t), args.experts, args.top_k, args.ep) for t in T], float)
            unique, pairs = routed[:, 0], routed[:, 1]
        elif args.routing == "overlap":
            from .. import overlap as ov

            s = args.tokens_per_request
            check_params("op moe", {"tokens_per_request": s}, {"tokens_per_request": Param(Interval(int, 1, None))})
            if np.any(T % s):
                raise ParameterError(f"--tokens must be multiples of --tokens-per-request {s}; got {args.tokens}")
            stats = ov.OverlapStats.from_overlaps(experts=args.experts, top_k=args.top_k,
                                                  overlaps=tuple(args.overlap), popularity=args.popularity)
            fit = ov.fit_window(stats, n_tokens=s)
            unique = ov.unique_experts(fit.p_zero, T / s) / args.ep  # mean rank
            pairs = T * args.top_k / args.ep
        op = moe_op(args.hidden, args.inter, args.experts, args.top_k, T, args.dtype, args.tp, args.ep, unique,
                    pairs)
        inputs = [{"num_tokens": int(t), "hidden_size": args.hidden, "inter_size": args.inter,
                   "num_experts": args.experts, "topk": args.top_k, "moe_tp_size": args.tp,
                   "moe_ep_size": args.ep, "moe_dtype": args.dtype, "distribution": args.routing} for t in T]
    views = op_views(op, hw)
    sim, roof = views["simulated"], views["roofline"]
    out = []
    for i, rec in enumerate(inputs):
        out.append({**rec, "time_us": float(np.ravel(sim.time)[i] * 1e6),
                    "roofline_us": float(np.ravel(roof.time)[i] * 1e6)})
    print_json(out)
    return 0
