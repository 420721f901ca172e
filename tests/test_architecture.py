"""The import graph of ``simulator``: no circles between modules, and no import from a lower layer to a higher one.

Layers, lowest first (data flows one way, DEVELOPERS.md): errors/params → outputs → specs → overlap → traces →
cost → calibrate → specdec → pricing → render → sweep → validate → experiments → cli. Every ``import`` counts, the
lazy ones inside functions too: a lazy import hides a circle from Python, not from the design.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[1] / "simulator"
LAYERS = ("errors", "params", "outputs", "specs", "overlap", "traces", "cost", "calibrate", "specdec", "pricing",
          "render", "sweep", "validate", "experiments", "cli", "__main__")
BASE = {"errors": 0, "params": 0}  # the two base modules may import each other's names only one way (no cycle)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("simulator")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("simulator"):
                continue
            for a in node.names:  # "from . import x" may name a submodule
                out.add(mod + "." + a.name if node.module is None else mod)
    return out


def _graph() -> nx.DiGraph:
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    g = nx.DiGraph()
    g.add_nodes_from(files)
    for name, path in files.items():
        for target in _imports(path, name):
            while target not in files and "." in target:  # "simulator.x.y.func" → nearest module
                target = target.rsplit(".", 1)[0]
            if target in files and target != name:
                g.add_edge(name, target)
    return g


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # simulator/__init__.py: the public facade may re-export anything
    top = parts[1]
    return LAYERS.index(top) if top in LAYERS else -1


def test_graph_is_found():
    g = _graph()
    assert g.number_of_nodes() > 50 and g.number_of_edges() > 100


def test_no_import_circles():
    cycles = [sorted(c) for c in nx.strongly_connected_components(_graph()) if len(c) > 1]
    assert not cycles, f"import circles: {cycles}"


def test_no_imports_upward():
    up = []
    for a, b in _graph().edges:
        la, lb = _layer(a), _layer(b)
        if la >= 0 and lb >= 0 and lb > la and not (a.split(".")[1] in BASE and b.split(".")[1] in BASE):
            up.append(f"{a} -> {b}")
    assert not up, "imports from a lower layer to a higher one: " + "; ".join(sorted(up))
