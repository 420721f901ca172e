"""Routing statistics by depth (by_layer) and group-limited routing in the YAML readers; the per-layer writer."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from simulator.cost.deployment import Deployment
from simulator.cost.step import step_time
from simulator.errors import ConfigError, ParameterError
from simulator.specs.catalog import load_hardware, load_model, load_routing_profile
from simulator.specs.model import read_model
from simulator.traces import Trace
from simulator.traces.layer_profile import layer_profile_from_trace, write_routing_profile

ROOT = Path(__file__).resolve().parents[2]
QWEN = yaml.safe_load((ROOT / "models/qwen3-30b-a3b.yaml").read_text())  # 48 MoE layers, cohere-128x8
DSV3 = yaml.safe_load((ROOT / "models/deepseek-v3.yaml").read_text())  # 256 experts, 8 groups, top-4 groups


def _inline(obj, by_layer):
    obj["routing_overlap"] = {"source": obj["ffn"]["source"], "lags": [0.38, 0.33], "popularity": "skew:0.118",
                              "by_layer": by_layer}


def _error(base, mutate) -> str:
    obj = copy.deepcopy(base)
    mutate(obj)
    with pytest.raises(ConfigError) as err:
        read_model(obj, "bad.yaml", load_routing_profile)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("bad.yaml: ")
    return msg


def test_thirds_and_per_layer_read():
    obj = copy.deepcopy(QWEN)
    _inline(obj, {"split": "thirds", "layers": [{"lags": [0.32]}, {"lags": [0.5], "popularity": "uniform"},
                                                {"lags": [0.25]}]})
    m = read_model(obj, "m.yaml", load_routing_profile)
    assert [x.lags for x in m.overlap.by_layer.layers] == [(0.32,), (0.5,), (0.25,)]
    assert [x.popularity for x in m.overlap.by_layer.layers] == ["skew:0.118", "uniform", "skew:0.118"]
    assert m.overlap.by_layer.segments(6) == (0, 0, 1, 1, 2, 2)


@pytest.mark.parametrize("mutate, fragments", [
    (lambda o: _inline(o, {"split": "per_layer", "layers": [{"lags": [0.3]}] * 47}),
     ("47 per-layer entries", "48 MoE layers")),
    (lambda o: _inline(o, {"split": "thirds", "layers": [{"lags": [0.3]}] * 2}), ("by_layer.layers", "3 entries")),
    (lambda o: _inline(o, {"split": "halves", "layers": [{"lags": [0.3]}]}), ("by_layer.split", "halves")),
    (lambda o: _inline(o, {"split": "thirds", "layers": [{"lags": [38.0]}] * 3}), ("layers[0].lags", "fractions")),
    (lambda o: o["routing_overlap"].update(by_layer={"split": "thirds", "layers": []}), ("together with profile",)),
])
def test_bad_depth_profiles_are_one_line(mutate, fragments):
    msg = _error(QWEN, mutate)
    assert all(f in msg for f in fragments), msg


@pytest.mark.parametrize("mutate, fragments", [
    (lambda o: o["ffn"].update(n_group=7), ("ffn.n_group", "7", "does not divide")),
    (lambda o: o["ffn"].update(topk_group=9), ("ffn.topk_group", "9", "topk_group <= n_group")),
    (lambda o: o["ffn"].update(topk_group=0), ("ffn.topk_group",)),
    (lambda o: o["ffn"].update(experts=16, n_group=8, topk_group=2), ("ffn.topk_group", "top_k = 8", "raise")),
    (lambda o: o["ffn"].update(n_group=16, topk_group=8), ("ffn.n_group", "at most 12")),
])
def test_bad_group_limited_routing_is_one_line(mutate, fragments):
    msg = _error(DSV3, mutate)
    assert all(f in msg for f in fragments), msg


def test_bad_model_through_the_cli(tmp_path):
    obj = copy.deepcopy(DSV3)
    obj["ffn"]["n_group"] = 7
    path = tmp_path / "bad-groups.yaml"
    path.write_text(yaml.safe_dump(obj))
    r = subprocess.run([sys.executable, "-m", "simulator", "step", "--model", str(path), "--hardware", "h200-sxm",
                        "--tp", "8", "--ep", "8", "--batch", "1", "--tokens", "1"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 2 and "n_group" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def _layered_trace(layers: int, seed: int = 0) -> Trace:
    """A small trace whose layers differ: layer ℓ repeats the previous token's experts with probability s_ℓ."""
    rng = np.random.default_rng(seed)
    seqs, tokens, experts, k = 24, 40, 32, 4
    stick = np.linspace(0.2, 0.7, layers)
    ids = np.empty((seqs, tokens, layers, k), dtype=np.int64)
    for ell in range(layers):
        cur = np.array([rng.choice(experts, k, replace=False) for _ in range(seqs)])
        for t in range(tokens):
            fresh = np.array([rng.choice(experts, k, replace=False) for _ in range(seqs)])
            keep = rng.random(seqs) < stick[ell]
            cur = np.where(keep[:, None], cur, fresh)
            ids[:, t, ell] = cur
    return Trace(ids, experts, "test")


def test_layer_profile_from_trace_round_trips_and_orders_layers(tmp_path):
    trace = _layered_trace(6)
    prof = layer_profile_from_trace(trace, name="t6", source="synthetic test trace")
    path = tmp_path / "t6.yaml"
    write_routing_profile(prof, str(path))
    back = load_routing_profile(str(path))
    assert back.by_layer.split == "thirds" and len(back.by_layer.layers) == 3
    o1 = [x.lags[0] for x in back.by_layer.layers]
    assert o1[0] < o1[1] < o1[2]  # stickier layers deeper in this trace
    assert back.lags[0] == pytest.approx(np.mean(o1), abs=2e-4)
    per = layer_profile_from_trace(trace, name="p", source="x", split="per_layer")
    assert len(per["by_layer"]["layers"]) == 6
    with pytest.raises(ParameterError, match="'split'"):
        layer_profile_from_trace(_layered_trace(2), name="x", source="x")


def test_a_model_priced_with_a_written_profile(tmp_path):
    """A user model referencing a per-layer profile by path: each third priced from its own statistics."""
    trace = _layered_trace(3)
    prof = layer_profile_from_trace(trace, name="t3", source="synthetic test trace")
    prof["experts"], prof["top_k"] = 128, 8  # reuse the statistics on a 128/8 model (test only)
    path = tmp_path / "t3.yaml"
    write_routing_profile(prof, str(path))
    obj = copy.deepcopy(QWEN)
    obj["routing_overlap"] = {"profile": str(path)}
    mpath = tmp_path / "m.yaml"
    mpath.write_text(yaml.safe_dump(obj))
    m = load_model(str(mpath))
    t = step_time(m, load_hardware("h100-sxm"), Deployment(tp=2, ep=2), [1, 4], 4, 1024).time
    assert np.all(np.isfinite(t)) and len(m.overlap.by_layer.layers) == 3


def test_overlap_fit_writes_a_profile_by_depth(tmp_path):
    from simulator.traces import write_trace

    trace_path, out = tmp_path / "t.npz", tmp_path / "deep.yaml"
    write_trace(_layered_trace(3), str(trace_path))
    base = [sys.executable, "-m", "simulator", "overlap", "fit", str(trace_path), "--samples", "50", "--json"]
    r = subprocess.run([*base, "--write-profile", str(out), "--profile-split", "per_layer"], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    prof = load_routing_profile(str(out))
    assert prof.name == "deep" and len(prof.by_layer.layers) == 3 and prof.experts == 32
    bad = subprocess.run([*base, "--write-profile", str(out / "x.yaml")], capture_output=True,  # under a file
                         text=True, cwd=ROOT)
    assert bad.returncode == 2 and "--write-profile: cannot write" in bad.stderr and "Traceback" not in bad.stderr
