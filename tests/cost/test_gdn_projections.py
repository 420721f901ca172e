"""Issue 18 round 4: a Gated-DeltaNet layer's input projection as the engine launches it (Qwen3.5 on SGLang 0.5.9:
four GEMMs; merged elsewhere and for Qwen3-Next's two-matrix checkpoint)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import yaml

from simulator.cost.deployment import Deployment, engine_release
from simulator.cost.ops import GEMM_TILE_N, Workload, attention_ops
from simulator.errors import ConfigError
from simulator.specs import load_model
from simulator.specs.catalog import load_routing_profile
from simulator.specs.model import read_model

ROOT = Path(__file__).resolve().parents[2]


def _ops(model: str, engine: str, batch: float = 4.0, tokens: float = 1.0, tp: int = 8) -> dict:
    wl = Workload(np.array([batch]), np.array([tokens]), 1024)
    dep = Deployment(dtype="fp8_block", kv_dtype="fp8", tp=tp, ep=1, engine=engine)
    layout = engine_release(dep).ops.linear_attention_in_proj  # the engine's op layout (its file's ops:)
    return {op.name: op for op in attention_ops(load_model(model), dep, wl, "linear", layout)}


def test_qwen35_runs_four_input_gemms_on_sglang_and_one_merged_op_elsewhere():
    split, merged = _ops("qwen3.5-397b-a17b", "sglang"), _ops("qwen3.5-397b-a17b", "vllm")
    names = ("attn_in_proj_qkv", "attn_in_proj_z", "attn_in_proj_b", "attn_in_proj_a")
    assert all(n in split for n in names) and "attn_in_proj" not in split
    assert "attn_in_proj" in merged and not any(n in merged for n in names)
    # the same weights either way (fp8 qkv/z, bf16 b/a): only the launches differ
    width = sum(float(np.ravel(split[n].parallel)[0]) for n in names[:2]) * GEMM_TILE_N + 2 * 64 / 8
    assert width == pytest.approx(float(np.ravel(merged["attn_in_proj"].parallel)[0]) * GEMM_TILE_N)
    assert split["attn_in_proj_b"].variant == "bf16" and split["attn_in_proj_qkv"].variant == "fp8_block"
    # Qwen3-Next's checkpoint stores two matrices: one op on every engine
    assert "attn_in_proj" in _ops("qwen3-next-80b-a3b", "sglang", tp=4)


def test_narrow_projection_is_tiled_over_rows_in_prefill_only():
    decode = _ops("qwen3.5-397b-a17b", "sglang")["attn_in_proj_b"]
    prefill = _ops("qwen3.5-397b-a17b", "sglang", batch=1.0, tokens=8192.0)["attn_in_proj_b"]
    assert float(np.ravel(decode.parallel)[0]) == pytest.approx(8 / GEMM_TILE_N)  # 64 heads / tp 8 columns
    assert float(np.ravel(prefill.parallel)[0]) == pytest.approx(8192 / GEMM_TILE_N)


def test_in_projections_is_checked():
    obj = yaml.safe_load((ROOT / "models/qwen3.5-397b-a17b.yaml").read_text())
    assert read_model(copy.deepcopy(obj), "m", load_routing_profile).attention.linear.in_projections == 4
    obj["attention"]["linear"]["in_projections"] = 3
    with pytest.raises(ConfigError) as err:
        read_model(obj, "bad.yaml", load_routing_profile)
    msg = str(err.value)
    assert "\n" not in msg and "in_projections" in msg and "3" in msg
