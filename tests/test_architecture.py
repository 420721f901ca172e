"""The guard of docs/ARCHITECTURE.md. The import graph of ``simulator``: no circles between modules, and no import
from a lower layer to a higher one; the page names every package in the order of the layers, every file it cites
exists, modules stay within 400 lines, and the tests cite only files in the repository.

Layers, lowest first (data flows one way, docs/ARCHITECTURE.md): errors/params → outputs → specs → overlap → traces →
cost → calibrate → specdec → pricing → render → sweep → validate → experiments → docs → cli. Every ``import`` counts,
the lazy ones inside functions too: a lazy import hides a circle from Python, not from the design.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

import networkx as nx
import pytest

pytestmark = pytest.mark.xdist_group("architecture")  # one worker parses the modules once (_tree is cached)

PKG = Path(__file__).resolve().parents[1] / "simulator"
LAYERS = ("errors", "params", "outputs", "specs", "overlap", "traces", "cost", "calibrate", "specdec", "pricing",
          "render", "sweep", "validate", "experiments", "docs", "cli", "__main__")
BASE = {"errors": 0, "params": 0}  # the two base modules may import each other's names only one way (no cycle)


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once per test session (several checks walk every module)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, name: str) -> set[str]:
    is_pkg = path.name == "__init__.py"
    tree = _tree(path)
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


def _calls(attr: str) -> set[str]:
    """Modules that call a method or function named ``attr``."""
    out = set()
    for path in PKG.rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name == attr:
                    out.add(_module_name(path))
    return out


def test_the_engine_is_bound_in_one_place():
    """Pricing binds a profile to the deployment's engine release once (pricing.scenario.bound, which Scenario.hw
    and the few single-op commands use); nothing below re-selects an engine's kernels (docs/MODEL.md §3.10)."""
    assert _calls("bind") == {"simulator.pricing.scenario"}
    assert _calls("for_engine") == set()
    assert {m.split(".")[1] for m in _calls("kernel_block")} <= {"specs", "calibrate"}


def _engine_names() -> set[str]:
    return {p.stem for p in (PKG.parent / "engines").glob("*.yaml")}


def test_no_engine_facts_in_python_below_pricing():
    """What an engine executes is read from its file (engines/*.yaml), so the cost, specdec and pricing code names
    no engine: no string constant equal to an engine's name there (the SD corpus fit's tables, keyed by engine, are
    written by the fit and checked against it by tests/validate/test_sd_fitted.py)."""
    names, found = _engine_names(), []
    assert names >= {"trtllm", "sglang", "vllm"}
    for pkg in ("cost", "specdec", "pricing"):
        for path in (PKG / pkg).rglob("*.py"):
            tree = _tree(path)
            fit_tables = {id(k) for node in ast.walk(tree) if isinstance(node, ast.AnnAssign)
                          and getattr(node.target, "id", "") in ("FITTED", "MODEL_ERROR")
                          for d in ast.walk(node.value) if isinstance(d, ast.Dict) for k in d.keys}
            found += [f"{path.relative_to(PKG)}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and n.value in names and id(n) not in fit_tables]
    assert not found, "engine names in code (move the fact to the engine's file): " + "; ".join(found)
ROOT = PKG.parent
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
MAX_LINES = 400


def test_the_page_names_every_package_in_layer_order():
    text = PAGE.read_text(encoding="utf-8")
    table = [line.split("|")[1] for line in text.splitlines() if line.startswith("| `")]
    named = [n for row in table for n in re.findall(r"`(\w+)`", row)]
    packages = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
    modules = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert sorted(named) == sorted(packages + modules), "docs/ARCHITECTURE.md's layer table and simulator/ differ"
    assert named == [x for x in LAYERS if x in named], "the layer table is not in the order of LAYERS"


def test_every_file_the_page_cites_exists():
    cited = re.findall(r"`((?:simulator|tests|docs|hardware|models|routing|experiments|measured)/[\w./-]+)`",
                       PAGE.read_text(encoding="utf-8"))
    assert cited and not [c for c in cited if "*" not in c and "NAME" not in c and not (ROOT / c).exists()]


def test_modules_stay_within_400_lines():
    long = [f"{p.relative_to(ROOT)} ({n})" for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines: {long}"


CITED = re.compile(r"(?<![\w/.-])((?:docs|measured|models|hardware|experiments|routing|benchmarks|simulator|tests)/"
                   r"[\w./-]*\w\.(?:md|ya?ml|py|csv|json|txt))|(?<![\w/.-])([A-Z][A-Z_]+\.md)")
DOCSTRING = ('"' * 3, "'" * 3)


def _prose(path: Path) -> str:
    """The comments and docstrings of a test file (what cites; string data such as a fake file name does not)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING and tok.string.startswith(DOCSTRING)):
            out.append(tok.string)
    return "\n".join(out)


def test_tests_cite_only_files_in_the_repository():
    missing = []
    for f in sorted((ROOT / "tests").rglob("*.py")):
        for m in CITED.finditer(_prose(f)):
            c = m.group(1) or m.group(2)
            if "*" not in c and not any(p.exists() for p in (ROOT / c, ROOT / "docs" / c, f.parent / c)):
                missing.append(f"{f.relative_to(ROOT)}: {c}")
    assert not missing, f"tests cite files that are not in the repository: {missing}"
