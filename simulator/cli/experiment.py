"""`experiment`: run a declared study from experiments/*.yaml, or all of them, and regenerate docs/RESULTS.md."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..errors import ParameterError
from ..outputs import RunFolder
from ._common import add_force_flag, command_text, progress

DEFAULT_OUT = "results"


def register(sub) -> None:
    p = sub.add_parser(
        "experiment", help="run a declared experiment (CSV + figures + summary), or all of them and the report",
        description=("Run an experiment file (experiments/NAME.yaml, or a bundled name such as paper-headline): "
                     "writes its tables as CSV, its figures as PNG and a Markdown summary with the key numbers to "
                     "--out (default results/NAME/). With --all, run every bundled experiment; with --report FILE, "
                     "also write the combined report (docs/RESULTS.md) and its figures next to it (figures/)."),
        epilog=("examples: python -m simulator experiment paper-headline\n"
                "          python -m simulator experiment experiments/paper-curves.yaml --out /tmp/curves\n"
                "          python -m simulator experiment --all --report docs/RESULTS.md\n"
                "          python -m simulator experiment --all --check"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("experiment", nargs="*", metavar="NAME|PATH", help="bundled experiment names or YAML paths")
    p.add_argument("--all", action="store_true", help="every bundled experiment (python -m simulator list "
                   "experiments)")
    p.add_argument("--out", metavar="DIR", help="output folder (default results/NAME/; with several experiments: "
                   "DIR/NAME/)")
    p.add_argument("--report", metavar="FILE", help="write the combined Markdown report of the experiments run "
                   "(figures into FILE's folder/figures/); per-experiment folders are then written only with --out")
    p.add_argument("--data", metavar="DIR", help="measured per-op CSV folder for the validation analysis "
                   "(default: the bundled measured/h100-sxm tables)")
    p.add_argument("--check", action="store_true", help="only validate the experiment file(s): read them, deploy "
                   "every target and case, build every variant and read the measured tables, without pricing")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_force_flag(p)
    p.set_defaults(func=cmd_experiment)


def cmd_experiment(args) -> int:
    from ..experiments import (
        RunContext,
        bundled_names,
        check_experiment,
        load_experiment,
        run_experiment,
        write_outcome,
        write_report,
    )

    if bool(args.experiment) == bool(args.all):
        raise ParameterError("give experiments (NAME or PATH) or --all, not both and not neither "
                             "(see python -m simulator list experiments)")
    names = bundled_names() if args.all else list(args.experiment)
    exps = [load_experiment(n) for n in names]
    if args.report:  # before any work
        from ..outputs import claim

        claim(args.report, param="report", force=args.force, suffixes=(".md",))
    folders = {}
    if not args.check and (not args.report or args.out):  # checked before any experiment runs
        for e in exps:
            out = Path(args.out or DEFAULT_OUT)
            out = out / e.name if (len(exps) > 1 or not args.out) else out
            folders[e.name] = RunFolder(out, "experiment", {"experiment": e.name, "file": str(e.where),
                                                           "data": args.data}, force=args.force)
    ctx = RunContext(data=args.data, progress=None if args.quiet else lambda m: progress(m, False))
    if args.check:
        for e in exps:
            lines = check_experiment(e, ctx)
            print(f"ok  {e.name} ({', '.join(e.analyses)}): {e.where}: {len(lines)} deployments and inputs checked")
            for line in lines if len(exps) == 1 else ():
                print(f"    {line}")
        return 0
    outcomes = []
    for e in exps:
        start = time.perf_counter()
        progress(f"experiment: running {e.name} ({', '.join(e.analyses)})", args.quiet)
        o = run_experiment(e, ctx)
        outcomes.append(o)
        if e.name in folders:
            folder = folders[e.name]
            with folder as stage:
                written = write_outcome(o, stage)
            print(f"{e.name}: wrote {len(written)} files to {folder.folder}/")
        _print_keys(o)
        print(f"{e.name}: {time.perf_counter() - start:.1f} s")
        sys.stdout.flush()
    if args.report:
        written = write_report(outcomes, args.report, command_text(args), args.force)
        print(f"wrote {written[0]} and {len(written) - 1} figures")
    return 0


def _print_keys(o, width: int = 100) -> None:
    """Key numbers as 'key  value' lines within ``width`` columns: a key too long for its column gets a line of its
    own and the value follows on the next, in the value column (nothing is clipped)."""
    keys = max((len(k) for k, _ in o.key_numbers), default=0)
    vals = max((len(str(v)) for _, v in o.key_numbers), default=0)
    col = max(20, min(keys, width - vals - 4))
    for k, v in o.key_numbers:
        if len(k) <= col:
            print(f"  {k:<{col}}  {v}")
        else:
            import textwrap

            print(textwrap.fill(k, width, initial_indent="  ", subsequent_indent="    "))
            print(f"  {'':<{col}}  {v}")
