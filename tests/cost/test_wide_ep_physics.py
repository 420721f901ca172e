"""Issue 18 item 4: MLA's work unit, the attention compute efficiency, FP8 MLA and DSA indexer caches."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cost.deployment import Deployment, Mechanisms
from simulator.cost.engine import op_time
from simulator.cost.memory import kv_bytes_per_request
from simulator.cost.ops import INDEXER_KEY_BYTES, Workload, attention_ops, mla_cache_bytes
from simulator.pricing import bound
from simulator.specs import load_hardware, load_model
from simulator.specs.kernels import DEFAULT_COMPUTE

L = 4096.0


def _attention(model, dep, batch, tokens=1, context=2048):
    wl = Workload(np.array([float(batch)]), np.array([float(tokens)]), context)
    return next(op for op in attention_ops(model, dep, wl, "full") if op.name == "attention")


def test_mla_work_unit_is_one_per_request_not_per_query_head():
    m = load_model("deepseek-v3")  # 128 query heads, one latent KV head
    for tp, dp in ((1, 8), (8, 1)):
        op = _attention(m, Deployment(dtype="fp8_block", tp=tp, dp=dp, ep=8), 64)
        assert float(np.ravel(op.parallel)[0]) == pytest.approx(64 / dp)  # B per attention group x 1 latent head


def test_mla_per_parallel_floor_is_paid_once_per_request():
    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    kc = hw.kernels.get("attention", "bf16")
    per = kc.params["per_parallel"]
    assert per > 0
    dep = Deployment(dtype="fp8_block", tp=1, dp=8, ep=8)
    mech = Mechanisms()
    fixed = [float(op_time(_attention(m, dep, b), hw, mech).fixed[0]) for b in (8, 800)]
    # 100 requests per rank more add 99 per-unit floors (not 99 x 128)
    assert fixed[1] - fixed[0] == pytest.approx(99 * per, rel=1e-9)


def test_attention_compute_efficiency_defaults_to_flashmla():
    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    assert hw.kernels.get("attention", "bf16").compute is None  # the profile states none: the default applies
    assert DEFAULT_COMPUTE["attention"] == pytest.approx(0.667, abs=1e-3)
    dep = Deployment(dtype="fp8_block", tp=1, dp=8, ep=8)
    op = _attention(m, dep, 2048, tokens=2)  # 256 requests per rank, one MTP token: compute-bound on H100
    c = op_time(op, hw, Mechanisms())
    expect = float(np.ravel(op.flops)[0]) / (hw.peak("bf16") * DEFAULT_COMPUTE["attention"])
    assert float(c.compute[0]) == pytest.approx(expect)
    assert float(c.compute[0]) > float(c.memory[0])


def test_fp8_mla_cache_is_576_bytes_dense_and_656_sparse():
    """Dense MLA in fp8: latent + RoPE key in fp8, per-tensor scale (576 B; SGLang set_mla_kv_buffer). Only the
    sparse-attention models' FlashMLA layout keeps scales per 128 values and a bf16 RoPE key (656 B)."""
    m = load_model("deepseek-v3")
    assert mla_cache_bytes(m, "fp8") == pytest.approx(576.0)
    assert mla_cache_bytes(m, "bf16") == pytest.approx(1152.0)
    assert mla_cache_bytes(load_model("deepseek-v3.2"), "fp8") == pytest.approx(656.0)
    got = kv_bytes_per_request(m, Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8), L)
    assert got == pytest.approx(m.layers * L * 576.0)
    op = _attention(m, Deployment(dtype="fp8_block", kv_dtype="fp8", tp=8, ep=8), 4, context=int(L) - 1)
    assert float(np.ravel(op.other_bytes)[0]) > 4 * L * 576.0  # the attention op reads the same layout


def test_dsa_indexer_key_cache_is_counted():
    m = load_model("deepseek-v3.2")
    a = m.attention
    assert a.sparse
    for kv in ("bf16", "fp8"):
        got = kv_bytes_per_request(m, Deployment(dtype="fp8_block", kv_dtype=kv, tp=8, ep=8), L)
        main = m.layers * L * mla_cache_bytes(m, kv)
        assert got == pytest.approx(main + m.layers * L * a.indexer_head_dim * INDEXER_KEY_BYTES)
        assert 0.10 < got / main - 1 < 0.21  # +11% (bf16 cache) to +20% (fp8 cache)


# ---- all-to-all defaults, dispatch precision, two-batch overlap ------------------------------------------------
from simulator.cost.deployment import resolve_all_to_all, two_batch_overlap_on  # noqa: E402
from simulator.cost.step import step_time  # noqa: E402


def test_auto_all_to_all_is_deepep_low_latency_across_domains_only():
    h100, a100 = load_hardware("h100-sxm"), load_hardware("a100-sxm")
    one = Deployment(dtype="fp8_block", tp=1, dp=8, ep=8)
    two = Deployment(dtype="fp8_block", tp=1, dp=16, ep=16)
    assert one.all_to_all == "auto"
    assert resolve_all_to_all(h100, one).all_to_all == "nccl"  # single-node default unchanged
    assert resolve_all_to_all(h100, two).all_to_all == "deepep_low_latency"
    assert resolve_all_to_all(a100, replace_dtype(two)).all_to_all == "nccl"  # no DeepEP parameters for A100
    gb200 = load_hardware("gb200")  # one NVL72 domain: DeepEP beyond an 8-GPU node's worth of EP ranks
    assert resolve_all_to_all(gb200, Deployment(dtype="fp8_block", tp=1, dp=8, ep=8)).all_to_all == "nccl"
    assert resolve_all_to_all(gb200, Deployment(dtype="fp8_block", tp=1, dp=16, ep=16)).all_to_all == \
        "deepep_low_latency"
    assert "deepep_low_latency" in load_hardware("gb200").kernels.collectives  # fitted on the gb200 tables


def replace_dtype(dep):
    from dataclasses import replace
    return replace(dep, dtype="bf16")


def test_dispatch_precision_sets_the_dispatched_bytes():
    assert Deployment(all_to_all="nccl").dispatch_bytes == 2.0
    assert Deployment(all_to_all="deepep_low_latency").dispatch_bytes == pytest.approx(1 + 4 / 128)
    assert Deployment(all_to_all="deepep_low_latency", dispatch_dtype="nvfp4").dispatch_bytes == pytest.approx(
        0.5 + 1 / 16)
    m, hw = load_model("deepseek-v3"), load_hardware("gb200")  # nvfp4 dispatch needs fp4 tensor cores (Blackwell)
    t = {d: step_time(m, hw, Deployment(dtype="fp8_block", tp=1, dp=16, ep=16, dispatch_dtype=d), [16 * 64], 1,
                      1024).breakdown["collective"][0] for d in ("bf16", "fp8", "nvfp4")}
    assert t["bf16"] > t["fp8"] > t["nvfp4"]


def test_two_batch_overlap_default_per_engine():
    mech = Mechanisms()
    hw = load_hardware("h100-sxm")
    wide = Deployment(dtype="fp8_block", tp=1, dp=16, ep=16, all_to_all="deepep_low_latency")

    def on(m, dep):
        return two_batch_overlap_on(m, bound(hw, dep), dep)

    assert on(mech, Deployment(**{**_fields(wide), "engine": "sglang"}))
    assert not on(mech, Deployment(**{**_fields(wide), "engine": "vllm"}))  # --enable-dbo: opt-in
    assert not on(mech, wide)  # trtllm
    assert not on(mech, Deployment(**{**_fields(wide), "engine": "sglang", "all_to_all": "nccl"}))
    assert on(Mechanisms(two_batch_overlap="on"), wide)
    assert not on(Mechanisms(two_batch_overlap="on"), Deployment(dtype="fp8_block", tp=8, ep=8))


def _fields(dep):
    from dataclasses import fields
    return {f.name: getattr(dep, f.name) for f in fields(dep)}


def test_two_batch_overlap_hides_the_smaller_stream_at_half_the_batch():
    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    dep = Deployment(dtype="fp8_block", tp=1, dp=64, ep=64, all_to_all="deepep_low_latency", engine="sglang")
    batch = np.array([64.0, 64 * 2, 64 * 128])  # 1, 2, 128 requests per attention rank (4 experts per rank)
    hw = bound(hw, dep)
    on = step_time(m, hw, dep, batch, 1, 1024, mech=Mechanisms(two_batch_overlap="on"))
    off = step_time(m, hw, dep, batch, 1, 1024, mech=Mechanisms(two_batch_overlap="off"))
    assert on.time[0] == off.time[0]  # one request per rank: nothing to split
    assert on.time[2] < off.time[2]  # communication hidden behind the other micro-batch's compute
    assert on.time[2] > off.time[2] - off.breakdown["collective"][2]  # but the halves pay floors twice
    assert on.hbm_bytes[2] > off.hbm_bytes[2]  # each micro-batch reads the weights again
    parts = sum(on.breakdown.values())
    np.testing.assert_allclose(parts, on.time, rtol=1e-12)  # the breakdown adds up to the step
    # two micro-batches read every weight twice: at 16 experts per rank (2 nodes) that costs more than it hides
    dep16 = Deployment(dtype="fp8_block", tp=1, dp=16, ep=16, all_to_all="deepep_low_latency", engine="sglang")
    on16, off16 = (step_time(m, hw, dep16, [16 * 128], 1, 1024, mech=Mechanisms(two_batch_overlap=t)).breakdown
                   for t in ("on", "off"))
    assert on16["moe"][0] > 1.5 * off16["moe"][0]


def test_mla_down_projections_are_one_fused_gemm():
    m = load_model("deepseek-v3")
    a = m.attention
    wl = Workload(np.array([4.0]), np.array([1.0]), 128)
    ops = {op.name: op for op in attention_ops(m, Deployment(dtype="fp8_block", tp=8, ep=8), wl, "full")}
    assert "q_a_proj" not in ops and "kv_a_proj" not in ops
    fused = ops["qkv_a_proj"]
    assert float(np.ravel(fused.parallel)[0]) * 128 == a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim


def test_trtllm_moe_kernel_is_the_engines_rule_not_the_faster_fit():
    """B200 TensorRT-LLM, DeepSeek at moe_tp 8, 4 tokens. The engine's rule picks the kernel (engines/trtllm.yaml
    kernels.moe_backend), never the faster of the fits: nvfp4 runs CUTLASS (the throughput class, 87.5 us measured)
    under AUTO although the min-latency fit is faster (25.2 us measured on the TRT-LLM-gen kernel, which runs only
    with moe_config.backend TRTLLM); fp8_block runs TRT-LLM-gen under AUTO (resolve_moe_backend on SM100) and the
    table's DeepGEMM kernel under CUTLASS (release 1.0's default); Hopper never runs an alternative."""
    from simulator.cost.opviews import moe_op

    hw0 = load_hardware("b200")
    assert "moe_min_latency" in hw0.kernels.classes
    assert "moe_min_latency" not in hw0.kernel_block("sglang").kernels.classes  # TRT-LLM's own kernel

    def t(dtype, **dep):
        hw = bound(hw0, Deployment(**dep))
        return float(op_time(moe_op(7168, 2048, 256, 8, 4, dtype, tp=8, ep=1), hw, Mechanisms()).time)

    def on(kernel, dtype):
        op = moe_op(7168, 2048, 256, 8, 4, dtype, tp=8, ep=1)
        return float(op_time(op, hw0, Mechanisms(), kernel=kernel).time)

    assert on("moe_min_latency", "nvfp4") < 0.5 * on("moe", "nvfp4")  # the faster fit ...
    assert t("nvfp4") == on("moe", "nvfp4")  # ... does not decide: AUTO runs CUTLASS for nvfp4
    assert t("nvfp4", moe_backend="TRTLLM") == on("moe_min_latency", "nvfp4")
    assert 15e-6 < t("nvfp4", moe_backend="TRTLLM") < 35e-6
    assert t("fp8_block") == on("moe_min_latency", "fp8_block")  # AUTO: TRT-LLM-gen FP8 block scales on SM100
    assert t("fp8_block", engine_version="1.0") == on("moe", "fp8_block")  # before AUTO: CUTLASS / DeepGEMM
    assert t("fp8_block", moe_backend="CUTLASS") == on("moe", "fp8_block")
    h100 = load_hardware("h100-sxm")
    op = moe_op(7168, 2048, 256, 8, 4, "fp8_block", tp=8, ep=1)
    hb = bound(h100, Deployment(moe_backend="TRTLLM"))
    assert float(op_time(op, hb, Mechanisms()).time) == float(op_time(op, h100, Mechanisms(), kernel="moe").time)


def test_trtllm_gen_fp8_block_copy_follows_the_sglang_fit():
    """The B200 TRT-LLM-gen fp8_block kernel's values are the SGLang sglang_flashinfer_trtllm_moe fit of the same
    kernel (hardware/b200.yaml source trtllm-gen-sglang); TRT-LLM prices it exactly as SGLang does."""
    from simulator.cost.opviews import moe_op
    hw = load_hardware("b200")
    gen, sgl = hw.kernels.get("moe_min_latency", "fp8_block"), hw.kernel_block("sglang").kernels.get("moe", "fp8_block")

    def values(kc):  # the copy must follow the SGLang fit (refresh it when fit-sglang is refitted)
        return kc.fixed, kc.memory.xs, kc.memory.ys, kc.compute.xs, kc.compute.ys, dict(kc.params)
    assert values(gen) == values(sgl)
    op = moe_op(7168, 2048, 256, 8, 4, "fp8_block", tp=8, ep=1)
    trt = float(op_time(op, bound(hw, Deployment(engine="trtllm")), Mechanisms()).time)
    assert trt == pytest.approx(float(op_time(op, bound(hw, Deployment(engine="sglang")), Mechanisms()).time))


def test_two_batch_overlap_step_is_the_stage_formula():
    """SGLang's five-stage decode schedule: T = Σ_layers 2·[max(S + A0, D − H_d) + H_d + X + max(A1, C − H_c) + H_c]
    at ⌈B/2⌉ (A0 the ops before core attention and the residual, A1 the rest of the compute, H the DeepEP hook
    kernels' SM time at the profile's published rates; 2 × path for layers without dispatch), plus the once-per-step
    ops at the whole batch and the host overhead."""
    from simulator.cost.engine import step_fixed
    from simulator.cost.graph import critical_path, structure
    from simulator.cost.step import describe, head_ops

    m, hw0 = load_model("deepseek-v3"), load_hardware("h100-sxm")
    dep = Deployment(dtype="fp8_block", tp=1, dp=64, ep=64, all_to_all="deepep_low_latency", engine="sglang")
    hw, mech, B = bound(hw0, Deployment(engine="sglang")), Mechanisms(two_batch_overlap="on"), 64 * 128.0
    got = float(step_time(m, hw, dep, [B], 1, 1024, mech=mech).time[0])
    groups = describe(m, dep, Workload(np.array([B / 2]), np.array([1.0]), 1024), mech)[0]
    want = 0.0
    for g in groups:
        t = {op.name: float(op_time(op, hw, mech).time[0]) for op in g.ops}
        comm = {"moe_dispatch", "moe_combine"}
        path = float(critical_path(structure(g.ops), {n: np.array([0.0 if n in comm else v])
                                                     for n, v in t.items()})[0][0])
        if comm <= set(t):
            X, D, C = t["experts"], t["moe_dispatch"], t["moe_combine"]
            S = sum(v for n, v in t.items() if n.startswith("shared_"))
            names = [op.name for op in g.ops]
            A0 = sum(t[n] for n in names[:names.index("attention")]) + t["residual"]
            A1 = path - X - S - A0
            col = hw.kernels.collectives["deepep_low_latency"]
            ops = {op.name: op for op in g.ops}
            Hd = float(np.ravel(ops["moe_dispatch"].wire_bytes)[0]) / col.hook_dispatch_rate
            Hc = float(np.ravel(ops["moe_combine"].wire_bytes)[0]) / col.hook_combine_rate
            assert 0 < Hd < D and 0 < Hc < C  # DeepEP's published send/recv split, at 64 tokens per rank
            layer = 2 * (max(S + A0, D - Hd) + Hd + X + max(A1, C - Hc) + Hc)
        else:
            layer = 2 * path
        want += g.count * layer
    wl = Workload(np.array([B]), np.array([1.0]), 1024)
    want += sum(float(op_time(op, hw, mech).time[0]) for op in head_ops(m, dep, wl))
    want += step_fixed(hw, mech, "host_overhead")
    assert got == pytest.approx(want, rel=1e-9)


def test_per_layer_qk_norm_all_reduces_under_tp():
    """MiniMax-M2's QK norm is one RMSNorm over all heads (config qk_norm_type per_layer): under TP each rank holds
    some heads, so the q and k sums of squares are all-reduced (vLLM MiniMaxText01RMSNormTP.forward_qk: one
    all-reduce of [q_var, k_var], fp32, per layer); per-head norms (Qwen3) and tp 1 need none."""
    wl = Workload(np.array([8.0]), np.array([1.0]), 1024)

    def names(model, tp):
        m = load_model(model)
        return {op.name: op for op in attention_ops(m, Deployment(dtype="fp8_block", tp=tp, ep=tp), wl, "full")}

    ar = names("minimax-m2.5", 4)["qk_norm_all_reduce"]
    assert ar.collective == "all_reduce" and ar.group == 4 and float(np.ravel(ar.wire_bytes)[0]) == 8 * 2 * 4
    assert "qk_norm_all_reduce" not in names("minimax-m2.5", 1)
    assert "qk_norm_all_reduce" not in names("qwen3-235b-a22b", 4)
