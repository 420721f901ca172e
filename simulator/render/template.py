"""Prose templates (docs/MODEL.md §6.2): findings, settings lines, key numbers and table notes of a study are
templates in its study file (:class:`Notes`, read and brace-checked by :func:`read_notes`), filled here from the
numbers its analysis computes (:func:`fill`, :func:`fill_items`). Nothing here knows a study."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..specs.schema import Reader
from ..specs.settings import read_settings

# {name} or {name:spec}: a value (a dotted name reads an attribute, key or index) formatted by the spec;
# {cond?A|B}: A if cond holds, else B; {cond?A|B|C}: by the sign of cond (> 0, < 0, = 0). cond: a name, or
# "name OP operand" with OP one of < > <= >= == != (operand: a number, a name or a 'quoted' string) or ~TOL (the
# sign of name, |name| <= TOL counted as 0). {name*ITEM|SEP}: ITEM filled for each element of the list (a mapping's
# keys become names, any other element is "it"), joined by SEP (default ", "; \n in SEP is a line break).
# Branches and items are templates themselves; \| is a literal | inside them.
OPS = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
       "<": lambda a, b: a < b, ">": lambda a, b: a > b, "~": lambda a, b: (a > b) - (a < -b)}
FIELD = re.compile(r"([\w.-]+)\s*(?:(<=|>=|==|!=|<|>|~)\s*('[^']*'|[\w.+-]+))?\s*([?*:]?)")


def _split(body: str, sep: str = "|") -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += (ch == "{") - (ch == "}")
        if ch == sep and depth == 0 and body[i - 1:i] != "\\":
            out.append(body[start:i])
            start = i + 1
    return [*out, body[start:]]


def lookup(ns, name: str):
    v = ns
    for part in name.split("."):
        v = v[int(part)] if part.lstrip("-").isdigit() else v[part] if isinstance(v, dict) else getattr(v, part)
    return v


def _operand(ns, x: str):
    if x.startswith("'"):
        return x[1:-1]
    try:
        return float(x)
    except ValueError:
        return lookup(ns, x)


def fill(template: str, ns: dict) -> str:
    """``template`` with its fields filled from ``ns`` (KeyError/AttributeError: a name ``ns`` lacks)."""
    out, i = [], 0
    while (j := template.find("{", i)) >= 0:
        depth, k = 0, j
        for k in range(j, len(template)):
            depth += (template[k] == "{") - (template[k] == "}")
            if depth == 0:
                break
        if depth:
            raise ValueError(f"the field at {template[j:j + 30]!r} is not closed")
        out += [template[i:j].replace("\\|", "|"), _field(template[j + 1:k], ns)]
        i = k + 1
    return "".join(out) + template[i:].replace("\\|", "|")


def _field(body: str, ns: dict) -> str:
    if not (m := FIELD.match(body)):
        raise ValueError(f"{{{body}}} does not start with a name")
    name, op, rhs, kind = m.groups()
    rest = body[m.end():]
    v = lookup(ns, name)
    if op:
        v = OPS[op](v, _operand(ns, rhs))
    if kind == "?":
        branches = _split(rest)
        pick = (0 if v else 1) if len(branches) == 2 else (0 if v > 0 else 1 if v < 0 else 2)
        return fill(branches[pick], ns)
    if kind == "*":
        item, sep = (_split(rest) + [", "])[:2]
        sep = sep.replace("\\n", "\n")
        return sep.join(fill(item, {**ns, **x} if isinstance(x, dict) else {**ns, "it": x}) for x in v)
    return format(v, rest)



class TemplateError(ValueError):
    """A template of ``items[index]`` that cannot be filled; ``cause`` is the lookup or format error."""

    def __init__(self, index: int, cause: Exception):
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.index, self.cause = index, cause


def fill_items(items, ns: dict, labels: bool = False) -> list[tuple[str, str]]:
    """The templates of ``items`` (a mapping key -> template, or a list) filled from ``ns``, as (key, text) pairs
    without the empty ones; a key ``each LIST: LABEL`` gives a pair per element of LIST (a mapping's keys become
    names, another element is ``it``), LABEL filled too when ``labels``. Raises :class:`TemplateError`."""
    out = []
    for i, (k, t) in enumerate(items.items() if isinstance(items, dict) else enumerate(items)):
        each, _, label = str(k).partition(": ") if str(k).startswith("each ") else ("", "", k)
        try:
            for x in lookup(ns, each[5:]) if each else (None,):
                sub = ns if x is None else {**ns, **x} if isinstance(x, dict) else {**ns, "it": x}
                out.append((fill(label, sub).strip() if labels else k, fill(t, sub).strip()))
        except (KeyError, AttributeError, IndexError, TypeError, ValueError) as exc:
            raise TemplateError(i, exc) from None
    return [(k, v) for k, v in out if v]


@dataclass(frozen=True)
class Notes:
    """The prose an analysis entry declares beside its settings (data, not code), as templates filled from the
    numbers its analysis computes (:func:`fill`): ``findings`` (paragraphs; an empty
    one is dropped), ``settings`` (bullet lines), ``key_numbers`` (label -> value) and ``table_notes`` (table name
    -> note)."""

    findings: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    key_numbers: dict | None = None
    table_notes: dict | None = None


NOTE_KEYS = tuple(f.name for f in dataclasses.fields(Notes))


def read_notes(r: Reader, obj: Any, path: str) -> Notes:
    """The :class:`Notes` keys of an analysis entry (the rest is its settings)."""
    n = read_settings(r, {k: v for k, v in obj.items() if k in NOTE_KEYS} if isinstance(obj, Mapping) else {}, path,
                      Notes)
    for key in ("key_numbers", "table_notes"):
        for k in getattr(n, key) or {}:
            r.string(getattr(n, key), k, f"{path}.{key}")
    for key in ("findings", "settings", "key_numbers", "table_notes"):
        items = getattr(n, key) or ()
        for k, t in items.items() if isinstance(items, dict) else enumerate(items):
            if any(str(s).count("{") != str(s).count("}") for s in (k, t)):
                raise r.fail(f"{path}.{key}[{k!r}]", "has a '{' without its '}' (or the reverse)",
                             "close every {field} of the template (docs/MODEL.md §6.2)")
    return n
