"""Declarative parameter constraints, in the spirit of scikit-learn's ``_param_validation``: the one constraint
language of the simulator.

Each parameter's allowed values (range, choices, integer-ness), unit and shape are declared once, as a
:class:`Param`, next to the dataclass field (:func:`param_field`) or the function (:func:`declare`) that owns it. The
same declaration is checked by library entry points (:func:`check_params`, :func:`check_fields`, the
:func:`declare` decorator), by YAML readers (:meth:`simulator.specs.schema.Reader.param`) and, through the library,
by the CLI. A violation raises :class:`~simulator.errors.ParameterError` naming the library parameter::

    the 'batch' parameter of step_time must be a non-empty list of ints in the range [1, inf). Got [0] instead.

The error carries ``owner``, ``param``, ``expected`` and ``value``, so the CLI can say the same with its flag
(``--batch: must be ...; got [0]``) from one table of parameter names to flags (``simulator/cli/_common.py``).
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ParameterError

__all__ = ["Interval", "Options", "Param", "Pattern", "check_fields", "check_params", "declare", "describe",
           "param_field", "parameter_error", "params_of"]


@dataclass(frozen=True)
class Interval:
    """A real or integer interval. ``kind`` is ``int`` or ``float``; ``closed`` is one of
    ``"both"``, ``"left"``, ``"right"``, ``"neither"``."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def contains(self, value: Any) -> bool:
        if type(value) is int or type(value) is float:  # the common case, without the numbers ABC checks
            if self.kind is int and type(value) is float:
                return False
            return self._in_range(float(value))
        if isinstance(value, bool):
            return False
        if self.kind is int:
            if not isinstance(value, numbers.Integral):
                return False
        elif not isinstance(value, numbers.Real):
            return False
        return self._in_range(float(value))

    def _in_range(self, v: float) -> bool:
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
        return f"{name} in the range {self.range_text()}"

    def range_text(self) -> str:
        lo = "-inf" if self.low is None else _fmt(self.low)
        hi = "inf" if self.high is None else _fmt(self.high)
        lb = "[" if self.closed in ("both", "left") and self.low is not None else "("
        rb = "]" if self.closed in ("both", "right") and self.high is not None else ")"
        return f"{lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """A finite set of allowed values."""

    values: tuple

    def __init__(self, values: Iterable):
        object.__setattr__(self, "values", tuple(values))

    def contains(self, value: Any) -> bool:
        try:
            return value in self.values
        except (TypeError, ValueError):  # unhashable or array-valued input
            return False

    def __str__(self) -> str:
        return "one of {" + ", ".join(repr(v) for v in self.values) + "}"


@dataclass(frozen=True)
class Pattern:
    """Text matching a regular expression (whole string), described as ``text`` in messages."""

    regex: str
    text: str

    def contains(self, value: Any) -> bool:
        import re

        return isinstance(value, str) and re.fullmatch(self.regex, value) is not None

    def __str__(self) -> str:
        return self.text


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def describe(constraints: Iterable) -> str:
    parts = [str(c) for c in constraints]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


@dataclass(frozen=True, init=False)
class Param:
    """The one declaration of a parameter: the constraints its value must meet (any one may match; ``None``
    allows ``None``), its unit (shown in messages) and whether it is a list.

    ``many=True``: the value is a non-empty 1-D list or array and *every* element must meet the constraints (an
    integer constraint accepts whole floats such as ``4.0``, as batch grids are float arrays)."""

    constraints: tuple
    unit: str = ""
    many: bool = False

    def __init__(self, *constraints, unit: str = "", many: bool = False):
        object.__setattr__(self, "constraints", tuple(constraints))
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "many", many)
        # read on every check (a sweep checks ~20k values): derived once from the constraints above
        object.__setattr__(self, "_real", tuple(c for c in self.constraints if c is not None))
        object.__setattr__(self, "_kind", next((c.kind for c in self.constraints if isinstance(c, Interval)), None))

    @property
    def allows_none(self) -> bool:
        return None in self.constraints

    @property
    def kind(self) -> type | None:
        """``int`` or ``float`` for a numeric parameter (its first interval), else None."""
        return self._kind

    def _one(self, value: Any) -> bool:
        if value is None:
            return self.allows_none
        if self.many and self._kind is int and isinstance(value, numbers.Real) and not isinstance(value, bool) \
                and math.isfinite(float(value)) and float(value).is_integer():
            value = int(value)
        return any(c.contains(value) for c in self._real)

    def contains(self, value: Any) -> bool:
        if not self.many:
            return self._one(value)
        fast = self._contains_array(value)
        if fast is not None:
            return fast
        items = _as_list(value)
        return items is not None and len(items) > 0 and all(self._one(v) for v in items)

    def _contains_array(self, value: Any) -> bool | None:
        """Vectorised check of a numeric 1-D numpy array against one interval (None: use the general path)."""
        real = self._real
        if type(value).__name__ != "ndarray" or len(real) != 1 or not isinstance(real[0], Interval) \
                or value.dtype.kind not in "iuf" or value.ndim != 1:
            return None
        c, v = real[0], value.astype(float)
        if v.size == 0 or not bool((v == v).all()) or not bool(abs(v).max() < float("inf")):
            return False
        if c.kind is int and not bool((v == v.round()).all()):
            return False
        lo_ok = c.low is None or bool((v >= c.low).all() if c.closed in ("both", "left") else (v > c.low).all())
        hi_ok = c.high is None or bool((v <= c.high).all() if c.closed in ("both", "right") else (v < c.high).all())
        return lo_ok and hi_ok

    def expected(self) -> str:
        """What a valid value is, e.g. ``an int in the range [1, inf) (requests)``."""
        real = [c for c in self.constraints if c is not None]
        text = describe(real)
        if self.many:
            text = "a non-empty list of " + text.replace("an int ", "ints ").replace("a float ", "floats ")
        if self.allows_none:
            text += " or None"
        return text + (f" ({self.unit})" if self.unit else "")

    def check(self, value: Any, name: str, owner: str) -> None:
        """Raise :class:`ParameterError` unless ``value`` is allowed."""
        if not self.contains(value):
            raise parameter_error(owner, name, self.expected(), value)


def _as_list(value: Any) -> list | None:
    if isinstance(value, (str, bytes, Mapping)):
        return None
    try:
        import numpy as np

        arr = np.asarray(value, dtype=object)
    except Exception:  # noqa: BLE001 - anything array-like that numpy cannot take is not a list
        return None
    if arr.ndim == 0:
        return [arr.item()]
    if arr.ndim != 1:
        return None
    return [v.item() if hasattr(v, "item") else v for v in arr]


def _shown(value: Any) -> Any:
    """The value as messages print it: arrays as lists, whole floats in lists as ints."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [int(v) if isinstance(v, float) and math.isfinite(v) and v.is_integer() else v for v in value]
    return value


def parameter_error(owner: str, name: str, expected: str, value: Any) -> ParameterError:
    shown = _shown(value)
    return ParameterError(f"the '{name}' parameter of {owner} must be {expected}. Got {shown!r} instead.",
                          owner=owner, param=name, expected=expected, value=shown)


def _as_param(decl) -> Param:
    return decl if isinstance(decl, Param) else Param(*decl)


def check_params(owner: str, params: Mapping[str, Any], constraints: Mapping[str, Param | list]) -> None:
    """Check each named parameter against its declaration (a :class:`Param`, or a list of constraints of which
    any one may match; ``None`` in the list allows ``None``). Parameters absent from ``params`` are not checked."""
    for name, decl in constraints.items():
        if name in params:
            _as_param(decl).check(params[name], name, owner)


# -- dataclass fields ---------------------------------------------------------------------------------------------
def param_field(param: Param, default: Any = ..., **kw) -> Any:
    """A dataclass field carrying its declaration: ``tp: int = param_field(Param(Interval(int, 1, 1024)), 1)``.
    :func:`check_fields` (called from ``__post_init__``) checks every such field."""
    meta = {**kw.pop("metadata", {}), "param": param}
    if default is ...:
        return field(metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


def params_of(owner: Any) -> dict[str, Param]:
    """The declarations of a dataclass (field name -> Param) or of a :func:`declare`-d function."""
    if hasattr(owner, "__params__"):
        return dict(owner.__params__)
    return {f.name: f.metadata["param"] for f in fields(owner) if "param" in f.metadata}


def check_fields(obj: Any, owner: str | None = None) -> None:
    """Check every declared field of the dataclass instance ``obj``."""
    name = owner or type(obj).__name__
    for f, p in _declared(type(obj)):
        p.check(getattr(obj, f), f, name)


@functools.cache
def _declared(cls: type) -> tuple:
    """(field name, Param) of every declared field of the dataclass ``cls`` (read once per class)."""
    return tuple((f.name, f.metadata["param"]) for f in fields(cls) if f.metadata.get("param") is not None)


# -- functions ----------------------------------------------------------------------------------------------------
def declare(**params: Param) -> Callable:
    """Declare the constraints of a function's parameters next to it; they are checked on every call and
    listed by :func:`params_of`::

        @declare(batch=BATCH, context=CONTEXT)
        def step_time(model, hw, dep, batch, tokens, context=0, ...): ...
    """

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        unknown = [n for n in params if n not in sig.parameters]
        if unknown:  # a programming error, not input
            raise TypeError(f"{fn.__name__} has no parameters {unknown}")

        # where each declared parameter arrives: its position (None: keyword-only), so a call needs no bind
        names = list(sig.parameters)
        slots = [(name, p, names.index(name) if sig.parameters[name].kind in
                  (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) else None)
                 for name, p in params.items()]

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            for name, p, pos in slots:
                if pos is not None and pos < len(args):
                    p.check(args[pos], name, fn.__name__)
                elif name in kwargs:
                    p.check(kwargs[name], name, fn.__name__)
            return fn(*args, **kwargs)

        checked.__params__ = dict(params)
        return checked

    return wrap
