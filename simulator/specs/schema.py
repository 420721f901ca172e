"""A strict reader for YAML-derived dictionaries: unknown keys, missing fields, types, ranges and units are
checked once, here, and reported as one-line :class:`~simulator.errors.ConfigError` messages that name the file,
the field, the value and the fix.

Sourced quantities are written ``{value: 3.35, unit: TB/s, source: A6}`` (optionally ``note:``); ``source`` must be
a key of the file's ``sources:`` table, or ``assumed`` together with a ``reason:``. The reader converts them to SI
and records their provenance for ``show``.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError
from ..params import Interval, Options, Param
from .units import dimension_of, to_si, units_for

QUANTITY_KEYS = ("value", "unit", "source", "reason", "note")


@dataclass(frozen=True)
class Provenance:
    """Where one number came from."""

    path: str
    given: float
    unit: str
    si: float
    dimension: str
    source: str
    citation: str
    note: str = ""

    def as_dict(self) -> dict:
        return {
            "value": self.given,
            "unit": self.unit,
            "si_value": self.si,
            "source": self.source,
            "citation": self.citation,
            **({"note": self.note} if self.note else {}),
        }


def closest(word: str, options: Iterable[str]) -> str | None:
    """The option most like ``word``: among the options ``word`` begins (a name typed short, ``qwen3-235b`` for
    ``qwen3-235b-a22b``) when there are any, else among all (a typo); None when nothing is close."""
    options = list(options)
    key = str(word).strip().lower()
    begun = [o for o in options if key and str(o).lower().startswith(key)]
    if begun:
        return difflib.get_close_matches(str(word), begun, n=1, cutoff=0.0)[0]
    match = difflib.get_close_matches(str(word), options, n=1, cutoff=0.5)
    return match[0] if match else None


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Reader:
    """Reads one file. ``where`` names it in every message; ``sources`` is its citation table."""

    def __init__(self, where: str, sources: Mapping[str, str] | None = None):
        self.where = where
        self.sources = dict(sources or {})
        self.provenance: dict[str, Provenance] = {}

    # -- structure ---------------------------------------------------------------------------------------------
    def fail(self, path: str, problem: str, fix: str = "") -> ConfigError:
        return ConfigError(self.where, path, problem, fix)

    def mapping(
        self,
        obj: Any,
        path: str,
        allowed: Iterable[str],
        required: Iterable[str] = (),
    ) -> Mapping[str, Any]:
        """Check that ``obj`` is a mapping with only ``allowed`` keys and every ``required`` key."""
        allowed = list(allowed)
        label = path or "top level"
        if not isinstance(obj, Mapping):
            raise self.fail(path, f"must be a mapping with keys {allowed}, got {_show(obj)}",
                            "write it as 'key: value' lines")
        bad = [k for k in obj if k not in allowed]
        if bad:
            parts = []
            for k in bad:
                guess = closest(k, allowed)
                parts.append(f"'{k}'" + (f" (did you mean '{guess}'?)" if guess else ""))
            raise ConfigError(
                self.where, "", f"unknown key{'s' if len(bad) > 1 else ''} {', '.join(parts)} in {label}",
                f"valid keys there are: {', '.join(allowed)}",
            )
        missing = [k for k in required if k not in obj]
        if missing:
            names = ", ".join(f"{path + '.' if path else ''}{k}" for k in missing)
            raise ConfigError(self.where, "", f"missing required field{'s' if len(missing) > 1 else ''} {names}",
                              "add it (see the bundled examples with `python -m simulator show`)")
        return obj

    @staticmethod
    def join(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    # -- scalars -------------------------------------------------------------------------------------------------
    # One constraint language (simulator.params): every range and choice below is an Interval / Options / Param,
    # and a declared library parameter is read with `param`, so YAML and library check the same declaration.
    def param(self, obj: Mapping, key: str, path: str, decl: Param, default: Any = ..., fix: str = "") -> Any:
        """Read ``key`` and check it against the parameter's one declaration ``decl`` (see
        :mod:`simulator.params`). Whole floats are read as ints for integer parameters, ints as floats for real
        ones; a list parameter (``many``) is read as a list."""
        p = self.join(path, key)
        if key not in obj:
            if default is ...:
                raise self.fail(p, "is missing", fix or f"add it ({decl.expected()})")
            return default
        v = obj[key]
        if decl.many:
            items = v if isinstance(v, list) else [v]
            v = [self._coerce(x, decl) for x in items]
        else:
            v = self._coerce(v, decl)
        self._check(p, v, decl, fix)
        return v

    @staticmethod
    def _coerce(v: Any, decl: Param) -> Any:
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            return v
        if decl.kind is int and isinstance(v, float) and v.is_integer():
            return int(v)
        if decl.kind is float and isinstance(v, numbers.Integral):
            return float(v)
        return v

    def _check(self, p: str, v: Any, decl: Param, fix: str = "") -> None:
        if decl.contains(v):
            return
        hint = ""
        opts = [o for c in decl.constraints if isinstance(c, Options) for o in c.values]
        if opts and isinstance(v, str):
            guess = closest(v, [str(o) for o in opts])
            hint = f"did you mean '{guess}'? " if guess else ""
        raise self.fail(p, f"is {_show(v)}, must be {decl.expected()}",
                        hint + (fix or ("use one of the listed values" if opts else "check the value and its unit")))

    def integer(self, obj: Mapping, key: str, path: str, low: int | None = None, high: int | None = None,
                default: Any = ..., fix: str = "") -> int:
        p = self.join(path, key)
        if key in obj:
            v = obj[key]
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) and not (
                    isinstance(v, float) and v.is_integer()):
                raise self.fail(p, f"must be an integer, got {_show(v)}", fix or "write a whole number")
        return self.param(obj, key, path, Param(Interval(int, low, high)), default, fix)

    def number(self, obj: Mapping, key: str, path: str, low: float | None = None, high: float | None = None,
               default: Any = ..., fix: str = "", open_low: bool = False) -> float:
        p = self.join(path, key)
        if key in obj:
            v = obj[key]
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
                raise self.fail(p, f"must be a finite number, got {_show(v)}", fix or "write a number")
        return self.param(obj, key, path, Param(Interval(float, low, high, "right" if open_low else "both")),
                          default, fix)

    def string(self, obj: Mapping, key: str, path: str, options: Iterable[str] | None = None,
               default: Any = ..., fix: str = "") -> str:
        p = self.join(path, key)
        if key not in obj:
            if default is ...:
                raise self.fail(p, "is missing", fix or "add it")
            return default
        v = obj[key]
        if not isinstance(v, str) or not v.strip():
            raise self.fail(p, f"must be a non-empty string, got {_show(v)}", fix or "quote a text value")
        if options is not None:
            self._check(p, v, Param(Options(options)), fix)
        return v

    def boolean(self, obj: Mapping, key: str, path: str, default: Any = ...) -> bool:
        p = self.join(path, key)
        if key not in obj:
            if default is ...:
                raise self.fail(p, "is missing", "add true or false")
            return default
        v = obj[key]
        if not isinstance(v, bool):
            raise self.fail(p, f"must be true or false, got {_show(v)}", "write true or false")
        return v

    # -- sourced quantities -------------------------------------------------------------------------------------
    def quantity(self, obj: Mapping, key: str, path: str, dimension: str, low: float | None = 0.0,
                 high: float | None = None, default: Any = ..., open_low: bool = False,
                 integer: bool = False) -> float:
        """Read ``{value, unit, source}`` (SI result) and record its provenance. ``integer``: the value counts
        whole things (SMs, GPUs, partitions) and must be a whole number."""
        p = self.join(path, key)
        if key not in obj:
            if default is ...:
                raise self.fail(p, "is missing", f"add it as {{value: ..., unit: {units_for(dimension)[0]}, "
                                                 "source: KEY}")
            return default
        q = obj[key]
        if isinstance(q, numbers.Real) and not isinstance(q, bool):
            raise self.fail(p, f"is a bare number {q!r} without unit and source",
                            f"write {{value: {q}, unit: {units_for(dimension)[0]}, source: KEY}} where KEY is in "
                            "'sources' (or source: assumed with a reason)")
        self.mapping(q, p, QUANTITY_KEYS, ("value", "source"))
        value = self.number(q, "value", p)
        unit = q.get("unit", "count" if dimension in ("count", "fraction") else None)
        if unit is None:
            raise self.fail(self.join(p, "unit"), "is missing", f"add one of {units_for(dimension)}")
        if not isinstance(unit, str):
            raise self.fail(self.join(p, "unit"), f"must be a text unit, got {_show(unit)}",
                            f"use one of {units_for(dimension)}")
        si = to_si(value, unit, dimension)
        if si is None:
            other = dimension_of(unit)
            what = f"a {other[0]} unit" if other else "not a known unit"
            raise self.fail(self.join(p, "unit"), f"is {unit!r} ({what}), but this field is a {dimension}",
                            f"use one of {units_for(dimension)}")
        allowed = Interval(float, low, high, "right" if open_low else "both")
        if integer and not float(si).is_integer():
            raise self.fail(self.join(p, "value"), f"is {value!r}, must be a whole number ({dimension})",
                            "write a whole number")
        if not allowed.contains(si):
            raise self.fail(p, f"is {value!r} {unit}, must be in the range {allowed.range_text()} (in SI units)",
                            f"check the value and its unit ({unit})")
        source = self.source(q, p)
        note = q.get("note", "")
        if not isinstance(note, str):
            raise self.fail(self.join(p, "note"), f"must be text, got {_show(note)}", "quote it")
        if source == "assumed":
            note = (note + " " if note else "") + f"assumed: {q['reason']}"
        self.provenance[p] = Provenance(p, value, unit, si, dimension, source,
                                        self.sources.get(source, "assumed"), note)
        return si

    def source(self, q: Mapping, p: str) -> str:
        source = q.get("source")
        if not isinstance(source, str) or not source.strip():
            raise self.fail(self.join(p, "source"), f"must name a source, got {_show(source)}",
                            "use a key of the 'sources' table, or 'assumed' with a 'reason'")
        if source == "assumed":
            reason = q.get("reason")
            if not isinstance(reason, str) or len(reason.strip()) < 8:
                raise self.fail(self.join(p, "reason"), f"is {_show(reason)}; an assumed number needs a reason",
                                "add reason: '<why this value>' (at least a few words)")
            return source
        if "reason" in q:
            raise self.fail(self.join(p, "reason"), "is only allowed with source: assumed",
                            "remove it or put the text in 'note'")
        if source not in self.sources:
            guess = closest(source, self.sources)
            hint = f" (did you mean '{guess}'?)" if guess else ""
            raise self.fail(self.join(p, "source"), f"is {source!r}{hint}, which is not in the 'sources' table",
                            "add it to 'sources' with its citation, or use 'assumed' with a reason")
        return source

    def read_sources(self, obj: Mapping, key: str = "sources") -> dict[str, str]:
        table = obj.get(key)
        if not isinstance(table, Mapping) or not table:
            raise self.fail(key, f"must be a non-empty mapping of citation keys to texts, got {_show(table)}",
                            "add e.g. sources: {A6: 'glennklockwood.com/garden/processors/h100 (hardware.md A6)'}")
        for k, v in table.items():
            if not isinstance(v, str) or not v.strip():
                raise self.fail(f"{key}.{k}", f"must be a citation text, got {_show(v)}", "quote the citation")
        self.sources = {str(k): v for k, v in table.items()}
        return self.sources

    # -- catalog names -------------------------------------------------------------------------------------------
    def names(self, obj: Mapping, key: str, path: str = "") -> tuple[str, ...]:
        """A list of other names (``aliases``): a string or a list of non-empty strings, no duplicates."""
        p = self.join(path, key)
        v = obj.get(key, [])
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, list) or not all(isinstance(x, str) and x.strip() for x in items):
            raise self.fail(p, f"must be a name or a list of names, got {_show(v)}", "write e.g. [h100_sxm, H100]")
        seen = [x.strip().lower() for x in items]
        if len(set(seen)) != len(seen):
            raise self.fail(p, "lists a name twice (names compare case-insensitively)", "list each name once")
        return tuple(x.strip() for x in items)

    def hub_ids(self, obj: Mapping, key: str, formats: Iterable[str], native: str) -> Mapping[str, str]:
        """Model hub ids of the checkpoints of this architecture with each checkpoint's weight format: a mapping
        ``id: format`` (null: not stated), or an id / list of ids (in the native format). Keys are ``org/name``,
        returned in lower case."""
        v = obj.get(key, {})
        if isinstance(v, (str, list)):
            v = {x: native for x in ([v] if isinstance(v, str) else v)}
        if not isinstance(v, Mapping):
            raise self.fail(key, f"must map hub ids to checkpoint formats, got {_show(v)}",
                            "write e.g. hf_id: {deepseek-ai/DeepSeek-R1: fp8_block}")
        out: dict[str, str] = {}
        for k, fmt in v.items():
            if not isinstance(k, str) or k.count("/") != 1 or not all(k.split("/")):
                raise self.fail(f"{key}.{k}", "is not a hub id of the form org/name", "write e.g. Qwen/Qwen3-32B")
            if fmt is not None:  # null: the checkpoint's format is not stated (a deployment's label is used)
                self._check(f"{key}.{k}", fmt, Param(Options(tuple(formats))))
            if k.lower() in out:
                raise self.fail(f"{key}.{k}", "is listed twice (ids compare case-insensitively)", "list it once")
            out[k.lower()] = fmt or ""
        return MappingProxyType(out)


def grouped(items: Iterable, attr: str) -> dict:
    """``items`` grouped by their attribute ``attr``, in order of first appearance, each group a tuple in input order
    (the corpus readers' by-source / by-author / by-target views)."""
    out: dict = {}
    for x in items:
        out.setdefault(getattr(x, attr), []).append(x)
    return {k: tuple(v) for k, v in out.items()}
