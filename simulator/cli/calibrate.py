"""`calibrate`: fit the H100 SXM kernel curves and fixed costs to the measured per-op data."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import print_json, progress

DEFAULT_DATA = Path("../shared/reference/measured-h100")


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="fit H100 kernel curves and fixed costs to measured-h100/ and write them to the profile",
        description=("Fit the kernel-efficiency curves, fixed costs and collective parameters of a profile to the "
                     "measured per-op latencies (TRT-LLM 1.3.0rc20 rows of measured-h100/), print the error per op "
                     "(MAPE in-sample and leave-one-shape-out), and optionally write the fitted values into the "
                     "profile's kernels section and a Markdown report."),
        epilog=("example: python -m simulator calibrate --data ../shared/reference/measured-h100 "
                "--write hardware/h100-sxm.yaml --report docs/CALIBRATION.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help=f"folder with the CSVs (default {DEFAULT_DATA})")
    p.add_argument("--hardware", default="h100-sxm", help="profile whose spec-sheet numbers are used (name or path)")
    p.add_argument("--write", type=Path, metavar="YAML", help="replace the kernels section of this profile file")
    p.add_argument("--report", type=Path, metavar="MD", help="write a Markdown calibration report")
    p.add_argument("--json", action="store_true", help="print the errors as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..cost.calibrate import calibrate
    from ..cost.calibrate_io import report_markdown, write_profile
    from ..specs.catalog import load_hardware

    hw = load_hardware(args.hardware)
    cal = calibrate(args.data, hw, progress=lambda m: progress(m, args.quiet))
    rows = [{"op": f.cls, "variant": f.variant, "rows": f.rows, "filter": f.filter, "mape_fit": f.mape_fit,
             "mape_leave_one_shape_out": f.mape_loso, "shape": f.shape_key, "mape_all_rows": f.mape_all}
            for f in cal.fits]
    if args.write:
        write_profile(args.write, cal)
    if args.report:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(report_markdown(cal), encoding="utf-8")
    if args.json:
        print_json({"fits": rows, "launch_eager_us": cal.eager_extra * 1e6})
        return 0
    print(f"{'op':<11} {'variant':<10} {'rows':>5} {'MAPE fit':>9} {'LOSO':>7} {'all rows':>9}")
    for r in rows:
        print(f"{r['op']:<11} {r['variant']:<10} {r['rows']:>5} {r['mape_fit']:>9.1%} "
              f"{r['mape_leave_one_shape_out']:>7.1%} {r['mape_all_rows']:>9.1%}")
    if args.write:
        print(f"wrote kernels section of {args.write}")
    if args.report:
        print(f"wrote {args.report}")
    return 0
