"""Round time and speedup: γ = 0 is plain decoding, speedup ≤ AL, Leviathan's formula, drafters."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.deployment import PRESETS, Deployment
from simulator.errors import ParameterError
from simulator.specdec import (
    Acceptance,
    Drafter,
    StepCache,
    best_gamma,
    drafter_deployment,
    eagle_head_spec,
    mtp_spec,
    parse_drafter,
    pays_up_to,
    rejection_time,
    round_time,
    speculative,
    speedup,
)
from simulator.specs import load_hardware, load_model, param_counts

H100 = load_hardware("h100-sxm")
BATCH = [1, 2, 8, 32, 128]
GAMMAS = [0, 1, 2, 3, 5, 8]
ACC = Acceptance.from_alpha(0.7)
SMALL = ("olmoe-1b-7b", "qwen3-30b-a3b", "mixtral-8x7b")


def _dep(model, tp=2, ep=2):
    return Deployment(dtype="bf16", tp=tp, ep=ep)


@settings(max_examples=100, deadline=None)
@given(t=st.lists(st.floats(1e-5, 1.0), min_size=1, max_size=6), c=st.floats(0, 1), rej=st.floats(0, 1e-3),
       alpha=st.floats(0, 1))
def test_pure_round_gamma0_is_plain_decoding(t, c, rej, alpha):
    t_dec = np.asarray(t)
    g = np.array([0, 1, 4])
    t_ver = np.stack([t_dec, t_dec * 1.3, t_dec * 2.0])
    t_round = round_time(g, t_dec, t_ver, c * t_dec, np.where(g > 0, rej, 0.0)[:, None])
    spd = speedup(Acceptance.from_alpha(alpha).accept_length(g), t_dec, t_round)
    assert np.array_equal(t_round[0], t_dec)
    assert np.all(spd[0] == 1.0)


@settings(max_examples=100, deadline=None)
@given(alpha=st.floats(0, 0.99), c=st.floats(0, 1), gamma=st.integers(1, 10))
def test_leviathan_walltime_formula(alpha, c, gamma):
    """With T(B, γ+1) = T(B, 1) and no rejection cost the speedup is (1 − α^(γ+1)) / ((1 − α)(γc + 1))."""
    t_dec = np.array([1e-3, 5e-3])
    g = np.array([gamma])
    t_round = round_time(g, t_dec, t_dec[None, :], c * t_dec, 0.0)
    spd = speedup(Acceptance.from_alpha(alpha).accept_length(g), t_dec, t_round)
    expected = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))
    assert np.allclose(spd, expected, rtol=1e-12)


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("mode", ["prior", "refined"])
@pytest.mark.parametrize("drafter", ["eagle", "mtp", "ratio:0.1", "model:qwen3-0.6b"])
def test_engine_rounds_invariants(name, mode, drafter):
    m = load_model(name)
    r = speculative(m, H100, _dep(m), BATCH, GAMMAS, ACC, drafter, 512, PRESETS[mode])
    assert r.speedup.shape == (len(GAMMAS), len(BATCH))
    # γ = 0 reproduces plain decoding (with its exposed host time) exactly
    assert np.array_equal(r.t_round[0], r.t_step)
    assert np.all(r.speedup[0] == 1.0) and r.accept_length[0] == 1.0
    # a verify pass costs at least a decode step, so a round never yields more than AL tokens per decode step
    assert np.all(r.t_verify >= r.t_decode[None, :] * (1 - 1e-12))
    assert np.all(r.speedup <= r.accept_length[:, None] * (1 + 1e-12))
    # the pieces add up
    rebuilt = (r.gammas[:, None] * r.t_draft_step[None, :] + r.t_verify + r.t_reject[:, None] + r.t_fuse
               + r.t_overhead + r.t_extend + r.t_kernels + r.t_host)
    assert np.allclose(r.t_round[1:], rebuilt[1:], rtol=1e-12)
    assert np.allclose(r.tokens_per_s_total, r.tokens_per_s_request * r.batch[None, :])
    assert np.allclose(r.speedup, r.tokens_per_s_request * r.t_step[None, :])
    assert np.all(r.speedup_low <= r.speedup) and np.all(r.speedup <= r.speedup_high)


def test_ratio_drafter_and_rejection():
    m = load_model("qwen3-30b-a3b")
    mech = PRESETS["refined"]
    r = speculative(m, H100, _dep(m), BATCH, [0, 2], ACC, Drafter("ratio", ratio=0.25), 0, mech)
    assert np.allclose(r.t_draft_step, 0.25 * r.t_decode)
    assert r.t_reject[0] == 0.0 and r.t_reject[1] == rejection_time(H100, mech)
    assert rejection_time(H100, PRESETS["refined"].with_(fixed_costs="off")) == 0.0


def test_more_expensive_drafter_lowers_speedup():
    m = load_model("olmoe-1b-7b")
    cache = StepCache()
    cheap = speculative(m, H100, _dep(m), BATCH, [3], ACC, "ratio:0.02", 0, PRESETS["refined"], cache=cache)
    dear = speculative(m, H100, _dep(m), BATCH, [3], ACC, "ratio:0.5", 0, PRESETS["refined"], cache=cache)
    assert np.all(dear.speedup < cheap.speedup)
    assert cache.hits > 0


def test_eagle_and_mtp_specs():
    t = load_model("qwen3-235b-a22b")
    e, p = eagle_head_spec(t), mtp_spec(t)
    for s in (e, p):
        assert s.layers == 1 and s.hidden_size == t.hidden_size and s.vocab_size == t.vocab_size
        assert s.attention.q_heads == t.attention.q_heads and s.attention.layer_pattern == ("full",)
    assert not e.ffn.is_moe and e.ffn.dense_intermediate == 3 * t.hidden_size
    assert p.ffn.is_moe and p.ffn.experts == t.ffn.experts and p.is_moe_layer(0)
    # a dense target's dense width is kept; MLA and linear-attention targets give full-attention heads
    assert eagle_head_spec(load_model("deepseek-v2")).ffn.dense_intermediate == 12288
    nxt = eagle_head_spec(load_model("qwen3-next-80b-a3b"))
    assert nxt.attention.linear is None and nxt.attention.layer_pattern == ("full",)
    assert [nxt.layer_kind(0)] == ["full"]
    assert param_counts(e).total < param_counts(t).total / 50


def test_drafter_deployments():
    t = load_model("qwen3-235b-a22b")
    dep = Deployment(dtype="fp8_block", tp=8, ep=8)
    q2 = load_model("qwen2-0.5b")  # 14 heads: tp 8 is impossible, so tp 2 × dp 4 on the same 8 GPUs
    d = drafter_deployment(Drafter("model", "qwen2-0.5b"), q2, dep, H100)
    assert (d.tp, d.dp, d.gpus, d.dtype) == (2, 4, 8, "bf16")
    assert drafter_deployment(Drafter("mtp"), mtp_spec(t), dep, H100) == dep
    de = drafter_deployment(Drafter("eagle"), eagle_head_spec(t), dep, H100)
    assert (de.tp, de.ep, de.dtype) == (8, 1, "bf16")


def test_eagle_step_cheaper_than_target_step():
    t = load_model("qwen3-235b-a22b")
    dep = Deployment(dtype="fp8_block", tp=8, ep=8)
    for mode in ("prior", "refined"):
        r = speculative(t, H100, dep, BATCH, [1], ACC, "eagle", 1024, PRESETS[mode])
        assert np.all(r.t_draft_step < 0.2 * r.t_decode)


@pytest.mark.parametrize("text", ["", "foo", "model:", "ratio:x", "ratio:-1", "eagle:3"])
def test_bad_drafter(text):
    with pytest.raises(ParameterError) as exc:
        parse_drafter(text)
    assert "\n" not in str(exc.value)


def test_parse_drafter():
    assert parse_drafter("eagle") == Drafter("eagle")
    assert parse_drafter("model:qwen3-0.6b").model == "qwen3-0.6b"
    assert parse_drafter("ratio:0.05").ratio == 0.05
    assert parse_drafter("ratio:0.05").label == "ratio:0.05"


def test_best_gamma_and_pays_up_to():
    g = np.array([0, 1, 2, 3])
    spd = np.array([[1.0, 1.0, 1.0], [1.4, 1.1, 0.8], [1.6, 1.05, 0.7], [1.5, 0.9, 0.6]])
    best, s = best_gamma(g, spd)
    assert best.tolist() == [2, 1, 1] and np.allclose(s, [1.6, 1.1, 0.8])
    assert pays_up_to([1, 8, 64], s) == 8
    assert pays_up_to([1, 8], [0.9, 0.8]) is None


@pytest.mark.parametrize("batch,gammas", [([0, 1], [1]), ([1.5], [1]), ([1], [-1]), ([1], [])])
def test_bad_grids(batch, gammas):
    m = load_model("olmoe-1b-7b")
    with pytest.raises(ParameterError) as exc:
        speculative(m, H100, _dep(m), batch, gammas, ACC)
    assert exc.value.param == ("batch" if batch != [1] else "gammas") and exc.value.owner == "speculative"
    assert "--" not in str(exc.value)  # library errors name library parameters, never CLI flags
