"""`calibrate`: fit the H100 SXM kernel curves and fixed costs to the measured per-op data."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..specs.catalog import ENGINES
from ._common import any_case, command_text, print_json, progress


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate", help="fit H100 kernel curves and fixed costs to measured/h100-sxm/ and print their errors",
        description=("Fit the kernel-efficiency curves, fixed costs and collective parameters of a profile to the "
                     "measured per-op latencies (TRT-LLM 1.3.0rc20 rows of the bundled measured/h100-sxm/ tables) "
                     "and print the error per op (MAPE in-sample and leave-one-shape-out). Writes nothing unless "
                     "asked: --write replaces, in a profile file, only the values the calibration fits (source "
                     "fit-h100); hand-set values stay as written. --report writes a Markdown report."),
        epilog=("examples:\n"
                "  python -m simulator calibrate\n"
                "  python -m simulator calibrate --write hardware/h100-sxm.yaml --report docs/CALIBRATION.md"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", type=Path, default=None,
                   help="folder with moe/gemm/decode_attention/collectives.csv (default: the bundled "
                        "measured/h100-sxm/)")
    p.add_argument("--hardware", default="h100-sxm", help="profile whose spec-sheet numbers are used (name or path)")
    p.add_argument("--write", type=Path, metavar="YAML",
                   help="replace the fitted values (source fit-h100) in this profile file; nothing else changes")
    p.add_argument("--force", action="store_true",
                   help="write or fit even when the profile is not the measured GPU's, and replace a report file "
                        "that no run of this tool wrote")
    p.add_argument("--report", metavar="MD", help="write a Markdown calibration report")
    p.add_argument("--engine", choices=ENGINES, default=None, type=any_case(ENGINES, "engine"),
                   help="calibrate this engine on aiconfigurator-core's tables of --hardware (needs the optional "
                        "extra: pip install \".[calibrate]\"); without it the bundled H100 CSVs are used")
    p.add_argument("--version", default=None, help="engine version folder to read (default: the newest)")
    p.add_argument("--all", action="store_true",
                   help="calibrate every bundled GPU x engine that has tables (held-out GPUs excluded) and write "
                        "each into its bundled profile (with --write-bundled) and report (with --report-dir)")
    p.add_argument("--write-bundled", type=Path, metavar="DIR", help="with --all: the hardware/ folder to write")
    p.add_argument("--report-dir", type=Path, metavar="DIR", help="with --all: write <gpu>-<engine>.md and an index")
    p.add_argument("--json", action="store_true", help="print the errors as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run_all(args) -> int:
    from ..calibrate.aic_tables import available_gpus, engines_with_data
    from ..calibrate.fit import calibrate_engine
    from ..calibrate.profile_io import write_profile
    from ..calibrate.report import index_markdown, report_markdown
    from ..outputs import atomic_text
    from ..specs.catalog import bundled_files

    bundled = set(bundled_files("hardware"))
    done = []
    command = command_text(args)
    for gpu in available_gpus():
        if gpu not in bundled:
            continue
        for engine in engines_with_data(gpu):
            if (gpu, engine) == ("h100-sxm", "trtllm"):
                continue  # the default block is fitted on the bundled CSVs (the same rows): plain `calibrate`
            progress(f"calibrate: {gpu} {engine}", args.quiet)
            cal = calibrate_engine(gpu, engine)
            if args.write_bundled:
                write_profile(args.write_bundled / f"{gpu}.yaml", cal)
            if args.report_dir:
                atomic_text(args.report_dir / f"{gpu}-{engine}.md", report_markdown(cal, command), param="report_dir")
            done.append(cal)
            print(f"{gpu:<10} {engine:<7} " + ", ".join(f"{f.cls} {f.variant} {f.mape_fit:.1%}/{f.mape_loso:.1%}"
                                                         for f in cal.fits))
            for r in cal.refused:
                print(f"{'':<18} refused {r}")
    if args.report_dir:
        atomic_text(args.report_dir / "README.md", index_markdown(done, command), param="report_dir")
    return 0


def run(args) -> int:
    from ..calibrate.fit import calibrate, calibrate_engine
    from ..calibrate.profile_io import write_profile
    from ..calibrate.report import report_markdown
    from ..outputs import atomic_text, claim
    from ..specs.catalog import load_hardware

    if args.all:
        return run_all(args)
    if args.report is not None:  # before any fitting
        claim(args.report, param="report", force=args.force, suffixes=(".md",))
    hw = load_hardware(args.hardware)
    if args.write is not None and not args.write.is_file():
        from ..errors import ConfigError

        raise ConfigError(str(args.write), "", "is not an existing file", "--write names an existing profile file")
    if args.write is not None:  # before any fitting: not another GPU's profile
        from ..calibrate.profile_io import check_profile_target

        check_profile_target(args.write, hw.name, args.force)
    if args.engine is not None or args.version is not None:
        cal = calibrate_engine(hw.name, args.engine or "trtllm",
                               args.version, progress=lambda m: progress(m, args.quiet), hw=hw)
    else:
        cal = calibrate(hw, args.data, progress=lambda m: progress(m, args.quiet), force=args.force)
    rows = [{"op": f.cls, "variant": f.variant, "rows": f.rows, "filter": f.filter, "mape_fit": f.mape_fit,
             "mape_leave_one_shape_out": f.mape_loso, "shape": f.shape_key, "mape_all_rows": f.mape_all}
            for f in cal.fits]
    written = write_profile(args.write, cal, force=args.force) if args.write else 0
    if args.report:
        atomic_text(args.report, report_markdown(cal, command_text(args)), param="report")
    if args.json:
        print_json({"gpu": cal.gpu, "engine": cal.engine, "data": cal.data, "fits": rows, "missing": cal.missing,
                    "refused": cal.refused,
                    "launch_eager_us": cal.eager_extra * 1e6})
        return 0
    print(f"{'op':<11} {'variant':<10} {'rows':>5} {'MAPE fit':>9} {'LOSO':>7} {'all rows':>9}")
    for r in rows:
        print(f"{r['op']:<11} {r['variant']:<10} {r['rows']:>5} {r['mape_fit']:>9.1%} "
              f"{r['mape_leave_one_shape_out']:>7.1%} {r['mape_all_rows']:>9.1%}")
    for r in cal.refused:
        print(f"refused: {r}")
    print(f"eager (no CUDA graph) extra per kernel: {cal.eager_extra * 1e6:.1f} µs")
    if args.write:
        print(f"wrote {written} fitted values into {args.write}")
    if args.report:
        print(f"wrote {args.report}")
    return 0
