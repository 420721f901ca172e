"""Experiment files (``experiments/*.yaml``): frozen dataclasses and their strict reader.

An experiment declares a study: what to run (targets: model × GPU × deployment), over which grid (batch, draft
length, context), with which speculation settings (drafter, acceptance) and cost-model modes, plus one section named
after its ``kind`` with the settings only that kind needs (read by the kind's module, see :mod:`.registry`).
Validation is the profiles' (:class:`~simulator.specs.schema.Reader`): unknown keys with the closest valid key,
missing fields, wrong types and out-of-range values are one-line :class:`~simulator.errors.ConfigError` messages
that name the file and the field; the CLI turns them into exit status 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..cost.deployment import PRESETS
from ..errors import SimulatorError
from ..specs.dtypes import FORMATS, KV_DTYPES
from ..specs.schema import Reader, closest

SCHEMA = "experiment/v1"
COMMON_KEYS = ("schema", "name", "kind", "title", "description", "question", "targets", "grid", "speculation",
               "modes")
TARGET_KEYS = ("model", "hardware", "dtype", "kv_dtype", "tp", "ep", "gpus", "drafter", "acceptance", "note")
ACCEPT_KEYS = ("alpha", "accept_length", "draft_len", "source")
DEFAULT_BATCH = tuple(2**i for i in range(9))
DEFAULT_DRAFT_LEN = tuple(range(1, 9))


@dataclass(frozen=True)
class AcceptanceSpec:
    """Per-token acceptance ``alpha``, or a mean acceptance length ``accept_length`` measured at ``draft_len``."""

    alpha: float | None = 0.75
    accept_length: float | None = None
    draft_len: int = 3
    source: str = ""

    def build(self):
        from ..specdec import Acceptance

        if self.accept_length is not None:
            return Acceptance.from_accept_length(self.accept_length, self.draft_len)
        return Acceptance.from_alpha(self.alpha)

    @property
    def label(self) -> str:
        if self.accept_length is not None:
            return f"AL {self.accept_length:g} at draft length {self.draft_len}"
        return f"alpha {self.alpha:g}"


@dataclass(frozen=True)
class Target:
    model: str
    hardware: str = "h100-sxm"
    dtype: str | None = None
    kv_dtype: str = "bf16"
    tp: int | None = None
    ep: int | None = None
    gpus: int | None = None
    drafter: str | None = None
    acceptance: AcceptanceSpec | None = None
    note: str = ""


@dataclass(frozen=True)
class Grid:
    batch: tuple[int, ...] = DEFAULT_BATCH
    draft_len: tuple[int, ...] = DEFAULT_DRAFT_LEN
    context: int = 1024


@dataclass(frozen=True)
class Speculation:
    drafter: str = "eagle"
    acceptance: AcceptanceSpec = field(default_factory=AcceptanceSpec)


@dataclass(frozen=True)
class Experiment:
    name: str
    kind: str
    title: str
    description: str
    question: str
    targets: tuple[Target, ...]
    grid: Grid
    speculation: Speculation
    modes: tuple[str, ...]
    params: Any  # the kind's own frozen settings dataclass
    where: str = ""
    raw: Mapping = field(default_factory=lambda: MappingProxyType({}), repr=False, compare=False)


# -- small typed readers on top of Reader ------------------------------------------------------------------------
def seq(r: Reader, obj: Mapping, key: str, path: str, kind: type, *, low=None, high=None, default: Any = ...,
        min_len: int = 1, unique: bool = True) -> tuple:
    """A list of ints, floats or strings (each checked like a scalar of that type)."""
    p = r.join(path, key)
    if key not in obj:
        if default is ...:
            raise r.fail(p, "is missing", "add it as a list, e.g. [1, 2, 4]")
        return default
    v = obj[key]
    if not isinstance(v, list) or len(v) < min_len:
        raise r.fail(p, f"must be a list of at least {min_len} {kind.__name__} value(s), got {v!r}"[:160],
                     "write it as [a, b, c]")
    out = []
    for i, x in enumerate(v):
        item = {f"{key}[{i}]": x}
        if kind is int:
            out.append(r.integer(item, f"{key}[{i}]", path, low=low, high=high))
        elif kind is float:
            out.append(r.number(item, f"{key}[{i}]", path, low=low, high=high))
        else:
            out.append(r.string(item, f"{key}[{i}]", path))
    if unique and len(set(out)) != len(out):
        raise r.fail(p, f"has repeated values {v!r}"[:160], "list each value once")
    return tuple(out)


def text(r: Reader, obj: Mapping, key: str, path: str, default: Any = ...) -> str:
    return r.string(obj, key, path, default=default)


def check_name(r: Reader, path: str, name: str, kind: str) -> str:
    """A bundled model/hardware name or a YAML path that loads; errors name the experiment field."""
    from ..specs.catalog import load_hardware, load_model

    try:
        (load_model if kind == "model" else load_hardware)(name)
    except SimulatorError as exc:
        raise r.fail(path, f"{name!r} cannot be loaded ({exc})"[:300],
                     f"use a bundled {kind} name (python -m simulator list) or a YAML path") from None
    return name


def check_drafter(r: Reader, path: str, value: str) -> str:
    from ..specdec import parse_drafter

    try:
        d = parse_drafter(value)
        if d.kind == "model":
            check_name(r, path, d.model, "model")
    except SimulatorError as exc:
        raise r.fail(path, f"is {value!r}: {exc}", "use eagle, mtp, model:NAME or ratio:C") from None
    return value


def read_acceptance(r: Reader, obj: Any, path: str) -> AcceptanceSpec:
    a = r.mapping(obj, path, ACCEPT_KEYS)
    if ("alpha" in a) == ("accept_length" in a):
        raise r.fail(path, "needs exactly one of 'alpha' or 'accept_length'",
                     "write {alpha: 0.75} or {accept_length: 2.73, draft_len: 3}")
    src = text(r, a, "source", path, default="")
    if "alpha" in a:
        return AcceptanceSpec(alpha=r.number(a, "alpha", path, low=0.0, high=1.0), source=src)
    g = r.integer(a, "draft_len", path, low=1, high=64, default=3)
    al = r.number(a, "accept_length", path, low=1.0, high=g + 1.0)
    return AcceptanceSpec(alpha=None, accept_length=al, draft_len=g, source=src)


def read_target(r: Reader, obj: Any, path: str) -> Target:
    t = r.mapping(obj, path, TARGET_KEYS, ("model",))
    model = check_name(r, r.join(path, "model"), text(r, t, "model", path), "model")
    hw = check_name(r, r.join(path, "hardware"), text(r, t, "hardware", path, default="h100-sxm"), "hardware")
    drafter = t.get("drafter")
    if drafter is not None:
        check_drafter(r, r.join(path, "drafter"), text(r, t, "drafter", path))
    return Target(
        model=model, hardware=hw,
        dtype=r.string(t, "dtype", path, options=FORMATS, default=None),
        kv_dtype=r.string(t, "kv_dtype", path, options=KV_DTYPES, default="bf16"),
        tp=r.integer(t, "tp", path, low=1, high=1024, default=None),
        ep=r.integer(t, "ep", path, low=1, high=1024, default=None),
        gpus=r.integer(t, "gpus", path, low=1, high=1024, default=None),
        drafter=drafter,
        acceptance=read_acceptance(r, t["acceptance"], r.join(path, "acceptance")) if "acceptance" in t else None,
        note=text(r, t, "note", path, default=""),
    )


def read_targets(r: Reader, top: Mapping, required: bool) -> tuple[Target, ...]:
    if "targets" not in top:
        if required:
            raise r.fail("targets", "is missing", "add a list of {model: NAME, hardware: NAME, ...} entries")
        return ()
    items = top["targets"]
    if not isinstance(items, list) or not items:
        raise r.fail("targets", f"must be a non-empty list of target entries, got {items!r}"[:160],
                     "write targets: [{model: qwen3-235b-a22b}]")
    return tuple(read_target(r, x, f"targets[{i}]") for i, x in enumerate(items))


def read_grid(r: Reader, top: Mapping) -> Grid:
    if "grid" not in top:
        return Grid()
    g = r.mapping(top["grid"], "grid", ("batch", "draft_len", "context"))
    batch = seq(r, g, "batch", "grid", int, low=1, high=1 << 16, default=DEFAULT_BATCH)
    gam = seq(r, g, "draft_len", "grid", int, low=1, high=64, default=DEFAULT_DRAFT_LEN)
    return Grid(tuple(sorted(batch)), tuple(sorted(gam)), r.integer(g, "context", "grid", low=0, high=1 << 22,
                                                                   default=1024))


def read_speculation(r: Reader, top: Mapping) -> Speculation:
    if "speculation" not in top:
        return Speculation()
    s = r.mapping(top["speculation"], "speculation", ("drafter", "acceptance"))
    drafter = check_drafter(r, "speculation.drafter", text(r, s, "drafter", "speculation", default="eagle"))
    acc = read_acceptance(r, s["acceptance"], "speculation.acceptance") if "acceptance" in s else AcceptanceSpec()
    return Speculation(drafter, acc)


def read_modes(r: Reader, top: Mapping) -> tuple[str, ...]:
    modes = seq(r, top, "modes", "", str, default=("prior", "refined"))
    for i, m in enumerate(modes):
        if m not in PRESETS:
            guess = closest(m, PRESETS)
            raise r.fail(f"modes[{i}]", f"is {m!r}, not one of {list(PRESETS)}",
                         f"did you mean '{guess}'?" if guess else "use prior and/or refined")
    return modes


def read_experiment(obj: Any, where: str) -> Experiment:
    """Validate a parsed experiment file and return the :class:`Experiment` (ConfigError on any problem)."""
    from .registry import KINDS

    r = Reader(where)
    if not isinstance(obj, Mapping):
        raise r.fail("", f"must be a mapping of experiment fields, got {type(obj).__name__}",
                     "start from a bundled file in experiments/")
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        r.mapping(obj, "", (*COMMON_KEYS, *(k.section for k in KINDS.values())), ("schema", "name", "kind"))
        r.string(obj, "kind", "", options=KINDS)
    spec = KINDS[kind]
    top = r.mapping(obj, "", (*COMMON_KEYS, spec.section),
                    ("schema", "name", "kind", "title", "description", spec.section)
                    + (("targets",) if spec.needs_targets else ()))
    r.string(top, "schema", "", options=(SCHEMA,))
    exp = Experiment(
        name=text(r, top, "name", ""), kind=kind, title=text(r, top, "title", ""),
        description=text(r, top, "description", ""), question=text(r, top, "question", "", default=""),
        targets=read_targets(r, top, spec.needs_targets), grid=read_grid(r, top),
        speculation=read_speculation(r, top), modes=read_modes(r, top),
        params=spec.read(r, top[spec.section], spec.section), where=where, raw=MappingProxyType(dict(top)),
    )
    spec.check(r, exp)
    return exp


def load_experiment(name_or_path: str) -> Experiment:
    """An experiment by bundled name (``paper-headline``) or path (``experiments/paper-headline.yaml``)."""
    from pathlib import Path

    from ..specs.catalog import experiment_path
    from ..specs.yamlio import load_yaml_file, load_yaml_text

    p = experiment_path(str(name_or_path))
    if isinstance(p, Path):
        return read_experiment(load_yaml_file(p), str(p))
    where = f"experiments/{p.name}"
    return read_experiment(load_yaml_text(p.read_text(encoding="utf-8"), where), where)
