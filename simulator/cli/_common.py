"""Helpers shared by the command modules: a parser whose errors are one line, and JSON printing."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, NoReturn


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
