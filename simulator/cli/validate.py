"""`validate`: check the model against measurements — end-to-end TPOT rows (`validate tpot FILE.csv`) in
aiconfigurator's silicon_sample.csv layout, per-op tables (`validate ops DIR`), or speculative-decoding speedups of
the public SD corpus (`validate sd [CORPUS.csv]`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import add_json_flag, print_json


def register(sub) -> None:
    p = sub.add_parser("validate", help="compare predictions with your own measurements (TPOT rows, per-op tables)",
                       description="Price measured rows and report per-row and per-group error.")
    vs = p.add_subparsers(dest="what", metavar="WHAT")
    t = vs.add_parser("tpot", help="end-to-end TPOT rows in aiconfigurator's silicon_sample.csv layout",
                      description="Price every row (agg rows, and the decode side of disagg rows) and compare with "
                                  "silicon_tpot_ms. Rows whose model or system is not in the catalog are 'unmapped', "
                                  "layouts the model cannot express are 'refused' (with the reason).",
                      epilog="example: python -m simulator validate tpot silicon_sample.csv --json")
    t.add_argument("file", metavar="FILE.csv")
    t.add_argument("--include-held-out", action="store_true",
                   help="also price the b300_sxm / gb300 rows (held out to judge the what-if rules)")
    t.add_argument("--rows", action="store_true", help="print every row, not only the per-group table")
    t.add_argument("--report", metavar="PATH.md", help="also write the Markdown report (e.g. docs/VALIDATION.md)")
    add_json_flag(t)
    t.set_defaults(func=cmd_tpot)
    o = vs.add_parser("ops", help="per-op tables (moe/gemm/decode_attention/collectives.csv) of one GPU",
                      description="Per-op error of the step model against a folder of measured per-op tables.",
                      epilog="example: python -m simulator validate ops measured/h100-sxm --hardware h100-sxm")
    o.add_argument("dir", metavar="DIR")
    o.add_argument("--hardware", default="h100-sxm", help="hardware profile the tables were measured on")
    add_json_flag(o)
    o.set_defaults(func=cmd_ops)
    d = vs.add_parser("sd", help="speculative-decoding speedups of the public SD corpus (measured/sd/corpus.csv)",
                      description="Price every corpus row at its level (serving or step), fit the engines' host-time "
                                  "parameters leave-one-source-out, and report the error per engine and mode.",
                      epilog="example: python -m simulator validate sd --report docs/SD_VALIDATION.md")
    d.add_argument("file", nargs="?", metavar="CORPUS.csv", help="a corpus in measured/sd/README.md's layout "
                                                                 "(default: the bundled corpus)")
    d.add_argument("--report", metavar="PATH.md", help="also write the Markdown report (e.g. docs/SD_VALIDATION.md)")
    add_json_flag(d)
    d.set_defaults(func=cmd_sd)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def cmd_tpot(args: argparse.Namespace) -> int:
    from ..validate import validate_tpot

    v = validate_tpot(args.file, include_held_out=args.include_held_out)
    if args.report:
        from ..outputs import atomic_text
        from ..validate.report import markdown

        atomic_text(args.report, markdown(v, f"Source: `{Path(args.file).name}` ({len(v.rows)} rows)."), param="report")
    if args.json:
        print_json(v.as_dict())
        return 0
    s = v.summary()
    if args.rows:
        for r in v.rows:
            pred = "-" if r.predicted_tpot_ms is None else f"{r.predicted_tpot_ms:.2f}"
            print(f"{r.id}\t{r.status}\t{pred}\t{r.measured_tpot_ms}\t{_pct(r.error)}\t{r.reason}")
    print("rows: " + ", ".join(f"{k} {n}" for k, n in s["counts"].items()))
    m = s["moe_rows_of_catalog_gpus"]
    print(f"MoE rows of catalog GPUs: {m['ok']}/{m['rows']} priced ({_pct(m['coverage'])}), median |error| "
          f"{_pct(m['median_abs_error'])}, MAPE {_pct(m['mape'])}")
    print(f"{'model':<20} {'gpu':<9} {'engine':<7} {'mode':<6} {'grounding':<10} {'priced':>9} {'median|e|':>9} "
          f"{'MAPE':>7} {'bias':>7}")
    for g in s["groups"]:
        print(f"{g['model']:<20} {g['gpu']:<9} {g['engine']:<7} {g['mode']:<6} {g['grounding']:<10} "
              f"{g['ok']:>4}/{g['rows']:<4} {_pct(g['median_abs_error']):>9} {_pct(g['mape']):>7} "
              f"{_pct(g['bias']):>7}")
    for reason, n in s["not_priced"].items():
        print(f"not priced ({n}): {reason}")
    return 0


def cmd_sd(args: argparse.Namespace) -> int:
    from ..validate.sd_report import markdown, run, text_lines

    s = run(args.file)
    if args.report:
        from ..outputs import atomic_text

        atomic_text(args.report, markdown(s), param="report")
    if args.json:
        print_json(s)
        return 0
    print("\n".join(text_lines(s)))
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from ..cost.measured import ERROR_COLUMNS, validate_ops

    v = validate_ops(args.hardware, data=args.dir)
    rows = v.table()
    if args.json:
        print_json({"hardware": v.hardware, "data": v.data, "excluded": dict(v.excluded),
                    "rows": [dict(zip(ERROR_COLUMNS, r, strict=True)) for r in rows]})
        return 0
    print("\t".join(ERROR_COLUMNS))
    for r in rows:
        print("\t".join(f"{x:.4f}" if isinstance(x, float) else str(x) for x in r))
    return 0
