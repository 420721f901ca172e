"""Op-level physics of the cost engine: roofline limit, L2, fixed costs, smooth max, collectives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.deployment import Mechanisms
from simulator.cost.engine import l2_hit_fraction, op_time, smooth_max
from simulator.cost.opviews import attention_op, balanced_routing, gemm_op, ideal_kernels, moe_op
from simulator.specs import load_hardware

H100 = load_hardware("h100-sxm")
IDEAL = H100.with_changes(kernels=ideal_kernels(H100))
ROOF = Mechanisms(kernel_curves="off", fixed_costs="off", l2="off")


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 4096), n=st.integers(1, 32768), k=st.integers(1, 32768),
       dtype=st.sampled_from(["bf16", "fp8", "fp8_block"]))
def test_gemm_pure_roofline(m, n, k, dtype):
    """Efficiency 1, no fixed costs, no L2: time = max(bytes / BW, FLOPs / peak), computed here from scratch."""
    bpw = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0 + 4.0 / 16384}[dtype]
    peak = {"bf16": 989.4e12, "fp8": 1978.9e12, "fp8_block": 1978.9e12}[dtype]
    bytes_ = n * k * bpw + m * (n + k) * 2.0
    expected = max(bytes_ / 3.35e12, 2.0 * m * n * k / peak)
    got = float(op_time(gemm_op(m, n, k, dtype), IDEAL, ROOF).time)
    assert got == pytest.approx(expected, rel=1e-9)


def test_l2_to_zero_gives_all_hbm():
    """Shrinking L2 to zero turns every re-read into HBM traffic: same as switching the L2 mechanism off."""
    op = moe_op(4096, 14336, 8, 2, 2048, "bf16")  # ~512 rows per expert: re-reads with H100's 128-row tile
    on = op_time(op, H100, Mechanisms(l2="on"))
    assert float(on.l2_bytes) > 0
    no_l2 = op_time(op, H100.with_changes(l2_size=0.0), Mechanisms(l2="on"))
    off = op_time(op, H100, Mechanisms(l2="off"))
    assert float(no_l2.time) == pytest.approx(float(off.time), rel=1e-12)
    assert float(on.time) < float(off.time)
    assert float(no_l2.l2_bytes) == 0.0


@settings(max_examples=30, deadline=None)
@given(tokens=st.integers(1, 8192), tile=st.sampled_from([0.0, 64.0, 128.0, 256.0]))
def test_weight_rereads_come_from_the_kernel_tile(tokens, tile):
    """The op carries no tile: op_time re-reads the weights once per extra tile of the kernel's ``tile_rows`` rows,
    weight · max(0, rows / tile − 1) (none without a tile), all of it HBM traffic with L2 off."""
    op = moe_op(4096, 1536, 8, 2, tokens, "bf16")
    kc = H100.kernels.get("moe", "bf16")
    hw = _with_moe_params(H100, "bf16", {**kc.params, "tile_rows": tile})
    weight, rows = float(op.weight_bytes), float(op.rows)
    expected = weight * max(0.0, rows / tile - 1.0) if tile > 0 else 0.0
    off = op_time(op, hw, Mechanisms(l2="off"))
    plain = op_time(op, _with_moe_params(H100, "bf16", {k: v for k, v in kc.params.items() if k != "tile_rows"}),
                    Mechanisms(l2="off"))
    assert float(off.hbm_bytes - plain.hbm_bytes) == pytest.approx(expected, rel=1e-12, abs=1e-6)


def _with_moe_params(hw, variant, params):
    from dataclasses import replace
    from types import MappingProxyType

    k = hw.kernels
    moe = {**k.classes["moe"], variant: replace(k.classes["moe"][variant], params=MappingProxyType(params))}
    return hw.with_changes(kernels=replace(k, classes=MappingProxyType({**k.classes, "moe": MappingProxyType(moe)})))


def test_describing_a_step_needs_no_gpu():
    """Ops describe work only: cost.step.describe takes no hardware profile (GPU data enters in op_time)."""
    import inspect

    from simulator.cost.step import describe

    assert "hw" not in inspect.signature(describe).parameters


def test_l2_hit_fraction_uses_one_partition():
    cap = H100.l2_size / H100.l2_partitions
    assert l2_hit_fraction(H100, cap * 0.5) == 1.0
    assert l2_hit_fraction(H100, cap * 4) == pytest.approx(0.25)


@settings(max_examples=50, deadline=None)
@given(a=st.floats(0, 1e-2), b=st.floats(0, 1e-2), q=st.floats(1.0, 50.0))
def test_smooth_max_bounds(a, b, q):
    """max(a, b) <= smooth_max <= a + b, and q = inf is the plain max."""
    s = float(smooth_max(np.float64(a), np.float64(b), q))
    assert max(a, b) * (1 - 1e-12) <= s <= (a + b) * (1 + 1e-12) + 1e-300
    assert float(smooth_max(np.float64(a), np.float64(b), np.inf)) == max(a, b)


def test_per_expert_fixed_cost_scales_with_unique_experts():
    """fixed_costs=per_expert (the prior) pays the MoE floor per unique expert; 'on' pays it once."""
    one = moe_op(4096, 1536, 128, 8, 1, "fp8_block", ep=8, unique=1.0, pairs=1.0)
    four = moe_op(4096, 1536, 128, 8, 1, "fp8_block", ep=8, unique=4.0, pairs=4.0)
    f = H100.kernels.get("moe", "fp8_block").fixed
    per = Mechanisms(fixed_costs="per_expert")
    assert float(op_time(four, H100, per).fixed - op_time(one, H100, per).fixed) == pytest.approx(3 * f)
    assert float(op_time(four, H100, Mechanisms()).fixed) == pytest.approx(float(op_time(one, H100,
                                                                                           Mechanisms()).fixed))


def test_balanced_routing_counts_match_the_pattern():
    # Small T spreads tokens over the stride: Mixtral EP4, T=2 touches one local expert (measured 146/139 us).
    assert balanced_routing(2, 8, 2, 4) == (1, 1)
    # Large T: every local expert, pairs = T*k/ep.
    assert balanced_routing(512, 128, 8, 8) == (16, 512)


@settings(max_examples=40, deadline=None)
@given(bw=st.floats(1.0, 4.0), b=st.integers(1, 256), kv=st.integers(1, 65536))
def test_more_bandwidth_never_slower_attention(bw, b, kv):
    op = attention_op(b, 8, 1, 128, kv)
    slow = op_time(op, H100, Mechanisms()).time
    fast = op_time(op, H100.with_changes(hbm_bandwidth=H100.hbm_bandwidth * bw), Mechanisms()).time
    assert float(fast) <= float(slow) * (1 + 1e-12)
