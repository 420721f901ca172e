"""`validate tpot` row readings (docs/MODEL.md §7): a checkpoint's own weight format over a row's 4-bit label
(gpt-oss ships MXFP4 only), and MoE rows whose tp_size cannot be attention TP read as wide EP with attention DP."""

from __future__ import annotations

import csv

import pytest

from simulator.cost.deployment import Deployment, validate
from simulator.cost.step import step_time
from simulator.errors import InfeasibleError
from simulator.pricing import bound
from simulator.specs import load_hardware, load_model
from simulator.validate import validate_tpot
from simulator.validate.mapping import find_model, row_dtype
from simulator.validate.tpot import REQUIRED_COLUMNS

HEADER = (*REQUIRED_COLUMNS, "silicon_data_source", "decode_num_workers")


def _rows(tmp_path, *rows):
    p = tmp_path / "rows.csv"
    with p.open("w", newline="") as f:
        w = csv.DictWriter(f, HEADER)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in HEADER})
    return {r.id: r for r in validate_tpot(p).rows}


def _agg(id, model, system, engine, quant, batch, tp, dp, moe_tp, ep, tpot=10.0):
    return {"id": id, "backend": engine, "model_path": model, "system": system, "precision": "fp8", "mode": "agg",
            "isl": 1024, "osl": 1024, "gemm_quant_mode": quant, "moe_quant_mode": quant, "batch_size": batch,
            "tp_size": tp, "pp_size": 1, "attention_dp_size": dp, "moe_tp_size": moe_tp, "moe_ep_size": ep,
            "silicon_tpot_ms": tpot}


def test_row_dtype_reads_same_width_labels_as_binding_checkpoint_formats():
    """The checkpoint's format comes from the model spec's hf_id: gpt-oss publishes MXFP4 only, DeepSeek-R1 and
    Qwen3-*-FP8 block-scaled FP8; a label of another width (or on a non-binding format) is the row's own."""
    assert find_model("openai/gpt-oss-120b") == ("gpt-oss-120b", "mxfp4")
    assert find_model("OpenAI/gpt-oss-20b") == ("gpt-oss-20b", "mxfp4")
    assert row_dtype("mxfp4", "nvfp4") == "mxfp4"
    assert row_dtype("mxfp4", "bf16") == "bf16"  # not a 4-bit label: the row's own format
    assert find_model("deepseek-ai/DeepSeek-R1")[1] == "fp8_block"
    assert row_dtype("fp8_block", "fp8") == "fp8_block"  # issue 18 item 3: block-FP8 weights run block kernels
    assert row_dtype("fp8_block", "nvfp4") == "nvfp4"
    assert row_dtype("int4_wo", "nvfp4") == "nvfp4"  # a different published checkpoint
    assert row_dtype("bf16", "fp8") == "fp8"
    assert row_dtype("", "int3") is None


def test_gpt_oss_nvfp4_row_on_hopper_prices_as_mxfp4(tmp_path):
    """moe_tp 8: 2880/8 = 360 is priced (mxfp4 pads its shards) at the W4A16 path, equal to a direct step_time."""
    r = _rows(tmp_path, _agg("oss", "openai/gpt-oss-120b", "h100_sxm", "vllm", "nvfp4", 8, 8, 1, 8, 1),
              _agg("r1", "deepseek-ai/DeepSeek-R1", "h100_sxm", "trtllm", "nvfp4", 8, 8, 1, 1, 8))
    assert r["oss"].status == "ok", r["oss"].reason
    assert r["r1"].status == "refused" and "fp4 tensor cores" in r["r1"].reason  # a real nvfp4 checkpoint
    m, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm")
    dep = Deployment(dtype="mxfp4", kv_dtype="fp8", tp=8, ep=1, moe_tp=8, engine="vllm")
    dec = step_time(m, bound(hw, dep), dep, [8], 1, context=1024 + 512, check_fit=False).time[0] * 1e3
    assert r["oss"].decode_ms == pytest.approx(dec, rel=1e-9)


def test_prefill_share_is_a_separate_pass_on_sglang_and_rides_in_a_decode_step_elsewhere(tmp_path):
    """SGLang runs a prefill batch as its own forward (mixed chunks off by default): (batch/osl)·T(dp, isl). vLLM
    and TensorRT-LLM put the prompt into a decode step: the weights are read once, so the share is smaller."""
    r = _rows(tmp_path, *(_agg(e, "Qwen/Qwen3-235B-A22B-FP8", "h100_sxm", e, "fp8_block", 32, 8, 1, 1, 8)
                          for e in ("sglang", "vllm", "trtllm")))
    m, hw = load_model("qwen3-235b-a22b"), load_hardware("h100-sxm")
    dep = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8, moe_tp=1, engine="sglang")
    pf = step_time(m, bound(hw, dep), dep, [1], 1024, context=0, check_fit=False).time[0] * 1e3
    assert r["sglang"].status == "ok", r["sglang"].reason
    assert r["sglang"].prefill_ms == pytest.approx(32 / 1024 * pf, rel=1e-9)
    for e in ("vllm", "trtllm"):
        assert r[e].status == "ok", r[e].reason
        d = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8, moe_tp=1, engine=e)
        full = step_time(m, bound(hw, d), d, [1], 1024, context=0, check_fit=False).time[0] * 1e3
        assert 0 < r[e].prefill_ms < 0.8 * 32 / 1024 * full


@pytest.mark.parametrize("gpus, redundant", [(36, 32), (20, 4), (72, 32), (28, 24)])
def test_tp_that_cannot_split_heads_is_read_as_wide_ep(tmp_path, gpus, redundant):
    batch = 3 * gpus - 1  # all requests of the row; per DP rank: ceil(batch / gpus) = 3
    r = _rows(tmp_path, _agg("w", "deepseek-ai/DeepSeek-R1", "gb200", "trtllm", "fp8_block", batch, gpus, 1, gpus,
                             1))["w"]
    assert r.status == "ok", r.reason
    m, hw = load_model("deepseek-r1"), load_hardware("gb200")
    dep = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=1, dp=gpus, ep=gpus, moe_tp=1, engine="trtllm",
                     redundant_experts=redundant)
    dec = step_time(m, hw, dep, [3 * gpus], 1, context=1024 + 512, check_fit=False).time[0] * 1e3
    assert r.decode_ms == pytest.approx(dec, rel=1e-9)
    assert r.gpus == gpus


def test_heads_dividing_tp_keeps_the_stated_layout(tmp_path):
    r = _rows(tmp_path, _agg("t", "deepseek-ai/DeepSeek-R1", "gb200", "trtllm", "fp8_block", 8, 8, 1, 1, 8))["t"]
    m, hw = load_model("deepseek-r1"), load_hardware("gb200")
    dep = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8, moe_tp=1, engine="trtllm")
    assert r.decode_ms == pytest.approx(step_time(m, hw, dep, [8], 1, context=1536, check_fit=False).time[0] * 1e3)


@pytest.mark.parametrize("ep", [12, 20, 24, 36, 48, 72])
def test_ep_not_dividing_experts_needs_slots_that_fill_the_ranks(ep):
    m, hw = load_model("deepseek-r1"), load_hardware("gb200")
    mk = lambda n: Deployment(dtype="fp8_block", tp=1, dp=ep, ep=ep, moe_tp=1, redundant_experts=n)  # noqa: E731
    with pytest.raises(InfeasibleError, match=rf"add {-256 % ep} redundant experts"):
        validate(m, hw, mk(0))
    validate(m, hw, mk(-256 % ep))  # the fewest slots that fill every rank equally
    with pytest.raises(InfeasibleError, match="do not fill"):
        validate(m, hw, mk(-256 % ep + 1))


@pytest.mark.parametrize("m", [4, 8])
def test_squared_tp_columns_read_as_tp_m_ep_m(tmp_path, m):
    """tp_size m² = moe_tp m × moe_ep m with attention DP 1 (aiconfigurator's rows with ids saying tp{m}_ep{m}, and
    their twins stating tp m, moe_tp 1, ep m with the same measured TPOT) is priced as the m-GPU deployment."""
    r = _rows(tmp_path, _agg("sq", "Qwen/Qwen3.5-397B-A17B", "h200_sxm", "sglang", "fp8_block", 16, m * m, 1, m, m),
              _agg("tw", "Qwen/Qwen3.5-397B-A17B", "h200_sxm", "sglang", "fp8_block", 16, m, 1, 1, m))
    assert r["sq"].status == r["tw"].status == "ok", (r["sq"].reason, r["tw"].reason)
    assert r["sq"].gpus == m and r["sq"].predicted_tpot_ms == r["tw"].predicted_tpot_ms


@pytest.mark.parametrize("m", [4, 8])
def test_squared_dp_columns_read_as_dp_m_ep_m(tmp_path, m):
    """attention_dp_size m² = moe_tp m × moe_ep m with tp 1 and batch_size = concurrency / m² (aiconfigurator's rows
    with ids saying tp{m}_ep{m}, twins of rows stating dp m, ep m, m·batch_size per rank with the same measured TPOT)
    is priced as the m-GPU deployment with m·batch_size requests per rank."""
    r = _rows(tmp_path, _agg("sq", "deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", "nvfp4", 4, 1, m * m, m, m, 50.0),
              _agg("tw", "deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", "nvfp4", 4 * m, 1, m, 1, m, 50.0))
    assert r["sq"].status == r["tw"].status == "ok", (r["sq"].reason, r["tw"].reason)
    assert r["sq"].gpus == m and r["sq"].predicted_tpot_ms == r["tw"].predicted_tpot_ms


def test_squared_tp_reading_needs_attention_dp_stated_as_one(tmp_path):
    """Older rows leave attention DP empty (ids saying tp4_epnone): tp 4 = moe_tp 2 × ep 2 stays 4 GPUs."""
    row = _agg("h", "Qwen/Qwen3-235B-A22B-FP8", "h100_sxm", "trtllm", "fp8_block", 16, 4, "", 2, 2)
    assert _rows(tmp_path, row)["h"].gpus == 4
    row = _agg("g", "deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", "fp8_block", 16, 8, 1, 2, 4)
    assert _rows(tmp_path, row)["g"].gpus == 8  # moe_tp ≠ moe_ep: the plain reading


def test_wide_ep_reading_only_within_one_scale_up_domain(tmp_path):
    """tp_size 64 (moe_tp 64) on an 8-GPU HGX system with 32 heads: not read as wide EP beyond one scale-up domain
    (ambiguous columns); refused."""
    r = _rows(tmp_path, _agg("q", "Qwen/Qwen3.5-397B-A17B", "h200_sxm", "sglang", "fp8_block", 64, 64, 1, 64, 1))["q"]
    assert r.status == "refused" and "'tp' = 64" in r.reason


def test_row_below_the_hbm_floor_of_its_stated_batch_is_refused(tmp_path):
    """A measured TPOT below the decode step's HBM bytes per GPU at peak bandwidth cannot be the stated deployment
    (vLLM gpt-oss-120b at concurrency 512 on 4 H100s: 4.7 ms measured); the same layout at a TPOT above the floor
    is priced. The floor is the model's own bytes: recomputed here from step_time."""
    m, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm")
    dep = Deployment(dtype="mxfp4", kv_dtype="fp8", tp=4, engine="vllm")
    step = step_time(m, bound(hw, dep), dep, [512], 1, context=[1024 + 512], check_fit=False)
    floor = float(step.hbm_bytes[0]) / hw.hbm_bandwidth * 1e3
    row = dict(_agg("lo", "openai/gpt-oss-120b", "h100_sxm", "vllm", "nvfp4", 512, 4, 1, 4, 1, tpot=0.9 * floor))
    hi = dict(row, id="hi", silicon_tpot_ms=1.5 * floor)
    r = _rows(tmp_path, row, hi)
    assert r["lo"].status == "refused" and "HBM floor" in r["lo"].reason and f"{floor:.3g} ms" in r["lo"].reason
    assert r["hi"].status == "ok"
