"""Wide expert parallelism as the engines deploy it (docs/MODEL.md §3.5, §3.9): the all-to-all chosen by
``Deployment.all_to_all = "auto"`` and the precision of dispatched tokens. Which engines split a batch in two
overlapped micro-batches is each engine's (engines/*.yaml, ``schedule.two_batch_overlap``); the kernels' parameters
are the profile's (:mod:`.kernels`)."""

from __future__ import annotations

# ``Deployment.all_to_all = "auto"`` (the default; docs/MODEL.md §3.9): what engines deploy. Inside one scale-up
# domain the engine's all-to-all (the single-node defaults, unchanged); across domains DeepEP's low-latency kernels
# for decode, which SGLang (--moe-a2a-backend deepep, --deepep-mode auto: low_latency for decode batches), vLLM
# (--all2all-backend deepep_low_latency in its wide-EP recipe) and TensorRT-LLM (alltoall method DeepEPLowLatency on
# HGX; NVL72 is one domain) run for decode across nodes, where the profile has its parameters.
# Wide EP inside a large domain (GB200 NVL72) runs the same kernels (SGLang's GB200 recipes: DeepEP over NVLink;
# TensorRT-LLM: its MNNVL all-to-all, priced with these parameters): beyond A2A_NCCL_MAX_GPUS EP ranks (one HGX node,
# the largest layout the engines' plain all-to-all recipes use) "auto" also picks DeepEP low-latency.
A2A_AUTO = "auto"
A2A_ACROSS_DOMAINS = "deepep_low_latency"
A2A_NCCL_MAX_GPUS = 8
# Bytes per hidden element a dispatched token carries (Deployment.dispatch_dtype; docs/MODEL.md §3.9): bf16; fp8
# with one fp32 scale per 128 channels (DeepEP's dispatch, low-latency always, normal as SGLang runs DeepSeek);
# nvfp4 with one fp8 scale per 16 values (TensorRT-LLM's NVFP4 dispatch for nvfp4 checkpoints). The combine returns
# bf16 in every mode.
DISPATCH_BYTES = {"bf16": 2.0, "fp8": 1.0 + 4.0 / 128, "nvfp4": 0.5 + 1.0 / 16}
MODE_DISPATCH = {"nccl": "bf16", "deepep_normal": "fp8", "deepep_low_latency": "fp8"}  # dispatch_dtype "auto"
