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
from typing import Any

from ..errors import ConfigError
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
    match = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.5)
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
    def integer(self, obj: Mapping, key: str, path: str, low: int | None = None, high: int | None = None,
                default: Any = ..., fix: str = "") -> int:
        p = self.join(path, key)
        if key not in obj:
            if default is ...:
                raise self.fail(p, "is missing", fix or "add it")
            return default
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise self.fail(p, f"must be an integer, got {_show(v)}", fix or "write a whole number")
        v = int(v)
        self._range(p, v, low, high, fix)
        return v

    def number(self, obj: Mapping, key: str, path: str, low: float | None = None, high: float | None = None,
               default: Any = ..., fix: str = "", open_low: bool = False) -> float:
        p = self.join(path, key)
        if key not in obj:
            if default is ...:
                raise self.fail(p, "is missing", fix or "add it")
            return default
        v = obj[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
            raise self.fail(p, f"must be a finite number, got {_show(v)}", fix or "write a number")
        v = float(v)
        self._range(p, v, low, high, fix, open_low)
        return v

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
            opts = list(options)
            if v not in opts:
                guess = closest(v, opts)
                hint = f"did you mean '{guess}'? " if guess else ""
                raise self.fail(p, f"is {v!r}, not one of {opts}", hint + "use one of the listed values")
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

    def _range(self, p: str, v: float, low, high, fix: str, open_low: bool = False) -> None:
        if low is not None and (v < low or (open_low and v <= low)):
            rel = ">" if open_low else ">="
            raise self.fail(p, f"is {v!r}, must be {rel} {low}", fix or "check the value and its unit")
        if high is not None and v > high:
            raise self.fail(p, f"is {v!r}, must be <= {high}", fix or "check the value and its unit")

    # -- sourced quantities -------------------------------------------------------------------------------------
    def quantity(self, obj: Mapping, key: str, path: str, dimension: str, low: float | None = 0.0,
                 high: float | None = None, default: Any = ..., open_low: bool = False) -> float:
        """Read ``{value, unit, source}`` (SI result) and record its provenance."""
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
        if (low is not None and (si < low or (open_low and si <= low))) or (high is not None and si > high):
            bound = (f"{'>' if open_low else '>='} {low:g}" if low is not None and (si < low or si <= low)
                     else f"<= {high:g}")
            raise self.fail(p, f"is {value!r} {unit}, must be {bound} (in SI units)",
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
