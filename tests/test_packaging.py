"""The wheel ships every subpackage and the YAML catalog (a plain `pip install .` must load the data)."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
ROOT = Path(__file__).resolve().parents[1]


def _config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_subpackage_is_listed():
    listed = set(_config()["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "simulator").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject [tool.setuptools] packages: {sorted(found - listed)}"


def test_data_packages_point_at_yaml_folders():
    cfg = _config()
    for pkg, folder in cfg["package-dir"].items():
        if pkg.startswith("simulator._data."):
            files = list((ROOT / folder).glob("*.yaml"))
            assert files, f"{folder}/ has no YAML files for {pkg}"
            assert cfg["package-data"][pkg] == ["*.yaml"]
