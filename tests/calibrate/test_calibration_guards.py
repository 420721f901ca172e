"""Calibration guards (calibrate/guard.py; issue 18 item 2): host-timed tables, fits at their bounds, floors
out of line with the other engines on the same GPU, one MoE kernel per fit, MoE series above the HBM peak."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from simulator.calibrate.fit import Fit, refusal
from simulator.calibrate.guard import (
    HOST_RATIO,
    at_bounds,
    floor_out_of_line,
    host_timed,
    kernel_rows,
    over_peak_series,
    roofline_seconds,
    select_moe_rows,
)
from simulator.cost.opviews import gemm_op
from simulator.specs import load_hardware
from simulator.specs.kernels import KernelClass

H100 = load_hardware("h100-sxm")


def test_parameters_at_their_bounds_are_named():
    got = at_bounds([0.0, 0.5, 1.0], [0.0, 0.0, 0.3], [10.0, 1.0, 1.0], ("a", "b", "c"))
    assert got == ("a=lower bound 0", "c=upper bound 1")
    assert at_bounds([5.0, 0.5], [0.0, 0.0], [10.0, 1.0], ("a", "b")) == ()


def _gemm_rows():
    m = np.repeat([1.0, 8.0, 64.0, 256.0], 6)
    n = np.tile([4096.0, 7168.0, 16384.0], 8)
    k = np.tile([4096.0, 7168.0], 12)
    return gemm_op(m, n, k, "fp8_block")


def test_rows_far_above_the_roofline_are_host_timed():
    op = _gemm_rows()
    ideal = roofline_seconds(op, H100)
    assert host_timed(op, 2.0 * ideal + 5e-6, H100) == ""  # a kernel: a floor and ~2x the roofline
    why = host_timed(op, 20.0 * ideal + 60e-6, H100)
    assert "host work" in why and f"{HOST_RATIO:g}x" in why


def test_floor_out_of_line_with_the_other_engines():
    # H100's moe fp8 floor is ~28 us under TRT-LLM (and SGLang's fallback to it): vLLM 0.24's 170 us table is not
    assert "6.1x" in floor_out_of_line(H100, "vllm", "moe", "fp8", 169.6e-6)
    assert floor_out_of_line(H100, "vllm", "moe", "fp8", 40e-6) == ""


def _fit(bounds=(), fixed=30e-6):
    return Fit("moe", "fp8", KernelClass(fixed=fixed), 100, 0.1, 0.1, 0.1, "", "", {"at_bounds": bounds})


def test_refusal_rule():
    assert refusal(_fit(), H100, "vllm") == ""
    assert refusal(_fit(("eta=lower bound 0.3",)), H100, "vllm") == ""  # one: flagged, kept
    assert "bounds" in refusal(_fit(("fixed=upper bound 200", "eta=lower bound 0.3")), H100, "vllm")
    assert "median" in refusal(_fit(fixed=200e-6), H100, "vllm")


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                    reason="needs the optional extra .[calibrate] (aiconfigurator-core tables)")
def test_vllm_tables_on_h100_are_refused_with_their_reasons():
    from simulator.calibrate.fit import calibrate_engine

    cal = calibrate_engine("h100-sxm", "vllm")
    refused = {r.split(":")[0]: r for r in cal.refused}
    assert "host work" in refused["gemm fp8_block"]
    assert "moe fp8" in refused
    assert {(f.cls, f.variant) for f in cal.fits} >= {("gemm", "bf16"), ("moe", "fp8_block")}


def _moe_rows(kernel, model, n):
    return [{"kernel_source": kernel, "model": model, "latency_us": "100"} for _ in range(n)]


def test_one_moe_kernel_per_fit():
    """SGLang's Blackwell tables hold two kernels per format: the fit reads the one SGLang runs; an engine with no
    declared kernel, or rows of one kernel, keep every row."""
    rows = _moe_rows("sglang_flashinfer_trtllm_moe", "Q", 3) + _moe_rows("sglang_fused_moe_triton", "M", 2)
    kept, why = kernel_rows(rows, "SGLang")
    assert [x["model"] for x in kept] == ["Q"] * 3 and "2 rows of sglang_fused_moe_triton" in why
    assert kernel_rows(rows, "VLLM") == (rows, "")
    assert kernel_rows(rows[3:], "SGLang") == (rows[3:], "")


def test_one_attention_kernel_per_fit():
    """SGLang's Blackwell decode-attention tables time flashinfer and trtllm_mha: the fit reads trtllm_mha, SGLang's
    default MHA backend on SM100; a table of one kernel (Hopper's) and the MoE rule's kernel are not confused."""
    rows = _moe_rows("flashinfer", "a", 2) + _moe_rows("trtllm_mha", "a", 3)
    kept, why = kernel_rows(rows, "SGLang", "attention")
    assert {x["kernel_source"] for x in kept} == {"trtllm_mha"} and "2 rows of flashinfer" in why
    assert kernel_rows(rows[:2], "SGLang", "attention") == (rows[:2], "")
    assert kernel_rows(rows, "SGLang", "moe") == (rows, "")  # neither row kernel is the MoE one: no selection


def test_series_streaming_above_the_hbm_peak_is_left_out():
    """A (model, kernel) series with one row faster than the HBM peak under balanced routing goes, whole."""
    rows = _moe_rows("k", "DeepSeek-V3", 3) + _moe_rows("k", "Qwen3", 2)
    peak = H100.hbm_bandwidth * 100e-6  # bytes one row streams at the peak in 100 us
    wb = np.array([0.5, 1.2, 0.9, 0.8, 0.99]) * peak
    keep, why = over_peak_series(rows, wb, np.full(5, 100e-6), H100)
    assert keep.tolist() == [False, False, False, True, True]
    assert "3 DeepSeek-V3 rows of k" in why and "1.20x" in why
    kept, notes = select_moe_rows(rows, "TRTLLM", lambda r: wb[:len(r)], H100)
    assert len(kept) == 2 and len(notes) == 1
    assert select_moe_rows(rows, "TRTLLM", lambda r: wb, H100, throughput=False) == (rows, ())


@pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                    reason="needs the optional extra .[calibrate] (aiconfigurator-core tables)")
def test_sglang_b200_moe_fits_read_one_kernel_and_balanced_series():
    from simulator.calibrate.fit import calibrate_engine

    cal = calibrate_engine("b200", "sglang")
    moe = {f.variant: f for f in cal.fits if f.cls == "moe"}
    assert "sglang_fused_moe_triton" in " ".join(moe["fp8_block"].notes["left_out"])
    assert "DeepSeek-V3" in " ".join(moe["nvfp4"].notes["left_out"])
    assert all(f.mape_fit <= 0.10 and f.mape_loso <= 0.12 for f in moe.values())
