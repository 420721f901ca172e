"""Serving-level speedup (simulator/specdec/serving.py, docs/MODEL.md §4.7): the steady-state equations against
synthetic affine step-time models, and the priced path (simulator/sweep/serving.py) on a bundled model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import SimulatorError
from simulator.specdec.serving import expected_rounds, iteration_time, occupancy, serving_point

# An affine step model T(B, s) = a + b·B·s (+ d per draft step in a round); every property below is stated for it.
coef = st.floats(1e-5, 1e-2)
conc = st.integers(1, 512)
isl_s = st.integers(0, 40000)
osl_s = st.integers(1, 20000)
al_s = st.floats(1.0, 6.0)


def _point(a, b, d, C, isl, osl, gamma, al, prefill="mixed", chunk=8192, caps=(None, None)):
    base = occupancy(C, isl, osl, 1.0, chunk, caps[0])
    sd = occupancy(C, isl, osl, al, chunk, caps[1])
    t = lambda B, s: a + b * B * s  # noqa: E731
    c = float(base.chunk_tokens)
    t_dec0 = t(base.decode_batch, 1)
    t_round = t(sd.decode_batch, gamma + 1) + gamma * d if gamma else t(sd.decode_batch, 1)
    step = al * t(C, 1) / (t(C, gamma + 1) + gamma * d if gamma else t(C, 1))
    chunk = t(1, c) if prefill == "separate" else t(1, c) - t(1, 1)  # the linear model: c more rows, same weights
    return serving_point(base, sd, al, t_dec0, t_round, chunk, chunk, step, prefill)


@settings(max_examples=60, deadline=None)
@given(C=conc, isl=isl_s, osl=osl_s, al=al_s)
def test_slots_split_exactly(C, isl, osl, al):
    """B + f = C; SD frees slots sooner, so B_SD ≤ B_0; no prompt, no prefill."""
    base, sd = occupancy(C, isl, osl, 1.0), occupancy(C, isl, osl, al)
    for o in (base, sd):
        assert o.decode_batch + o.chunks == pytest.approx(C, rel=1e-12)
    assert sd.decode_batch <= base.decode_batch + 1e-9
    if isl == 0:
        assert sd.chunks == 0 and sd.decode_batch == C


@settings(max_examples=60, deadline=None)
@given(a=coef, b=coef, d=coef, C=conc, osl=osl_s, g=st.integers(1, 8), al=al_s)
def test_no_prompt_gives_the_step_level_speedup(a, b, d, C, osl, g, al):
    p = _point(a, b, d, C, 0, osl, g, min(al, g + 1))
    assert p.speedup_tpot == pytest.approx(p.step_speedup, rel=1e-12)
    assert p.speedup_throughput == pytest.approx(p.step_speedup, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(a=coef, b=coef, d=coef, C=conc, isl=st.integers(1, 40000), g=st.integers(1, 8), al=al_s)
def test_long_outputs_tend_to_the_step_level_speedup(a, b, d, C, isl, g, al):
    """The prompt's share of an iteration is at most f · T(1, c) / T(B, 1) ≤ scale / OSL: the gap to the step-level
    speedup shrinks with OSL and is below 1e-3 once OSL is 1e6 × that scale."""
    al = min(al, g + 1)
    occ = occupancy(C, isl, 1.0, 1.0)
    scale = float(occ.chunks_per_request) * C * (a + b * float(occ.chunk_tokens)) / (a + b * C) * (g + 1)
    gaps = []
    for k in (1e2, 1e4, 1e6):
        p = _point(a, b, d, C, isl, scale * k, g, al)
        gaps.append(abs(p.speedup_throughput / p.step_speedup - 1))
    assert gaps[2] <= gaps[1] + 1e-12 and gaps[1] <= gaps[0] + 1e-12
    assert gaps[2] < 1e-3


@settings(max_examples=40, deadline=None)
@given(a=coef, b=coef, C=conc, isl=isl_s, osl=osl_s, prefill=st.sampled_from(["mixed", "separate"]))
def test_no_drafting_is_plain_decoding(a, b, C, isl, osl, prefill):
    p = _point(a, b, 0.0, C, isl, osl, 0, 1.0, prefill)
    assert p.speedup_tpot == 1.0 and p.speedup_throughput == 1.0


@settings(max_examples=80, deadline=None)
@given(a=coef, b=coef, d=coef, C=conc, isl=st.integers(2, 40000), osl=osl_s, g=st.integers(1, 8), al=al_s,
       prefill=st.sampled_from(["mixed", "separate"]))
def test_serving_speedup_bounded_by_accept_length(a, b, d, C, isl, osl, g, al, prefill):
    """S_thr ≤ S_tpot ≤ AL when a prompt chunk (c ≥ 2 tokens) costs at least the decode rows it displaces."""
    al = min(al, g + 1)
    p = _point(a, b, d, C, isl, osl, g, al, prefill)
    assert p.speedup_throughput <= p.speedup_tpot * (1 + 1e-12)
    assert p.speedup_tpot <= al * (1 + 1e-12)
    # Little's law in the closed loop: latency = C · OSL / throughput, so the latency speedup is the throughput's
    assert p.latency_base * p.throughput_base == pytest.approx(C * osl, rel=1e-9)
    assert p.latency_base / p.latency_sd == pytest.approx(p.speedup_throughput, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(a=coef, b=coef, C=conc, isl=isl_s, osl=osl_s, al=al_s)
def test_mixed_prefill_never_costs_more_than_separate(a, b, C, isl, osl, al):
    occ = occupancy(C, isl, osl, al)
    t_chunk = a + b * float(occ.chunk_tokens)
    mixed = iteration_time(a + b * C, occ, t_chunk - (a + b), "mixed")
    sep = iteration_time(a + b * C, occ, t_chunk, "separate")
    assert mixed <= sep
    assert (mixed < sep) == bool(occ.chunks > 0)


def test_prefill_lowers_the_serving_speedup_of_a_winning_case():
    """A case where SD wins at step level (AL 3, verify ≈ decode): prompts that dwarf outputs pull the serving
    speedup below it, and the throughput speedup below the TPOT one (fewer SD slots decode)."""
    p = _point(1e-3, 1e-6, 1e-4, 64, 8000, 100, 3, 3.0)
    assert p.step_speedup > 2.0
    assert p.speedup_tpot < 0.8 * p.step_speedup
    assert p.speedup_throughput < p.speedup_tpot


@settings(max_examples=60, deadline=None)
@given(a=coef, b=coef, d=coef, C=conc, isl=isl_s, osl=osl_s, g=st.integers(1, 8), al=al_s,
       cap=st.floats(1.0, 600.0))
def test_a_running_cap_queues_the_rest(a, b, d, C, isl, osl, g, al, cap):
    """A cap at or above C changes nothing; below C only N = cap requests run, TPOT is that of N, and Little's law
    still gives latency · throughput = C · OSL; capping only the SD arm never raises its throughput speedup."""
    al = min(al, g + 1)
    free = _point(a, b, d, C, isl, osl, g, al)
    both = _point(a, b, d, C, isl, osl, g, al, caps=(cap, cap))
    if cap >= C:
        assert both.speedup_throughput == pytest.approx(free.speedup_throughput, rel=1e-12)
    else:
        assert both.sd.running == cap and both.base.decode_batch + both.base.chunks == pytest.approx(cap)
    for p in (free, both):
        assert p.latency_sd * p.throughput_sd == pytest.approx(C * osl, rel=1e-9)
    sd_only = _point(a, b, d, C, isl, osl, g, al, caps=(None, cap))
    assert sd_only.speedup_throughput <= free.speedup_throughput * (1 + 1e-12)


def test_bad_lengths_are_refused():
    with pytest.raises(SimulatorError, match="osl"):
        occupancy(4, 100, 0, 1.0)
    with pytest.raises(SimulatorError, match="accept_length"):
        occupancy(4, 100, 10, 0.5)
    with pytest.raises(SimulatorError, match="concurrency"):
        occupancy(0, 100, 10, 1.0)
    with pytest.raises(SimulatorError, match="prefill"):
        iteration_time(1.0, occupancy(4, 100, 10, 1.0), 1.0, "overlapped")


@pytest.fixture(scope="module")
def qwen():
    from simulator.pricing import resolve
    from simulator.specdec import Acceptance, StepCache

    acc = Acceptance.from_accept_length(2.5, 3)
    sc = resolve("qwen3-30b-a3b", "h100-sxm", dtype="bf16", tp=2, gpus=2, engine="sglang", acceptance=acc)
    return sc, StepCache()


def test_priced_serving_without_prompt_equals_the_step_level_speedup(qwen):
    from simulator.pricing import price
    from simulator.sweep.serving import decode_context, price_serving

    sc, cache = qwen
    s = price_serving(sc, 16, 0, 600, 3, cache=cache)
    direct = price(sc.edit(context=decode_context(0, 600)), [16], [3], cache=cache)
    assert s.point.step_speedup == pytest.approx(float(direct.result.speedup[0, 0]), rel=1e-12)
    # a request's last round is cut at OSL: AL_served = OSL / E[rounds], a little below a round's AL
    assert s.round_accept_length == pytest.approx(2.5, rel=1e-9)
    assert 600 / (600 + 3) * 2.5 <= s.accept_length < 2.5
    assert float(s.point.speedup_throughput) == pytest.approx(
        float(s.point.step_speedup) * s.accept_length / s.round_accept_length, rel=1e-12)


def test_priced_serving_prompt_costs_and_gamma_zero(qwen):
    from simulator.sweep.serving import price_serving

    sc, cache = qwen
    s = price_serving(sc, 64, 4000, 200, 3, cache=cache, prefill="mixed", caps=(None, None))
    assert float(s.point.speedup_throughput) < float(s.point.speedup_tpot) < float(s.point.step_speedup)
    assert float(s.point.throughput_base) > 0 and s.as_dict()["prefill"] == "mixed"
    sep = price_serving(sc, 64, 4000, 200, 3, cache=cache, prefill="separate", caps=(None, None))
    assert float(sep.point.throughput_base) < float(s.point.throughput_base)
    # SGLang's defaults: prefill in its own iterations, an SD server runs at most 48 requests (the rest queue)
    eng = price_serving(sc, 64, 4000, 200, 3, cache=cache)
    assert eng.prefill == "separate" and float(eng.sd.running) == 48 and float(eng.base.running) == 64
    assert float(eng.point.throughput_sd) < float(sep.point.throughput_sd)
    z = price_serving(sc, 64, 4000, 200, 0, cache=cache)  # engine defaults: γ = 0 runs the plain server
    assert float(z.point.speedup_tpot) == 1.0 and float(z.point.speedup_throughput) == 1.0
    assert np.isfinite(float(z.point.tpot_base))
    with pytest.raises(SimulatorError, match="gamma"):
        price_serving(sc, 4, 100, 100, cache=cache)


def test_priced_serving_of_a_tree_uses_its_nodes(qwen):
    from simulator.sweep.serving import price_serving

    sc, cache = qwen
    t = price_serving(sc.edit(tree=(-1, 0, 0, 1, 2)), 8, 500, 300, cache=cache)
    assert t.gamma == 4 and 1 < t.accept_length <= 4
    assert t.step.result.t_round.shape == (1, t.grid.size)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=0, max_size=8), st.integers(1, 6000))
def test_expected_rounds_obey_walds_bounds(rates, n):
    """E[N(n)] rounds to produce n tokens, a round yielding X = 1 + accepted drafts (the last round cut at n): by
    Wald's identity n / AL <= E[N] <= (n + X_max - 1) / AL; one token takes one round."""
    survival = np.concatenate([[1.0], np.cumprod(rates)])
    al = float(survival.sum())
    e = expected_rounds(survival, n)
    assert n / al * (1 - 1e-9) <= e <= (n + survival.size - 1) / al * (1 + 1e-9)
    assert expected_rounds(survival, 1) == pytest.approx(1.0)


def test_one_output_token_gains_nothing_from_drafting(qwen):
    """OSL = 1: every round yields the one token a plain step does, so SD serves no faster (serve --osl 1)."""
    from simulator.sweep.serving import price_serving

    sc, cache = qwen
    s = price_serving(sc, 8, 256, 1, 3, cache=cache)
    assert s.accept_length == pytest.approx(1.0) and s.round_accept_length > 2
    assert float(s.point.speedup_throughput) < 1.0 < float(s.point.step_speedup)
