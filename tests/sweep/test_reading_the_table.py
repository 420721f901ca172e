"""What the sweep's table and files say is true and complete: the batches where SD pays as runs of the grid, the band
beside S at the row's own draft length, the GPUs, engine, version, placement and tree of every row, the same point
counts in the progress line and the summary, and model names never cut inside a word."""

from __future__ import annotations

import csv

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.render.textable import Col, render
from simulator.sweep import run_sweep
from simulator.sweep.report import runs, summarize

GRID = [2**i for i in range(9)]


def _parse(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += [g for g in GRID if int(a) <= g <= int(b or a)]
    return out


def test_runs_are_every_grid_batch_they_name():
    assert runs([1, 4, 8, 16, 32, 64, 128], GRID) == "1,4-128"  # not "1-128": batch 2 is not among them
    assert runs([2, 256], GRID) == "2,256" and runs(GRID, GRID) == "1-256" and runs([8], GRID) == "8"


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(GRID), min_size=1))
def test_runs_read_back_to_the_same_batches(batches):
    assert _parse(runs(sorted(batches), GRID)) == sorted(batches)


def test_band_is_at_the_rows_draft_length():
    r = run_sweep(["qwen3-30b-a3b"], ["h100-sxm"], engine="sglang", batch=[1, 8], draft_len=[1, 3, 7])
    for s, c in zip(summarize(r), r.cases, strict=True):
        g = int(np.flatnonzero(c.result.gammas == s["best_gamma_min_batch"])[0])
        assert s["speedup_low_min_batch"] == c.result.speedup_low[g, 0]
        assert s["speedup_high_min_batch"] == c.result.speedup_high[g, 0]
        assert s["speedup_low_min_batch"] <= s["speedup_min_batch"] <= s["speedup_high_min_batch"]


def test_rows_state_gpus_engine_version_placement_and_tree(tmp_path, capsys):
    argv = ["sweep", "--model", "qwen3-235b-a22b", "--tp", "8", "--ep", "8", "--dp", "2", "--batch", "1,4",
            "--draft-len", "1,2", "--engine", "sglang", "--placement", "balanced", "--tree", "2,2", "--no-plots",
            "--quiet", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "resolved: 16 GPUs fp8_block tp8 dp2 ep8" in out  # tp 8 x dp 2, no --gpus: said, never silent
    with open(tmp_path / "sweep.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {r["gpus"] for r in rows} == {"16"} and {r["engine"] for r in rows} == {"sglang"}
    assert {r["engine_version"] for r in rows} == {"0.5.13"} and {r["placement"] for r in rows} == {"balanced"}
    assert {r["tree"] for r in rows} == {"", "-1,0,0,1,1,2,2"}  # the parent list of full_tree((2, 2))


def test_progress_and_summary_count_the_same_points(tmp_path, capsys):
    argv = ["sweep", "--model", "qwen3-30b-a3b,deepseek-v3", "--batch", "1,4", "--draft-len", "1,2", "--no-plots",
            "--out", str(tmp_path)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "sweep: done, 8 points priced, 8 not priced" in err  # deepseek-v3 does not fit 8 H100s
    assert "8 points priced (8 not priced" in out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z0-9.-]{1,21}", fullmatch=True),
                          st.text("0123456789", max_size=30),
                          st.lists(st.from_regex(r"[a-z0-9@/~+-]{1,15}", fullmatch=True), max_size=6)),
                min_size=1, max_size=5))
def test_names_are_never_cut_inside_a_word(rows):
    """A wrapped column breaks at spaces: a model name (no spaces) stays whole while an optional column can hide."""
    cols = [Col("model", "<", wrap=True), Col("extra", drop=1), Col("pays", "<", wrap=True)]
    cells = [[m, x, " ".join(ws)] for m, x, ws in rows]
    text = render(cols, cells, width=60)
    words = text.split()
    assert all(m in words for m, _, _ in rows)
