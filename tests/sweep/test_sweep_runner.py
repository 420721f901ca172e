"""run_sweep: tidy table schema and size, the default study in reduced form, writers, figures, deployments."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from simulator.cost.deployment import PRESETS, Deployment
from simulator.cost.step import check_memory
from simulator.errors import InfeasibleError, ParameterError
from simulator.pricing import Layout, default_deployment, default_targets
from simulator.specdec import Acceptance, speculative
from simulator.specs import load_hardware, load_model
from simulator.sweep import (
    COLUMN_NAMES,
    format_table,
    plot_all,
    run_sweep,
    summarize,
    write_csv,
    write_json,
)

H100 = load_hardware("h100-sxm")
REQUIRED = ("model", "hardware", "dtype", "tp", "ep", "batch", "draft_len", "acceptance", "accept_length", "mode",
            "t_decode_us", "t_verify_us", "t_draft_us", "t_round_us", "unique_experts_decode",
            "unique_experts_verify", "speedup")
MODELS = ["olmoe-1b-7b", "qwen3-30b-a3b"]
BATCH = [1, 4, 16, 64]
GAMMAS = [0, 1, 3]


@pytest.fixture(scope="module")
def small():
    return run_sweep(MODELS, "h100-sxm", batch=BATCH, draft_len=GAMMAS, context=256)


def test_schema_and_size(small):
    assert set(REQUIRED) <= set(COLUMN_NAMES)
    assert len(small) == len(MODELS) * 1 * 2 * len(BATCH) * len(GAMMAS)
    arr = small.to_array()
    assert arr.dtype.names == COLUMN_NAMES and len(arr) == len(small)
    recs = small.records
    assert len(recs) == len(small) and list(recs[0]) == list(COLUMN_NAMES)
    keys = {(r["model"], r["mode"], r["batch"], r["draft_len"]) for r in recs}
    assert len(keys) == len(recs)  # one row per grid point


def test_rows_are_consistent(small):
    a = small.to_array()
    base = a[a["draft_len"] == 0]
    step = a["t_decode_us"] + a["t_host_decode_us"]  # a plain decode step with its exposed host time
    assert np.all(base["speedup"] == 1.0) and np.all(base["t_round_us"] == step[a["draft_len"] == 0])
    assert np.all(a["speedup"] <= a["accept_length"] * (1 + 1e-12))
    assert np.allclose(a["speedup"], a["accept_length"] * step / a["t_round_us"])
    assert np.all((a["speedup_low"] <= a["speedup"]) & (a["speedup"] <= a["speedup_high"]))
    assert np.allclose(a["verify_decode_ratio"], a["t_verify_us"] / a["t_decode_us"])
    assert np.allclose(a["t_draft_us"], a["draft_len"] * a["t_draft_step_us"] + a["t_extend_us"])
    assert np.all(a["unique_experts_verify"] >= a["unique_experts_decode"] - 1e-9)
    assert set(a["mode"]) == {"prior", "refined"}


def test_rows_match_direct_engine_calls(small):
    m = load_model("qwen3-30b-a3b")
    case = next(c for c in small.cases if c.model.name == m.name and c.mode == "refined")
    direct = speculative(m, H100, case.deployment, BATCH, GAMMAS, case.scenario.accept, "eagle", 256,
                         PRESETS["refined"])
    a = small.to_array()
    sel = a[(a["model"] == m.name) & (a["mode"] == "refined")]
    assert np.allclose(sel["speedup"], direct.speedup.T.ravel(), rtol=1e-12)


def test_csv_and_json(small, tmp_path):
    path = write_csv(small, tmp_path / "sweep.csv")
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMN_NAMES
    assert len(rows) - 1 == len(small)
    col = rows[0].index("speedup")
    assert [float(r[col]) for r in rows[1:]] == pytest.approx(small.columns["speedup"].tolist(), rel=1e-6)
    doc = json.loads((tmp_path / "x" / "sweep.json").read_text()) if write_json(small,
        tmp_path / "x" / "sweep.json") else None
    assert len(doc["rows"]) == len(small) and doc["meta"]["columns"] == list(COLUMN_NAMES)
    assert len(doc["summary"]) == len(small.cases)


def test_figures_written(small, tmp_path):
    paths = plot_all(small, tmp_path / "figs")
    assert len(paths) == 3
    for p in paths:
        data = Path(p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_summary_and_table(small):
    summ = summarize(small)
    assert len(summ) == len(MODELS) * 2
    a = small.to_array()
    for s in summ:
        sel = a[(a["model"] == s["model"]) & (a["mode"] == s["mode"]) & (a["draft_len"] >= 1)]
        best = {b: sel["speedup"][sel["batch"] == b].max() for b in BATCH}
        assert s["speedup_min_batch"] == pytest.approx(best[1])
        assert s["peak_speedup"] == pytest.approx(max(best.values()))
        paying = [b for b, v in best.items() if v > 1]
        assert s["pays_up_to"] == (max(paying) if paying else None)
        assert s["pays_from"] == (min(paying) if paying else None)
        assert s["pays_at_max"] == (best[BATCH[-1]] > 1)
    text = format_table(small)
    assert all(m in text for m in MODELS) and "prior / refined" in text


def test_default_study_reduced():
    """The default study (all bundled MoE targets, filtered by fit) on a small grid."""
    r = run_sweep(batch=[1, 256], draft_len=[3], modes=["refined"])
    ran = {c.model.name for c in r.cases}
    skipped = {m for m, _, _ in r.skipped}
    targets = {m.name for m in default_targets()}
    assert ran | skipped == targets and not ran & skipped
    assert all(m.ffn.is_moe and m.role == "target" for m in default_targets())
    for c in r.cases:  # everything that ran fits at its largest batch; dropped batches are noted
        top = float(np.max(c.result.batch))
        check_memory(c.model, c.hardware, c.deployment, top, 4, r.context)
        assert top == 256 or any(n.startswith(f"{c.model.name} on {c.hardware.name}: batches above") for n in r.notes)
    for _, _, why in r.skipped:
        assert "GB" in why
    ref = [c for c in r.cases if c.is_reference]
    assert len(ref) == 1 and (ref[0].deployment.dtype, ref[0].deployment.tp, ref[0].deployment.ep) == \
        ("fp8_block", 8, 8)
    assert "*" in format_table(r)


def test_batches_that_do_not_fit_are_dropped_with_a_note():
    r = run_sweep(["qwen3-235b-a22b"], batch=[1, 2, 4096], draft_len=[1], context=32768, modes=["prior"])
    assert sorted(set(r.columns["batch"].tolist())) == [1, 2]
    assert r.notes and "dropped" in r.notes[0]
    with pytest.raises(InfeasibleError):
        run_sweep(["deepseek-v3"], batch=[1], draft_len=[1])


def test_default_deployment_rule():
    q = load_model("qwen3-235b-a22b")
    assert default_deployment(q, H100) == Deployment(dtype="fp8_block", tp=8, dp=1, ep=8, moe_tp=1)
    assert default_deployment(q, load_hardware("a100-sxm")).dtype == "bf16"  # no fp8 tensor cores
    assert default_deployment(load_model("gpt-oss-120b"), H100).dtype == "mxfp4"  # native format kept
    q2 = load_model("qwen2-57b-a14b")  # 28 heads: tp 4, dp 2
    d = default_deployment(q2, H100)
    assert (d.tp, d.dp, d.ep) == (4, 2, 8)
    d = default_deployment(q, H100, Layout(tp=4, ep=4, dtype="bf16"))
    assert (d.tp, d.dp, d.ep, d.moe_tp, d.dtype) == (4, 2, 4, 2, "bf16")
    with pytest.raises(ParameterError, match="'tp' parameter of default_deployment"):
        default_deployment(q, H100, Layout(tp=3))


@pytest.mark.parametrize("kw", [dict(batch=[]), dict(batch=[0, 1]), dict(draft_len=[-1]), dict(context=-5),
                                dict(modes=["fast"]), dict(acceptance=1.5), dict(drafter="nope")])
def test_bad_parameters(kw):
    args = dict(batch=[1], draft_len=[1])
    args.update(kw)
    with pytest.raises(ParameterError):
        run_sweep(["olmoe-1b-7b"], **args)


def test_draft_model_with_another_vocabulary_is_noted():
    r = run_sweep(["mixtral-8x7b"], batch=[1], draft_len=[1], drafter="model:qwen3-0.6b", modes=["prior"])
    assert any("vocabulary" in n for n in r.notes)


def test_other_drafters_and_acceptance():
    for model, drafter in (("glm-4.7-flash", "mtp"), ("qwen3-30b-a3b", "model:qwen3-0.6b"),
                           ("qwen3-30b-a3b", "ratio:0.05")):
        r = run_sweep([model], batch=[1, 32], draft_len=[2], drafter=drafter,
                      acceptance=Acceptance.from_accept_length(2.2, 2), modes=["refined"])
        assert set(r.columns["drafter"].tolist()) == {drafter}
        assert np.allclose(r.columns["accept_length"], 2.2)
    with pytest.raises(ParameterError, match="MTP module"):  # qwen3-30b-a3b has no MTP module to draft with
        run_sweep(["qwen3-30b-a3b"], batch=[1], draft_len=[2], drafter="mtp")


def test_overlap_override_changes_refined_only_through_routing():
    base = run_sweep(["qwen3-30b-a3b"], batch=[1, 8], draft_len=[3])
    over = run_sweep(["qwen3-30b-a3b"], batch=[1, 8], draft_len=[3], overlap=[0.9, 0.9])
    prior = base.columns["mode"] == "prior"
    # the prior preset routes uniformly, so overlap statistics cannot change it
    assert np.array_equal(base.columns["speedup"][prior], over.columns["speedup"][prior])
    # more persistent routing: fewer unique experts in the verify pass, a cheaper round, a higher speedup
    ref = ~prior
    assert np.all(over.columns["unique_experts_verify"][ref] < base.columns["unique_experts_verify"][ref])
    assert np.all(over.columns["speedup"][ref] > base.columns["speedup"][ref])
