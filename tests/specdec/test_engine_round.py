"""SD rounds as engines run them (docs/MODEL.md §4.6): execution modes, draft-extend, round kernels, exposed host
time and the speedup band. Invariants: γ = 0 is plain decoding exactly in every mode; switching a round term off
never slows a round; low <= central <= high; host work grows with batch; a 1-wide tree equals the chain."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import invoke
from simulator.cost.deployment import PRESETS, Deployment
from simulator.pricing import bound
from simulator.specdec import Acceptance, StepCache, speculative
from simulator.specdec.engine_round import LEVELS, Band, exposed, overlap_modes
from simulator.specdec.tree import chain_parents, speculative_tree
from simulator.specs.catalog import ENGINES, engine_release, load_engine, load_hardware, load_model

MODEL = load_model("qwen3-30b-a3b")
HW = load_hardware("h100-sxm")
ACC = Acceptance.from_accept_length(2.4, 3)
CACHE = StepCache()
TERMS = ("draft_extend", "round_kernels", "host_time", "graph_padding", "round_overheads")
ONOFF = st.sampled_from(("on", "off"))


def _spec(engine, batch, gammas, mech=None, drafter="eagle", acc=ACC, **kw):
    dep = Deployment(dtype="fp8_block", tp=2, ep=2, engine=engine)
    return speculative(MODEL, bound(HW, dep), dep, batch, gammas, acc, drafter, 1024,
                       mech or PRESETS["refined"], cache=CACHE, **kw)


def test_engine_defaults_are_the_documented_modes():
    refined = PRESETS["refined"]
    sgl, vllm, trt = (engine_release(e) for e in ("sglang", "vllm", "trtllm"))
    assert overlap_modes(refined, sgl) == ("on", "on")  # spec v2 by default from 0.5.13 (chains)
    assert overlap_modes(refined, sgl, tree=True) == ("off", "on")  # spec v2 drafts chains only
    assert overlap_modes(refined, sgl, "ngram") == ("off", "on")  # n-gram never overlapped
    v1 = engine_release("sglang", "0.4")
    assert overlap_modes(refined, v1) == ("off", "on")  # spec v1 turns the overlap scheduler off
    assert overlap_modes(refined, vllm) == ("on", "on")  # async scheduling with EAGLE/MTP from v0.14
    assert overlap_modes(refined, vllm, "ngram") == ("off", "on")  # not for n-gram (vllm PR #31998)
    assert overlap_modes(refined, trt) == ("on", "on")
    assert overlap_modes(refined.with_(sd_overlap="off", decode_overlap="off"), sgl) == ("off", "off")
    assert load_engine("vllm").releases[0].execution.sd_overlap == "off"  # before v0.14
    assert engine_release("vllm", "0.13").execution.decode_overlap == "off"
    for engine in ENGINES:  # every engine has a mode and sourced bands
        for name, band in vars(engine_release(engine).round).items():
            assert band.source, (engine, name)


def test_band_is_checked():
    with pytest.raises(ValueError):
        Band(2.0, 1.0, 3.0, "x")


@settings(max_examples=20, deadline=None)
@given(engine=st.sampled_from(ENGINES), sd=ONOFF, dec=ONOFF, b=st.integers(1, 256))
def test_gamma_zero_is_plain_decoding_in_every_mode(engine, sd, dec, b):
    r = _spec(engine, [b], [0, 3], PRESETS["refined"].with_(sd_overlap=sd, decode_overlap=dec))
    assert r.speedup[0, 0] == 1.0 and r.speedup_low[0, 0] == 1.0 and r.speedup_high[0, 0] == 1.0
    assert r.t_round[0, 0] == r.t_decode[0] + r.t_host_decode[0]
    assert r.sd_overlap == sd and r.decode_overlap == dec


@settings(max_examples=25, deadline=None)
@given(engine=st.sampled_from(ENGINES), term=st.sampled_from(TERMS), sd=ONOFF, b=st.integers(1, 256),
       g=st.integers(1, 6), drafter=st.sampled_from(("eagle", "eagle3", "mtp", "ratio:0.1")))
def test_switching_a_round_term_off_never_slows_a_round(engine, term, sd, b, g, drafter):
    on = PRESETS["refined"].with_(sd_overlap=sd)
    off = on.with_(**{term: "off"})
    r_on, r_off = _spec(engine, [b], [g], on, drafter), _spec(engine, [b], [g], off, drafter)
    assert np.all(r_off.t_round <= r_on.t_round * (1 + 1e-12))
    assert np.all(r_off.t_round_high <= r_on.t_round_high * (1 + 1e-12))


@settings(max_examples=25, deadline=None)
@given(engine=st.sampled_from(ENGINES), sd=ONOFF, dec=ONOFF, g=st.integers(1, 8),
       drafter=st.sampled_from(("eagle", "eagle3", "mtp", "ngram")))
def test_low_central_high_are_ordered(engine, sd, dec, g, drafter):
    r = _spec(engine, [1, 16, 256], [0, g], PRESETS["refined"].with_(sd_overlap=sd, decode_overlap=dec), drafter)
    assert np.all(r.speedup_low <= r.speedup) and np.all(r.speedup <= r.speedup_high)
    assert np.all(r.t_round_low <= r.t_round) and np.all(r.t_round <= r.t_round_high)
    # the ranged terms have public ranges wider than a point: the band is open where SD runs
    assert np.all(r.speedup_low[1] < r.speedup_high[1])


def test_acceptance_band_widens_the_speedup_band():
    lo, hi = Acceptance.from_accept_length(1.9, 3), Acceptance.from_accept_length(2.9, 3)
    plain = _spec("sglang", [1, 32], [3])
    banded = _spec("sglang", [1, 32], [3], acceptance_band=(lo, hi))
    assert np.all(banded.speedup_low < plain.speedup_low) and np.all(banded.speedup_high > plain.speedup_high)
    np.testing.assert_array_equal(banded.speedup, plain.speedup)


@settings(max_examples=20, deadline=None)
@given(engine=st.sampled_from(ENGINES), b1=st.integers(1, 256), b2=st.integers(1, 256), g=st.integers(1, 6))
def test_host_time_grows_with_batch(engine, b1, b2, g):
    """Host work (requests, accepted tokens) and the round kernels never fall with batch; with the mode's overlap
    off the host work is exposed in full, so the exposed host time never falls either. (With overlap on, the
    exposed part max(0, H − G) may fall as the GPU time grows: that is what hiding means.)"""
    lo, hi = sorted((b1, b2))
    mech = PRESETS["refined"].with_(sd_overlap="off", decode_overlap="off", graph_padding="off")
    r = _spec(engine, [lo, hi], [0, g], mech)
    assert r.t_host[1, 0] <= r.t_host[1, 1] * (1 + 1e-12)
    assert r.t_host_decode[0] <= r.t_host_decode[1] * (1 + 1e-12)
    assert r.t_kernels[1, 0] <= r.t_kernels[1, 1] * (1 + 1e-12)
    if hi >= 2 * lo:  # per-request and per-token host work is priced, not a constant
        assert r.t_host[1, 1] > r.t_host[1, 0]


def test_overlap_hides_host_time_up_to_the_gpu_time():
    h, gpu = np.array([0.5, 2.0]), np.array([1.0, 1.0])
    assert np.array_equal(exposed(h, gpu, "off"), h)
    assert np.array_equal(exposed(h, gpu, "on"), [0.0, 1.0])
    off = _spec("sglang", [1, 64], [3], PRESETS["refined"].with_(sd_overlap="off"))
    on = _spec("sglang", [1, 64], [3], PRESETS["refined"].with_(sd_overlap="on"))
    assert np.all(off.t_host > 0) and np.all(on.t_round < off.t_round)


def test_sglang_spec_v1_loses_more_with_batch_than_trtllm():
    """The exposed per-request host work of an SGLang v1 round makes its speedup fall faster with batch than
    TRT-LLM's overlapped one-model round (the engines' measured direction; nothing fitted)."""
    v1 = PRESETS["refined"].with_(sd_overlap="off")
    sgl, trt = _spec("sglang", [1, 128], [3], v1), _spec("trtllm", [1, 128], [3])
    assert np.all(sgl.speedup < trt.speedup)
    assert sgl.t_host[0, 1] > sgl.t_host[0, 0] > 0 and np.all(trt.t_host == 0)


@settings(max_examples=15, deadline=None)
@given(engine=st.sampled_from(ENGINES), sd=ONOFF, g=st.integers(1, 5), b=st.integers(1, 128))
def test_one_wide_tree_equals_the_chain(engine, sd, g, b):
    mech = PRESETS["refined"].with_(sd_overlap=sd)
    chain = _spec(engine, [b], [g], mech)
    dep = Deployment(dtype="fp8_block", tp=2, ep=2, engine=engine)
    tree = speculative_tree(MODEL, bound(HW, dep), dep, [b], chain_parents(g), ACC, "eagle", 1024, mech,
                            cache=CACHE).as_spec_result()
    for f in ("t_round", "speedup", "speedup_low", "speedup_high", "t_host", "t_kernels", "t_extend"):
        np.testing.assert_allclose(getattr(tree, f), getattr(chain, f), rtol=1e-12, err_msg=f)


def test_levels_are_the_three_ends():
    assert LEVELS == ("low", "central", "high")


def _run(argv):
    r = invoke(*argv)
    return r.returncode, r.stdout, r.stderr


def test_bad_mode_is_one_line_exit_2(tmp_path):
    for flag in ("--sd-overlap", "--decode-overlap", "--host-time"):
        rc, _, err = _run(["sweep", flag, "sometimes", "--out", str(tmp_path / "x")])
        assert rc == 2 and flag in err and len(err.strip().splitlines()) == 1


def test_a_profile_states_round_bands_per_engine():
    """kernels.round in an engine block replaces that engine's bands (public or FITTED); the other parameters keep
    theirs (the corpus fit's where it has one); a band out of order is one line naming the field."""
    from dataclasses import fields

    import yaml

    from simulator.errors import SimulatorError
    from simulator.specdec.engine_round import FITTED, RoundParams, round_params
    from simulator.specs.catalog import bundled_files
    from simulator.specs.hardware import read_hardware
    from simulator.specs.kernels import ROUND_KEYS

    assert [f.name for f in fields(RoundParams)] == list(ROUND_KEYS)
    obj = yaml.safe_load(bundled_files("hardware")["h100-sxm"].read_text())
    q = {"unit": "ms", "source": "assumed", "reason": "a test value for the override path"}
    obj["engines"]["sglang"]["kernels"]["round"] = {
        "round_host": {"low": {"value": 6, **q}, "central": {"value": 7, **q}, "high": {"value": 8, **q}}}
    raw = read_hardware(obj, "x.yaml")
    hw = raw.bind(engine_release("sglang"))
    p = round_params(hw)
    assert (p.round_host.low, p.round_host.central, p.round_host.high) == pytest.approx((6e-3, 7e-3, 8e-3))
    vllm = raw.bind(engine_release("vllm"))
    assert p.sync == engine_release("sglang").round.sync and round_params(vllm) == engine_release("vllm").round
    assert p.draft_step_offset == FITTED["sglang"]["draft_step_offset"]
    dep = Deployment(dtype="fp8_block", tp=2, ep=2, engine="sglang")
    slow = speculative(MODEL, hw, dep, [1], [3], ACC, "eagle", 1024)
    assert slow.t_round[0, 0] > _spec("sglang", [1], [3]).t_round[0, 0]
    obj["engines"]["sglang"]["kernels"]["round"]["round_host"]["low"]["value"] = 9
    with pytest.raises(SimulatorError, match="round.round_host"):
        read_hardware(obj, "x.yaml")


def test_an_acceptance_carrying_its_band_plugs_in():
    """A default acceptance with a public range (a ``band`` of (low, high) acceptances) widens the band without
    an explicit argument; an explicit band wins."""
    from types import SimpleNamespace

    from simulator.specdec.rounds import acceptance_band_of

    lo, hi = Acceptance.from_accept_length(1.9, 3), Acceptance.from_accept_length(2.9, 3)
    assert acceptance_band_of(SimpleNamespace(band=(lo, hi))) == (lo, hi)
    assert acceptance_band_of(ACC) == () and acceptance_band_of(ACC, (hi, hi)) == (hi, hi)


def test_explain_prices_the_mode_flags():
    """--sd-overlap on explain: every step priced in that mode (the walk's labels stay the walk's), and hiding the
    SGLang v1 round's host work raises the refined speedup."""
    import json

    runs = {}
    for mode in ("on", "off"):
        rc, out, _ = _run(["explain", "--model", "qwen3-30b-a3b", "--gpus", "2", "--engine", "sglang", "--json",
                           "--sd-overlap", mode])
        assert rc == 0
        runs[mode] = json.loads(out)["steps"]
    assert [s["name"] for s in runs["on"]] == [s["name"] for s in runs["off"]]
    assert not any("forced" in s["name"] for s in runs["on"])
    assert all(s["mechanisms"]["sd_overlap"] == "on" for s in runs["on"])
    assert runs["on"][-1]["speedup"] > runs["off"][-1]["speedup"]


def test_explain_names_the_mode_and_band():
    import json

    rc, out, _ = _run(["explain", "--model", "qwen3-30b-a3b", "--gpus", "2", "--engine", "sglang", "--json",
                       "--engine-version", "0.4"])
    assert rc == 0
    d = json.loads(out)
    e = d["engine"]
    assert (e["sd_overlap"], e["decode_overlap"]) == ("off", "on")
    assert e["speedup_low"] <= d["steps"][-1]["speedup"] <= e["speedup_high"] and e["speedup_low"] < e["speedup_high"]


def test_sglang_sd_server_captures_its_own_batch_list():
    """SGLang launched with SD captures 1..8, steps of 2 to 32, of 4 to 64, of 8 beyond (sd_sizes): a round's
    passes at B = 3 or 10 run unpadded, while the plain-decoding baseline pads to 4 and 12."""
    from simulator.specdec.overheads import graph_batch, padded_step

    hw = bound(HW, Deployment(engine="sglang"))
    g = hw.engine_spec.graphs
    assert graph_batch(g.for_round(True), [3, 10, 44, 70], 1)[0].tolist() == [3, 10, 44, 72]
    assert graph_batch(g.for_round(False), [3, 10, 44, 70], 1)[0].tolist() == [4, 12, 48, 72]
    trt = HW.engine_spec.graphs
    assert g.for_round(True) is not g and trt.for_round(True) is trt  # TRT-LLM: one list
    dep = Deployment(dtype="fp8_block", tp=2, ep=2, engine="sglang")
    mech = PRESETS["refined"]
    sd = padded_step(CACHE, MODEL, hw, dep, [3.0], 4, 1024, mech, None, True).time
    plain = padded_step(CACHE, MODEL, hw, dep, [3.0], 4, 1024, mech, None, False).time
    at3 = CACHE.step(MODEL, hw, dep, [3.0], 4, 1024, mech).time
    assert sd[0] == at3[0] and plain[0] > sd[0]
    r = _spec("sglang", [3], [0, 3])
    np.testing.assert_allclose(r.t_verify[1], at3)  # the round's verify: the SD list
    np.testing.assert_allclose(r.t_decode, padded_step(CACHE, MODEL, hw, dep, [3.0], 1, 1024, mech).time)


def test_the_default_acceptance_brings_its_public_band():
    """The drafter family's default acceptance (default_acceptance's central) widens speedup_low/high by the band
    every public log spans; a stated acceptance brings none; ngram has no default."""
    from simulator.specdec.acceptance import default_acceptance
    from simulator.specdec.rounds import acceptance_band_of

    d = default_acceptance("eagle", True)
    assert acceptance_band_of(d.central, None, "eagle", True) == (d.low, d.high)
    assert acceptance_band_of(Acceptance.from_alpha(0.7), None, "eagle", True) == ()
    assert acceptance_band_of(ACC, None, "ngram", True) == ()
    default = _spec("trtllm", [1, 64], [3], acc=d.central)
    explicit = _spec("trtllm", [1, 64], [3], acc=d.central, acceptance_band=(d.low, d.high))
    np.testing.assert_array_equal(default.speedup_high, explicit.speedup_high)
    assert np.all(default.speedup_high > _spec("trtllm", [1, 64], [3], acc=d.central, acceptance_band=()).speedup_high)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_host_term_for_an_instance_on_several_gpus(engine):
    """The host work of a round and of a plain step does not depend on the GPU count: SGLang's per-iteration TP
    step (scheduler.recv_requests: one broadcast_pyobj of a size tensor) is tens of µs, inside round_host's band,
    and no other engine code adds a host term per extra GPU (the former h_tp had no mechanism)."""
    from simulator.specdec.engine_round import round_terms

    mech = PRESETS["refined"].with_(sd_overlap="off", decode_overlap="off")
    hw = bound(HW, Deployment(engine=engine))

    def work(tp):
        dep = Deployment(tp=tp, engine=engine)
        t = round_terms(hw, dep, mech, [1, 8], [3], [2.4], np.full((1, 2), 5e-3), np.full(2, 4e-3), 32000, 151936)
        return t.work["central"], t.host_decode["central"]

    (r1, d1), (r2, d2) = work(1), work(2)
    np.testing.assert_array_equal(r1, r2)
    np.testing.assert_array_equal(d1, d2)


def test_the_draft_step_offset_is_never_hidden():
    """The fitted offset per draft step (no mechanism) is GPU-side: overlap does not hide it, it grows by one offset
    per draft step, and it is 0 with host_time off."""
    from simulator.specdec.engine_round import round_params, round_terms

    hw = bound(HW, Deployment(engine="sglang"))
    o = round_params(hw).draft_step_offset.central
    assert o > 0

    def kern(mech, g):
        t = round_terms(hw, Deployment(engine="sglang"), mech, [1], [g], [2.0], np.full((1, 1), 5e-3),
                        np.full(1, 4e-3), 32000, 151936)
        return t.kernels["central"][0, 0]

    ref = PRESETS["refined"]
    for sd in ("on", "off"):
        m = ref.with_(sd_overlap=sd)
        assert kern(m, 4) - kern(m, 3) == pytest.approx(o + (kern(m.with_(host_time="off"), 4)
                                                             - kern(m.with_(host_time="off"), 3)), rel=1e-9)
    assert kern(ref.with_(sd_overlap="on"), 3) == kern(ref.with_(sd_overlap="off"), 3)


@settings(max_examples=20, deadline=None)
@given(engine=st.sampled_from(ENGINES), sd=ONOFF, b=st.integers(1, 256), g=st.integers(1, 6))
def test_model_error_widens_the_band_where_sd_runs_only(engine, sd, b, g):
    """speedup_low / speedup_high = the parameter / acceptance band × exp(q_lo / q_hi) of MODEL_ERROR (the engine's,
    else POOLED) where γ >= 1; γ = 0 stays exactly 1; the central speedup is untouched and inside; another mechanism
    set than the validated (refined) one carries no model-error band."""
    from simulator.specdec import engine_round

    mech = PRESETS["refined"].with_(sd_overlap=sd)
    r = _spec(engine, [b], [0, g], mech)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine_round, "MODEL_ERROR", {k: (0.0, 0.0) for k in engine_round.MODEL_ERROR})
        r0 = _spec(engine, [b], [0, g], mech)
    q_lo, q_hi = engine_round.MODEL_ERROR.get(engine, engine_round.MODEL_ERROR[engine_round.POOLED])
    assert q_lo <= 0 < q_hi and r.model_error == (q_lo, q_hi)
    np.testing.assert_allclose(r.speedup_low[1], r0.speedup_low[1] * np.exp(q_lo), rtol=1e-12)
    np.testing.assert_allclose(r.speedup_high[1], r0.speedup_high[1] * np.exp(q_hi), rtol=1e-12)
    assert r.speedup_low[0, 0] == r.speedup_high[0, 0] == r.speedup[0, 0] == 1.0
    np.testing.assert_array_equal(r.speedup, r0.speedup)
    assert np.all(r.speedup_low <= r.speedup) and np.all(r.speedup <= r.speedup_high)
    assert engine_round.model_error(engine, mech.with_(round_kernels="off")) == (0.0, 0.0)
    assert engine_round.model_error(engine, PRESETS["prior"]) == (0.0, 0.0)
    off = _spec(engine, [b], [0, g], mech.with_(model_error="off"))  # the switch: the ranged terms' band alone
    assert off.model_error == (0.0, 0.0)
    for f in ("speedup", "speedup_low", "speedup_high"):
        np.testing.assert_array_equal(getattr(off, f), getattr(r0, f))


def test_engine_version_selects_its_documented_mode():
    """--engine-version: the releases are declared once (each engine file's ``releases:``) and each is one
    documented mode; vLLM 0.13 (before async scheduling under SD) runs rounds and steps without overlap, so its
    exposed host time is larger and its speedup differs from 0.14's; a version of another engine is one line."""
    from simulator.cli import invoke
    from simulator.cost.deployment import validate_options
    from simulator.errors import InfeasibleError

    assert load_engine("vllm").versions == ("0.13", "0.14")
    old = Deployment(dtype="fp8_block", tp=2, ep=2, engine="vllm", engine_version="0.13")
    assert overlap_modes(PRESETS["refined"], engine_release("vllm", "0.13"), "eagle") == ("off", "off")
    r13 = speculative(MODEL, bound(HW, old), old, [1, 32], [0, 3], ACC, "eagle", 1024, PRESETS["refined"],
                      cache=CACHE)
    r14 = _spec("vllm", [1, 32], [0, 3])
    assert r13.sd_overlap == "off" and r14.sd_overlap == "on"
    assert np.all(r13.t_host[1] > r14.t_host[1]) and not np.array_equal(r13.speedup, r14.speedup)
    assert "vllm 0.13" in old.label
    with pytest.raises(InfeasibleError, match="engine_version"):
        validate_options(MODEL, HW, Deployment(engine="sglang", engine_version="0.14"))
    bad = invoke("sweep", "--model", "qwen3-30b-a3b", "--engine", "sglang", "--engine-version", "0.14",
                 "--no-plots", "--quiet")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "engine_version" in bad.stderr


def test_a_stated_release_runs_its_documented_mode():
    """cost.deployment.version_key (EngineSpec.version_key): the newest documented release at or below a release as
    sources write it (the oldest for an older release; None for text without a leading version number)."""
    from simulator.cost.deployment import version_key
    assert version_key("vllm", "0.13.0") == "0.13" and version_key("vllm", "v0.14.1") == "0.14"
    assert version_key("vllm", "0.17.1") == "0.14" and version_key("vllm", "0.6.x (Oct 2024)") == "0.13"
    assert version_key("sglang", "0.5.6.post2") == "0.4" and version_key("trtllm", "1.2.0rc5") == "1.0"
    for text in ("V1 (April 2025)", "main (March 2025)", "fork tails-mpt/sglang 63291f7f51", ">= 0.5.2", ""):
        assert version_key("vllm", text) is None


def test_sd_corpus_rows_price_the_mode_of_their_release():
    """A vLLM 0.13.0 corpus row runs SD without async scheduling (its release's mode), not the newest default."""
    from simulator.validate.sd_corpus import read_corpus
    from simulator.validate.sd_speedup import predict_row
    rows = read_corpus()
    row = next(r for r in rows if r.id == "gpustack-v32-8xh200-vllm-c1000-thr")
    assert row.engine_version == "0.13.0" and row.overlap_scheduler == "unknown"
    res = predict_row(row, rows).result
    assert (res.sd_overlap, res.decode_overlap) == ("off", "off")


def test_sglang_forces_overlapped_sd_for_linear_attention_hybrids_chains_only():
    """SGLang enables spec v2 itself for Qwen3.5/Qwen3-Next-style hybrids (sglang PR #22908), chain drafting only:
    on a spec v1 release their chain rounds are overlapped by default, trees and other models keep spec v1."""
    sgl = engine_release("sglang", "0.4")
    refined = PRESETS["refined"]
    assert overlap_modes(refined, sgl, "eagle", hybrid=True) == ("on", "on")
    assert overlap_modes(refined, sgl, "eagle", hybrid=True, tree=True) == ("off", "on")
    assert overlap_modes(refined, sgl, "eagle", hybrid=False) == ("off", "on")
    assert overlap_modes(refined.with_(sd_overlap="off"), sgl, "eagle", hybrid=True) == ("off", "on")
    model = load_model("qwen3.5-397b-a17b")
    dep = Deployment(dtype="fp8_block", tp=8, ep=8, engine="sglang", engine_version="0.4")
    r = speculative(model, bound(load_hardware("h200-sxm"), dep), dep, [1], [3], ACC, "mtp", 1024,
                    refined, cache=CACHE)
    assert r.sd_overlap == "on"
