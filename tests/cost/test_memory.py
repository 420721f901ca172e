"""The KV memory check (docs/MODEL.md §3.1): window-limited SWA layers, replicated KV heads, replicated MLA latent."""

from __future__ import annotations

import pytest

from simulator.cost.deployment import Deployment
from simulator.cost.memory import kv_bytes_per_gpu, kv_bytes_per_request
from simulator.cost.step import check_memory
from simulator.errors import InfeasibleError
from simulator.specs import load_hardware, load_model

L = 32768.0


def test_sliding_window_layers_keep_only_the_window():
    m = load_model("gpt-oss-20b")  # alternating sliding (window 128) / full layers, 8 KV heads
    a = m.attention
    dep = Deployment(dtype="mxfp4", tp=1)
    kinds = [m.layer_kind(i) for i in range(m.layers)]
    per_token = 2 * a.kv_heads * a.head_dim * 2.0
    expect = (kinds.count("full") * L + kinds.count("sliding") * a.window) * per_token
    assert kinds.count("sliding") > 0
    assert kv_bytes_per_request(m, dep, L) == pytest.approx(expect)
    assert kv_bytes_per_request(m, dep, L) < m.layers * L * per_token / 1.9  # about half: not full context


@pytest.mark.parametrize(("tp", "heads"), [(1, 4), (2, 2), (4, 1), (8, 1)])
def test_kv_heads_are_replicated_when_tp_exceeds_them(tp, heads):
    m = load_model("qwen3-235b-a22b")  # 4 KV heads
    a = m.attention
    got = kv_bytes_per_request(m, Deployment(dtype="fp8_block", tp=tp, ep=tp), L)
    assert got == pytest.approx(m.layers * L * 2 * heads * a.head_dim * 2.0)


def test_mla_latent_is_replicated_under_attention_tp():
    m = load_model("deepseek-v3")
    a = m.attention
    one = kv_bytes_per_request(m, Deployment(dtype="fp8_block", tp=1, ep=1), L)
    eight = kv_bytes_per_request(m, Deployment(dtype="fp8_block", tp=8, ep=8), L)
    assert eight == pytest.approx(one) == pytest.approx(m.layers * L * (a.kv_lora_rank + a.qk_rope_head_dim) * 2.0)
    # attention DP divides the requests instead
    assert kv_bytes_per_gpu(m, Deployment(dtype="fp8_block", tp=1, dp=8, ep=8), 64, 1, 1023) == \
        pytest.approx(kv_bytes_per_gpu(m, Deployment(dtype="fp8_block", tp=8, ep=8), 8, 1, 1023))


def test_check_memory_uses_the_per_gpu_kv():
    m, hw = load_model("deepseek-v3"), load_hardware("h200-sxm")
    dep = Deployment(dtype="fp8_block", tp=8, ep=8)
    got = check_memory(m, hw, dep, 16, 1, 4095)["kv_per_gpu"]
    assert got == pytest.approx(16 * kv_bytes_per_request(m, dep, 4096))


def test_llama4_scout_int4_fits_one_h100_as_deployed():
    """Meta ships Scout for one H100 with int4 weights: 85.0 GB of driver-visible HBM (not 80e9 B)."""
    m, hw = load_model("llama-4-scout"), load_hardware("h100-sxm")
    assert hw.hbm_capacity == pytest.approx(85.045e9, rel=1e-3)
    out = check_memory(m, hw, Deployment(dtype="int4_wo", tp=1), 1, 1, 1024)
    assert out["weights_per_gpu"] > 0.9 * 80e9  # it would not fit 90% of 80e9 B
    with pytest.raises(InfeasibleError):  # drafter weights count against the same budget
        check_memory(m, hw, Deployment(dtype="int4_wo", tp=1), 1, 1, 1024, extra_weights=5e9)


def test_hbm_capacities_are_binary_as_the_engines_see_them():
    assert load_hardware("h200-sxm").hbm_capacity == pytest.approx(141 * 2**30)  # "141GB" is GiB
