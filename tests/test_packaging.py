"""The wheel ships every subpackage and the bundled data (a plain `pip install .` must load the YAML catalog and find
the measured tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
ROOT = Path(__file__).resolve().parents[1]
MEASURED_FILES = ("moe.csv", "gemm.csv", "decode_attention.csv", "collectives.csv", "README.md",
                  "LICENSE-Apache-2.0.txt")


def _config():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_subpackage_is_listed():
    listed = set(_config()["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "simulator").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject [tool.setuptools] packages: {sorted(found - listed)}"


def test_every_data_package_is_listed_and_ships_its_files():
    """Each data folder is a listed package, and its package-data globs cover every file in it."""
    cfg = _config()
    data = {pkg: folder for pkg, folder in cfg["package-dir"].items() if pkg.startswith("simulator._data.")}
    assert set(data.values()) >= {"hardware", "models", "experiments", "measured"}
    for pkg, folder in data.items():
        assert pkg in cfg["packages"], pkg
        files = {p for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        shipped = {p for pattern in cfg["package-data"][pkg] for p in (ROOT / folder).glob(pattern)}
        assert files, f"{folder}/ is empty"
        assert files <= shipped, f"{pkg} does not ship {sorted(str(p.relative_to(ROOT)) for p in files - shipped)}"


def test_measured_folders_carry_tables_readme_and_licence():
    gpus = [p for p in (ROOT / "measured").iterdir() if p.is_dir()]
    assert gpus, "no measured/<gpu>/ folder"
    for gpu in gpus:
        # measured/silicon/ holds end-to-end deployment rows (validation only), not per-op tables; measured/sd/ the
        # public SD measurement corpus (numbers read from many public pages, each row citing its source; no licensed
        # table is copied, its README says so); measured/acceptance/ the public acceptance logs per target (likewise);
        # measured/engines/ the public A/Bs of engine mechanisms (likewise)
        needed = {"silicon": ("silicon_sample.csv", "README.md", "LICENSE-Apache-2.0.txt"),
                  "sd": ("corpus.csv", "README.md"),
                  "acceptance": ("logs.csv", "README.md"),
                  "engines": ("ab.csv", "README.md")}.get(gpu.name, MEASURED_FILES)
        missing = [f for f in needed if not (gpu / f).is_file()]
        assert not missing, f"{gpu.name}: missing {missing}"
