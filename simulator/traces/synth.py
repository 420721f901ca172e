"""A seeded synthetic correlated router, for demos, tests and the accuracy benchmark.

Hidden state per sequence (dimension h, shared by all layers like a residual stream):

    a_t = ρ·a_{t−1} + sqrt(1 − ρ²)·ε_t,   a_0, ε_t ~ N(0, I)        (AR(1), stationary, persistence ρ)
    z_t = sqrt(c)·u + sqrt(1 − c)·a_t,    u ~ N(0, I) once per sequence (context share c)

Layer l routes token t to the top-k of the logits W_l z_t + b_l, W_l with N(0, 1/h) entries (each logit has unit
variance). Since z_t ~ N(0, I) for every t whatever ρ and c, popularity does not depend on the knobs of time:
the bias b_l is calibrated (deterministically, on a fixed sample of z) so that each expert's popularity matches a
Zipf popularity with independent overlap Σπ²/k = ``skew`` (uniform when ``skew`` is None), assigned to experts in
a random (seeded) order. Persistence ρ raises every lag overlap, decaying with lag like ρ^d towards the
independent value; context c adds a floor that does not decay.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..overlap.popularity import skew_popularity
from ..params import Interval, Param, check_params, param_field
from ..specs.settings import fraction, positive
from .trace import NUM_EXPERTS, Trace, check_trace_path, layer_stats, validate_routing, write_trace

__all__ = ["TraceSpec", "measured_trace", "synth_to_file", "synth_trace"]

_CALIBRATION_SAMPLES = 8192
MAX_SYNTH_VALUES = 1 << 25  # values of the largest float64 array (hidden states or logits): 256 MiB
_CALIBRATION_STEPS = 50


def _top_k(logits: np.ndarray, k: int) -> np.ndarray:
    part = np.argpartition(-logits, k - 1, axis=-1)[..., :k]
    order = np.argsort(-np.take_along_axis(logits, part, axis=-1), axis=-1)
    return np.take_along_axis(part, order, axis=-1)


def _top_counts(x: np.ndarray, k: int) -> np.ndarray:
    """How often each expert is in a row's top k of x (rows, E): the rows' k-th largest logit as the threshold,
    argpartition's sets when a row has a tie at the boundary."""
    e = x.shape[1]
    kth = np.partition(x, e - k, axis=-1)[:, e - k:e - k + 1]  # each row's k-th largest logit
    top = x >= kth
    if np.all(np.count_nonzero(top, axis=1) == k):  # no tie at the boundary: argpartition's sets exactly
        return np.count_nonzero(top, axis=0)
    return np.bincount(np.argpartition(-x, k - 1, axis=-1)[..., :k].ravel(), minlength=e)


class _Shortlist:
    """Each calibration row's m largest logits at a base bias b0 (indices ``cand``, their z in ``zc``) and the
    (m+1)-th largest ``rest`` (every other logit of the row is at most it). At a later bias b, a logit off the list
    is at most rest + max(b − b0), up to rounding (``slack``, a million times the rounding of these sums), so when
    that is below the k-th largest of the list (k < m) the row's top k lies in the list and is found there exactly:
    the list's logits are the full row's (the same sums z + b). Rows where it is not below are counted in full."""

    def __init__(self, z: np.ndarray, bias: np.ndarray, m: int, z_max: float):
        rows, e = z.shape
        x = z + bias
        idx = np.argpartition(x, e - m - 1, axis=1)
        first = np.arange(rows)[:, None] * e  # flat index of each row's first logit
        self.cand = np.ascontiguousarray(idx[:, e - m:])
        self.zc = np.take(z, self.cand + first)
        self.rest = np.take(x, idx[:, e - m - 1:e - m] + first)[:, 0]
        self.base = bias.copy()
        self.scale = 1.0 + z_max + float(np.abs(bias).max())  # bounds |z + b0|

    def counts(self, z: np.ndarray, bias: np.ndarray, k: int):
        """The top-k counts at ``bias``, equal to ``_top_counts(z + bias, k)``; None when more than 1/16 of the rows
        may leave the list (the caller then builds a new one)."""
        e, m = z.shape[1], self.zc.shape[1]
        xc = self.zc + np.take(bias, self.cand)
        kth = np.partition(xc, m - k, axis=1)[:, m - k]
        diff = bias - self.base
        slack = 1e-9 * (self.scale + float(np.abs(diff).max()))
        out = ~(self.rest + (float(diff.max()) + slack) < kth)  # rows whose top k may leave the list
        n_out = int(np.count_nonzero(out))
        if n_out * 16 > z.shape[0]:
            return None
        top = (xc >= kth[:, None]) & ~out[:, None]
        if np.any(np.count_nonzero(top, axis=1)[~out] != k):  # a tie at the boundary: argpartition's sets
            return _top_counts(z + bias, k)
        counts = np.bincount(self.cand[top], minlength=e)
        if n_out:
            x = z[out] + bias
            top_out = x >= np.partition(x, e - k, axis=-1)[:, e - k:e - k + 1]
            if np.any(np.count_nonzero(top_out, axis=1) != k):
                return _top_counts(z + bias, k)
            counts += np.count_nonzero(top_out, axis=0)
        return counts


def _calibrate(weight: np.ndarray, target: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    z = rng.standard_normal((_CALIBRATION_SAMPLES, weight.shape[0])) @ weight
    bias = np.zeros(weight.shape[1])
    e = weight.shape[1]
    log_target = np.log(target)
    shortlist, use_list = None, e >= 32 and e >= 4 * k  # a short list pays off when it is much shorter than E
    z_max = float(np.abs(z).max())
    for _ in range(_CALIBRATION_STEPS):  # only which experts are picked counts here, not their order
        counts = None
        if use_list and np.all(np.isfinite(bias)):
            counts = None if shortlist is None else shortlist.counts(z, bias, k)
            if counts is None:
                shortlist = _Shortlist(z, bias, 2 * k + 8, z_max)
                counts = shortlist.counts(z, bias, k)
                use_list = counts is not None  # a fresh list that does not hold (ties): the full rule from now on
        if counts is None:
            counts = _top_counts(z + bias, k)
        freq = counts / _CALIBRATION_SAMPLES
        bias += 0.3 * (log_target - np.log(np.maximum(freq, 0.5 / _CALIBRATION_SAMPLES)))
        bias -= bias.mean()
    return bias


def synth_trace(experts: int, top_k: int, sequences: int, tokens: int, *, layers: int = 1,
                persistence: float = 0.8, skew: float | None = None, context: float = 0.0, hidden: int = 32,
                seed: int = 0) -> Trace:
    """Generate a routing trace shaped (sequences, tokens, layers, top_k). Same arguments, same trace."""
    check_params(
        "synth_trace",
        {"experts": experts, "top_k": top_k, "sequences": sequences, "tokens": tokens, "layers": layers,
         "persistence": persistence, "context": context, "hidden": hidden, "seed": seed},
        {"experts": NUM_EXPERTS, "top_k": [Interval(int, 1, None)],
         "sequences": [Interval(int, 1, None)], "tokens": [Interval(int, 2, None)],
         "layers": [Interval(int, 1, None)], "persistence": [Interval(float, 0, 1, closed="left")],
         "context": [Interval(float, 0, 1, closed="left")], "hidden": [Interval(int, 1, None)],
         "seed": [Interval(int, 0, None)]},
    )
    if top_k > experts:
        check_params("synth_trace", {"top_k": top_k}, {"top_k": [Interval(int, 1, experts)]})
    rows = max(sequences * tokens, _CALIBRATION_SAMPLES)  # tokens routed, or the calibration sample
    if rows * max(hidden, experts) > MAX_SYNTH_VALUES:
        raise ParameterError(f"synth_trace: {rows} tokens x {max(hidden, experts)} logits each is more than the "
                             f"{MAX_SYNTH_VALUES} values a synthetic trace holds in memory at once; use fewer "
                             f"sequences, tokens or experts")
    rng = np.random.default_rng(seed)
    target = np.full(experts, top_k / experts) if skew is None else skew_popularity(experts, top_k, float(skew))
    weights, biases = [], []
    for _ in range(layers):
        w = rng.standard_normal((hidden, experts)) / np.sqrt(hidden)
        weights.append(w)
        biases.append(_calibrate(w, target[rng.permutation(experts)], top_k, rng))
    rho = float(persistence)
    walk = np.empty((tokens, sequences, hidden))  # a_t of every sequence, token-major as drawn
    walk[0] = rng.standard_normal((sequences, hidden))
    ctx = rng.standard_normal((sequences, hidden))
    rng.standard_normal(out=walk[1:])  # ε_1 .. ε_{T−1}: the draws of a token-by-token loop, in its order
    walk[1:] *= np.sqrt(1 - rho * rho)
    for t in range(1, tokens):
        walk[t] += rho * walk[t - 1]
    z = np.empty((sequences, tokens, hidden))
    np.multiply(np.sqrt(1 - context), walk, out=z.transpose(1, 0, 2))
    z += np.sqrt(context) * ctx[:, None, :]
    out = np.empty((sequences, tokens, layers, top_k), dtype=np.int64)
    for layer, (w, b) in enumerate(zip(weights, biases, strict=True)):
        out[:, :, layer] = _top_k(z @ w + b, top_k)
    return validate_routing(out, experts, f"synthetic(persistence={rho:g}, skew={skew}, seed={seed})")


def synth_to_file(path: str, experts: int, top_k: int, sequences: int, tokens: int, **kwargs) -> Trace:
    """Generate a synthetic trace (see :func:`synth_trace`) and write it to ``path`` (.npy, .npz or .jsonl)."""
    check_trace_path(path)
    trace = synth_trace(experts, top_k, sequences, tokens, **kwargs)
    write_trace(trace, path)
    return trace


@dataclass(frozen=True)
class TraceSpec:
    """A seeded synthetic router setting (:func:`synth_trace`, one layer) as a study file declares it."""

    experts: int = param_field(Param(Interval(int, 2, None)))
    top_k: int = positive()
    sequences: int = positive()
    tokens: int = param_field(Param(Interval(int, 8, None)))
    seed: int = param_field(Param(Interval(int, 0, None)))
    persistence: float = param_field(Param(Interval(float, 0.0, 0.999)))
    context: float = param_field(Param(Interval(float, 0.0, 0.999)))
    skew: float = fraction()
    hidden: int = positive(32)
    max_lag: int = param_field(Param(Interval(int, 1, 8)), 4)
    label: str = ""  # names the trace in tables (validation checks)


@functools.lru_cache(maxsize=32)
def measured_trace(t: TraceSpec):
    """(trace, measured statistics) of a synthetic router setting (cached: analyses reuse it)."""
    tr = synth_trace(t.experts, t.top_k, t.sequences, t.tokens, layers=1, persistence=t.persistence, skew=t.skew,
                     context=t.context, hidden=t.hidden, seed=t.seed)
    return tr, layer_stats(tr, 0, max_lag=t.max_lag)
