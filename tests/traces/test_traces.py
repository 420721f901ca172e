import json

import numpy as np
import pytest

from simulator.errors import ParameterError
from simulator.traces import (
    empirical_unique,
    evaluate_trace,
    layer_stats,
    read_trace,
    synth_trace,
    validate_routing,
    write_trace,
)


def _small():
    # 2 sequences x 4 tokens x 1 layer, k = 2, E = 4
    return np.array([[[0, 1], [0, 2], [0, 1], [3, 2]], [[1, 2], [1, 2], [0, 3], [0, 3]]])


def test_stats_by_hand():
    trace = validate_routing(_small(), 4)
    s = layer_stats(trace, 0, max_lag=2, window=2)
    x = np.zeros((2, 4, 4), bool)
    for i in range(2):
        for t in range(4):
            x[i, t, _small()[i, t]] = True
    assert np.allclose(s.popularity, x.mean(axis=(0, 1)))
    assert s.popularity.sum() == pytest.approx(2)
    lag1 = np.mean(x & np.roll(x, -1, axis=1), axis=(0, 1))  # circular within each sequence
    assert np.allclose(s.pair_probs[:, 0], lag1)
    assert np.allclose(s.window[:, 3], lag1)  # pattern 11 of the 2-token windows
    assert s.overlaps[0] == pytest.approx(lag1.sum() / 2)


@pytest.mark.parametrize("ext", [".npy", ".npz", ".jsonl"])
def test_write_read_roundtrip(tmp_path, ext):
    trace = synth_trace(16, 2, 3, 12, layers=2, persistence=0.7, seed=5)
    path = tmp_path / f"t{ext}"
    write_trace(trace, str(path))
    back = read_trace(str(path))
    assert np.array_equal(back.experts, trace.experts)
    assert back.num_experts == (16 if ext == ".npz" else int(trace.experts.max()) + 1)


def test_synth_is_deterministic_and_respects_its_knobs():
    a = synth_trace(32, 4, 8, 64, seed=11, persistence=0.9, skew=0.3)
    b = synth_trace(32, 4, 8, 64, seed=11, persistence=0.9, skew=0.3)
    c = synth_trace(32, 4, 8, 64, seed=12, persistence=0.9, skew=0.3)
    assert np.array_equal(a.experts, b.experts) and not np.array_equal(a.experts, c.experts)
    slow = layer_stats(synth_trace(32, 4, 32, 128, persistence=0.95, seed=1), 0, max_lag=1)
    fast = layer_stats(synth_trace(32, 4, 32, 128, persistence=0.0, seed=1), 0, max_lag=1)
    assert slow.overlaps[0] > fast.overlaps[0] + 0.2
    skewed = layer_stats(synth_trace(64, 4, 64, 64, persistence=0.0, skew=0.2, seed=2), 0, max_lag=1)
    assert skewed.skew == pytest.approx(0.2, rel=0.1)


@pytest.mark.parametrize(
    "array,text",
    [
        (np.zeros((2, 3)), "shaped"),
        (np.array([[[0, 1], [1, 1]]]), "twice"),
        (np.array([[[0, 1], [1, 9]]]), "outside"),
        (np.array([[[0, -1], [1, 2]]]), "negative"),
        (np.array([[[0.5, 1], [1, 2]]]), "integers"),
        (np.array([[[0, 1]]]), "2 tokens"),
    ],
)
def test_bad_arrays_are_rejected(array, text):
    with pytest.raises(ParameterError, match=text) as err:
        validate_routing(array, 4)
    assert "\n" not in str(err.value)


def _jsonl(tmp_path, records):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def test_jsonl_validation(tmp_path):
    ok = [{"seq": 0, "token": t, "experts": [t % 3, 3]} for t in range(3)]
    assert read_trace(_jsonl(tmp_path, ok)).experts.shape == (1, 3, 1, 2)
    missing = [r for r in ok if r["token"] != 1]
    with pytest.raises(ParameterError, match="missing token 1"):
        read_trace(_jsonl(tmp_path, missing))
    with pytest.raises(ParameterError, match="duplicate record"):
        read_trace(_jsonl(tmp_path, ok + ok[:1]))
    with pytest.raises(ParameterError, match="missing field 'experts'"):
        read_trace(_jsonl(tmp_path, [{"seq": 0, "token": 0}]))
    with pytest.raises(ParameterError, match="same k"):
        read_trace(_jsonl(tmp_path, ok + [{"seq": 1, "token": 0, "experts": [1]}]))
    with pytest.raises(ParameterError, match="twice"):
        read_trace(_jsonl(tmp_path, [{"seq": 0, "token": t, "experts": [2, 2]} for t in range(2)]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(ParameterError, match="line 1"):
        read_trace(str(bad))
    with pytest.raises(ParameterError, match="outside"):
        read_trace(_jsonl(tmp_path, ok), num_experts=3)
    other = tmp_path / "t.csv"
    other.write_text("0,1\n")
    with pytest.raises(ParameterError, match="unknown trace format"):
        read_trace(str(other))


def test_ragged_jsonl_is_truncated_with_a_warning(tmp_path):
    recs = [{"seq": 0, "token": t, "experts": [0]} for t in range(4)] + [
        {"seq": 1, "token": t, "experts": [1]} for t in range(3)]
    with pytest.warns(UserWarning, match="different lengths"):
        assert read_trace(_jsonl(tmp_path, recs)).tokens == 3


def test_empirical_unique_is_seeded_and_exact_on_a_constant_trace():
    const = validate_routing(np.tile(np.array([[0, 1]]), (5, 6, 1)), 4)
    mean, std = empirical_unique(const, 0, 3, [1, 4])
    assert np.allclose(mean, 2) and np.allclose(std, 0)
    trace = synth_trace(16, 2, 10, 20, seed=1)
    assert np.array_equal(empirical_unique(trace, 0, 4, [2], seed=3)[0], empirical_unique(trace, 0, 4, [2], seed=3)[0])


def test_evaluate_trace_reports_every_method():
    trace = synth_trace(32, 4, 24, 64, persistence=0.8, seed=4)
    rep = evaluate_trace(trace, (2, 4), (1, 4), window=3, samples=400)
    d = rep.to_dict()
    assert len(d["predictions"]) == 4
    row = d["predictions"][0]
    for m in ("pairs", "pooled", "lag1", "window", "independent", "uniform"):
        assert isinstance(row[m], float) and f"{m}_rel_error" in row
    errors = rep.mean_abs_error()
    assert errors["pairs"] < errors["lag1"] < errors["independent"] < errors["uniform"]  # more statistics, less error
    # for a fixed Σπ = k, independent routing touches at most as many experts as uniform routing (Jensen)
    assert all(r.predictions["independent"] <= r.predictions["uniform"] + 1e-9 for r in rep.rows)
    n2 = [r for r in rep.rows if r.n_tokens == 2]
    assert all(abs(r.predictions["pairs"] - r.predictions["lag1"]) < 1e-6 for r in n2)
