"""mxfp4 MoE calibration variant (simulator.calibrate.measured.mxfp4_table): W4A8 (mxfp8 activations) rows on GPUs with
fp4 tensor cores where the engine's tables have them, else W4A16; the bundled Blackwell profiles say which."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.calibrate.measured import MXFP4_W4A8, MXFP4_W4A16, Reference, mxfp4_table

REF = Reference("TRTLLM", "1.0")
HARDWARE = Path(__file__).resolve().parents[2] / "hardware"


def _row(dtype, framework="TRTLLM", version="1.0"):
    return {"moe_dtype": dtype, "framework": framework, "version": version}


@pytest.mark.parametrize("rows, fp4, want", [
    ([_row(MXFP4_W4A16), _row(MXFP4_W4A8)], True, MXFP4_W4A8),
    ([_row(MXFP4_W4A16), _row(MXFP4_W4A8)], False, MXFP4_W4A16),  # Hopper: W4A16 dequant
    ([_row(MXFP4_W4A16)], True, MXFP4_W4A16),  # the engine measured only W4A16 (vLLM's mxfp4_bf16 kernels)
    ([_row(MXFP4_W4A16), _row(MXFP4_W4A8, version="0.9")], True, MXFP4_W4A16),  # another version's rows don't count
])
def test_mxfp4_table(rows, fp4, want):
    assert mxfp4_table(rows, fp4, REF) == want


@pytest.mark.parametrize("gpu, engine, table", [("b200", "trtllm", MXFP4_W4A8), ("b200", "sglang", MXFP4_W4A8),
                                                 ("gb200", "trtllm", MXFP4_W4A8), ("b200", "vllm", MXFP4_W4A16),
                                                 ("h200-sxm", "trtllm", MXFP4_W4A16)])
def test_bundled_profiles_name_the_variant_they_were_fitted_on(gpu, engine, table):
    doc = yaml.safe_load((HARDWARE / f"{gpu}.yaml").read_text())
    block = doc["kernels"] if engine == "trtllm" else doc["engines"][engine]["kernels"]
    assert f"{table} table" in block["classes"]["moe"]["mxfp4"]["fixed"]["note"]
