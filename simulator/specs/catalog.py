"""The bundled catalog (hardware/, models/, engines/, routing/, experiments/, measured/) and name-or-path resolution.

In a wheel the YAML files are the data packages ``simulator._data.{hardware,models,engines,routing,experiments,
measured}`` (:mod:`.bundled`); in a source checkout or an editable install they are read from the repository root
next to the package.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from types import MappingProxyType

from ..errors import ConfigError
from .bundled import MEASURED, bundled_dir, bundled_files, engine_names
from .engine import EngineRelease, EngineSpec
from .engine_file import read_engine
from .hardware import HardwareProfile, read_hardware
from .kernels import DEFAULT_ENGINE
from .model import ModelSpec, read_model
from .plausible import check_magnitudes
from .routing_profile import RoutingProfile, read_routing_profile
from .schema import closest
from .whatif import derive_kernels, grounding
from .yamlio import load_yaml_file, load_yaml_text

# The bundled engines' names, the default engine first (engines/*.yaml).
ENGINES = engine_names()


def measured_dir(hardware: str = "h100-sxm") -> Path:
    """The bundled folder of measured per-op tables of one GPU (``measured/<hardware>/``: ``moe.csv``, ``gemm.csv``,
    ``decode_attention.csv``, ``collectives.csv``, with their README and licence), found through
    ``importlib.resources`` in a wheel and at the repository root in a source checkout."""
    d = bundled_dir(MEASURED) / hardware
    if not d.is_dir():
        have = sorted(p.name for p in bundled_dir(MEASURED).iterdir() if p.is_dir()) if bundled_dir(
            MEASURED).is_dir() else []
        raise ConfigError("", "", f"no bundled measurements for hardware {hardware!r}",
                          f"bundled: {', '.join(have) or 'none'}; or pass a folder of measured CSVs")
    return Path(str(d))


def _looks_like_path(text: str) -> bool:
    return text.endswith((".yaml", ".yml")) or "/" in text or "\\" in text


def _other_name(kind: str, text: str) -> str | None:
    """The bundled name a model or GPU is known by under another name (display name, alias, hub id), or None."""
    if kind not in ("models", "hardware"):
        return None
    hit = _name_index(kind).get(_key(text))
    return None if hit is None else hit[0]


def _load(kind: str, name_or_path: str, role: str | None = None) -> tuple[object, str]:
    if _looks_like_path(name_or_path) or Path(name_or_path).is_file():
        other = None if Path(name_or_path).is_file() else _other_name(kind, name_or_path)  # a hub id: org/name
        if other is None:
            return load_yaml_file(name_or_path), str(name_or_path)
        name_or_path = other
    files = bundled_files(kind)
    if name_or_path not in files and (other := _other_name(kind, name_or_path)) is not None:
        name_or_path = other
    if name_or_path not in files:
        names = list(files)
        if role is not None:  # suggest among the models of the role asked for (a target's typo: not a drafter)
            names = [n for n in names if _role_of(files[n]) == role]
        guess = closest(name_or_path, names)
        hint = f"did you mean '{guess}'? " if guess else ""
        noun = {"hardware": "hardware profile", "models": "model", "routing": "routing profile",
                "experiments": "experiment", "engines": "engine"}[kind]
        raise ConfigError("", "", f"unknown {noun} {name_or_path!r}",
                          f"{hint}run `python -m simulator list {kind}` or pass a path to a YAML file")
    f = files[name_or_path]
    return load_yaml_text(f.read_text(encoding="utf-8"), f"{kind}/{f.name}"), f"{kind}/{f.name}"


@functools.lru_cache(maxsize=256)
def _raw_hardware(name_or_path: str) -> HardwareProfile:
    obj, where = _load("hardware", name_or_path)
    hw = read_hardware(obj, where)
    check_magnitudes(hw, where)  # a unit slip (GFLOPS for TFLOPS) is one line, not a silent 500x
    if not hw.kernels.resolved:  # its grounding: derived:<base> or spec-only:<base> (specs.whatif.grounding)
        hw = hw.with_changes(grounding=grounding(hw, _raw_hardware(hw.kernels.derive_from)))
    return hw.with_changes(engine_spec=load_engine(DEFAULT_ENGINE).default)  # as its `kernels:` block: the default


@functools.lru_cache(maxsize=64)
def load_engine(name_or_path: str) -> EngineSpec:
    """An engine spec (``engines/<name>.yaml``) by bundled name, alias or path (one object per name: a release is
    compared by identity)."""
    text = str(name_or_path)
    if not (_looks_like_path(text) or Path(text).is_file()):
        text = _engine_alias(text)
    obj, where = _load("engines", text)
    return read_engine(obj, where)


def engine_release(engine: str, version: str | None = None) -> EngineRelease:
    """The release of ``engine`` (name, alias or path) a deployment prices: ``version`` or the newest."""
    return load_engine(engine).release(version)


def list_engines() -> list[EngineSpec]:
    return [load_engine(n) for n in engine_names()]


def _engine_alias(text: str) -> str:
    """A bundled engine's name for any of its names as users write them (any case, with or without '-'/'_')."""
    def norm(t: str) -> str:
        return t.strip().lower().replace("-", "").replace("_", "")

    for n in engine_names():
        obj = load_yaml_text(bundled_files("engines")[n].read_text(encoding="utf-8"), f"engines/{n}.yaml")
        names = [n, obj.get("display_name", n), *(obj.get("aliases") or [])] if isinstance(obj, dict) else [n]
        if norm(text) in {norm(str(x)) for x in names}:
            return n
    return text


def load_hardware(name_or_path: str, resolve: bool = True) -> HardwareProfile:
    """A hardware profile by bundled name or path. With ``resolve`` a ``derive_from`` kernels section is filled in
    by the what-if rule (docs/MODEL.md) from the named base profile (derived once per name: the same object on
    every call, as an unresolved profile is)."""
    return _resolved_hardware(str(name_or_path)) if resolve else _raw_hardware(str(name_or_path))


@functools.lru_cache(maxsize=256)
def _resolved_hardware(name_or_path: str) -> HardwareProfile:
    hw = _raw_hardware(name_or_path)
    if not hw.kernels.resolved:
        base = load_hardware(hw.kernels.derive_from, resolve=True)
        hw = hw.with_changes(kernels=derive_kernels(hw, base),
                             engine_kernels=MappingProxyType({e: derive_kernels(hw, base.kernel_block(e))
                                                              for e in base.engine_kernels}))
    return hw


@functools.lru_cache(maxsize=256)
def load_routing_profile(name_or_path: str) -> RoutingProfile:
    """A named routing profile (``routing/<name>.yaml``) by bundled name or path."""
    obj, where = _load("routing", str(name_or_path))
    return read_routing_profile(obj, where)


def _role_of(path) -> str | None:
    obj = load_yaml_file(path)
    return obj.get("role") if isinstance(obj, dict) else None


def load_model(name_or_path: str, role: str | None = None) -> ModelSpec:
    """A model spec by bundled name or path; a ``routing_overlap.profile`` it names is resolved as a bundled routing
    profile, or as a path (relative paths from the model file's folder). ``role``: the role the caller wants
    (target, drafter); an unknown name then suggests only models of that role."""
    name = str(name_or_path)
    if role is not None and not (_looks_like_path(name) or Path(name).is_file()) and name not in bundled_files(
            "models"):
        _load("models", name, role)  # raises: unknown model, with a suggestion of that role
    return _load_checkpoint(name)


@functools.lru_cache(maxsize=256)
def _load_checkpoint(name: str) -> ModelSpec:
    """The spec of ``name``; a hub id of a checkpoint whose format the catalog states carries that format
    (``ModelSpec.checkpoint_dtype``), so the FP8 checkpoint is deployed in FP8 as ``--dtype`` would be (one object per
    name: caches keyed on the spec's identity stay valid)."""
    spec = _load_model(name)
    hit = None if name in bundled_files("models") or Path(name).is_file() else _name_index("models").get(_key(name))
    if hit is None or not hit[1]:
        return spec
    return dataclasses.replace(spec, checkpoint_dtype=hit[1])


@functools.lru_cache(maxsize=256)
def _load_model(name_or_path: str) -> ModelSpec:
    obj, where = _load("models", str(name_or_path))
    folder = Path(where).parent if Path(str(name_or_path)).is_file() else None

    def profile(ref: str) -> RoutingProfile:
        if folder is not None and _looks_like_path(ref) and not Path(ref).is_absolute():
            ref = str(folder / ref)
        return load_routing_profile(ref)

    return read_model(obj, where, profile)


def list_routing_profiles() -> list[RoutingProfile]:
    return [load_routing_profile(n) for n in bundled_files("routing")]


def list_hardware() -> list[HardwareProfile]:
    return [_raw_hardware(n) for n in bundled_files("hardware")]


def list_models() -> list[ModelSpec]:
    return [load_model(n) for n in bundled_files("models")]


def experiment_path(name_or_path: str):
    """Path (or traversable) of an experiment file by bundled name or path."""
    if _looks_like_path(name_or_path) or Path(name_or_path).is_file():
        return Path(name_or_path)
    files = bundled_files("experiments")
    if name_or_path not in files:
        guess = closest(name_or_path, list(files))
        hint = f"did you mean '{guess}'? " if guess else ""
        raise ConfigError("", "", f"unknown experiment {name_or_path!r}",
                          f"{hint}run `python -m simulator list experiments` or pass a path")
    return files[name_or_path]


def _key(text: str) -> str:
    return text.strip().lower()


@functools.cache
def _name_index(kind: str) -> dict[str, tuple[str, str]]:
    """``{name in lower case: (bundled name, checkpoint format or '')}``: every bundled entry's name, display name,
    ``aliases`` and (models) ``hf_id`` checkpoints. The first bundled entry claiming a name keeps it."""
    out: dict[str, tuple[str, str]] = {}
    specs = list_models() if kind == "models" else list_hardware()
    for s in specs:
        for n in (s.name, s.display_name, *s.aliases):
            out.setdefault(_key(n), (s.name, ""))
    for s in specs:
        for hub, fmt in getattr(s, "hf_id", {}).items():
            out.setdefault(_key(hub), (s.name, fmt))
    return out


def find_in_catalog(kind: str, text: str) -> tuple[str, str] | None:
    """A model (``kind`` "models") or GPU ("hardware") named as users and measurement files name them: a bundled
    name, a display name, an alias, a model hub id (``mistralai/Mixtral-8x7B-Instruct-v0.1``; case-insensitive)
    or the path of a YAML file. Returns (what :func:`load_model` / :func:`load_hardware` take, the named
    checkpoint's weight format or ''), or None when nothing matches."""
    text = text.strip()
    if not text:
        return None
    hit = _name_index(kind).get(_key(text))
    if hit is not None:
        return hit
    if text.endswith((".yaml", ".yml")) and Path(text).is_file():
        return text, ""
    return None
