"""The engine-mode table of docs/MODEL.md §4.6 is generated from the engine files: the document and the files
cannot disagree (regenerate: ``python -m simulator list engines --markdown``)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from simulator.cli import main
from simulator.render.engine_table import embedded, modes_markdown
from simulator.specs import catalog
from simulator.specs.bundled import bundled_files
from simulator.specs.engine_file import read_engine

MODEL_MD = Path(__file__).resolve().parents[2] / "docs" / "MODEL.md"


def test_model_md_embeds_the_generated_table():
    table = embedded(MODEL_MD.read_text(encoding="utf-8"))
    assert table is not None, "docs/MODEL.md lacks the engine-modes block"
    assert table == modes_markdown(catalog.list_engines()), \
        "docs/MODEL.md's engine-mode table is stale: paste `python -m simulator list engines --markdown` into it"


def test_the_table_follows_the_files():
    """Every release is a row, the default marked; a changed mode in a file changes its row (the check can fail)."""
    engines = catalog.list_engines()
    text = modes_markdown(engines)
    rows = [line for line in text.splitlines()[2:]]
    assert len(rows) == sum(len(e.releases) for e in engines)
    assert sum("(default)" in r for r in rows) == len(engines)
    obj = yaml.safe_load(bundled_files("engines")["sglang"].read_text(encoding="utf-8"))
    changed = copy.deepcopy(obj)
    changed["releases"][-1]["execution"]["sd_overlap"] = False
    other = read_engine(changed, "sglang-test.yaml")
    swapped = [other if e.name == "sglang" else e for e in engines]
    assert modes_markdown(swapped) != text


def test_list_engines_markdown_prints_it(capsys):
    assert main(["list", "engines", "--markdown"]) == 0
    assert capsys.readouterr().out == modes_markdown(catalog.list_engines())
    assert main(["list", "models", "--markdown"]) == 2
