"""The one knob table: every knob a user may set on a scenario, declared once (docs/ARCHITECTURE.md, "Where a new
knob goes").

A :class:`Knob` names where the knob lives (a :class:`~.deploy.Layout` field, another
:class:`~simulator.cost.deployment.Deployment` field, a :class:`~simulator.cost.deployment.Mechanisms` field forced
in every mode, or a :class:`~.resolve.Request` field), its declaration (the :class:`~simulator.params.Param` of the
field that owns it: not a copy), its value kind, its text form (CSV/JSON cells, CLI values) and the value a priced
:class:`~.price.Case` resolved for it. :data:`KNOBS` is generated from the Deployment and Mechanisms fields plus the
layout and request fields, so a field added to either dataclass is a knob of every surface:

- the CLI flags of every scenario command (``simulator.cli._scenario``, flag :attr:`Knob.flag`);
- the study-file target keys and validation-case keys (``simulator.experiments.schema.Target``);
- the sweep's CSV/JSON columns (``simulator.sweep.table``, column :attr:`Knob.column`: the resolved value priced);

and :func:`request_knobs` / :func:`row_request` read a :class:`~.resolve.Request` back from any of them
(``request(**request_knobs(req))`` prices as ``req``; a CSV row reads back to the request that prices it again).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ..cost.deployment import WAYS, Deployment, Mechanisms, preset
from ..cost.ops import CONTEXT, DEFAULT_CONTEXT
from ..params import Param, params_of
from ..specdec import Acceptance
from .deploy import Layout
from .resolve import DEFAULT_DRAFTER, LAYOUT_KNOBS, REQUEST_KNOBS, Request, request

__all__ = ["KNOBS", "Knob", "by_name", "request_knobs", "row_request"]

# Value kinds: "str" (a name or option), "int", "bool" (text on/off), "floats" / "ints" (comma lists), "acceptance"
# (one number: α; several: per-position acceptances, the CLI's --acceptance form).
KINDS = ("str", "int", "bool", "floats", "ints", "acceptance")


@dataclass(frozen=True)
class Knob:
    """One knob (module docstring). ``home``: layout | deployment | mechanisms | request; ``param``: its declaration
    (None: checked where it is parsed, e.g. the drafter's grammar); ``column``: its CSV/JSON column; ``flag``: its
    CLI flag (``--eager`` is the switch of ``cuda_graphs`` off)."""

    name: str
    home: str
    kind: str
    param: Param | None = None
    column: str = ""
    flag: str = ""
    default: Any = None  # the request's value when the knob is not given (None: the rule's or the mode's)

    def text(self, value) -> str:
        """The cell text of ``value`` ("" for None: the rule's, the mode's or the engine's default)."""
        if value is None:
            return ""
        if self.kind == "bool":
            return "on" if value else "off"
        if self.kind in ("floats", "ints"):
            return ",".join(repr(x) for x in value)
        if self.kind == "acceptance":
            a = value if isinstance(value, Acceptance) else None
            if a is None:
                return ",".join(repr(float(x)) for x in (value if isinstance(value, (list, tuple)) else [value]))
            return repr(a.alpha) if a.alpha is not None else ",".join(repr(x) for x in a.per_position)
        return str(value)

    def parse(self, text: str):
        """The value of a cell text (None for ""); :meth:`text`'s inverse."""
        text = str(text).strip()
        if text == "":
            return None
        if self.kind == "int":
            return int(text)
        if self.kind == "bool":
            return text == "on"
        if self.kind == "floats":
            return tuple(float(x) for x in text.split(","))
        if self.kind == "ints":
            return tuple(int(x) for x in text.split(","))
        if self.kind == "acceptance":
            v = tuple(float(x) for x in text.split(","))
            return v[0] if len(v) == 1 else v
        return text

    def priced(self, case):
        """The value a priced case resolved for this knob (the rule's layout, the engine release run, the mode's
        mechanisms with the forced ones and the execution modes the engine ran)."""
        sc = case.scenario
        if self.home in ("layout", "deployment"):
            if self.name == "engine_version":
                return case.engine_version
            return getattr(sc.deployment, self.name)
        if self.home == "mechanisms":
            v = getattr(sc.mechanisms, self.name)
            return v if v is not None or self.name not in ("sd_overlap", "decode_overlap") else \
                getattr(case.result, self.name) or None
        return {"drafter": lambda: sc.drafter.label, "acceptance": lambda: sc.acceptance, "context": lambda: sc.context,
                "lags": lambda: sc.overlap.lags if sc.overlap is not None else None,
                "popularity": lambda: sc.overlap.popularity if sc.overlap is not None else None,
                "tree": lambda: sc.tree}[self.name]()


def _kind(param: Param) -> str:
    k = param.kind
    return "int" if k is int else "str"


def _knobs() -> tuple[Knob, ...]:
    dep, mech = params_of(Deployment), params_of(Mechanisms)
    out = [Knob("gpus", "layout", "int", WAYS)]
    for f in fields(Deployment):
        if f.name == "moe_tp":  # follows from gpus / ep
            continue
        home = "layout" if f.name in LAYOUT_KNOBS else "deployment"
        if f.name == "cuda_graphs":
            out.append(Knob(f.name, home, "bool", None, flag="--eager"))
        else:
            out.append(Knob(f.name, home, _kind(dep[f.name]), dep[f.name]))
    out += [Knob(f.name, "mechanisms", "str", mech[f.name]) for f in fields(Mechanisms)]
    out += [Knob("drafter", "request", "str", None, default=DEFAULT_DRAFTER),
            Knob("acceptance", "request", "acceptance", None, column="acceptance_given"),
            Knob("context", "request", "int", CONTEXT, default=DEFAULT_CONTEXT),
            Knob("lags", "request", "floats", None, flag="--overlap"),
            Knob("popularity", "request", "str", None),
            Knob("tree", "request", "ints", None, flag="--tree-parents")]
    done = []
    for k in out:
        col = k.column or k.name
        flag = k.flag or "--" + k.name.replace("_", "-")
        done.append(Knob(k.name, k.home, k.kind, k.param, col, flag, k.default))
    assert set(LAYOUT_KNOBS + REQUEST_KNOBS) <= {k.name for k in done}, "a Request knob missing from KNOBS"
    return tuple(done)


KNOBS: tuple[Knob, ...] = _knobs()
_BY_NAME = {k.name: k for k in KNOBS}


def by_name(name: str) -> Knob:
    return _BY_NAME[name]


def request_knobs(req: Request) -> dict[str, Any]:
    """The knobs ``req`` sets, by name (those left at their defaults are left out): ``request(**request_knobs(req))``
    asks for what ``req`` asks for."""
    lay, base = req.layout, Layout()
    out: dict[str, Any] = {}
    for f in LAYOUT_KNOBS:
        if getattr(lay, f) != getattr(base, f):
            out[f] = getattr(lay, f)
    out.update(dict(lay.options))
    out.update(dict(req.mechanisms))
    for k in REQUEST_KNOBS:
        v = getattr(req, k)
        if v is not None and v != by_name(k).default:
            out[k] = v
    return out


def row_request(row: dict) -> tuple[str, str, str, Request]:
    """(model, hardware, mode, Request) of one CSV/JSON row of the sweep table: every knob column read back (a
    mechanism column whose value is not the mode's own is forced, so the row's mode prices exactly what the row
    priced; the mode's own is left to the mode, e.g. graph_padding of an eager row, which the CLI refuses forced)."""
    mode = str(row["mode"])
    own = preset(mode)
    knobs = {k.name: k.parse(row[k.column]) for k in KNOBS if k.column in row}
    knobs = {n: (None if by_name(n).home == "mechanisms" and v == getattr(own, n) else v) for n, v in knobs.items()}
    return str(row["model"]), str(row["hardware"]), mode, request(**knobs)
