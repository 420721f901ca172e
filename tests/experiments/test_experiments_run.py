"""Studies run: a new study written as YAML runs through the CLI and gives the sweep's numbers; every analysis's
numbers agree with an independent computation or with another table; findings prose follows the numbers."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from experiments_helpers import bundled_outcomes, headline_findings, prose, small_study, table, write_yaml

from simulator.cli import main
from simulator.cost.deployment import Deployment, preset
from simulator.cost.step import step_time
from simulator.experiments import traffic
from simulator.specs.catalog import load_hardware, load_model
from simulator.sweep import run_sweep
from simulator.sweep.curve_shape import INTERIOR, LOW, RISING, classify

OUTCOMES = pytest.mark.xdist_group("bundled_outcomes")  # the readers of bundled_outcomes() share one worker


def _csv(path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


# -- a new study, written as a file, run by the CLI ---------------------------------------------------------------
def test_new_study_runs_through_the_cli_with_the_sweep_numbers(tmp_path, capsys):
    path = write_yaml(tmp_path, small_study())
    out = tmp_path / "out"
    assert main(["experiment", str(path), "--out", str(out), "--quiet"]) == 0
    assert "small: " in capsys.readouterr().out
    assert (out / "small-speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curves = _csv(out / "curves.csv")
    # the same grid through run_sweep (the sweep command's path): same best speedups per model, mode, batch
    ref = run_sweep(["qwen3-30b-a3b", "mixtral-8x7b"], batch=[1, 4], draft_len=[1, 3], acceptance=0.7,
                    context=512, modes=("prior", "refined"))
    got = {(r["model"], r["variant"], int(r["batch"])): float(r["speedup"]) for r in curves}
    want = {}
    for c in ref.cases:
        for b, s in zip(c.result.batch, c.best()[1], strict=True):
            want[(c.model.name, c.mode, int(b))] = float(s)
    assert len(want) == 8
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=1e-5), k
    # shapes follow from the curves: classify the CSV's refined curve again
    shapes = {r["model"]: r for r in _csv(out / "shapes.csv")}
    assert set(shapes) == {"qwen3-30b-a3b", "mixtral-8x7b"}
    for m, row in shapes.items():
        s = classify([1, 4], [want[(m, "refined", 1)], want[(m, "refined", 4)]], 0.01)
        assert row["refined shape"].startswith(s.label) and int(row["refined peak B"]) == s.peak_batch
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "Of 2 deployable targets" in summary


def test_report_is_deterministic(tmp_path):
    path = write_yaml(tmp_path, small_study(batch=[1, 8], draft_len=[3]))
    trees = []
    report = tmp_path / "run" / "R.md"
    for _ in ("one", "two"):  # the same command twice (the report names it): the second replaces the first
        assert main(["experiment", str(path), "--report", str(report), "--quiet"]) == 0
        trees.append({p.relative_to(tmp_path / "run").as_posix(): p.read_bytes()
                      for p in sorted((tmp_path / "run").rglob("*")) if p.is_file()})
    assert trees[0] == trees[1]
    assert set(trees[0]) == {"R.md", "figures/small-speedup.png"}


# -- headline ------------------------------------------------------------------------------------------------------
@OUTCOMES
def test_headline_ratios_equal_step_times():
    """T_decode/T_verify of the study comparison = step_time of 1 token / step_time of γ+1 tokens, per mode."""
    o = bundled_outcomes()["paper-headline"]
    model, hw = load_model("qwen3-235b-a22b"), load_hardware("h100-sxm")
    dep = Deployment(dtype="fp8_block", tp=8, ep=8)
    for row in table(o, "study_comparison"):
        st = step_time(model, hw, dep, [1, 1], [1, 4], 2048, preset(row["mode"]))
        assert row["predicted T_decode/T_verify"] == pytest.approx(st.time[0] / st.time[1], rel=1e-9)
        assert row["error (pred - study)"] == pytest.approx(row["predicted T_decode/T_verify"] - row["study"])
    ratios = {r["mode"]: r["T_decode/T_verify"] for r in table(o, "ratios") if r["draft length"] == 3}
    walk = table(o, "walk")
    assert walk[0]["T_decode/T_verify"] == pytest.approx(ratios["prior"])  # the walk starts at the prior …
    assert walk[-1]["T_decode/T_verify"] == pytest.approx(ratios["refined"])  # … and ends at the refined model
    assert sum(r["change"] for r in walk[1:]) == pytest.approx(ratios["refined"] - ratios["prior"])


@OUTCOMES
def test_headline_findings_are_filled_from_the_numbers():
    o = bundled_outcomes()["paper-headline"]
    pred = {r["mode"]: r for r in table(o, "study_comparison")}
    text = " ".join(o.findings)
    for r in pred.values():
        assert f"{100 * r['predicted T_decode/T_verify']:.1f}%" in text
        side = "above" if r["error (pred - study)"] > 0 else "below"
        assert f"{r['error (pred - study)']:+.3f}, {side} the study" in text
    bracket = [r["refined T_decode/T_verify"] for r in table(o, "overlap_bracket")]
    assert f"from {min(bracket):.3f} to {max(bracket):.3f}" in text
    inside = min(bracket) <= 0.89 <= max(bracket)
    assert ("lies inside that range" in text) == inside and ("lies outside that range" in text) == (not inside)


def test_headline_prose_flips_with_the_numbers():
    inside = headline_findings(0.55, 0.85, {0.2: 0.84, 0.45: 0.95}, 0.2)
    assert "lies inside that range" in inside and "outside" not in inside
    above = headline_findings(0.55, 0.85, {0.2: 0.80, 0.45: 0.85}, 0.2)
    assert "lies outside that range (above it)" in above and "inside" not in above
    below = headline_findings(0.55, 0.85, {0.2: 0.92, 0.45: 0.95}, 0.2)
    assert "lies outside that range (below it)" in below
    assert "+0.030, above the study" in inside and "-0.040, below the study" in inside
    low = headline_findings(0.49, 0.93, {0.2: 0.84, 0.45: 0.95}, -0.2)
    assert "-0.030, below the study" in low and "+0.040, above the study" in low
    assert "which raises the ratio" in inside and "which lowers the ratio" in low
    # the prior's range over its readings and the Shapley values come from the numbers
    assert f"ranges from {0.55 - 0.05:.3f} (prior-no-fixed) to 0.770 (prior-kernel-floors)" in inside
    assert f"ranges from {0.49 - 0.05:.3f} (prior-no-fixed)" in low
    assert "Averaged over every order (Shapley): routing +0.195, l2 +0.015" in inside
    assert "routing is worth +0.200 switched first and +0.190 last" in inside


def test_traffic_prose_flips_with_the_numbers():
    def text(oa, ob, route, both):
        meas = [("prose", None, (oa,), 0.06, None), ("code", None, (ob,), 0.06, None)]
        diff = [("code − prose", "routing only", route, 0.0), ("code − prose", "with acceptance", both, 0.0)]
        mae = {"prose": {"pairs": 0.01, "pooled": 0.02}}
        return prose("agent-traffic", "traffic", traffic.values(meas, diff, mae, (0.38,), (1, 16)))

    assert "share 50% of their experts against 30% for prose" in text(0.3, 0.5, 0.1, 0.5)
    assert "more overlap" in text(0.3, 0.5, 0.1, 0.5) and "less overlap" in text(0.5, 0.3, 0.1, 0.5)
    assert "routing effect (0.10) is smaller than the acceptance effect (0.40)" in text(0.3, 0.5, 0.1, 0.5)
    assert "routing effect (0.40) is larger than the acceptance effect (0.10)" in text(0.3, 0.5, 0.4, 0.5)
    assert "as much overlap" in text(0.4, 0.4, 0.1, 0.5) and "mean |error| prose 1.0% (pooled statistics 2.0%)" in \
        text(0.3, 0.5, 0.1, 0.5)


# -- curve shapes, overlap sweep, what-if, traffic, validation (bundled runs) --------------------------------------
def test_classify_shapes():
    b = [1, 2, 4, 8]
    assert classify(b, [2.0, 1.9, 1.8, 1.7]).label == LOW
    s = classify(b, [1.2, 1.1, 2.0, 1.5])
    assert s.label == INTERIOR and s.dip and s.peak_batch == 4 and not s.unimodal
    assert classify(b, [1.0, 1.5, 1.8, 2.0]).label == RISING
    assert classify(b, [1.0, 1.5, 1.8, 1.6]).concave and not classify(b, [1.0, 1.1, 1.8, 1.9]).concave


@OUTCOMES
def test_curve_shapes_follow_the_curves_table():
    o = bundled_outcomes()["paper-curves"]
    curves = table(o, "curves")
    shapes = [r for r in table(o, "shapes") if r["deployment"] != "not deployable"]
    assert len(shapes) >= 16
    for r in shapes:
        for mode in ("prior", "refined"):
            pts = [(c["batch"], c["speedup"]) for c in curves if c["model"] == r["model"] and c["variant"] == mode]
            s = classify([b for b, _ in pts], [v for _, v in pts], 0.01)
            assert r[f"{mode} shape"] == s.description and r[f"{mode} peak B"] == s.peak_batch
        assert r["refined low-batch"] == (r["refined peak B"] <= 2 or r["refined shape"].startswith(LOW))
        # the reason (the study file's template) names the rule the numbers select
        e, k = (int(x) for x in r["E/k"].split("+")[0].split("/"))
        ep = int(r["deployment"].split(" ep")[1].split()[0])
        coarse = e / ep <= 2
        assert ("coarse MoE" in r["reason"]) == (coarse and r["reason"] != "as expected"), r["model"]
        assert (r["reason"] == "as expected") == (r["prior as MoESD"] and r["refined low-batch"]), r["model"]


@OUTCOMES
def test_overlap_flips_lie_where_the_peak_batch_changes():
    o = bundled_outcomes()["overlap-sensitivity"]
    sens = table(o, "sensitivity")
    flips = table(o, "flips")
    assert flips
    for f in flips:
        pts = sorted((r["o(1)"], r["peak batch"]) for r in sens if (r["model"], r["profile"]) == (f["model"],
                                                                                              f["profile"]))
        below = [pb for x, pb in pts if x < f["o(1) at flip"]]
        above = [pb for x, pb in pts if x > f["o(1) at flip"]]
        assert below[-1] != 1 and above[0] == 1  # the peak moves to the smallest batch across the flip
        assert (below[-1] == 1) != (above[0] == 1)


@OUTCOMES
def test_whatif_attribution_is_measured_against_the_grid():
    o = bundled_outcomes()["blackwell-whatif"]
    grid = {(r["model"], r["GPU"], r["format"]): r for r in table(o, "grid")}
    attr = table(o, "attribution")
    base = grid[("qwen3-235b-a22b", "h100-sxm", "fp8_block")]["refined S(B=1)"]
    target = grid[("qwen3-235b-a22b", "b200", "fp8_block")]["refined S(B=1)"]
    rows = {r["group"]: r for r in attr}
    assert rows["base"]["S(B=1)"] == pytest.approx(base)  # the attribution's own pricing agrees with the grid
    assert rows["target"]["S(B=1)"] == pytest.approx(target)
    assert rows["target"]["Δ S(B=1)"] == pytest.approx(target - base)
    assert abs(target - base) > 0.01
    hbm = next(r for r in attr if r["variant"].endswith("HBM bandwidth") and r["group"] == "one change")
    assert hbm["Δ S(B=1)"] == pytest.approx(hbm["S(B=1)"] - base) and abs(hbm["Δ S(B=1)"]) > 0.01


@OUTCOMES
def test_traffic_difference_is_the_difference_of_speedups():
    o = bundled_outcomes()["agent-traffic"]
    sp = {r["variant"]: r for r in table(o, "speedup")}
    diff = table(o, "difference")
    assert diff[0]["ΔS(B=1)"] == pytest.approx(sp["code"]["S(B=1)"] - sp["prose"]["S(B=1)"])
    assert diff[1]["ΔS(B=16)"] == pytest.approx(sp["code + published acceptance"]["S(B=16)"]
                                               - sp["prose + published acceptance"]["S(B=16)"])
    stats = {r["type"]: r for r in table(o, "statistics")}
    assert stats["code"]["o(1)"] > stats["prose"]["o(1)"] > stats["prose"]["independent overlap"]


@OUTCOMES
def test_validation_per_op_and_published_checks():
    o = bundled_outcomes()["validation"]
    per_op = [r for r in table(o, "per_op") if r["format"] == "all formats" and r["row set"] == "calibration rows"]
    mape = {r["op"]: r["MAPE"] for r in per_op}
    assert mape["moe"] < 0.05 and mape["gemm"] < 0.10  # docs/CALIBRATION.md
    pub = table(o, "published")
    assert len(pub) >= 20
    for r in pub:
        if r["predicted"] is None:
            continue
        lo, _, hi = r["published"].partition("–")
        if hi:  # a range: inside it exactly when the error is zero
            assert r["within"] == (float(lo) <= r["predicted"] <= float(hi)) == (r["error"] == 0.0)
    assert sum(1 for r in pub if r["within"]) == int(dict(o.key_numbers)["published checks within their range"]
                                                        .split(" of ")[0])


@OUTCOMES
def test_bundled_studies_share_the_step_cache_numbers():
    """A study's point equals the same point priced alone (the shared step cache changes nothing)."""
    o = bundled_outcomes()["paper-curves"]
    curves = {(r["model"], r["variant"], r["batch"]): r["speedup"] for r in table(o, "curves")}
    ref = run_sweep(["glm-4.5-air"], batch=[1, 2, 4, 8, 16, 32, 64, 128, 256], draft_len=list(range(1, 9)),
                    acceptance=0.75, context=1024, modes=("refined",))
    c = ref.cases[0]
    got = np.array([curves[("glm-4.5-air", "refined", int(b))] for b in c.result.batch])
    assert np.allclose(got, c.best()[1], rtol=1e-12)
