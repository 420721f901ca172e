"""The CLI side of the one table formatter (:mod:`simulator.render.textable`): the ``--wide`` flag."""

from __future__ import annotations

import argparse

from ..render.textable import WIDTH, Col, max_width, render


def add_wide_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wide", action="store_true",
                   help=f"print every table column in full (default: fit {WIDTH} columns, hiding or wrapping some)")


def wide(args) -> bool:
    return bool(getattr(args, "wide", False))


__all__ = ["WIDTH", "Col", "add_wide_flag", "max_width", "render", "wide"]
