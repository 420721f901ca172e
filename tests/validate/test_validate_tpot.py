"""`validate tpot`: a hand-written fixture in aiconfigurator's silicon_sample.csv layout (no network, no
aiconfigurator): statuses, JSON schema, error equal to a direct step-time call, bad input exits 2 with one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from simulator.cli import main
from simulator.cost.deployment import Deployment
from simulator.cost.step import step_time
from simulator.specs import load_hardware, load_model
from simulator.validate import validate_tpot

HERE = Path(__file__).parent
TINY = HERE / "tiny_silicon.csv"


@pytest.fixture(scope="module")
def result():
    return validate_tpot(TINY)


def _by_id(v):
    return {r.id: r for r in v.rows}


def test_statuses(result):
    r = _by_id(result)
    assert [r[i].status for i in ("agg_qwen_h100", "agg_qwen_h100_b64", "dense_llama_h100")] == ["ok"] * 3
    assert r["disagg_r1_h200"].status == "batch-inferred"  # no decode_batch_size: priced, reported apart
    assert r["unmapped_model"].status == "unmapped" and "acme/Unknown-1B" in r["unmapped_model"].reason
    assert r["impossible_tp3"].status == "refused" and "tp" in r["impossible_tp3"].reason
    assert r["held_out_b300"].status == "unmapped" and "held out" in r["held_out_b300"].reason
    assert result.counts() == {"ok": 3, "batch-inferred": 1, "speculative": 0, "refused": 1, "unmapped": 2}


def test_agg_error_equals_direct_step_time(result):
    """Agg TPOT on TensorRT-LLM (in-flight batching: a prompt rides in a decode step) = T(B, 1, isl + osl/2) +
    (batch/osl)·[T(B + isl, 1, 0) − T(B, 1, 0) + the isl-token prefill's attention]: recomputed from step_time."""
    m, hw = load_model("qwen3-235b-a22b"), load_hardware("h100-sxm")
    dep = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8, moe_tp=1, engine="trtllm")
    dec = step_time(m, hw, dep, [16], 1, context=1024 + 512, check_fit=False).time[0] * 1e3
    both = step_time(m, hw, dep, [16 + 1024, 16], 1, context=0, check_fit=False).time * 1e3
    prompt = step_time(m, hw, dep, [1], 1024, context=0, check_fit=False)
    mixed = both[0] - both[1] + prompt.breakdown["attention"][0] * 1e3
    row = _by_id(result)["agg_qwen_h100"]
    assert row.predicted_tpot_ms == pytest.approx(dec + 16 / 1024 * mixed, rel=1e-9)
    assert 0 < mixed < prompt.time[0] * 1e3  # the weights are read once for the decode tokens and the prompt
    assert row.error == pytest.approx(row.predicted_tpot_ms / 20.0 - 1, rel=1e-12)


def test_disagg_uses_concurrency_and_no_prefill(result):
    m, hw = load_model("deepseek-r1"), load_hardware("h200-sxm")
    dep = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8, moe_tp=1, engine="trtllm")
    dec = step_time(m, hw, dep, [64], 1, context=1024 + 512, check_fit=False).time[0] * 1e3
    row = _by_id(result)["disagg_r1_h200"]
    assert row.prefill_ms == 0.0
    assert row.predicted_tpot_ms == pytest.approx(dec, rel=1e-9)


def test_json_schema(capsys):
    assert main(["validate", "tpot", str(TINY), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"rows", "summary"}
    for r in out["rows"]:
        assert {"id", "status", "reason", "predicted_tpot_ms", "measured_tpot_ms"} <= set(r)
        assert r["status"] in ("ok", "batch-inferred", "speculative", "refused", "unmapped")
        assert (r["predicted_tpot_ms"] is None) == (r["status"] not in ("ok", "batch-inferred"))
    s = out["summary"]
    assert s["counts"] == {"ok": 3, "batch-inferred": 1, "speculative": 0, "refused": 1, "unmapped": 2}
    moe = s["moe_rows_of_catalog_gpus"]
    # headline: batch-stated MoE rows; the tp3 row is refused; unmapped / held-out / batch-inferred rows not counted
    assert moe["rows"] == 3 and moe["ok"] == 2
    assert s["moe_batch_inferred"]["rows"] == 1 and s["moe_batch_inferred"]["ok"] == 1
    errs = [abs(r["error"]) for r in out["rows"] if r["status"] == "ok" and r["id"] != "dense_llama_h100"]
    assert len(errs) == 2
    assert moe["mape"] == pytest.approx(np.mean(errs))
    keys = {(g["model"], g["gpu"], g["engine"], g["mode"]) for g in s["groups"]}
    assert ("qwen3-235b-a22b", "h100-sxm", "trtllm", "agg") in keys


def test_missing_columns_one_line_exit_2(capsys):
    assert main(["validate", "tpot", str(HERE / "missing_columns.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "missing" in err and "batch_size" in err and "silicon_sample.csv layout" in err


def test_missing_file_exit_2(capsys, tmp_path):
    assert main(["validate", "tpot", str(tmp_path / "nope.csv")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_held_out_rows_priced_only_on_request():
    v = validate_tpot(TINY, include_held_out=True)
    assert _by_id(v)["held_out_b300"].status in ("ok", "refused")


def test_report_is_deterministic_and_names_groups(result):
    from simulator.validate.report import markdown

    a, b = markdown(result), markdown(validate_tpot(TINY))
    assert a == b
    assert "| qwen3-235b-a22b | h100-sxm | trtllm | agg |" in a


def test_shipped_measurements_have_the_layout():
    """measured/silicon/silicon_sample.csv (validation only) keeps every column `validate tpot` reads."""
    from simulator.validate import REQUIRED_COLUMNS, read_rows

    path = Path(__file__).resolve().parents[2] / "measured/silicon/silicon_sample.csv"
    rows = read_rows(path)
    assert len(rows) > 5000 and set(REQUIRED_COLUMNS) <= set(rows[0])


def test_shipped_mtp_rows_are_marked():
    """The bundled file's MTP rows (measured/silicon/README.md, 'Speculative rows') carry their draft depth: the
    Qwen3.5 fp8 B200 SGLang tp 4 ep 1 rows (InferenceX key qwen3.5-fp8-b200-sglang-mtp, EAGLE num-steps 3, and their
    gap-analysis copies) and DeepSeek-R1 SGLang tp 8 rows beyond the STP key's concurrencies (num-steps 2); the STP
    rows of the same model and GPU (tp 8, tp 4 ep 4) carry none."""
    import re

    from simulator.validate import read_rows

    rows = read_rows(Path(__file__).resolve().parents[2] / "measured/silicon/silicon_sample.csv")
    depth = {r["id"]: r.get("speculative_num_draft_tokens", "") for r in rows}
    qwen = [i for i in depth if re.search(r"qwen3_5_397b.*b200_sxm_sglang_fp8_agg_.*_tp4(_0)?_ep1", i)]
    assert len(qwen) == 63 and {depth[i] for i in qwen} == {"3"}
    stp = [i for i in depth if re.search(r"qwen3_5.*b200.*sglang_.*(_tp8(_0)?_ep1|_tp4(_0)?_ep4|cfg61[58])", i)]
    assert stp and {depth[i] for i in stp} == {""}
    dsr1 = [i for i, d in depth.items() if d == "2"]
    assert len(dsr1) == 26 and all("deepseek_r1_b200_sxm_sglang_fp8" in i and "_tp8" in i for i in dsr1)
    assert sum(1 for d in depth.values() if d) == 251
