"""Helpers shared by the command modules: a parser whose errors are one line, JSON printing, and the one table
from library parameter names to command-line flags."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from ..errors import ParameterError, SimulatorError

# Library parameter name -> command-line flag: the one place where the CLI's vocabulary meets the library's.
# A ParameterError raised from a declaration (simulator.params) names the library parameter; `error_line`
# prints it with the flag instead: a scenario knob's flag is the knob table's (simulator.pricing.knobs.KNOBS), the
# other parameters' are listed here. Parameters named in neither keep the library's message.
FLAGS = {
    "batch": "--batch", "gammas": "--draft-len", "draft_len": "--draft-len", "tokens": "--tokens", "mode": "--mode",
    "alpha": "--acceptance", "overlaps": "--overlap", "top_k": "--top-k", "experts": "--experts", "hidden": "--hidden",
    "inter": "--inter", "tokens_per_request": "--tokens-per-request", "branching": "--tree",
    "num_experts": "--experts", "samples": "--samples", "seed": "--seed", "seq_tokens": "--seq-tokens",
    "format": "--format",
    "hw": "--hardware", "out": "--out", "plot": "--plot", "report": "--report", "write": "--write",
    "report_dir": "--report-dir", "write_profile": "--write-profile", "split": "--profile-split", "isl": "--isl",
    "osl": "--osl",
}


def flag_of(param: str | None) -> str | None:
    """The command-line flag of a library parameter: a knob's (the knob table) or one of :data:`FLAGS`."""
    from ..pricing.knobs import KNOBS  # on the error path only: the table is not loaded at start-up

    return next((k.flag for k in KNOBS if k.name == param), None) or FLAGS.get(param or "")


def choices_of(owner, name: str) -> tuple:
    """The allowed values of a declared parameter (a dataclass field or a declared function's parameter), for
    argparse ``choices``: the declaration stays the one home of the list."""
    from ..params import Options, params_of

    return next(c.values for c in params_of(owner)[name].constraints if isinstance(c, Options))


def default_of(cls, name: str):
    """The default of dataclass field ``name`` (so a flag's default is the library's)."""
    from dataclasses import MISSING, fields

    f = next(f for f in fields(cls) if f.name == name)
    return f.default if f.default is not MISSING else f.default_factory()


def error_line(exc: SimulatorError) -> str:
    """The one-line message the CLI prints for ``exc``: a declared parameter is named by its flag."""
    flag = flag_of(exc.param) if isinstance(exc, ParameterError) else None
    if flag:
        if exc.expected:
            return f"{flag}: must be {exc.expected}; got {exc.value!r}"
        if exc.owner == "output":  # simulator.outputs: "cannot write out 'x': ..." -> "--out: cannot write 'x': ..."
            return str(exc).replace(f"cannot write {exc.param} ", f"{flag}: cannot write ", 1)
    return str(exc)


# Integers given on the command line must fit the 64-bit arithmetic they feed (numpy): larger ones are refused
# while parsing, with the flag named, instead of overflowing later.
INT_LIMIT = 2**53


def _int(text: str) -> int:
    v = int(text)
    if abs(v) > INT_LIMIT:
        raise argparse.ArgumentTypeError(f"must be an int of magnitude at most {INT_LIMIT:.3g}; got {v}")
    return v


_int.__name__ = "int"


class WrappingFormatter(argparse.RawDescriptionHelpFormatter):
    """Help whose description and epilog keep their line breaks (examples stay one per line) but wrap every line
    longer than the terminal ($COLUMNS, at most 100 columns), continuing at the line's indent."""

    def __init__(self, prog, **kw):
        import shutil

        kw.setdefault("width", min(100, shutil.get_terminal_size((100, 24)).columns))
        super().__init__(prog, **kw)

    def _fill_text(self, text, width, indent):
        import textwrap

        out = []
        for line in text.splitlines():
            lead = indent + " " * (len(line) - len(line.lstrip()))
            hang = "  " if "python -m" in line else ""  # a long example command continues indented
            out.append(textwrap.fill(line.strip(), width, initial_indent=lead, subsequent_indent=lead + hang,
                                     break_on_hyphens=False) if line.strip() else "")
        return "\n".join(out)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line on stderr with exit status 2. Every ``type=int`` argument
    is bounded (:data:`INT_LIMIT`), and an empty value (``--model ''``, e.g. from an unset shell variable) is an
    error, never the default. Help fits the terminal, at most 100 columns (:class:`WrappingFormatter`)."""

    def __init__(self, *a, **kw):
        if kw.get("formatter_class") in (None, argparse.HelpFormatter, argparse.RawDescriptionHelpFormatter):
            kw["formatter_class"] = WrappingFormatter
        super().__init__(*a, **kw)
        self.register("type", int, _int)

    def _get_value(self, action, arg_string):
        if isinstance(arg_string, str) and not arg_string.strip() and action.nargs not in (argparse.PARSER,
                                                                                            argparse.REMAINDER):
            name = "/".join(action.option_strings) or action.metavar or action.dest
            what = "list" if getattr(action.type, "is_list", False) else "value"
            self.error(f"argument {name}: must be a non-empty {what} (an unset shell variable?); got "
                       f"{arg_string!r}: give a value or leave the flag out")
        return super()._get_value(action, arg_string)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see --help)\n")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of a table")


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=_default)
    sys.stdout.write("\n")


def _default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def any_case(choices, name: str):
    """A choice as users write it: any case, with or without '-' or '_' (``--engine TRTLLM``, ``TRT-LLM``); other
    text is passed on for argparse to refuse with the choices."""
    def norm(text) -> str:
        return str(text).strip().lower().replace("-", "").replace("_", "")

    table = {norm(c): c for c in choices if isinstance(c, str)}

    def parse(text: str):
        return table.get(norm(text), text)

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def csv_list(kind: type, name: str):
    """An argparse type for comma-separated lists: ``1,2,4`` -> [1, 2, 4]."""

    convert = _int if kind is int else kind

    def parse(text: str):
        try:
            values = [convert(x) for x in text.split(",") if x.strip() != ""]
        except ValueError:
            values = None
        if not values:
            raise argparse.ArgumentTypeError(
                f"{name} must be a comma-separated list of {kind.__name__} values, e.g. 1,2,4; got {text!r}")
        return values

    parse.is_list = True
    parse.kind = kind  # read by the CLI fuzz test (tests/cli/test_cli_fuzz.py) to draw values from the declarations
    return parse


_NOT_ARGUMENTS = ("func", "command", "force", "quiet", "out", "json", "wide", "argv")


def add_tree_choice(parser: argparse.ArgumentParser, verb: str, note: str = "") -> None:
    """``--tree B1,B2,..`` or ``--tree-parents FILE``: one draft tree (read by :func:`tree_choice`). ``verb`` says
    what the command does with the tree's nodes; ``note`` is added to the ``--tree`` help."""
    tree = parser.add_mutually_exclusive_group()
    tree.add_argument("--tree", type=csv_list(int, "--tree"), default=None, metavar="B1,B2,..",
                      help=f"{verb} a full draft tree: the root, B1 children, each with B2 children, ... "
                      f"(every node){note}")
    tree.add_argument("--tree-parents", default=None, metavar="FILE", help=f"{verb} a general draft tree: a text "
                      "file with one parent index per node (root -1)")


def tree_choice(args) -> tuple[tuple[int, ...], str, str] | None:
    """(parent list, label, flag) of the tree that ``--tree``/``--tree-parents`` give, or None without them."""
    from ..overlap import full_tree, read_parents

    if args.tree is not None:
        return full_tree(args.tree), ",".join(str(b) for b in args.tree), "--tree"
    if args.tree_parents is not None:
        try:
            parents = read_parents(args.tree_parents)
        except ParameterError as exc:
            raise ParameterError(f"--tree-parents: {exc}") from None
        return parents, args.tree_parents, "--tree-parents"
    return None


def add_force_flag(parser: argparse.ArgumentParser, file: bool = False) -> None:
    """``--force``: replace output files that no run of this tool wrote (``file``: the command writes named files,
    not a run folder)."""
    text = ("overwrite an existing output file that no run of this tool wrote (a report, figure or schedule this "
            "tool wrote is always replaced)" if file else
            "overwrite files in the output folder that no run of this tool recorded (a previous run's files, listed "
            "in its manifest.json, are always replaced)")
    parser.add_argument("--force", action="store_true", help=text)


def command_text(args, drop: tuple[str, ...] = ("--quiet", "--force", "--json", "--wide")) -> str:
    """The command as the user typed it, for a report's "Generated by" line (flags that do not change what is
    written are left out): ``python -m simulator`` and the arguments :func:`simulator.cli.main` parsed."""
    import shlex

    argv = [a for a in getattr(args, "argv", None) or [args.command] if a not in drop]
    return "python -m simulator " + shlex.join(argv)


def run_folder(args, out, **extra):
    """The :class:`~simulator.outputs.RunFolder` of this command's run into ``out`` (its manifest records the
    command and the parsed arguments)."""
    from ..outputs import RunFolder

    arguments = {k: v for k, v in vars(args).items() if k not in _NOT_ARGUMENTS}
    return RunFolder(out, args.command, {**arguments, **extra}, force=getattr(args, "force", False))


def progress(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)
