"""Decode schedules as each engine runs them (docs/MODEL.md §3.5, engines/*.yaml ``schedule:``): shared experts on a
second stream beside the routed experts (and the all-reduce after both), two-batch overlap by the engine's rule and
at every batch."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import invoke
from simulator.cost.deployment import Deployment, Mechanisms, two_batch_overlap_on
from simulator.cost.step import step_time
from simulator.pricing import bound
from simulator.specs.catalog import load_hardware, load_model
from simulator.specs.engine import SharedExperts

H200, GB200 = load_hardware("h200-sxm"), load_hardware("gb200")
KIMI, DSV3 = load_model("kimi-k2"), load_model("deepseek-v3")


def _serial(hw):
    """``hw`` with its engine's shared-expert stream switched off (the shared experts in series)."""
    spec = hw.engine_spec
    return replace(hw, engine_spec=replace(spec, schedule=replace(spec.schedule, shared_experts=SharedExperts())))


def _t(model, hw, dep, batch, tokens=1):
    return step_time(model, hw, dep, batch, tokens, 1024, check_fit=False).time


def test_shared_experts_run_beside_the_routed_experts_within_the_engines_limit():
    """SGLang runs Kimi-K2's shared expert on a second stream at up to 1024 tokens (its 384 experts are not fused):
    the step is faster than in series at B = 1 (fixed costs hidden), and the same beyond 1024 tokens per rank."""
    dep = Deployment(dtype="fp8_block", tp=8, ep=8, engine="sglang")
    hw = bound(H200, dep)
    b = [1, 8, 2048]
    conc, serial = _t(KIMI, hw, dep, b), _t(KIMI, _serial(hw), dep, b)
    assert conc[0] < 0.99 * serial[0] and conc[1] < serial[1]
    assert conc[2] == serial[2]  # 2048 tokens > 1024: one stream


def test_fused_shared_expert_stays_in_series():
    """SGLang fuses DeepSeek-V3's one shared expert into the routed kernel (256 routed experts, no expert
    parallelism): no second stream, as if the rule were off; with expert parallelism it runs the dual stream."""
    dep = Deployment(dtype="fp8_block", tp=8, ep=1, engine="sglang")
    hw = bound(H200, dep)
    assert (_t(DSV3, hw, dep, [1, 8]) == _t(DSV3, _serial(hw), dep, [1, 8])).all()
    ep = Deployment(dtype="fp8_block", tp=8, ep=8, engine="sglang")
    he = bound(H200, ep)
    assert _t(DSV3, he, ep, [1])[0] < _t(DSV3, _serial(he), ep, [1])[0]


def test_each_engine_declares_its_own_limit():
    """vLLM: at most 256 tokens (VLLM_SHARED_EXPERTS_STREAM_TOKEN_THRESHOLD); TensorRT-LLM: graph-replayed passes
    only (eager ones run in series)."""
    v = Deployment(dtype="fp8_block", tp=8, ep=8, engine="vllm")
    hv = bound(H200, v)
    assert _t(KIMI, hv, v, [256])[0] < _t(KIMI, _serial(hv), v, [256])[0]
    assert _t(KIMI, hv, v, [257])[0] == _t(KIMI, _serial(hv), v, [257])[0]
    t = Deployment(dtype="fp8_block", tp=8, ep=8)
    ht = bound(H200, t)
    eager = replace(t, cuda_graphs=False)
    assert _t(KIMI, ht, t, [1])[0] < _t(KIMI, _serial(ht), t, [1])[0]
    assert _t(KIMI, ht, eager, [1])[0] == _t(KIMI, _serial(ht), eager, [1])[0]


@settings(max_examples=25, deadline=None, derandomize=True)
@given(engine=st.sampled_from(["trtllm", "sglang", "vllm"]), b=st.integers(1, 4096), s=st.integers(1, 8))
def test_a_second_stream_never_slows_a_step_and_keeps_the_roofline(engine, b, s):
    """The concurrent segment is max(R + X, S, Σ roofline parts): never above the serial one, never below any
    stream alone, and never below the bandwidth both streams share."""
    dep = Deployment(dtype="fp8_block", tp=8, ep=8, engine=engine)
    hw = bound(H200, dep)
    conc, serial = _t(KIMI, hw, dep, [b], s)[0], _t(KIMI, _serial(hw), dep, [b], s)[0]
    assert conc <= serial * (1 + 1e-12)
    no_fixed = Mechanisms(fixed_costs="off")
    pure = step_time(KIMI, hw, dep, [b], s, 1024, mech=no_fixed, check_fit=False).time[0]
    pure_serial = step_time(KIMI, _serial(hw), dep, [b], s, 1024, mech=no_fixed, check_fit=False).time[0]
    assert pure == pytest.approx(pure_serial, rel=1e-12)  # without fixed costs nothing is left to hide


def test_the_all_reduce_follows_both_streams():
    """Under attention TP the MoE all-reduce sums routed and shared outputs: it runs after the shared experts."""
    from simulator.cost.ops import Workload
    from simulator.cost.step import describe

    dep = Deployment(dtype="fp8_block", tp=8, ep=8)
    ops = describe(KIMI, dep, Workload(np.array([4.0]), np.array([1.0]), 1024), Mechanisms())[0][-1].ops
    names = [o.name for o in ops]
    assert names.index("moe_all_reduce") > names.index("shared_down") > names.index("experts")


def test_two_batch_overlap_auto_is_the_engines_rule():
    """SGLang turns TBO on for DeepEP across scale-up domains (its multi-node recipes), not inside one NVL72 rack
    (its GB200 posts) and never for TensorRT-LLM or vLLM; 'on' forces it, and then prices slower than off at 32
    requests per GPU for Kimi-K2 on 64 GB200s (each weight read twice)."""
    wide = dict(dtype="fp8_block", tp=1, dp=64, ep=64, all_to_all="deepep_low_latency")

    def on(hw, mech=None, **kw):
        dep = Deployment(**{**wide, **kw})
        return two_batch_overlap_on(mech or Mechanisms(), bound(hw, dep), dep)

    h100 = load_hardware("h100-sxm")
    assert on(h100, engine="sglang")  # 64 GPUs = 8 HGX nodes
    assert not on(GB200, engine="sglang")  # one NVL72 domain
    assert not on(h100, engine="vllm") and not on(h100, engine="trtllm")
    assert on(GB200, Mechanisms(two_batch_overlap="on"), engine="sglang")
    dep = Deployment(**wide, engine="sglang")
    hw = bound(GB200, dep)
    auto = step_time(KIMI, hw, dep, [2048], 1, 1024, check_fit=False).time[0]
    forced = step_time(KIMI, hw, dep, [2048], 1, 1024, mech=Mechanisms(two_batch_overlap="on"),
                       check_fit=False).time[0]
    assert forced > 1.2 * auto


@pytest.mark.parametrize("batch", [16, 17, 31, 33, 48, 97])
def test_attention_dp_with_deepep_prices_every_batch(batch):
    """Odd batches split one request apart: both micro-batches are priced at ⌈B/2⌉ (never a half request)."""
    dep = Deployment(dtype="fp8_block", tp=1, dp=16, ep=16, all_to_all="deepep_low_latency", engine="sglang")
    hw = bound(load_hardware("h100-sxm"), dep)
    t = step_time(DSV3, hw, dep, [batch], 1, 1024, mech=Mechanisms(two_batch_overlap="on"), check_fit=False)
    assert np.isfinite(t.time).all() and t.time[0] > 0


def test_cli_runs_dp_attention_with_deepep_at_any_batch(tmp_path):
    base = ["--model", "deepseek-v3", "--hardware", "h100-sxm", "--gpus", "16", "--tp", "1", "--dp", "16",
            "--ep", "16", "--engine", "sglang", "--two-batch-overlap", "on"]
    assert invoke("step", *base, "--batch", "17,31,48", "--tokens", "1").returncode == 0
    r = invoke("sweep", *base, "--batch", "17,31", "--draft-len", "2", "--no-plots", "--quiet", "--out",
               str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    r = invoke("serve", *base, "--concurrency", "31", "--isl", "128", "--osl", "128", "--draft-len", "2")
    assert r.returncode == 0, r.stderr
