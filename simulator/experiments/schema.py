"""Study files (``experiments/*.yaml``, ``schema: study/v2``): one schema for every study, and its strict reader.

A study is a grid of lists expanded as a product and priced by the sweep's one pricing path, plus the named analyses
that turn the priced points into tables, figures and findings; every key, with an example: docs/MODEL.md §6.1. Each
analysis declares its settings once, as a frozen dataclass whose fields carry their constraints
(:func:`~simulator.params.param_field` and the field helpers of :mod:`simulator.specs.settings`); :func:`read_settings`
reads any such dataclass strictly (the generic reader with this file's hooks) and :func:`check_settings` applies
its cross-field rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..cost.deployment import MODE
from ..cost.ops import BATCH, CONTEXT, DEFAULT_CONTEXT
from ..errors import SimulatorError
from ..params import Options, Param, param_field
from ..pricing import DEFAULT_DRAFTER, Request, request
from ..pricing.knobs import KNOBS
from ..render.template import NOTE_KEYS, read_notes
from ..specdec.declared import DRAFT, AcceptanceSpec, check_name, read_acceptance
from ..specs.dtypes import FORMATS
from ..specs.schema import Reader
from ..specs.settings import Hooks, loadable
from ..specs.settings import read_settings as read_declared
from ..sweep.runner import DEFAULT_BATCH, DEFAULT_DRAFT_LEN, DEFAULT_MODES

SCHEMA = "study/v2"
TOP_KEYS = ("schema", "name", "title", "description", "question", "grid", "speculation", "analyses")


def _target_fields() -> list:
    """The keys of a study target (and of a validation case): the model and GPU, then one key per knob of the knob
    table (:data:`simulator.pricing.knobs.KNOBS`, by the knob's name and declaration; None = the rule's, the mode's or
    the study's), then a note. A knob added to the table is a study key too."""
    types = {"str": str, "int": int, "bool": bool, "floats": tuple[float, ...], "ints": tuple[int, ...]}
    out: list = [("model", str, loadable("model")), ("hardware", str | None, loadable("hardware", None))]
    for k in KNOBS:
        if k.kind == "acceptance":  # {alpha}, {accept_length, draft_len} or {per_position} (specdec.declared)
            out.append((k.name, AcceptanceSpec | None, None))
        elif k.name == "drafter":
            out.append((k.name, str | None, loadable("drafter", None)))
        else:
            f = param_field(Param(*k.param.constraints, None, unit=k.param.unit), None) if k.param is not None \
                else field(default=None)
            out.append((k.name, types[k.kind] | None, f))
    return out + [("note", str, "")]


# A study target: the fields of _target_fields (model, hardware, every knob, note).
Target = dataclasses.make_dataclass("Target", _target_fields(), frozen=True)
Target.__module__ = __name__
# Knob keys whose lists are sequences (values may repeat): routing lags, a tree's parent list, per-position rates.
SEQUENCES = tuple(k.name for k in KNOBS if k.kind in ("floats", "ints")) + ("per_position",)


@dataclass(frozen=True)
class Grid:
    targets: tuple[Target, ...] = ()
    model: tuple[str, ...] = loadable("model", ())
    hardware: tuple[str, ...] = loadable("hardware", ())
    dtype: tuple[str, ...] = ()
    fallback_dtypes: tuple[str, ...] = ()
    batch: tuple[int, ...] = DEFAULT_BATCH
    draft_len: tuple[int, ...] = DEFAULT_DRAFT_LEN
    context: int = param_field(CONTEXT, DEFAULT_CONTEXT)
    modes: tuple[str, ...] = DEFAULT_MODES
    variants: tuple[Any, ...] = ()  # raw variant mappings, read by grid.read_variant

    @property
    def all_targets(self) -> tuple[Target, ...]:
        return self.targets + tuple(Target(model=m) for m in self.model)


@dataclass(frozen=True)
class Speculation:
    drafter: str = loadable("drafter", DEFAULT_DRAFTER)
    acceptance: AcceptanceSpec = AcceptanceSpec()  # neither alpha nor accept_length: the family default


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    description: str
    question: str
    grid: Grid
    speculation: Speculation
    analyses: Mapping[str, Any]  # analysis name -> its settings dataclass, in file order
    where: str = ""
    variants: tuple = field(default=(), compare=False)  # sweep.Variant objects (built by grid.read_variants)
    notes: Mapping[str, Any] = field(default_factory=dict)  # analysis name -> its declared Notes


# -- the generic reader of a settings dataclass ------------------------------------------------------------------
# List-valued grid axes checked against their one declaration (each as a whole list).
LIST_CHECKS = {"batch": BATCH, "draft_len": Param(*DRAFT.constraints, unit=DRAFT.unit, many=True),
               "modes": Param(*MODE.constraints, many=True), "dtype": Param(Options(FORMATS), many=True),
               "fallback_dtypes": Param(Options(FORMATS), many=True)}


def read_settings(r: Reader, obj: Any, path: str, cls: type, raw: tuple[str, ...] = ("variants",)) -> Any:
    """Read the mapping ``obj`` into the frozen dataclass ``cls`` (:func:`simulator.specs.settings.read_settings` with
    the study file's hooks: its list checks, acceptance reader and name loader)."""
    return read_declared(r, obj, path, cls, raw, HOOKS)


HOOKS = Hooks(lists=LIST_CHECKS, sort=("batch", "draft_len"), readers={AcceptanceSpec: read_acceptance},
              load=check_name, sequences=SEQUENCES)


def read_study(obj: Any, where: str, analyses: Mapping[str, Any]) -> Study:
    """Validate a parsed study file against ``analyses`` (name -> Analysis) and return the :class:`Study`."""
    r = Reader(where)
    if not isinstance(obj, Mapping):
        raise r.fail("", f"must be a mapping of study fields, got {type(obj).__name__}",
                     "start from a bundled file in experiments/")
    top = r.mapping(obj, "", TOP_KEYS, ("schema", "name", "title", "description", "grid", "analyses"))
    r.string(top, "schema", "", options=(SCHEMA,))
    grid = read_settings(r, top["grid"], "grid", Grid)
    amap = r.mapping(top["analyses"], "analyses", list(analyses))
    if not amap:
        raise r.fail("analyses", "is empty", f"add one of {', '.join(analyses)}")
    notes = {k: read_notes(r, v, f"analyses.{k}") for k, v in amap.items()}
    chosen = {k: read_settings(r, {x: y for x, y in v.items() if x not in NOTE_KEYS} if isinstance(v, Mapping) else v,
                               f"analyses.{k}", analyses[k].settings) for k, v in amap.items()}
    study = Study(r.string(top, "name", ""), r.string(top, "title", ""), r.string(top, "description", ""),
                  r.string(top, "question", "", default=""), grid,
                  read_settings(r, top.get("speculation"), "speculation", Speculation),
                  MappingProxyType(chosen), where, notes=MappingProxyType(notes))
    check_targets(r, study)
    check_default_acceptance(r, study)
    for k, settings in chosen.items():
        check_settings(r, study, f"analyses.{k}", settings, analyses[k].modes)
        if analyses[k].check is not None:
            analyses[k].check(r, study, settings)
    return study


def check_targets(r: Reader, study: Study) -> None:
    """Each target's knobs together make a request (:func:`simulator.pricing.request`: a tree's parent list, the
    mechanisms, the acceptance), else one line naming the target."""
    for i, t in enumerate(study.grid.targets):
        try:
            target_request(study, t)
        except SimulatorError as exc:
            raise r.fail(f"grid.targets[{i}]", str(exc)[:300], "change the knob it names") from None


def target_request(study: Study, t: Target, dtype: str | None = None, context: int | None = None) -> Request:
    """The :class:`~simulator.pricing.Request` of a study target: every knob it states (the knob table's keys), the
    format ``dtype`` (else the target's), the drafter and acceptance (else the study's speculation settings) and the
    context (``context``, else the target's, else the grid's)."""
    sp = study.speculation
    knobs = {k.name: getattr(t, k.name) for k in KNOBS if k.kind != "acceptance"}
    knobs["dtype"] = dtype or t.dtype
    knobs["drafter"] = t.drafter or sp.drafter
    knobs["context"] = next(c for c in (context, t.context, study.grid.context) if c is not None)
    return request(Request(acceptance=(t.acceptance or sp.acceptance).build()), **knobs)


def target_mapping(model: str, hardware: str | None, req) -> dict:
    """The study-file target (plain YAML values) that asks for ``req`` on ``model`` / ``hardware``: every knob
    ``req`` sets, by its name (:func:`simulator.pricing.knobs.request_knobs`); read back by :func:`read_study` and
    priced through :func:`target_request`, it prices as ``req``."""
    from ..pricing.knobs import request_knobs
    from ..specdec import Acceptance

    out: dict = {"model": model, **({"hardware": hardware} if hardware else {})}
    for name, v in request_knobs(req).items():
        if isinstance(v, Acceptance):
            v = {"alpha": v.alpha} if v.alpha is not None else {"per_position": list(v.per_position)}
        elif isinstance(v, (int, float)) and name == "acceptance":
            v = {"alpha": float(v)}
        elif isinstance(v, tuple) and name == "acceptance":
            v = {"per_position": list(v)}
        out[name] = list(v) if isinstance(v, tuple) else v
    return out


def check_default_acceptance(r: Reader, study: Study) -> None:
    """Every target (and drafter variant) priced with the default acceptance has a drafter with a default
    (``specdec.acceptance.default_acceptance``: ngram has none), else the study field is named."""
    from ..specdec import default_acceptance, parse_drafter

    sp = study.speculation
    drafters = [(f"grid.targets[{i}]" if i < len(study.grid.targets) else "speculation", t.drafter or sp.drafter,
                 (t.acceptance or sp.acceptance).build()) for i, t in enumerate(study.grid.all_targets)]
    stated = all(acc is not None for *_, acc in drafters)  # every target states one: variants inherit it
    drafters += [(f"grid.variants[{i}]", v["drafter"], v.get("acceptance") or (True if stated else None))
                 for i, v in enumerate(study.grid.variants) if isinstance(v, Mapping) and v.get("drafter")]
    for path, drafter, acc in drafters:
        if acc is None:
            try:
                default_acceptance(parse_drafter(drafter).kind)
            except SimulatorError as exc:
                raise r.fail(path, f"prices drafter {drafter!r} with the default acceptance: {exc}",
                             "add acceptance: {accept_length: AL, draft_len: G} (or {alpha: A})") from None


def check_settings(r: Reader, study: Study, path: str, s: Any, modes: tuple[str, ...] = ()) -> None:
    """The cross-field rules declared on a settings dataclass: ``on_grid`` values are on the grid's axis,
    ``variant_name`` values name grid variants, and the grid prices the analysis's ``modes``."""
    if not set(modes) <= set(study.grid.modes):
        raise r.fail("grid.modes", f"is {list(study.grid.modes)}; {path} needs {list(modes)}", "list them")
    names = {v.get("name") for v in study.grid.variants if isinstance(v, Mapping)}
    for f in dataclasses.fields(s):
        v, p, axis = getattr(s, f.name), f"{path}.{f.name}", f.metadata.get("grid")
        vals = v if isinstance(v, tuple) else (v,)
        if dataclasses.is_dataclass(v):
            check_settings(r, study, p, v)
        elif axis and (missing := [x for x in vals if x not in getattr(study.grid, axis)]):
            raise r.fail(p, f"has {missing}, not in grid.{axis} {list(getattr(study.grid, axis))}",
                         f"add them to grid.{axis}")
        elif f.metadata.get("variant") and (missing := [x for x in vals if x and x not in names]):
            raise r.fail(p, f"names {missing}, not in grid.variants", "name a grid variant")
