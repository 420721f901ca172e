"""Engine per-round overheads (simulator.specdec.overheads): switching one off never slows a round; γ = 0 stays
plain decoding; padding staircase and drafter kinds."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.deployment import Deployment, Mechanisms
from simulator.pricing import bound
from simulator.specdec import Acceptance, StepCache, speculative
from simulator.specdec.drafters import parse_drafter
from simulator.specdec.overheads import graph_batch
from simulator.specs.catalog import load_engine, load_hardware, load_model

HW = load_hardware("h100-sxm")


def _graphs(engine):
    return load_engine(engine).default.graphs
MODELS = {"qwen3-30b-a3b": Deployment(dtype="fp8_block", tp=2, ep=2),
          "qwen3-next-80b-a3b": Deployment(dtype="fp8_block", tp=4, ep=4)}
SPECS = {m: load_model(m) for m in MODELS}
ACC = Acceptance.from_alpha(0.7)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(model=st.sampled_from(sorted(MODELS)), batch=st.integers(1, 300), gamma=st.integers(0, 6),
       engine=st.sampled_from(["trtllm", "sglang", "vllm"]), drafter=st.sampled_from(["eagle", "eagle3", "ngram"]),
       which=st.sampled_from(["graph_padding", "round_overheads"]))
def test_switching_an_overhead_off_never_slows_a_round(model, batch, gamma, engine, drafter, which):
    from dataclasses import replace
    dep = replace(MODELS[model], engine=engine)
    cache = StepCache()
    hw = bound(HW, dep)
    on = speculative(SPECS[model], hw, dep, [batch], [gamma], ACC, drafter, 1024, Mechanisms(), cache=cache)
    off = speculative(SPECS[model], hw, dep, [batch], [gamma], ACC, drafter, 1024,
                      Mechanisms().with_(**{which: "off"}), cache=cache)
    assert off.t_round[0, 0] <= on.t_round[0, 0] * (1 + 1e-12)


def test_gamma_zero_is_plain_decoding_exactly():
    dep = Deployment(dtype="fp8_block", tp=4, ep=4, engine="vllm")
    r = speculative(SPECS["qwen3-next-80b-a3b"], bound(HW, dep), dep, [1, 3, 77, 300], [0, 3], ACC, "eagle3", 1024)
    assert np.array_equal(r.t_round[0], r.t_decode) and np.all(r.speedup[0] == 1.0)


def test_gdn_checkpoints_only_for_linear_attention():
    dep = Deployment(dtype="fp8_block", tp=4, ep=4)
    nxt = speculative(SPECS["qwen3-next-80b-a3b"], HW, dep, [8], [3], ACC, "eagle", 1024)
    q30 = speculative(SPECS["qwen3-30b-a3b"], HW, Deployment(dtype="fp8_block", tp=2, ep=2), [8], [3], ACC)
    assert nxt.t_overhead[0, 0] > 0 and q30.t_overhead[0, 0] == 0


def test_padding_staircase_and_eager_cap():
    b, eager = graph_batch(_graphs("vllm"), [1, 3, 5, 128, 129], 4)  # tokens: multiples of 4 up to 512
    assert b.tolist() == [1, 4, 6, 128, 129] and eager.tolist() == [False, False, False, False, True]
    b, eager = graph_batch(_graphs("trtllm"), [3, 9, 128, 129], 4)  # requests: 1, 2, 4, 8, 16, ... 128
    assert b.tolist() == [4, 16, 128, 129] and eager.tolist() == [False, False, False, True]


def test_drafter_kinds():
    dep = Deployment(dtype="fp8_block", tp=2, ep=2)
    kw = dict(acceptance=ACC, context=1024)
    e1 = speculative(SPECS["qwen3-30b-a3b"], HW, dep, [1], [3], drafter="eagle", **kw)
    e3 = speculative(SPECS["qwen3-30b-a3b"], HW, dep, [1], [3], drafter="eagle3", **kw)
    ng = speculative(SPECS["qwen3-30b-a3b"], HW, dep, [1], [3], drafter="ngram", **kw)
    assert 0 < e3.t_draft_step[0] < e1.t_draft_step[0]  # 32k draft vocabulary vs the target's 151k
    assert ng.t_draft_step[0] == 0
    assert parse_drafter("ratio:0.1").ratio == 0.1


def test_engine_rates_give_the_logged_accept_length():
    u = [0.58, 0.34, 0.22, 0.15, 0.11]  # vLLM PR #24243 (MiniCPM3 EAGLE-3, 5 drafts): AL = 1 + Σ u_i = 2.40
    acc = Acceptance.from_engine_rates(u, temperature=0.0)
    assert np.allclose(acc.accept_length([0, 1, 5]), [1.0, 1.58, 1 + sum(u)])


def test_context_term_in_draft_and_verify():
    dep = Deployment(dtype="fp8_block", tp=2, ep=2)
    short = speculative(SPECS["qwen3-30b-a3b"], HW, dep, [16], [3], ACC, "eagle", 512)
    long = speculative(SPECS["qwen3-30b-a3b"], HW, dep, [16], [3], ACC, "eagle", 32768)
    assert long.t_verify[0, 0] > short.t_verify[0, 0] and long.t_draft_step[0] > short.t_draft_step[0]


def test_capture_lists_are_profile_parameters():
    """The capture sizes come from the profile's engine block (one home): every engine of every bundled profile
    states them, and an edited list changes the padded pass."""
    from dataclasses import replace

    from simulator.specs.catalog import bundled_files
    from simulator.specs.engine import GraphCapture

    for name in bundled_files("hardware"):
        hw = load_hardware(name)
        for e in hw.engines:
            g = load_engine(e).default.graphs
            assert g is not None and g.sizes[0] == 1 and g.unit in ("tokens", "requests"), (name, e)
    assert _graphs("vllm").unit == "tokens" and _graphs("vllm").cap == 512
    dep = Deployment(dtype="fp8_block", tp=2, ep=2)
    model = load_model("qwen3-30b-a3b")
    base = speculative(model, HW, dep, [5], [3], ACC, "eagle", 1024)
    spec = HW.engine_spec
    coarse = replace(HW, engine_spec=replace(spec, graphs=GraphCapture((1, 64), "requests")))
    padded = speculative(model, coarse, dep, [5], [3], ACC, "eagle", 1024)  # 5 -> 64 per rank: slower
    assert padded.t_round[0, 0] > base.t_round[0, 0]
    none = replace(HW, engine_spec=replace(spec, graphs=None))
    off = speculative(model, HW, dep, [5], [3], ACC, "eagle", 1024, Mechanisms(graph_padding="off"))
    np.testing.assert_allclose(speculative(model, none, dep, [5], [3], ACC, "eagle", 1024).t_round, off.t_round)


def test_bad_capture_list_is_one_line():
    import pytest
    import yaml

    from simulator.errors import SimulatorError
    from simulator.specs.catalog import bundled_files
    from simulator.specs.engine_file import read_engine
    from simulator.specs.hardware import read_hardware

    obj = yaml.safe_load(bundled_files("engines")["sglang"].read_text())
    obj["graphs"]["sizes"] = [4, 2]
    with pytest.raises(SimulatorError, match="graphs.sizes"):
        read_engine(obj, "x.yaml")
    obj["graphs"] = {"sizes": [1, 2], "unit": "tokens"}
    with pytest.raises(SimulatorError, match="source"):
        read_engine(obj, "x.yaml")
    hw = yaml.safe_load(bundled_files("hardware")["h100-sxm"].read_text())
    hw["kernels"]["graphs"] = {"sizes": [1, 2], "unit": "tokens", "source": "A1"}
    with pytest.raises(SimulatorError, match="kernels.graphs.*engine fact.*engines/<engine>.yaml"):
        read_hardware(hw, "x.yaml")


def test_input_projections_are_priced():
    """EAGLE-3's fc (3H -> H) once per round over the verified tokens, MTP's eh_proj (2H -> H) in every pass
    (docs/MODEL.md §4.2); a 1-wide tree still equals the chain with them; gamma = 0 has no projection."""
    from dataclasses import replace

    from simulator.specdec.drafters import input_projection_time
    from simulator.specdec.tree import chain_parents, speculative_tree

    target = load_model("qwen3-30b-a3b")
    dep = Deployment(dtype="fp8_block", tp=2, ep=2)
    e3 = speculative(target, HW, dep, [1, 16], [0, 3], ACC, "eagle3", 1024)
    assert np.all(e3.t_fuse[0] == 0) and np.all(e3.t_fuse[1] > 0)
    assert np.array_equal(e3.t_round[0], e3.t_step)
    np.testing.assert_allclose(e3.t_draft[1], 3 * e3.t_draft_step + e3.t_fuse[1] + e3.t_extend[1])
    mtp = parse_drafter("mtp")
    spec = replace(target, layers=1)
    proj = input_projection_time(mtp, target, spec, HW, dep, np.array([1.0, 16.0]), Mechanisms())
    assert np.all(proj > 0)
    for d in ("eagle3", "mtp"):
        chain = speculative(target, HW, dep, [1, 16], [3], ACC, d, 1024)
        tree = speculative_tree(target, HW, dep, [1, 16], chain_parents(3), ACC, d, 1024)
        np.testing.assert_allclose(tree.t_round, chain.t_round[0], rtol=1e-12)


def test_bundled_eagle3_heads_load_and_price():
    d = parse_drafter("eagle3:gpt-oss-120b-eagle3")
    assert d.kind == "eagle3" and d.label == "eagle3:gpt-oss-120b-eagle3"
    target = load_model("gpt-oss-120b")
    r = speculative(target, HW, Deployment(dtype="mxfp4", tp=8, ep=8), [1], [3], ACC, d, 1024)
    assert r.t_fuse[0, 0] > 0 and r.drafter_dep.dtype == "bf16"
    for name in ("gpt-oss-120b-eagle3", "kimi-k2-eagle3", "deepseek-v3-eagle3"):
        head = load_model(name)
        assert head.role == "drafter" and head.layers == 1 and head.vocab_size == 32000


def test_draft_host_overhead_is_a_profile_parameter():
    """kernels.step.draft_host_overhead replaces a target step's host cost in every draft pass (one home: the
    profile); the bundled value equals host_overhead (assumed), so stating it changes nothing until edited."""
    from dataclasses import replace
    from types import MappingProxyType

    target = load_model("qwen3-30b-a3b")
    dep = Deployment(dtype="fp8_block", tp=2, ep=2)
    step = dict(HW.kernels.step)
    assert step["draft_host_overhead"] == step["host_overhead"]
    base = speculative(target, HW, dep, [1, 8], [3], ACC, "eagle", 1024)
    step["draft_host_overhead"] = step["host_overhead"] - 20e-6
    cheap = replace(HW, kernels=replace(HW.kernels, step=MappingProxyType(step)))
    r = speculative(target, cheap, dep, [1, 8], [3], ACC, "eagle", 1024)
    np.testing.assert_allclose(base.t_draft_step - r.t_draft_step, 20e-6, rtol=1e-9)
    np.testing.assert_allclose(r.t_decode, base.t_decode)  # target passes keep host_overhead
    off = speculative(target, cheap, dep, [1, 8], [3], ACC, "eagle", 1024, Mechanisms(fixed_costs="off"))
    ref = speculative(target, HW, dep, [1, 8], [3], ACC, "eagle", 1024, Mechanisms(fixed_costs="off"))
    np.testing.assert_allclose(off.t_round, ref.t_round)  # a fixed cost: gone with fixed costs off


def test_gdn_checkpoints_over_draft_lengths_at_once():
    """T_gdn for an array of drafted counts is a row per count, each the scalar call's, linear in γ and 0 at γ = 0
    (docs/MODEL.md: T_gdn(B, γ) = γ · n_linear · ...)."""
    from simulator.specdec.overheads import gdn_checkpoint_time
    dep = Deployment(dtype="fp8_block", tp=4, ep=4, engine="vllm")
    b = np.array([1.0, 8.0, 64.0])
    rows = gdn_checkpoint_time(SPECS["qwen3-next-80b-a3b"], HW, dep, b, np.array([0, 1, 3]), Mechanisms())
    assert rows.shape == (3, 3) and not rows[0].any() and (rows[1] > 0).all()
    for g, row in zip((0, 1, 3), rows, strict=True):
        np.testing.assert_array_equal(row, gdn_checkpoint_time(SPECS["qwen3-next-80b-a3b"], HW, dep, b, g,
                                                               Mechanisms()))
    np.testing.assert_allclose(rows[2], 3 * rows[1], rtol=1e-12)


def test_padded_batches_memo_is_read_only_and_per_grid():
    """The memoised padding gives each grid its own answer (the scalar graph_batch's) and cannot be altered."""
    import pytest

    from simulator.specdec.overheads import _padded_batches
    g = _graphs("sglang")
    for batch in ([3.0, 9.0, 300.0], [5.0, 9.0, 300.0]):
        b = np.array(batch)
        padded, eager = _padded_batches(g, b, np.full(3, 4.0), np.zeros(3, dtype=bool))
        want = [graph_batch(g, [x], 4)[0][0] for x in batch]
        assert padded.tolist() == want
        with pytest.raises(ValueError):
            padded[0] = 1.0
