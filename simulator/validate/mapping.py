"""The one table from the names in public deployment measurements to the catalog (docs/MODEL.md §7).

Hugging Face model ids -> bundled model specs; aiconfigurator system names -> bundled hardware profiles;
quantisation modes -> deployment dtypes; the KV-cache dtype a row implies. Quantised checkpoints of the same
architecture (``nvidia/...-NVFP4``, ``-FP8``) map to the architecture's spec: the dtype comes from the row.
"""

from __future__ import annotations

# Hugging Face id (case-insensitive) -> bundled model spec name
MODELS: dict[str, str] = {
    "deepseek-ai/deepseek-r1": "deepseek-r1",
    "nvidia/deepseek-r1-nvfp4": "deepseek-r1",
    "nvidia/deepseek-r1-fp4": "deepseek-r1",
    "deepseek-ai/deepseek-v3": "deepseek-v3",
    "nvidia/deepseek-v3.1-nvfp4": "deepseek-v3",  # V3.1 keeps V3's architecture (models.md [B30])
    "deepseek-ai/deepseek-v3.1": "deepseek-v3",
    "deepseek-ai/deepseek-v3.2": "deepseek-v3.2",
    "deepseek-ai/deepseek-v3.2-exp": "deepseek-v3.2",
    "nvidia/deepseek-v3.2-nvfp4": "deepseek-v3.2",
    "moonshotai/kimi-k2-instruct": "kimi-k2",
    "moonshotai/kimi-k2.5": "kimi-k2.5",
    "nvidia/kimi-k2.5-nvfp4": "kimi-k2.5",
    "qwen/qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen/qwen3-235b-a22b-fp8": "qwen3-235b-a22b",
    "qwen/qwen3-30b-a3b": "qwen3-30b-a3b",
    "qwen/qwen3-30b-a3b-fp8": "qwen3-30b-a3b",
    "qwen/qwen3-coder-480b-a35b-instruct": "qwen3-coder-480b-a35b",
    "qwen/qwen3.5-397b-a17b": "qwen3.5-397b-a17b",
    "nvidia/qwen3.5-397b-a17b-nvfp4": "qwen3.5-397b-a17b",
    "qwen/qwen3-32b": "qwen3-32b",
    "qwen/qwen3-32b-fp8": "qwen3-32b",
    "nvidia/qwen3-32b-nvfp4": "qwen3-32b",
    "minimaxai/minimax-m2": "minimax-m2",
    "minimaxai/minimax-m2.5": "minimax-m2.5",
    "nvidia/minimax-m2.5-nvfp4": "minimax-m2.5",
    "zhipuai/glm-5": "glm-5",
    "zai-org/glm-5": "glm-5",
    "zai-org/glm-5-fp8": "glm-5",
    "nvidia/glm-5-nvfp4": "glm-5",
    "zai-org/glm-4.5": "glm-4.5",
    "zai-org/glm-4.5-air": "glm-4.5-air",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "meta-llama/llama-3.1-8b": "llama-3.1-8b",
    "meta-llama/llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama/meta-llama-3.1-8b": "llama-3.1-8b",
    "nvidia/llama-3.1-8b-instruct-fp8": "llama-3.1-8b",
    "meta-llama/llama-3.1-70b": "llama-3.1-70b",
    "meta-llama/llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama/meta-llama-3.1-70b": "llama-3.1-70b",
    "nvidia/llama-3.1-70b-instruct-fp8": "llama-3.1-70b",
    "mistralai/mixtral-8x7b-v0.1": "mixtral-8x7b",
    "mistralai/mixtral-8x22b-v0.1": "mixtral-8x22b",
    "meta-llama/llama-4-scout-17b-16e-instruct": "llama-4-scout",
    "meta-llama/llama-4-maverick-17b-128e-instruct": "llama-4-maverick",
}

# aiconfigurator system name -> bundled hardware profile
SYSTEMS: dict[str, str] = {
    "a100_sxm": "a100-sxm",
    "h100_sxm": "h100-sxm",
    "h100_pcie": "h100-pcie",
    "h200_sxm": "h200-sxm",
    "b200_sxm": "b200",
    "gb200": "gb200",
    "gb200_sxm": "gb200",
    "b300_sxm": "b300",
    "gb300": "gb300",
    "mi300x": "mi300x",
    "mi325x": "mi325x",
    "mi355x": "mi355x",
}

# Systems whose measurements judge the what-if rules (issue 11): never priced while developing; `validate
# --include-held-out` prices them when the what-if accuracy is reported.
HELD_OUT_SYSTEMS = ("b300_sxm", "gb300")

# quantisation mode (moe_quant_mode, else gemm_quant_mode) -> Deployment.dtype; '' (no quantisation) -> bf16.
# The deployment has one weight format: a row with fp8 GEMMs and fp8_block MoE is priced as fp8_block (the MoE
# weights dominate decode traffic).
DTYPES: dict[str, str] = {"": "bf16", "bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block",
                          "nvfp4": "nvfp4", "mxfp4": "mxfp4", "w4a16_mxfp4": "mxfp4", "int4_wo": "int4_wo"}

# Checkpoints that ship in one weight format, whatever the row's quantisation label says: openai/gpt-oss-* publish
# their MoE weights only as MXFP4 (config.json quantization_config.quant_method = "mxfp4"; gpt-oss model card [B16]),
# so every engine runs those weights as mxfp4 (W4A16 dequant on Hopper, fp4 tensor cores on Blackwell) — the
# aiconfigurator rows label them 'nvfp4'. A 4-bit label on such a checkpoint is read as its own format.
CHECKPOINT_DTYPES: dict[str, str] = {"openai/gpt-oss-120b": "mxfp4", "openai/gpt-oss-20b": "mxfp4"}
FOUR_BIT_LABELS = ("nvfp4", "mxfp4", "w4a16_mxfp4")


def row_dtype(model_path: str, quant: str) -> str | None:
    """The Deployment dtype of a row's checkpoint and quantisation label (None: no catalog format)."""
    native = CHECKPOINT_DTYPES.get(model_path.strip().lower())
    if native and quant in FOUR_BIT_LABELS:
        return native
    return DTYPES.get(quant)


# KV-cache dtype a row implies: the rows do not state it. Quantised runs use an fp8 KV cache (NVIDIA's FP8/NVFP4
# checkpoints declare kv_cache_quant_algo FP8, models.md [B25]); unquantised runs keep bf16.
KV_FP8_PRECISIONS = ("fp8", "fp4", "int4")


def kv_dtype(precision: str) -> str:
    return "fp8" if precision.strip().lower() in KV_FP8_PRECISIONS else "bf16"
