"""vLLM's B200 gpt-oss MoE as InferenceX runs it (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1, the engine file's MoE
backend value flashinfer-mxfp8: the FlashInfer TRT-LLM-gen MXFP4 x MXFP8 kernel, whose values are the SGLang fit of
the same kernel); without the setting vLLM runs its MXFP4 x BF16 kernel (the tables' own), however fast the other."""

from __future__ import annotations

import pytest

from simulator.cost.deployment import Deployment, Mechanisms
from simulator.cost.engine import op_time
from simulator.cost.opviews import moe_op
from simulator.pricing import bound
from simulator.specs import load_hardware


def test_vllm_mxfp4_moe_runs_the_mxfp8_kernel_priced_as_sglang_prices_it():
    hw = load_hardware("b200")
    vllm = bound(hw, Deployment(engine="vllm", moe_backend="flashinfer-mxfp8"))
    default, sglang = bound(hw, Deployment(engine="vllm")), bound(hw, Deployment(engine="sglang"))
    copy, fit = vllm.kernels.get("moe_min_latency", "mxfp4"), sglang.kernels.get("moe", "mxfp4")

    def values(kc):  # the copy must follow the SGLang fit (refresh it when fit-sglang is refitted)
        return kc.fixed, kc.memory.xs, kc.memory.ys, kc.compute.xs, kc.compute.ys, dict(kc.params)
    assert values(copy) == values(fit)
    assert "moe_min_latency" not in sglang.kernels.classes
    # gpt-oss-120b's layer at tp 1, 32 tokens: with the setting the MXFP8 kernel, priced as on SGLang
    op = moe_op(2880, 2880, 128, 4, 32, "mxfp4", tp=1, ep=1)
    mxfp8, plain = float(op_time(op, vllm, Mechanisms()).time), float(op_time(op, default, Mechanisms()).time)
    assert mxfp8 == pytest.approx(float(op_time(op, sglang, Mechanisms()).time))
    assert plain == float(op_time(op, default, Mechanisms(), kernel="moe").time)
    assert mxfp8 < 0.85 * plain  # the table: MXFP4 x BF16 is 1.3x slower at 32 tokens on one GPU
