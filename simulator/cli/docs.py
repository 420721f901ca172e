"""`docs`: regenerate README.md (from docs/templates/README.md) and every generated document from one run of each
source (simulator/docs.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ._common import progress


def register(sub) -> None:
    p = sub.add_parser(
        "docs", help="regenerate README.md and every generated document of a source checkout",
        description=("Fill README.md from docs/templates/README.md with the numbers of the runs it quotes, and "
                     "write docs/RESULTS.md (and its figures), docs/SD_VALIDATION.md, docs/VALIDATION.md, "
                     "docs/CALIBRATION.md and docs/MODEL.md's engine-mode table, each as its own command writes it; "
                     "only the files whose text changed are written. With --check, write nothing: list the stale "
                     "documents and exit 1 if any."),
        epilog="examples: python -m simulator docs\n          python -m simulator docs --check",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", default=".", metavar="DIR", help="the repository checkout (default: .)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a document is stale")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_docs)


def cmd_docs(args) -> int:
    from ..docs import Runs, stale, write_documents

    runs = Runs(progress=None if args.quiet else lambda m: progress(m))
    if args.check:
        old = stale(Path(args.root), runs)
        for p in old:
            print(f"stale: {p} (run python -m simulator docs)")
        if not old:
            print("every generated document is current")
        return 1 if old else 0
    written, figures = write_documents(Path(args.root), runs)
    print("\n".join(f"wrote {p}" for p in written) or "every generated document was already current")
    print(f"drew {len(figures)} figures of docs/RESULTS.md into docs/figures/")
    return 0
