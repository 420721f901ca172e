"""Fit vLLM's Triton fused-MoE kernel (fp8 block-scale) on one GPU from aiconfigurator-core's vLLM 0.19.0 table.

vLLM's FP8 MoE oracle (vllm/model_executor/layers/fused_moe/oracle/fp8.py, select_fp8_moe_backend) tries AITER,
FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, DEEPGEMM, VLLM_CUTLASS, TRITON in that order; a launch that sets
VLLM_USE_FLASHINFER_MOE_FP8=0 and VLLM_MOE_USE_DEEP_GEMM=0 removes the FlashInfer and DeepGEMM backends, and
Fp8MoEMethod passes allow_vllm_cutlass=False, so it runs TRITON (TritonExperts, the Triton fused_moe kernel).
aiconfigurator-core's vLLM 0.19.0 MoE table (kernel_source ``vllm_fused_moe``) times that kernel: its collector
(ai-dynamo/aiconfigurator collector/vllm/collect_moe.py before the 0.24 upgrade, d5bad971c) calls vLLM's
``fused_experts``, the Triton path. The 0.24.0 table the profile's ``moe`` class is fitted on times FlashInfer's
TRT-LLM-gen kernel instead (the oracle's default pick on SM100).

Prints the fitted parameters in the profile's YAML form, with the in-sample and leave-one-(model, tp, ep)-out MAPE.
Run: PYTHONPATH=. python benchmarks/fit_vllm_triton_moe.py [GPU] (needs the optional extra: pip install ".[calibrate]")
"""

from __future__ import annotations

import sys

from simulator.calibrate.aic_tables import FRAMEWORK_LABEL, _moe, _src, data_root, package_gpu, read_file
from simulator.calibrate.fit import fit_moe
from simulator.calibrate.measured import Reference
from simulator.cost.deployment import Deployment
from simulator.pricing import bound
from simulator.specs.catalog import load_hardware

VERSION, DTYPE = "0.19.0", "fp8_block"


def main(gpu: str = "b200") -> None:
    root = data_root()
    path = root / package_gpu(gpu) / "moe" / "vllm" / VERSION / "moe_perf.parquet"
    rows = _moe(read_file(path), gpu, _src(root, path))
    ref = Reference(FRAMEWORK_LABEL["vllm"], VERSION, "")
    hw = bound(load_hardware(gpu), Deployment(engine="vllm"))
    mu = hw.kernels.get("gemm", DTYPE).compute  # the calibration's rule where vLLM's fp8_block GEMM fit is refused
    f = fit_moe(rows, hw, DTYPE, "fit-vllm-triton", mu, ref)
    k = f.kernel
    print(f"{gpu} vLLM {VERSION} {DTYPE} Triton fused_moe ({path.relative_to(root)}): {f.rows} fitted rows of "
          f"{f.notes['rows_total']}; MAPE {f.mape_fit:.1%} fitted, {f.mape_loso:.1%} leave-one-{f.shape_key}-out, "
          f"{f.mape_all:.1%} on all rows; at bounds: {', '.join(f.notes['at_bounds']) or 'none'}")
    print(f"  fixed {k.fixed * 1e6:.6g} us; eta(bytes) {k.memory.ys[0]:.4g}; "
          f"per_local_expert {k.params['per_local_expert'] * 1e6:.6g} us; "
          f"activation_efficiency {k.params['activation_efficiency']:.6g}; mu {k.compute.ys[0]:.4g}")


if __name__ == "__main__":
    main(*sys.argv[1:])
