"""The fast synthetic router (short-listed calibration, the hidden-state noise drawn at once) routes exactly as the
plain one.

``_plain_*`` below is the generator as first written (a full partition per calibration step, a token loop for the
hidden state, the stacked product z @ w): every id and every calibrated bias must come out the same, bit for bit.
"""

import hashlib

import numpy as np
import pytest

from simulator.overlap.maxent.tree_ipf import preorder
from simulator.overlap.popularity import skew_popularity
from simulator.traces.synth import TraceSpec, _calibrate, _top_k, measured_trace, synth_trace
from simulator.traces.synth_tree import route_tree, tree_router

SAMPLES, STEPS = 8192, 50  # the calibration sample and steps of simulator.traces.synth


def _plain_calibrate(weight, target, k, rng):
    z = rng.standard_normal((SAMPLES, weight.shape[0])) @ weight
    bias = np.zeros(weight.shape[1])
    e = weight.shape[1]
    for _ in range(STEPS):
        x = z + bias
        kth = np.partition(x, e - k, axis=-1)[:, e - k:e - k + 1]
        top = x >= kth
        if np.all(np.count_nonzero(top, axis=1) == k):
            counts = np.count_nonzero(top, axis=0)
        else:
            counts = np.bincount(np.argpartition(-x, k - 1, axis=-1)[..., :k].ravel(), minlength=e)
        freq = counts / SAMPLES
        bias += 0.3 * (np.log(target) - np.log(np.maximum(freq, 0.5 / SAMPLES)))
        bias -= bias.mean()
    return bias


def _plain_synth(experts, top_k, sequences, tokens, *, layers, persistence, skew, context, hidden, seed):
    rng = np.random.default_rng(seed)
    target = np.full(experts, top_k / experts) if skew is None else skew_popularity(experts, top_k, float(skew))
    weights, biases = [], []
    for _ in range(layers):
        w = rng.standard_normal((hidden, experts)) / np.sqrt(hidden)
        weights.append(w)
        biases.append(_plain_calibrate(w, target[rng.permutation(experts)], top_k, rng))
    rho = float(persistence)
    state = rng.standard_normal((sequences, hidden))
    ctx = rng.standard_normal((sequences, hidden))
    z = np.empty((sequences, tokens, hidden))
    for t in range(tokens):
        if t:
            state = rho * state + np.sqrt(1 - rho * rho) * rng.standard_normal((sequences, hidden))
        z[:, t] = np.sqrt(context) * ctx + np.sqrt(1 - context) * state
    out = np.empty((sequences, tokens, layers, top_k), dtype=np.int64)
    for layer, (w, b) in enumerate(zip(weights, biases, strict=True)):
        out[:, :, layer] = _top_k(z @ w + b, top_k)
    return out


@pytest.mark.parametrize("experts,top_k,sequences,tokens,layers,hidden,skew", [
    (32, 4, 5, 37, 2, 32, 0.3),   # short list (E >= 32, E >= 4k); tokens not a multiple of a kernel's rows
    (64, 8, 3, 20, 1, 16, None),  # uniform popularity
    (40, 10, 4, 9, 1, 3, 0.4),    # the full partition (E < 4k); a thin hidden state
    (8, 8, 2, 7, 1, 5, None),     # k = E
])
def test_synth_trace_is_the_plain_generator_bit_for_bit(experts, top_k, sequences, tokens, layers, hidden, skew):
    kw = dict(layers=layers, persistence=0.7, skew=skew, context=0.3, hidden=hidden, seed=3)
    fast = synth_trace(experts, top_k, sequences, tokens, **kw).experts
    assert np.array_equal(fast, _plain_synth(experts, top_k, sequences, tokens, **kw))


@pytest.mark.parametrize("experts,top_k,hidden,tie", [(128, 8, 32, False), (36, 9, 32, False), (64, 4, 2, True)])
def test_calibration_is_the_plain_one_bit_for_bit(experts, top_k, hidden, tie):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((hidden, experts))
    if tie:  # two experts with the same logits on every row: ties at the top-k boundary (argpartition's sets)
        w[:, 1] = w[:, 0]
    target = skew_popularity(experts, top_k, 2.5 * top_k / experts)[rng.permutation(experts)]
    fast = _calibrate(w, target, top_k, np.random.default_rng(11))
    assert fast.tobytes() == _plain_calibrate(w, target, top_k, np.random.default_rng(11)).tobytes()


def test_tree_router_chain_matches_the_stacked_product():
    router = tree_router(64, 4, persistence=0.7, skew=0.2, context=0.3, seed=2)
    parents = [-1, 0, 0, 1, 1, 2]
    fast = route_tree(router, parents, 50, seed=1)
    rng = np.random.default_rng(1)
    state = np.empty((50, len(parents), 32))
    for v in preorder(parents):
        noise = rng.standard_normal((50, 32))
        p = parents[v]
        state[:, v] = noise if p < 0 else 0.7 * state[:, p] + np.sqrt(1 - 0.7 * 0.7) * noise
    z = np.sqrt(0.3) * rng.standard_normal((50, 1, 32)) + np.sqrt(1 - 0.3) * state
    assert np.array_equal(fast, _top_k(z @ router.weight + router.bias, 4))


def test_a_bundled_trace_is_pinned():
    """The prose-like trace of the validation and agent-traffic studies, as the plain generator made it."""
    spec = TraceSpec(experts=128, top_k=8, sequences=64, tokens=256, seed=1, persistence=0.35, context=0.45,
                     skew=0.118)
    trace, stats = measured_trace(spec)
    digest = hashlib.sha256(np.asarray(trace.experts, dtype="<i2").tobytes()).hexdigest()
    assert digest.startswith("842829b45ad7ba5c")
    assert stats.overlaps[0] == 0.397735595703125 and stats.skew == pytest.approx(0.11410428863018751, abs=1e-15)
