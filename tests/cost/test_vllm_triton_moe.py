"""vLLM's block-scaled fp8 MoE on B200 at the launch InferenceX's v0.17.0 MiniMax-M2.5 script used
(VLLM_USE_FLASHINFER_MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0, the engine file's MoE backend value triton): the FP8 MoE
oracle's Triton backend, priced on the profile's Triton fit; without the setting the oracle's default, FlashInfer's
TRT-LLM-gen kernel (the moe class), whichever of the two fits is faster."""

from __future__ import annotations

from simulator.cost.deployment import Deployment, Mechanisms
from simulator.cost.engine import op_time
from simulator.cost.opviews import moe_op
from simulator.pricing import bound
from simulator.specs import load_hardware


def _times(gpu: str, dtype: str) -> tuple[float, float, float]:
    hw = load_hardware(gpu)
    triton, default = bound(hw, Deployment(engine="vllm", moe_backend="triton")), bound(hw, Deployment(engine="vllm"))
    op = moe_op(3072, 1536, 256, 8, 16, dtype, tp=4, ep=1)  # MiniMax-M2.5's layer at moe_tp 4, 16 tokens
    return (float(op_time(op, triton, Mechanisms()).time), float(op_time(op, default, Mechanisms()).time),
            float(op_time(op, default, Mechanisms(), kernel="moe_min_latency").time)
            if "moe_min_latency" in default.kernels.classes and dtype in default.kernels.classes["moe_min_latency"]
            else float("nan"))


def test_triton_setting_prices_fp8_block_on_the_triton_fit_and_the_default_on_flashinfer():
    triton, default, fit = _times("b200", "fp8_block")
    assert triton == fit  # the setting runs the alternative kernel: the Triton fit
    assert default == float(op_time(moe_op(3072, 1536, 256, 8, 16, "fp8_block", tp=4, ep=1),
                                    bound(load_hardware("b200"), Deployment(engine="vllm")), Mechanisms(),
                                    kernel="moe").time)
    assert triton > 1.1 * default  # aiconfigurator's tables: Triton 1.2-2x slower than TRT-LLM-gen at this shape


def test_triton_setting_leaves_other_formats_and_gpus_on_the_default_kernel():
    for gpu, dtype in (("b200", "nvfp4"), ("b200", "bf16"), ("h200-sxm", "fp8_block")):
        triton, default, _ = _times(gpu, dtype)
        assert triton == default, (gpu, dtype)
