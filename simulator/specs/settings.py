"""Settings dataclasses read from YAML: a frozen dataclass declares its keys once, as fields whose types and
declarations (:func:`~simulator.params.param_field`, :func:`on_grid`, :func:`variant_name`, :func:`loadable`) say what
each value may be, and :func:`read_settings` reads a mapping into it strictly through a
:class:`~simulator.specs.schema.Reader` (one-line ConfigError naming the field, the value and the fix).

The reader knows nothing of a particular file: what one file adds (whole-list checks of named keys, a reader of its
own for a dataclass type, the check that a named model, GPU or drafter loads) comes in as :class:`Hooks`. The study
files (``simulator.experiments.schema``) are read this way, and the validation cases they declare
(``simulator.validate``) are declared with the field helpers here.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..params import Interval, Options, Param, param_field
from .schema import Reader

FRACTION = Param(Interval(float, 0.0, 1.0))
POSITIVE = Param(Interval(int, 1, None))


def fraction(default: Any = ...):
    return param_field(FRACTION, default)


def positive(default: Any = ...):
    return param_field(POSITIVE, default)


def choice(values, default: Any = ...):
    return param_field(Param(Options(tuple(values))), default)


def on_grid(axis: str, default: Any = ...):
    """A settings value (or list) that must be on the grid's ``axis`` (batch or draft_len)."""
    return param_field(POSITIVE, default, metadata={"grid": axis})


def variant_name(default: Any = ...):
    """A settings value (or list) naming variants of ``grid.variants``."""
    return field(metadata={"variant": True}) if default is ... else field(default=default, metadata={"variant": True})


def loadable(kind: str, default: Any = ...):
    """A model, hardware or drafter name that must load (checked by :attr:`Hooks.load`)."""
    return field(metadata={"load": kind}) if default is ... else field(default=default, metadata={"load": kind})


@dataclass(frozen=True)
class Hooks:
    """What a file's reader adds to :func:`read_settings`: ``lists`` (key -> declaration every list under that key is
    checked against as a whole), ``sort`` (keys whose lists are read sorted), ``readers`` (dataclass type -> its own
    ``reader(r, obj, path)``) and ``load`` (``load(r, path, name, kind)`` for :func:`loadable` fields)."""

    lists: Mapping[str, Param] = field(default_factory=dict)
    sort: tuple[str, ...] = ()
    readers: Mapping[type, Callable] = field(default_factory=dict)
    load: Callable | None = None
    sequences: tuple[str, ...] = ()


def read_settings(r: Reader, obj: Any, path: str, cls: type, raw: tuple[str, ...] = ("variants",),
                  hooks: Hooks = Hooks()) -> Any:
    """Read the mapping ``obj`` into the frozen dataclass ``cls`` by its field types and declarations; fields named
    in ``raw`` (and ``dict`` fields) are kept as given."""
    hints = typing.get_type_hints(cls)
    flds = dataclasses.fields(cls)
    required = [f.name for f in flds if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    m = r.mapping(obj if obj is not None else {}, path, [f.name for f in flds], required)
    out = {}
    for f in flds:
        if f.name not in m:
            continue
        p = r.join(path, f.name)
        v = m[f.name]
        is_raw = f.name in raw or dict in (hints[f.name], *typing.get_args(hints[f.name]))
        out[f.name] = v if is_raw else _value(r, v, p, hints[f.name], f, f.name, hooks)
    return cls(**out)


def _value(r: Reader, v: Any, p: str, tp: Any, f, key: str, hooks: Hooks) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return None if v is None else _value(r, v, p, args[0], f, key, hooks)
    if typing.get_origin(tp) is tuple:
        if not isinstance(v, list) or not v:
            raise r.fail(p, f"must be a non-empty list, got {v!r}"[:160], "write it as [a, b, c]")
        item = args[0]
        vals = tuple(_value(r, x, f"{p}[{i}]", item, f, key, hooks) for i, x in enumerate(v))
        if not dataclasses.is_dataclass(item) and key not in hooks.sequences and len(set(vals)) != len(vals):
            raise r.fail(p, f"has repeated values {v!r}"[:160], "list each value once")
        if key in hooks.lists:
            parent, _, name = p.rpartition(".")
            r.param({name: list(vals)}, name, parent, hooks.lists[key])
        return tuple(sorted(vals)) if key in hooks.sort else vals
    if dataclasses.is_dataclass(tp):
        if tp in hooks.readers:
            return hooks.readers[tp](r, v, p)
        return read_settings(r, v, p, tp, hooks=hooks)
    parent, _, name = p.rpartition(".")
    holder = {name: v}
    if tp is bool:
        return r.boolean(holder, name, parent)
    if tp in (int, float, str):
        decl = f.metadata.get("param") if f is not None else None
        if tp is int:
            val = r.integer(holder, name, parent)
        elif tp is float:
            val = r.number(holder, name, parent)
        else:
            val = r.string(holder, name, parent)
        if decl is not None:
            r.param(holder, name, parent, decl)
        load = f.metadata.get("load") if f is not None else None
        return hooks.load(r, p, val, load) if load and hooks.load else val
    raise r.fail(p, f"has a field type {tp!r} the reader does not know", "report this as a bug")
