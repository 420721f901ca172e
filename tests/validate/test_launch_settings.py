"""`validate tpot` prices a row with the launch it states (simulator/validate/launch.py): the engine release its
``backend_version`` runs and the MoE backend its launch set (column ``moe_backend``); a value the release does not
list is refused in one line. Each priced decode step is recomputed from ``step_time`` with the Deployment the row
names."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.cost.deployment import Deployment, version_key
from simulator.cost.step import step_time
from simulator.pricing import bound
from simulator.specs import load_hardware, load_model
from simulator.validate import validate_tpot

SHIPPED = Path(__file__).resolve().parents[2] / "measured/silicon/silicon_sample.csv"
# DeepSeek-R1 fp8 (block-scaled checkpoint) on B200, TensorRT-LLM tp 8, 16 requests, 1024/1024
R1 = {"backend": "trtllm", "backend_version": "1.2.0rc6.post2", "model_path": "deepseek-ai/DeepSeek-R1",
      "system": "b200_sxm", "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "1024",
      "gemm_quant_mode": "fp8_block", "moe_quant_mode": "fp8_block", "batch_size": "16", "tp_size": "8",
      "pp_size": "1", "attention_dp_size": "1", "moe_tp_size": "8", "moe_ep_size": "1", "silicon_tpot_ms": "10"}


FP4 = {"precision": "fp4", "gemm_quant_mode": "nvfp4", "moe_quant_mode": "nvfp4"}  # the same on DeepSeek-R1 NVFP4


def _row(id_, **kw):
    return {"id": id_, **R1, **kw}


def _decode_ms(dtype="fp8_block", **dep_kw) -> float:
    """The row's decode step priced directly: batch 16, context isl + osl/2."""
    m, hw = load_model("deepseek-r1"), load_hardware("b200")
    dep = Deployment(dtype=dtype, kv_dtype="fp8", tp=8, ep=1, moe_tp=8, engine="trtllm", **dep_kw)
    return float(step_time(m, bound(hw, dep), dep, [16], 1, context=1536, check_fit=False).time[0]) * 1e3


@pytest.fixture(scope="module")
def rows():
    v = validate_tpot([_row("trtllm_gen", moe_backend="TRTLLM"), _row("empty", moe_backend=""), _row("absent"),
                       _row("newest", backend_version="1.3.0rc20"), _row("no_version", backend_version=""),
                       _row("lower", moe_backend="trtllm"), _row("auto_on_1_2", moe_backend="AUTO"),
                       _row("vllm_value", moe_backend="flashinfer-mxfp8"),
                       _row("fp4_trtllm_gen", moe_backend="TRTLLM", **FP4), _row("fp4_empty", **FP4),
                       _row("fp4_newest", backend_version="1.3.0rc20", **FP4)])
    return {r.id: r for r in v.rows}


def test_stated_trtllm_prices_the_trtllm_gen_kernel(rows):
    got = rows["trtllm_gen"]
    assert got.status == "ok"
    assert got.decode_ms == pytest.approx(_decode_ms(engine_version="1.0", moe_backend="TRTLLM"), rel=1e-9)
    # the engine file's TRTLLM rule: fp8_block on Blackwell runs the profile's moe_min_latency class, not moe
    assert got.decode_ms != pytest.approx(_decode_ms(engine_version="1.0"), rel=1e-3)
    # nvfp4: TRTLLM runs the TRT-LLM-gen kernel where the release default (CUTLASS on 1.0, AUTO on 1.3) does not
    fp4 = _decode_ms("nvfp4", engine_version="1.0", moe_backend="TRTLLM")
    assert rows["fp4_trtllm_gen"].status == "ok" and rows["fp4_trtllm_gen"].decode_ms == pytest.approx(fp4, rel=1e-9)
    for rid in ("fp4_empty", "fp4_newest"):
        assert rows[rid].decode_ms == pytest.approx(_decode_ms("nvfp4", engine_version="1.3"), rel=1e-9)
        assert rows[rid].decode_ms != pytest.approx(fp4, rel=1e-3)


def test_empty_or_absent_column_is_the_release_default(rows):
    """1.2.0rc6.post2 runs release 1.0 (MoE backend CUTLASS by default); a 1.3 version runs AUTO (fp8_block on
    Blackwell on TRT-LLM-gen); no version stated: the newest release."""
    default_1_0 = _decode_ms(engine_version="1.0")
    assert rows["empty"].decode_ms == pytest.approx(default_1_0, rel=1e-9)
    assert rows["absent"].decode_ms == pytest.approx(default_1_0, rel=1e-9)
    auto = _decode_ms(engine_version="1.3")
    assert rows["newest"].decode_ms == pytest.approx(auto, rel=1e-9)
    assert rows["no_version"].decode_ms == pytest.approx(auto, rel=1e-9)
    assert auto != pytest.approx(default_1_0, rel=1e-3)


def test_bad_value_refused_in_one_line(rows):
    """Read strictly: exact spelling of a value the row's release lists (AUTO only from 1.3; vLLM's values are not
    TensorRT-LLM's)."""
    for rid, value in (("lower", "trtllm"), ("auto_on_1_2", "AUTO"), ("vllm_value", "flashinfer-mxfp8")):
        r = rows[rid]
        assert r.status == "refused" and r.predicted_tpot_ms is None
        assert "\n" not in r.reason and f"column moe_backend is {value!r}" in r.reason
        assert "trtllm 1.0" in r.reason and "'TRTLLM'" in r.reason and "'CUTLASS'" in r.reason


def test_cli_reads_the_column(tmp_path, capsys):
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, ["id", *R1, "moe_backend", *(f"decode_{c}" for c in (
            "batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"))])
        w.writeheader()
        w.writerow({**_row("a"), "moe_backend": "TRTLLM"})
        w.writerow({**_row("b"), "moe_backend": "Trtllm"})
    assert main(["validate", "tpot", str(path), "--rows", "--json"]) == 0
    import json

    out = {r["id"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert out["a"]["status"] == "ok" and out["b"]["status"] == "refused"
    assert out["a"]["predicted_tpot_ms"] > _decode_ms(engine_version="1.0", moe_backend="TRTLLM") * (1 - 1e-9)


def test_shipped_column_is_listed_and_read():
    """measured/silicon/silicon_sample.csv's moe_backend (README.md, 'MoE backend at launch'): every value is one its
    row's engine release lists (no shipped row is refused for it), and the InferenceX DeepSeek-R1 fp8 B200 script's
    choice is carried: TRTLLM, DEEPGEMM at 1024/8192 with 256 requests under DP attention."""
    with SHIPPED.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    stated = [r for r in rows if r.get("moe_backend")]
    assert stated and {r["backend"] for r in stated} == {"trtllm", "vllm"}
    v = validate_tpot(stated)
    assert not [r.reason for r in v.rows if "column moe_backend" in r.reason]
    fp8 = [r for r in stated if r["backend"] == "trtllm" and r["system"] == "b200_sxm" and r["precision"] == "fp8"
           and not r["speculative_num_draft_tokens"] and r["mode"] == "agg"]
    deepgemm = {r["moe_backend"] for r in fp8 if "fp8_agg_1024x8192_c256" in r["id"]}
    assert deepgemm == {"DEEPGEMM"} and {r["moe_backend"] for r in fp8 if "_c256" not in r["id"]} == {"TRTLLM"}


def test_shipped_disagg_rows_carry_their_recipe():
    """The Dynamo (disagg) rows carry the MoE backend their srt-slurm recipe gives the decode workers (README 'MoE
    backend at launch'): DeepSeek-R1 fp8 B200 at 8192/1024, 128 requests: the three recipes benchmarking 128 requests
    (dep8 x1, dep8 x2, tp8 x4 decode workers) all state TRTLLM; H200 CUTLASS; no SGLang row is written (the SGLang
    file lists no backend setting); CUTEDSL (no profile class for TensorRT-LLM's CuTe DSL MoE) is left empty."""
    with SHIPPED.open(newline="", encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert rows["dsr1_b200_trtllm_fp8_disagg_8192x1024_c128_cfg666"]["moe_backend"] == "TRTLLM"
    disagg = [r for r in rows.values() if r["mode"] == "disagg" and r["moe_backend"]]
    assert {r["moe_backend"] for r in disagg if r["system"] == "h200_sxm"} == {"CUTLASS"}
    assert {r["backend"] for r in disagg} == {"trtllm"} and "CUTEDSL" not in {r["moe_backend"] for r in disagg}


def test_wideep_runs_the_cutlass_kernels():
    """WIDEEP (WideEPMoE) computes the routed experts with the CUTLASS backend's ops (engines/trtllm.yaml T-wideep): the
    same decode step as CUTLASS, and not TRT-LLM-gen's."""
    wide = _decode_ms("nvfp4", engine_version="1.0", moe_backend="WIDEEP")
    assert wide == pytest.approx(_decode_ms("nvfp4", engine_version="1.0", moe_backend="CUTLASS"), rel=1e-12)
    assert wide != pytest.approx(_decode_ms("nvfp4", engine_version="1.0", moe_backend="TRTLLM"), rel=1e-3)


# Dynamo's tensorrtllm-runtime containers and the TensorRT-LLM each bundles (Dynamo release artifacts,
# docs.nvidia.com/dynamo/dev/reference/release-artifacts.html: 0.8.1 -> v1.2.0rc6.post1, 0.8.1.post1 -> v1.2.0rc6.post2)
DYNAMO = {"0.8.1": "1.2.0rc6.post1", "0.8.1.post1": "1.2.0rc6.post2"}


@pytest.mark.parametrize("dynamo, bundled", sorted(DYNAMO.items()))
def test_a_dynamo_version_runs_the_release_its_container_bundles(dynamo, bundled):
    """A Dynamo (disagg) row states the container's version as backend_version; read as an engine version it gives
    the release of the TensorRT-LLM the container bundles (0.8.1, older than any release, reads as the oldest, 1.0,
    which 1.2.0rc6 runs), so the reader needs no Dynamo table."""
    assert version_key("trtllm", dynamo) == version_key("trtllm", bundled) == "1.0"
