"""Where the bundled catalog lives: the data packages ``simulator._data.<kind>`` in a wheel, the folders at the
repository root in a source checkout or an editable install (hardware/, models/, routing/, experiments/, engines/,
measured/)."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

KINDS = ("hardware", "models", "routing", "experiments", "engines")
MEASURED = "measured"  # measured per-op tables, one folder per GPU (measured/<gpu>/*.csv, README.md, LICENSE)


def bundled_dir(kind: str):
    try:
        d = resources.files(f"simulator._data.{kind}")
        if d.is_dir():
            return d
    except ModuleNotFoundError:
        pass
    return Path(__file__).resolve().parents[2] / kind


@functools.cache
def bundled_files(kind: str) -> dict[str, object]:
    """Bundled ``name -> traversable`` for one kind, sorted by name."""
    d = bundled_dir(kind)
    if not d.is_dir():
        return {}
    files = {p.name[: -len(".yaml")]: p for p in d.iterdir() if p.name.endswith(".yaml")}
    return dict(sorted(files.items()))


@functools.cache
def engine_names() -> tuple[str, ...]:
    """The bundled engines' names (``engines/<name>.yaml``), the default engine first."""
    from .kernels import DEFAULT_ENGINE
    names = tuple(bundled_files("engines"))
    return tuple(sorted(names, key=lambda n: (n != DEFAULT_ENGINE, n)))
