"""Declarative parameter constraints, in the spirit of scikit-learn's ``_param_validation``.

Constraints are declared once, next to the function or command that owns them, and checked with
:func:`check_params`. A violation raises :class:`~simulator.errors.ParameterError` with a message of the form
``the 'batch' parameter of step_time must be an int in the range [1, inf). Got 0 instead.``
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ParameterError

__all__ = ["Interval", "Options", "check_params", "describe"]


@dataclass(frozen=True)
class Interval:
    """A real or integer interval. ``kind`` is ``int`` or ``float``; ``closed`` is one of
    ``"both"``, ``"left"``, ``"right"``, ``"neither"``."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def contains(self, value: Any) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                return False
        elif not isinstance(value, numbers.Real):
            return False
        v = float(value)
        if not math.isfinite(v):
            return False
        if self.low is not None:
            if self.closed in ("both", "left") and v < self.low:
                return False
            if self.closed in ("right", "neither") and v <= self.low:
                return False
        if self.high is not None:
            if self.closed in ("both", "right") and v > self.high:
                return False
            if self.closed in ("left", "neither") and v >= self.high:
                return False
        return True

    def __str__(self) -> str:
        name = "an int" if self.kind is int else "a float"
        lo = "-inf" if self.low is None else _fmt(self.low)
        hi = "inf" if self.high is None else _fmt(self.high)
        lb = "[" if self.closed in ("both", "left") and self.low is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        return f"{name} in the range {lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """A finite set of allowed values."""

    values: tuple

    def __init__(self, values: Iterable):
        object.__setattr__(self, "values", tuple(values))

    def contains(self, value: Any) -> bool:
        return value in self.values

    def __str__(self) -> str:
        return "one of {" + ", ".join(repr(v) for v in self.values) + "}"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def describe(constraints: Iterable) -> str:
    parts = [str(c) for c in constraints]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def check_params(owner: str, params: Mapping[str, Any], constraints: Mapping[str, list]) -> None:
    """Check each named parameter against its list of constraints (any one may match).

    ``None`` in a constraint list allows ``None``. Parameters absent from ``constraints`` are not checked.
    """
    for name, allowed in constraints.items():
        if name not in params:
            continue
        value = params[name]
        if value is None and None in allowed:
            continue
        real = [c for c in allowed if c is not None]
        if any(c.contains(value) for c in real):
            continue
        raise ParameterError(
            f"the '{name}' parameter of {owner} must be {describe(real)}. Got {value!r} instead."
        )
