"""Multi-node layouts (docs/MODEL.md §3.9): hierarchical collectives, DeepEP modes, validation, mxfp4 shards."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.cost.deployment import Deployment, Mechanisms, validate
from simulator.cost.engine import collective_seconds
from simulator.cost.ops import Workload, ffn_ops
from simulator.cost.step import step_time
from simulator.errors import InfeasibleError
from simulator.specs import load_hardware, load_model

H100 = load_hardware("h100-sxm")
DSV3 = load_model("deepseek-v3")
KINDS = ("all_reduce", "all_to_all", "all_gather", "deepep_low_latency", "deepep_normal")
MECH = Mechanisms()


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(KINDS), n=st.sampled_from([2, 4, 8]), mib=st.floats(1e-4, 256.0))
def test_inside_one_domain_is_the_single_domain_formula(kind, n, mib):
    wire = np.array([mib * 2**20])
    t = collective_seconds(kind, wire, n, H100, MECH)[0]
    wide = H100.with_changes(domain_size=1024, scale_out_bandwidth=1.0)  # a fabric that would be slow if used
    assert t == pytest.approx(collective_seconds(kind, wire, n, wide, MECH)[0], rel=1e-12)
    if kind in ("all_to_all", "all_reduce"):  # the one-shot formula, written out
        c = H100.kernels.collectives[kind]
        f = (n - 1) / n if kind == "all_to_all" else n - 1.0
        small = c.latency + c.latency_per_gpu * n + wire * f / (H100.link_bandwidth * c.efficiency)
        assert t <= small[0] * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(KINDS), mib=st.floats(1e-3, 64.0), n=st.sampled_from([16, 32, 64]))
def test_cost_non_decreasing_as_more_traffic_crosses_the_fabric(kind, mib, n):
    wire = np.array([mib * 2**20])
    times = [collective_seconds(kind, wire, n, H100.with_changes(domain_size=d), MECH)[0][0]
             for d in (n, 32, 16, 8, 4, 2) if d <= n]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(times, times[1:], strict=False))


def test_slower_fabric_never_faster():
    wire = np.array([1e5, 1e7])
    for kind in KINDS:
        fast = collective_seconds(kind, wire, 32, H100, MECH)[0]
        slow = collective_seconds(kind, wire, 32, H100.with_changes(scale_out_bandwidth=25e9), MECH)[0]
        assert np.all(slow >= fast) and slow[1] > fast[1]


def test_low_latency_fit_matches_a_measured_row():
    # aiconfigurator-core 0.12.0 h100_sxm sglang 0.5.6.post2 DeepEP LL: 4 nodes, 128 tokens/rank, H 7168, top-8:
    # dispatch 142.97 us, combine 263.27 us (the fit's rows; MAPE 4% over all of them)
    dispatch = collective_seconds("deepep_low_latency", 128 * 8 * 7168 * (1 + 4 / 128), 32, H100, MECH)[0]
    combine = collective_seconds("deepep_low_latency", 128 * 8 * 7168 * 2.0, 32, H100, MECH)[0]
    assert dispatch * 1e6 == pytest.approx(142.97, rel=0.1)
    assert combine * 1e6 == pytest.approx(263.27, rel=0.1)


@pytest.mark.parametrize("mode", ["nccl", "deepep_normal", "deepep_low_latency"])
def test_wide_ep_step_over_four_nodes(mode):
    dep = Deployment(dtype="fp8_block", tp=1, dp=32, ep=32, all_to_all=mode)
    r = step_time(DSV3, H100, dep, [32, 256], 1, 1024)
    one = step_time(DSV3, H100, Deployment(dtype="fp8_block", tp=1, dp=8, ep=8, all_to_all=mode), [8, 64], 1, 1024,
                    check_fit=False)
    assert np.all(np.isfinite(r.time)) and np.all(r.breakdown["collective"] > 0)
    # same tokens per rank: the 32-GPU layout pays more communication (a quarter of the traffic stays in-node)
    assert np.all(r.breakdown["collective"] > one.breakdown["collective"])


def test_wide_ep_cli_step_runs(capsys):
    assert main(["step", "--model", "deepseek-v3", "--hardware", "h100-sxm", "--gpus", "32", "--tp", "1", "--dp",
                 "32", "--ep", "32", "--tokens", "1", "--batch", "64"]) in (0, None)
    assert "32x h100-sxm" in capsys.readouterr().out


@pytest.mark.parametrize(("hw", "dep", "words"), [
    ("h100-sxm", Deployment(dtype="fp8_block", tp=1, dp=13, ep=13), ("'gpus' = 13", "multiple of 2")),
    ("b300", Deployment(dtype="fp8_block", tp=1, dp=16, ep=16), ("'gpus' = 16", "scale_out_bandwidth")),
    ("h100-sxm", Deployment(dtype="fp8_block", tp=9, dp=2, ep=18), ("'tp' = 9", "multiple of 6")),
    ("h100-sxm", Deployment(dtype="fp8_block", tp=1, dp=24, ep=24), ("'ep' = 24", "divide")),
])
def test_bad_layouts_name_the_parameter_and_the_fix(hw, dep, words):
    with pytest.raises(InfeasibleError) as exc:
        validate(DSV3, load_hardware(hw), dep)
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_a2a_mode_without_parameters_is_refused():
    cols = {k: v for k, v in H100.kernels.collectives.items() if not k.startswith("deepep")}
    hw = H100.with_changes(kernels=replace(H100.kernels, collectives=MappingProxyType(cols)))
    with pytest.raises(InfeasibleError, match="'all_to_all' = 'deepep_low_latency'"):
        validate(DSV3, hw, Deployment(dtype="fp8_block", tp=1, dp=8, ep=8, all_to_all="deepep_low_latency"))


def test_cli_bad_layout_exits_2(capsys):
    rc = main(["step", "--model", "deepseek-v3", "--hardware", "h100-sxm", "--gpus", "13", "--tokens", "1",
               "--batch", "8"])
    err = capsys.readouterr().err
    assert rc == 2 and "--gpus" in err and "multiple of 2" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("moe_tp", [4, 8])
def test_gpt_oss_mxfp4_at_moe_tp_4_and_8_is_accepted_and_priced_padded(moe_tp):
    m = load_model("gpt-oss-120b")
    dep = Deployment(dtype="mxfp4", tp=8, ep=8 // moe_tp, moe_tp=moe_tp)
    validate(m, H100, dep)
    r = step_time(m, H100, dep, [8], 1, 1024)
    assert np.isfinite(r.time).all()
    wl = Workload(np.array([8.0]), np.array([1.0]), 1024)

    class Load:
        unique, pairs = np.array([4.0]), np.array([8.0])

    op = ffn_ops(m, dep, wl, True, Load)[1]
    width = m.ffn.expert_intermediate // moe_tp  # 720 / 360: padded to 768 / 384 (multiple of 64)
    padded = -(-width // 64) * 64
    assert op.working_set == pytest.approx(3 * m.hidden_size * padded * 4.25 / 8)
    assert padded > width


def test_cli_all_to_all_mode_reaches_the_deployment(capsys):
    import json
    args = ["step", "--model", "deepseek-v3", "--hardware", "h100-sxm", "--gpus", "16", "--tp", "1", "--dp", "16",
            "--ep", "16", "--tokens", "1", "--batch", "64", "--json"]
    out = {}
    for mode in ("nccl", "deepep_low_latency"):
        assert main([*args, "--all-to-all", mode]) in (0, None)
        rec = json.loads(capsys.readouterr().out)[0]
        assert rec["all_to_all"] == mode
        out[mode] = rec["time_us"]
    assert out["nccl"] != out["deepep_low_latency"]


def test_default_rule_keeps_tp_inside_one_domain():
    from simulator.pricing import Layout, default_deployment
    wide = default_deployment(DSV3, H100, Layout(gpus=32))
    assert (wide.tp, wide.dp, wide.ep) == (8, 4, 32)
    assert default_deployment(DSV3, H100).tp == 8  # one node: unchanged (TP8 EP8)
