"""Reduced runs of the experiments write their CSV tables, figures and summary; key numbers are sane."""

from __future__ import annotations

import csv

import pytest
from experiments_helpers import DATA, write_reduced

from simulator.cli import main
from simulator.experiments import load_experiment, run_experiment
from simulator.experiments.shapes import INTERIOR, LOW, RISING, classify


def _outputs(out, name, tables, figures):
    for t in tables:
        with (out / f"{t}.csv").open(encoding="utf-8") as f:
            rows = list(csv.reader(f))
        assert len(rows) >= 2, t
    for fig in figures:
        png = out / f"{name}-{fig}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "What the model predicts" in text
    return text


def test_headline_cli_writes_outputs(tmp_path, capsys):
    path = write_reduced(tmp_path, "paper-headline", grid={"draft_len": [2, 3]},
                         headline={"overlap_bracket": {"lag1": [0.2, 0.45], "shape": [0.381, 0.329, 0.301, 0.299],
                                                       "baseline": 0.118, "popularity": "skew:0.118"}})
    out = tmp_path / "out"
    assert main(["experiment", str(path), "--out", str(out), "--quiet"]) == 0
    text = _outputs(out, "paper-headline", ("study_comparison", "walk", "breakdown", "ratios", "overlap_bracket"),
                    ("waterfall", "ratio"))
    assert "No parameter was fitted" in text
    assert "paper-headline" in capsys.readouterr().out


def test_headline_numbers_near_the_study():
    o = run_experiment("paper-headline")
    comp = next(t for t in o.tables if t.name == "study_comparison")
    pred = {r[0]: r[1] for r in comp.rows}
    assert abs(pred["prior"] - 0.52) < 0.05
    assert pred["prior"] < pred["refined"] <= 1.0


def test_curves_reduced(tmp_path):
    path = write_reduced(tmp_path, "paper-curves",
                         targets=[{"model": "mixtral-8x7b"}, {"model": "qwen3-235b-a22b"}, {"model": "glm-4.5"},
                                  {"model": "kimi-k2"}],
                         grid={"batch": [1, 4, 16, 64, 256], "draft_len": [1, 3]}, curves={"ratio_draft_len": 3})
    out = tmp_path / "curves"
    assert main(["experiment", str(path), "--out", str(out), "--quiet"]) == 0
    _outputs(out, "paper-curves", ("shapes", "curves"), ("speedup",))
    with (out / "shapes.csv").open(encoding="utf-8") as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    assert rows["qwen3-235b-a22b"]["refined low-batch"] == "true"
    assert "int4_wo" in rows["kimi-k2"]["deployment"]  # fp8 does not fit 8x80 GB: fallback format
    assert "coarse" in rows["mixtral-8x7b"]["reason"]


def test_sensitivity_and_traffic_reduced(tmp_path):
    p1 = write_reduced(tmp_path, "overlap-sensitivity", targets=[{"model": "qwen3-235b-a22b"}],
                       grid={"batch": [1, 16], "draft_len": [3]},
                       overlap_sensitivity={"lag1": [0.1, 0.45], "profiles": ["markov"], "resolution": 0.05})
    o = run_experiment(load_experiment(str(p1)))
    flips = next(t for t in o.tables if t.name == "flips")
    assert all(0.1 <= r[2] <= 0.45 for r in flips.rows)
    p2 = write_reduced(tmp_path, "agent-traffic", grid={"batch": [1, 16], "draft_len": [3]},
                       traffic={"router": {"experts": 128, "top_k": 8, "sequences": 8, "tokens": 64, "hidden": 16,
                                           "seed": 3},
                                "evaluate": {"n_tokens": [2], "batch": [1], "samples": 100, "window": 2}})
    out = tmp_path / "agent"
    assert main(["experiment", str(p2), "--out", str(out), "--quiet"]) == 0
    _outputs(out, "agent-traffic", ("statistics", "speedup", "difference", "ipf_accuracy"), ("lags", "speedup"))


def test_blackwell_reduced():
    from experiments_helpers import bundled_yaml

    from simulator.experiments import read_experiment

    doc = bundled_yaml("blackwell-whatif")
    doc["targets"] = [{"model": "qwen3-30b-a3b"}]
    doc["grid"] = {"batch": [1, 16], "draft_len": [3], "context": 512}
    doc["hardware_whatif"]["compare_from"] = 16
    doc["hardware_whatif"]["attribution"]["model"] = "qwen3-30b-a3b"
    o = run_experiment(read_experiment(doc, "test"))
    attr = next(t for t in o.tables if t.name == "attribution")
    base = attr.rows[0]
    assert base[0] == "base" and base[6] == 0.0
    assert any(r[0] == "4-bit" for r in attr.rows)


@pytest.mark.skipif(not DATA.is_dir(), reason="measured-h100 data not present")
def test_validation_reduced(tmp_path):
    path = write_reduced(tmp_path, "validation", grid={"batch": [1, 16, 32], "draft_len": [3]})
    out = tmp_path / "val"
    assert main(["experiment", str(path), "--out", str(out), "--data", str(DATA), "--quiet"]) == 0
    _outputs(out, "validation", ("per_op", "published"), ("scatter",))
    with (out / "per_op.csv").open(encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["op"] == "moe" and r["format"] == "fp8_block"
                and r["row set"] == "calibration rows"]
    assert float(rows[0]["MAPE"]) < 0.05  # docs/CALIBRATION.md: 1.6%


def test_validation_missing_data(tmp_path, capsys):
    path = write_reduced(tmp_path, "validation", grid={"batch": [1, 16, 32], "draft_len": [3]})
    assert main(["experiment", str(path), "--data", str(tmp_path / "nowhere"), "--quiet"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_classify_shapes():
    b = [1, 2, 4, 8]
    assert classify(b, [2.0, 1.9, 1.8, 1.7]).label == LOW
    s = classify(b, [1.2, 1.1, 2.0, 1.5])
    assert s.label == INTERIOR and s.dip and s.peak_batch == 4 and not s.unimodal
    assert classify(b, [1.0, 1.5, 1.8, 2.0]).label == RISING
    assert classify(b, [1.0, 1.5, 1.8, 1.6]).concave
