"""Routing traces: the validated routing array, writing, per-layer statistics and empirical unique-expert counts.

A trace is an integer array of expert ids shaped [sequences, tokens, layers, k]. Reading files (``.npy``, ``.npz``,
JSON Lines, and the routing dumps of SGLang and vLLM) is in :mod:`simulator.traces.formats`.

The expert count E: a trace's ids must lie in [0, E). When E is stated (``num_experts``), any id outside is an
error that counts the bad ids; E is never widened to fit them. When it is not stated, E = largest id + 1 is
assumed only if the ids are dense enough to make that plausible: at least half of the ids in [0, largest] occur
(``SPARSE_IDS_SHARE``). A trace whose ids are sparser (e.g. one stray id 1,000,000 among 16 experts) is refused,
asking for the expert count.

Statistics are counted *circularly* within each sequence (token T−1 is followed by token 0), so that popularity,
pair marginals and window-pattern frequencies are exactly consistent with one another (stationary); the bias is
O(D/T) for lags up to D.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..outputs import atomic_write
from ..overlap.persistent import Persistent
from ..overlap.stats import MAX_EXPERTS, NUM_EXPERTS, OverlapStats
from ..params import Interval, Param, check_params

__all__ = [
    "BATCH_DRAWS",
    "MAX_EXPERTS",
    "NUM_EXPERTS",
    "SAMPLES",
    "SEED",
    "SPARSE_IDS_SHARE",
    "Trace",
    "activity",
    "check_trace_path",
    "empirical_unique",
    "layer_stats",
    "validate_routing",
    "write_trace",
]

SAMPLES = Param(Interval(int, 1, None), unit="draws")
SEED = Param(Interval(int, 0, None))
BATCH_DRAWS = Param(Interval(int, 1, 1 << 20), many=True, unit="requests")  # batch sizes of the empirical draws
_DRAW_BUDGET = 1 << 24  # ids held at once by empirical_unique (draws are chunked beyond it)
SPARSE_IDS_SHARE = 0.5  # an unstated E = max id + 1 needs at least this share of [0, max id] to occur

WRITE_FORMATS = (".npy", ".npz", ".jsonl")


@dataclass(frozen=True, eq=False)
class Trace:
    """Expert ids routed to, shape (sequences, tokens, layers, k); ids in [0, num_experts).

    ``layer_ids``: the model layer of each trace layer when they differ from 0..L−1 (an engine dump whose dense
    layers carry no routing); empty otherwise."""

    experts: np.ndarray
    num_experts: int
    source: str = ""
    layer_ids: tuple = ()

    @property
    def sequences(self) -> int:
        return int(self.experts.shape[0])

    @property
    def tokens(self) -> int:
        return int(self.experts.shape[1])

    @property
    def layers(self) -> int:
        return int(self.experts.shape[2])

    @property
    def top_k(self) -> int:
        return int(self.experts.shape[3])

    def layer(self, index: int) -> np.ndarray:
        if not 0 <= index < self.layers:
            raise ParameterError(f"layer {index} does not exist: the trace has layers 0..{self.layers - 1}")
        return self.experts[:, :, index, :]


def _where(pos) -> str:
    return f"[seq {int(pos[0])}, token {int(pos[1])}, layer {int(pos[2])}]"


def _expert_count(arr: np.ndarray, num_experts, where: str) -> int:
    """The expert count E of a non-negative id array: the stated one (every id must be below it) or an inferred
    max id + 1 when the ids are dense enough (module docstring)."""
    largest = int(arr.max())
    if num_experts is not None:
        check_params("read_trace", {"num_experts": num_experts}, {"num_experts": NUM_EXPERTS})
        e = int(num_experts)
        bad = int(np.count_nonzero(arr >= e))
        if bad:
            raise ParameterError(
                f"{where}: {bad} of {arr.size} expert ids are outside [0, {e}) (largest {largest}, first at "
                f"{_where(np.argwhere(arr >= e)[0])}); the expert count is {e}: check that the trace belongs to "
                f"this model, or state its real expert count")
        return e
    used = int(np.unique(arr).size)
    if used < SPARSE_IDS_SHARE * (largest + 1) or largest + 1 > MAX_EXPERTS:
        raise ParameterError(
            f"{where}: the expert count is not stated and the ids are too sparse to infer it: only {used} distinct "
            f"ids occur in [0, {largest}]; state the model's expert count (num_experts), and ids at or above it "
            f"are rejected")
    return largest + 1


def validate_routing(array, num_experts: int | None = None, where: str = "trace", *, layer_ids=()) -> Trace:
    """Check shape, integer ids, id range and distinct experts per token; returns a :class:`Trace`."""
    arr = np.asarray(array)
    if arr.ndim == 3:
        arr = arr[:, :, None, :]
    if arr.ndim != 4:
        raise ParameterError(f"{where}: expected an integer array shaped [sequences, tokens, layers, k] or "
                             f"[sequences, tokens, k]; got shape {tuple(np.shape(array))}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise ParameterError(f"{where}: expert ids must be integers; got dtype {arr.dtype}")
    s, t, layers, k = arr.shape
    if min(s, layers, k) < 1 or t < 2:
        raise ParameterError(f"{where}: need at least 1 sequence, 2 tokens, 1 layer and k >= 1; got shape "
                             f"{tuple(int(d) for d in arr.shape)}")
    if arr.min() < 0:
        neg = int(np.count_nonzero(arr < 0))
        pos = np.argwhere(arr < 0)[0]
        raise ParameterError(f"{where}: {neg} negative expert ids (first {int(arr[tuple(pos)])} at {_where(pos)}); "
                             f"ids must be in [0, E)")
    ordered = np.sort(arr, axis=-1)
    dup = ordered[..., 1:] == ordered[..., :-1]
    if dup.any():
        pos = np.argwhere(dup)[0]
        raise ParameterError(f"{where}: token {int(pos[1])} of sequence {int(pos[0])} (layer {int(pos[2])}) routes "
                             f"to expert {int(ordered[tuple(pos)])} twice; each token's k experts must be distinct")
    e = _expert_count(arr, num_experts, where)
    if k > e:
        raise ParameterError(f"{where}: each token lists k={k} experts but there are only E={e}")
    dtype = np.int16 if e <= np.iinfo(np.int16).max else np.int32
    out = arr.astype(dtype)
    out.setflags(write=False)
    layer_ids = tuple(int(i) for i in layer_ids)
    if layer_ids == tuple(range(layers)):
        layer_ids = ()
    elif layer_ids and len(layer_ids) != layers:
        raise ParameterError(f"{where}: {len(layer_ids)} layer ids for {layers} layers")
    return Trace(out, e, where, layer_ids)


def check_trace_path(path: str) -> str:
    """The lower-case extension of a trace path to write, after checking that a file can be created there (a
    probe file is created and removed); raises a one-line ParameterError otherwise."""
    if os.path.isdir(path):
        raise ParameterError(f"cannot write '{path}': it is a folder; give a file name ending in .npy, .npz or "
                             f".jsonl")
    ext = os.path.splitext(path)[1].lower()
    if ext not in WRITE_FORMATS:
        raise ParameterError(f"unknown output format '{ext}' for '{path}': use .npy, .npz or .jsonl")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ParameterError(f"cannot write '{path}': folder '{folder}' does not exist")
    tmp = _temporary(path, folder, ext)
    os.close(tmp[0])
    os.unlink(tmp[1])
    return ext


def _temporary(path: str, folder: str, ext: str):
    try:
        return tempfile.mkstemp(prefix=".tmp-", suffix=ext, dir=folder)
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        raise ParameterError(f"cannot write '{path}': {reason} in folder '{folder}'; choose a writable folder") \
            from None


def write_trace(trace: Trace, path: str) -> None:
    """Write a trace as .npy, .npz (with num_experts) or .jsonl, chosen by the extension.

    The file is written under a temporary name in the target folder and renamed when complete, so a failure
    leaves no partial file."""
    ext = check_trace_path(path)
    with atomic_write(path, "wb", param="out") as fh:  # one home for atomic writes (simulator.outputs)
        if ext == ".npy":
            np.save(fh, np.asarray(trace.experts))
        elif ext == ".npz":
            np.savez_compressed(fh, experts=np.asarray(trace.experts), num_experts=np.int64(trace.num_experts))
        else:
            for s in range(trace.sequences):
                for t in range(trace.tokens):
                    for layer in range(trace.layers):
                        ids = [int(i) for i in trace.experts[s, t, layer]]
                        rec = {"seq": s, "token": t, "layer": layer, "experts": ids}
                        fh.write((json.dumps(rec) + "\n").encode("utf-8"))


def activity(trace: Trace, layer: int) -> np.ndarray:
    """Boolean activations x[s, t, e] of one layer, shape (sequences, tokens, E)."""
    ids = trace.layer(layer)
    s, t, k = ids.shape
    x = np.zeros((s, t, trace.num_experts), dtype=bool)
    x[np.arange(s)[:, None, None], np.arange(t)[None, :, None], ids] = True
    return x


def layer_stats(trace: Trace, layer: int = 0, *, max_lag: int = 4, window: int = 0) -> OverlapStats:
    """Per-expert popularity, pair marginals p_e(1..max_lag) and (if window=m) m-token pattern frequencies."""
    x = activity(trace, layer)
    s, t, e = x.shape
    if max_lag >= t or window > t:
        raise ParameterError(f"the trace has {t} tokens per sequence; lags up to {max_lag} and windows of {window} "
                             f"need more")
    pi = x.mean(axis=(0, 1))
    pairs = np.stack([(x & np.roll(x, -d, axis=1)).mean(axis=(0, 1)) for d in range(1, max_lag + 1)], axis=1) \
        if max_lag else np.zeros((e, 0))
    freq = None
    if window:
        counts = np.zeros(e << window)
        offsets = (np.arange(e) << window)[None, :]
        for seq in range(s):  # one sequence at a time keeps memory at T x E
            pat = np.zeros((t, e), dtype=np.int64)
            for j in range(window):
                pat = (pat << 1) | np.roll(x[seq], -j, axis=0)
            counts += np.bincount((pat + offsets).ravel(), minlength=e << window)
        freq = counts.reshape(e, 1 << window) / (s * t)
    label = f"{trace.source} layer {layer}"
    return OverlapStats(pi, trace.top_k, pair_probs=pairs, window=freq, label=label)


def empirical_unique(trace: Trace, layer: int, n_tokens: int, batch=1, *, samples: int = 2000, seed: int = 0):
    """Mean and standard deviation of unique experts over windows of n tokens in B randomly drawn sequences.

    Each sample draws B distinct sequences (with replacement when B exceeds the number of sequences) and one window
    start per sequence, uniformly. Returns two arrays with one value per batch size.
    """
    check_params("empirical_unique", {"samples": samples, "seed": seed, "batch": batch},
                 {"samples": SAMPLES, "seed": SEED, "batch": BATCH_DRAWS})
    ids = trace.layer(layer)
    s, t, k = ids.shape
    if not 1 <= n_tokens <= t:
        raise ParameterError(f"windows of {n_tokens} tokens do not fit in sequences of {t} tokens")
    rng = np.random.default_rng(seed)
    means, stds = [], []
    for b in np.atleast_1d(np.asarray(batch, dtype=np.int64)):
        distinct = b <= s  # B distinct sequences when there are enough of them
        chunk = max(1, _DRAW_BUDGET // max(int(b) * n_tokens, s if distinct else 1, trace.num_experts))
        counts = []
        for first in range(0, samples, chunk):  # one pass unless the draws would exceed the memory budget
            m = min(chunk, samples - first)
            seqs = np.argsort(rng.random((m, s)), axis=1)[:, :b] if distinct else rng.integers(0, s, (m, b))
            starts = rng.integers(0, t - n_tokens + 1, size=(m, b))
            tok = starts[..., None] + np.arange(n_tokens)
            chosen = ids[seqs[..., None], tok].reshape(m, -1)
            seen = np.zeros((m, trace.num_experts), dtype=bool)
            seen[np.arange(m)[:, None], chosen] = True
            counts.append(seen.sum(axis=1))
        count = np.concatenate(counts)
        means.append(count.mean())
        stds.append(count.std(ddof=1) if samples > 1 else 0.0)
    return np.array(means), np.array(stds)


def fit_persistent(trace, layer: int = 0) -> Persistent:
    """Estimate the persistent component of one trace layer: each sequence is cut into three segments; per expert,
    E[f1·f2] and E[f1·f2·f3] of the segment frequencies (far apart: independent given the request's latent state)
    pooled over experts give the moments m2 = E[r²], m3 = E[r³] of the popularity ratio r; a two-point r (mean 1)
    with these moments gives the share h, and the floor is f = m2·Σπ²/k."""
    x = activity(trace, layer).astype(float)  # (sequences, tokens, E)
    t = x.shape[1]
    if t < 48:
        raise ParameterError(f"fit_persistent needs sequences of at least 48 tokens (three segments far apart); the "
                             f"trace has {t}", owner="fit_persistent", param="trace")
    seg = t // 3
    f = [x[:, i * seg:(i + 1) * seg].mean(axis=1) for i in range(3)]  # (S, E) each
    pi = x.mean(axis=(0, 1))
    m2 = float((f[0] * f[1]).mean(axis=0).sum() / (pi @ pi))
    m3 = float((f[0] * f[1] * f[2]).mean(axis=0).sum() / (pi ** 3).sum())
    k = trace.top_k
    floor = min(m2 * float(pi @ pi) / k, 1 - 1e-9)
    v = m2 - 1
    if v <= 1e-9:
        return Persistent(floor=max(floor, 1e-9), share=None)
    mu3 = m3 - 3 * m2 + 2
    gamma = mu3 / v ** 1.5
    h = (1 - gamma / np.sqrt(gamma * gamma + 4)) / 2
    return Persistent(floor=floor, share=float(min(max(h, 1e-6), 1 / m2)))
