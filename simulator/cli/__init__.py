"""Command-line interface: parses arguments, calls the library, prints. Nothing else lives here.

Each command is a small module with ``register(subparsers)``; it sets ``func`` on its parser. Any
:class:`~simulator.errors.SimulatorError` becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import SimulatorError
from ._common import OneLineParser, error_line

# Command modules, in the order shown by --help. Each registers one top-level command.
_COMMANDS = ("catalog", "overlap", "step", "op", "calibrate", "sweep", "explain", "schedule", "serve", "plan", "report",
             "experiment", "validate", "docs")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m simulator",
        description=(
            "Does speculative decoding pay off for this sparse MoE model, on this GPU, at this batch size, and why? "
            "An analytical cost model (roofline + L2 + kernel-efficiency curves + fixed costs) with a maximum-entropy "
            "routing-overlap model."
        ),
        epilog="Start with:  python -m simulator sweep      (bundled defaults; writes results/)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for name in _COMMANDS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:  # a command whose module is not built yet
            if exc.name == f"{__name__}.{name}":
                continue
            raise
        module.register(sub)
    return parser


def _for_terminal(line: str) -> str:
    """An error is one line (scripts and logs read it so); on a terminal it wraps at the terminal's width (at most
    100 columns), continuing indented, so a long reason stays readable."""
    if not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return line
    import shutil
    import textwrap

    width = min(100, shutil.get_terminal_size((100, 24)).columns)
    return textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a job scheduler's stop) raised where the program runs, so that every output writer cleans
    up as on Ctrl-C (:mod:`simulator.outputs`): nothing partial is left, not even a hidden staging folder."""


def _terminate(signum, frame):
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (one line already printed) returns 2; --help still exits
        if exc.code == 2:
            return 2
        raise
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command as typed (reports name it)
    try:
        return int(args.func(args) or 0)
    except SimulatorError as exc:
        print(_for_terminal(f"error: {error_line(exc)}"), file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `... | head`
        return 0
    except MemoryError:  # a size beyond this machine that no declaration bounds: still one line, exit 2
        print("error: out of memory: a size given (batch, tokens, experts, grid) is too large for this machine; "
              "use smaller values", file=sys.stderr)
        return 2
    except Terminated:  # SIGTERM: cleaned up as on Ctrl-C; the status a shell gives a run killed by it
        print("terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:  # Ctrl-C: outputs are written atomically (simulator.outputs), nothing partial remains
        print("interrupted", file=sys.stderr)
        return 130


def invoke(*args: str, cwd=None):
    """The CLI in process, as ``python -m simulator ARGS`` run from ``cwd`` (default: here) without a new
    interpreter's start-up: ``returncode``, ``stdout`` and ``stderr`` (``--help``'s exit is a return code); any other
    uncaught exception propagates. For tests and notebooks."""
    import contextlib
    import io
    import os
    from types import SimpleNamespace

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # --help
                code = exc.code or 0
    finally:
        os.chdir(here)
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())
