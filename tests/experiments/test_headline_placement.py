"""The headline study's rows per expert placement (issue 10): priced through variants, prose from the numbers."""

from __future__ import annotations

import pytest
from experiments_helpers import bundled_yaml, headline_findings, table, write_yaml

from simulator.experiments import run_experiment


@pytest.fixture(scope="module")
def headline(tmp_path_factory):
    doc = bundled_yaml("paper-headline")
    doc["grid"]["draft_len"] = [3]  # the analysed draft length only: fast
    return run_experiment(str(write_yaml(tmp_path_factory.mktemp("h"), doc)))


def test_placement_rows_order_the_busiest_rank(headline):
    rows = {r["placement"]: r for r in table(headline, "placement")}
    assert set(rows) == {"random (file)", "balanced", "contiguous"}
    verify = {k: r["busiest-rank experts verify"] for k, r in rows.items()}
    ratio = {k: r["refined T_decode/T_verify"] for k, r in rows.items()}
    assert verify["balanced"] < verify["random (file)"] < verify["contiguous"]
    assert ratio["balanced"] > ratio["random (file)"] > ratio["contiguous"]
    assert verify["contiguous"] == pytest.approx(6.66, abs=0.01)  # the number for contiguous placement


def _placement_text(place: dict, study: float) -> str:
    """The headline prose with the study's refined ratio at ``study`` (its other numbers fixed)."""
    text = headline_findings(0.55, 0.85, {}, 0.2, place, study)
    return text[text.find("Expert placement"):] if "Expert placement" in text else ""


def test_placement_sentence_follows_the_numbers():
    place = {"random (file)": (2.5, 4.8, 0.85), "balanced": (2.4, 4.7, 0.86), "contiguous": (3.2, 6.7, 0.80)}
    assert "no placement reaches the study's 0.89 (above the range)" in _placement_text(place, 0.89)
    assert "the study's 0.82 lies inside that range" in _placement_text(place, 0.82)
    assert "no placement reaches the study's 0.70 (below the range)" in _placement_text(place, 0.70)
    assert "from contiguous to balanced the refined ratio moves by +0.060" in _placement_text(place, 0.89)
    assert _placement_text({"random (file)": (2.5, 4.8, 0.85)}, 0.89) == ""
