"""README.md and every generated document are what `python -m simulator docs` writes from today's runs
(simulator/docs.py): a committed byte that differs from the regenerated text fails here. The runs are shared: the
bundled studies with the other study tests of this worker (one xdist group), the rest once per module."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
from experiments_helpers import bundled_outcomes

from simulator.cli import main
from simulator.docs import COMMAND, DOCUMENTS, TEMPLATE, Runs, documents, readme, stale

pytestmark = pytest.mark.xdist_group("bundled_outcomes")  # with the other readers of bundled_outcomes()

ROOT = Path(__file__).resolve().parents[2]
README_START = ("# moe-specdec-sim\n\n```bash\npip install . && python -m simulator sweep\n```\n\n```bash\n"
                "pip install \".[test]\" && python -m pytest -q\n```\n")


@pytest.fixture(scope="module")
def runs():
    return Runs(outcomes=list(bundled_outcomes().values()))


@pytest.fixture(scope="module")
def regenerated(runs):
    return documents(ROOT, runs)


def test_every_generated_doc_is_current(regenerated):
    assert sorted(regenerated) == sorted(DOCUMENTS)
    stale_docs = [p for p, text in regenerated.items() if (ROOT / p).read_text(encoding="utf-8") != text]
    assert stale_docs == [], f"{stale_docs} differ from the runs: run `{COMMAND}` (README.md: edit {TEMPLATE})"


def test_the_readme_starts_with_the_two_commands_and_names_the_regeneration(regenerated):
    text = regenerated["README.md"]
    assert text.startswith(README_START)
    assert f"`{COMMAND}`" in text and f"`{TEMPLATE}`" in text and "{" not in text


def test_readme_numbers_follow_the_runs(runs, regenerated):
    """A number the runs change changes the README where it is quoted (the check can fail): the SD corpus's held-out
    error, the default sweep's count and the study's headline ratio."""
    template = (ROOT / TEMPLATE).read_text(encoding="utf-8")
    sd = copy.deepcopy(runs.sd)
    sd["overall"]["mean_abs_error_held_out"] = 0.4321
    sweeps = {e: [dict(s, pays=[]) for s in rows] for e, rows in runs.sweeps.items()}
    changed = Runs(outcomes=runs.outcomes, sd=sd, tpot=runs.tpot, sweeps=sweeps)
    text = readme(template, changed)
    assert text != regenerated["README.md"]
    assert "the held-out mean |error| is\n43.2%" in text
    n = sum(s["mode"] == "refined" for s in runs.sweeps["trtllm"])
    assert f"for 0 of {n} targets" in text
    assert "| `python -m simulator sweep [--model M]" in text and "trtllm\\|sglang\\|vllm" in text  # tables kept


def test_stale_names_the_edited_document(runs, regenerated, tmp_path):
    for p in DOCUMENTS + (TEMPLATE,):
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / p, tmp_path / p)
    readme_path = tmp_path / "README.md"
    readme_path.write_text(readme_path.read_text(encoding="utf-8").replace("held-out", "held out", 1),
                           encoding="utf-8")
    (tmp_path / "docs/VALIDATION.md").write_text(regenerated["docs/VALIDATION.md"] + " ", encoding="utf-8")
    assert stale(tmp_path, runs) == ["README.md", "docs/VALIDATION.md"]


def test_docs_outside_a_checkout_is_one_line(tmp_path, capsys):
    assert main(["docs", "--check", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "templates/README.md" in err and "--root" in err
