"""Helpers shared by the command modules: a parser whose errors are one line, JSON printing, and the one table
from library parameter names to command-line flags."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn

from ..errors import ParameterError, SimulatorError

# Library parameter name -> command-line flag: the one place where the CLI's vocabulary meets the library's.
# A ParameterError raised from a declaration (simulator.validation) names the library parameter; `error_line`
# prints it with the flag instead. Parameters not listed here keep the library's message.
FLAGS = {
    "batch": "--batch", "gammas": "--draft-len", "draft_len": "--draft-len", "tokens": "--tokens",
    "context": "--context", "dtype": "--dtype", "kv_dtype": "--kv-dtype", "tp": "--tp", "dp": "--dp",
    "ep": "--ep", "gpus": "--gpus", "mode": "--mode", "routing": "--routing", "kernel_curves": "--kernel-curves",
    "fixed_costs": "--fixed-costs", "l2": "--l2", "alpha": "--acceptance", "overlaps": "--overlap", "lags": "--overlap",
    "popularity": "--popularity", "top_k": "--top-k", "experts": "--experts", "hidden": "--hidden",
    "inter": "--inter", "tokens_per_request": "--tokens-per-request", "placement": "--placement",
    "redundant_experts": "--redundant-experts", "drafter": "--drafter", "engine": "--engine",
    "num_experts": "--experts", "samples": "--samples", "seed": "--seed", "seq_tokens": "--seq-tokens",
    "format": "--format",
    "hw": "--hardware",
}


def choices_of(owner, name: str) -> tuple:
    """The allowed values of a declared parameter (a dataclass field or a declared function's parameter), for
    argparse ``choices``: the declaration stays the one home of the list."""
    from ..validation import Options, params_of

    return next(c.values for c in params_of(owner)[name].constraints if isinstance(c, Options))


def default_of(cls, name: str):
    """The default of dataclass field ``name`` (so a flag's default is the library's)."""
    from dataclasses import MISSING, fields

    f = next(f for f in fields(cls) if f.name == name)
    return f.default if f.default is not MISSING else f.default_factory()


def error_line(exc: SimulatorError) -> str:
    """The one-line message the CLI prints for ``exc``: a declared parameter is named by its flag."""
    if isinstance(exc, ParameterError) and exc.param in FLAGS and exc.expected:
        return f"{FLAGS[exc.param]}: must be {exc.expected}; got {exc.value!r}"
    return str(exc)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line on stderr with exit status 2."""

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


def csv_list(kind: type, name: str):
    """An argparse type for comma-separated lists: ``1,2,4`` -> [1, 2, 4]."""

    def parse(text: str):
        try:
            return [kind(x) for x in text.split(",") if x.strip() != ""]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a comma-separated list of {kind.__name__} values, e.g. 1,2,4; got {text!r}"
            ) from None

    return parse


def progress(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)
