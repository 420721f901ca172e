"""`report`: one self-contained HTML file with every view of a sweep scenario (docs/MODEL.md §5.6)."""

from __future__ import annotations

import argparse
import time
from textwrap import fill

from ._common import csv_list, progress
from ._scenario import add_scenario_flags, request_from
from .sweep import _names

DEFAULT_OUT = "results/report.html"


def register(sub) -> None:
    p = sub.add_parser(
        "report", help="one self-contained HTML report (charts, tables, engine configs; no network)",
        description=fill("Price the sweep scenario (default: the default study) on each engine and drafter asked "
                         "for and write one HTML file that works offline: speedup vs batch with its band and where "
                         "SD pays (prior vs refined), tokens/s per GPU vs per user with and without SD, the time "
                         "per output token by part, the explain walk, the draft-length table in each engine's "
                         "syntax with its assumptions; controls switch views; every plotted number downloads as "
                         "CSV.", 100),
        epilog="example: python -m simulator report --model qwen3-235b-a22b,mixtral-8x7b --out report.html",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_scenario_flags(p, single=False)
    p.add_argument("--engines", type=csv_list(str, "--engines"), default=None, metavar="E1,E2",
                   help="engines to price, e.g. trtllm,sglang,vllm (default: --engine if given, else trtllm, the "
                        "default study's)")
    p.add_argument("--drafters", type=csv_list(str, "--drafters"), default=None, metavar="D1,D2",
                   help="drafters to price (default: --drafter)")
    p.add_argument("--batch", type=csv_list(int, "--batch"), default=None, metavar="B1,B2,...",
                   help="batch sizes (default 1,2,4,...,256)")
    p.add_argument("--draft-len", type=csv_list(int, "--draft-len"), default=None, metavar="G1,G2,...",
                   help="draft lengths (default 1..8)")
    p.add_argument("--tolerance", type=float, default=0.01, metavar="F",
                   help="the draft-length tables' allowance (default 0.01)")
    p.add_argument("--isl", type=float, default=None, help="also the served workload of ISL prompt tokens")
    p.add_argument("--osl", type=float, default=None, help="... and OSL output tokens (default 1024 with --isl)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="FILE", help=f"the HTML file (default {DEFAULT_OUT})")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from pathlib import Path

    from ..outputs import atomic_text, check_writable
    from ..specs.catalog import ENGINES
    from ..sweep import DEFAULT_BATCH, DEFAULT_DRAFT_LEN
    from ..sweep.deployable import TOLERANCE
    from ..sweep.htmlreport import build_report, report_html

    start = time.perf_counter()
    if args.out == DEFAULT_OUT:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    check_writable(args.out, param="out")
    TOLERANCE.check(args.tolerance, "tolerance", "report")
    for e in args.engines or ():
        if e not in ENGINES:
            from ..errors import ParameterError

            raise ParameterError(f"--engines: unknown engine {e!r}; use {', '.join(ENGINES)}", param="engines")
    osl = args.osl if args.osl is not None else (1024.0 if args.isl is not None else None)
    isl = args.isl if args.isl is not None else (1024.0 if args.osl is not None else None)
    data = build_report(_names(args.model), _names(args.hardware), request_from(args), engines=args.engines,
                        drafters=args.drafters, batch=args.batch or DEFAULT_BATCH,
                        draft_len=args.draft_len or DEFAULT_DRAFT_LEN, tolerance=args.tolerance, isl=isl, osl=osl,
                        progress=None if args.quiet else (lambda line: progress(line, False)))
    written = atomic_text(args.out, report_html(data), param="out")
    size = Path(written).stat().st_size / 1e6
    shape = ", ".join(f"{c['name']} x{len(c['options'])}" for c in data["controls"])
    print(f"{len(data['views'])} views ({shape}) "
          f"in {time.perf_counter() - start:.1f} s; wrote {written} ({size:.2f} MB, self-contained: open it in a "
          f"browser, no server or network needed)")
    return 0
