"""`validate`: check the model against measurements — end-to-end TPOT rows (`validate tpot FILE.csv`) in
aiconfigurator's silicon_sample.csv layout, per-op tables (`validate ops DIR`), or speculative-decoding speedups of
the public SD corpus (`validate sd [CORPUS.csv]`). Errors print as percents (predicted / measured − 1); JSON carries
them as fractions."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import add_force_flag, add_json_flag, command_text, print_json, progress


def register(sub) -> None:
    p = sub.add_parser("validate", help="compare predictions with your own measurements (TPOT rows, per-op tables)",
                       description="Price measured rows and report per-row and per-group error.")
    vs = p.add_subparsers(dest="what", metavar="WHAT")
    t = vs.add_parser("tpot", help="end-to-end TPOT rows in aiconfigurator's silicon_sample.csv layout",
                      description="Price every row (agg rows, and the decode side of disagg rows) and compare with "
                                  "silicon_tpot_ms (milliseconds). Models and GPUs are found in the catalog by name, "
                                  "alias, hub id (hf_id) or YAML path; rows naming neither are 'unmapped' (map them "
                                  "with --mapping), layouts the model cannot express are 'refused' (with the "
                                  "reason). Disagg rows without a decode batch are priced from their concurrency "
                                  "and reported apart ('batch-inferred'); rows stating draft tokens are set apart "
                                  "('speculative'). Each row runs the engine release its backend_version names and "
                                  "the MoE backend of its optional moe_backend column (empty: the release's default).",
                      epilog="example: python -m simulator validate tpot measured/silicon/silicon_sample.csv")
    t.add_argument("file", metavar="FILE.csv")
    t.add_argument("--mapping", metavar="FILE.yaml",
                   help="extra names: 'models: {their name: catalog model}', 'systems: {their name: catalog GPU}'")
    t.add_argument("--include-held-out", action="store_true",
                   help="also price the b300_sxm / gb300 rows (held out to judge the what-if rules)")
    t.add_argument("--rows", action="store_true", help="print every row, not only the per-group table")
    t.add_argument("--report", metavar="PATH.md", help="also write the Markdown report (e.g. docs/VALIDATION.md)")
    add_force_flag(t, file=True)
    add_json_flag(t)
    t.set_defaults(func=cmd_tpot)
    o = vs.add_parser("ops", help="per-op tables (moe/gemm/decode_attention/collectives.csv) of one GPU",
                      description="Per-op error of the step model against a folder of measured per-op tables "
                                  "(latency_us in microseconds). The GPU is read from the tables' gpu column.",
                      epilog="example: python -m simulator validate ops measured/h100-sxm")
    o.add_argument("dir", metavar="DIR")
    o.add_argument("--hardware", default=None, metavar="NAME|PATH",
                   help="hardware profile to price on (default: the GPU named in the tables)")
    add_json_flag(o)
    o.set_defaults(func=cmd_ops)
    d = vs.add_parser("sd", help="speculative-decoding speedups of the public SD corpus (measured/sd/corpus.csv)",
                      description="Price every corpus row at its level (serving or step), fit the engines' host-time "
                                  "parameters leave-one-author-out, price the engines' public A/Bs and the slopes "
                                  "against concurrency, and report the error per engine, mode and author.",
                      epilog="example: python -m simulator validate sd --report docs/SD_VALIDATION.md")
    d.add_argument("file", nargs="?", metavar="CORPUS.csv", help="a corpus in measured/sd/README.md's layout "
                                                                 "(default: the bundled corpus)")
    d.add_argument("--report", metavar="PATH.md", help="also write the Markdown report (e.g. docs/SD_VALIDATION.md)")
    add_force_flag(d, file=True)
    d.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_json_flag(d)
    d.set_defaults(func=cmd_sd)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


GROUP_HEAD = (f"{'model':<20} {'gpu':<9} {'engine':<7} {'mode':<6} {'grounding':<10} {'priced':>9} "
              f"{'median|e|':>9} {'MAPE':>7} {'bias':>7}")


def _line(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def cmd_tpot(args: argparse.Namespace) -> int:
    from ..validate import read_mapping, validate_tpot

    if args.report:  # before any work
        from ..outputs import claim

        claim(args.report, param="report", force=args.force, suffixes=(".md",))
    names = read_mapping(args.mapping) if args.mapping else None
    v = validate_tpot(args.file, include_held_out=args.include_held_out, names=names)
    if args.report:
        from ..outputs import atomic_text
        from ..validate.report import markdown

        atomic_text(args.report, markdown(v, f"Source: `{Path(args.file).name}` ({len(v.rows)} rows).",
                                          command_text(args)), param="report")
    if args.json:
        print_json(v.as_dict())
        return 0
    s = v.summary()
    if args.rows:
        import textwrap

        print("id  status  predicted ms  measured ms  error (predicted / measured - 1)  [reason]")
        for r in v.rows:
            pred = "-" if r.predicted_tpot_ms is None else f"{r.predicted_tpot_ms:.2f}"
            text = f"{r.id}  {r.status}  {pred}  {r.measured_tpot_ms}  {_pct(r.error)}" + (
                f"  {r.reason}" if r.reason else "")
            print(textwrap.fill(text, 100, subsequent_indent="    ", break_on_hyphens=False))
    print("rows: " + ", ".join(f"{k} {n}" for k, n in s["counts"].items()))
    for key, what in (("moe_rows_of_catalog_gpus", "MoE rows, batch stated"),
                      ("moe_batch_inferred", "MoE rows, batch inferred")):
        m = s[key]
        print(f"{what}: {m['ok']}/{m['rows']} priced ({_pct(m['coverage'])}), median |error| "
              f"{_pct(m['median_abs_error'])}, MAPE {_pct(m['mape'])}, bias {_pct(m['bias'])}")
    print(GROUP_HEAD)
    for g in s["groups"]:
        print(f"{g['model'][:20]:<20} {g['gpu'][:9]:<9} {g['engine'][:7]:<7} {g['mode']:<6} {g['grounding']:<10} "
              f"{g['ok']:>4}/{g['rows']:<4} {_pct(g['median_abs_error']):>9} {_pct(g['mape']):>7} "
              f"{_pct(g['bias']):>7}")
    for reason, n in s["not_priced"].items():
        print(_line(f"not priced ({n}): {reason}"))
    return 0


def cmd_sd(args: argparse.Namespace) -> int:
    from ..outputs import atomic_text, claim
    from ..validate.sd_report import markdown, run, text_lines

    if args.report:  # before any work: exactly this file is written, or one line says why not
        claim(args.report, param="report", force=args.force, suffixes=(".md",))
    s = run(args.file, progress=None if args.quiet else lambda m: progress(m))
    if args.report:
        atomic_text(args.report, markdown(s, command=command_text(args)), param="report")
    if args.json:
        print_json(s)
        return 0
    print("\n".join(text_lines(s)))
    return 0


def cmd_ops(args: argparse.Namespace) -> int:
    from ..calibrate.measured import ERROR_COLUMNS
    from ..validate.ops import validate_ops_folder

    v = validate_ops_folder(args.dir, args.hardware)
    rows = v.table()
    if args.json:
        print_json({"hardware": v.hardware, "data": v.data, "excluded": dict(v.excluded),
                    "rows": [dict(zip(ERROR_COLUMNS, r, strict=True)) for r in rows]})
        return 0
    print(f"hardware: {v.hardware}; data: {v.data}; errors: predicted / measured − 1, in percent")
    head = ("op", "format", "row set", "n", "MAPE", "median|e|", "within 20%", "bias")
    widths = (10, 11, 27, 5, 7, 9, 10, 7)
    for cells in (head, *((r.op, r.variant, r.set, str(r.n), _pct(r.mape), _pct(r.median_ape), _pct(r.within_20),
                           _pct(r.bias)) for r in rows)):
        print(" ".join(f"{c[:w]:<{w}}" if i < 3 else f"{c:>{w}}" for i, (c, w) in
                       enumerate(zip(cells, widths, strict=True))))
    return 0
