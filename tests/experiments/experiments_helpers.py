"""Helpers for the experiment tests: the bundled files as dictionaries, reduced copies, the measured data."""

from __future__ import annotations

from pathlib import Path

import yaml

from simulator.specs.catalog import bundled_files

DATA = Path(__file__).resolve().parents[3] / "shared" / "reference" / "measured-h100"


def bundled_yaml(name: str) -> dict:
    return yaml.safe_load(bundled_files("experiments")[name].read_text(encoding="utf-8"))


def write_reduced(folder: Path, name: str, **changes) -> Path:
    """A copy of a bundled experiment with top-level sections replaced (dict values are merged into dict
    sections); returns its path."""
    doc = bundled_yaml(name)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    path = folder / f"{name}-reduced.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
