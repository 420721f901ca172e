"""Routing traces: reading, validating, writing, per-layer statistics and empirical unique-expert counts.

Formats: ``.npy`` / ``.npz`` integer arrays shaped [sequences, tokens, layers, k] or [sequences, tokens, k] (one
layer; in ``.npz`` the array is ``experts``, optionally with a scalar ``num_experts``), and JSON Lines with one
record per token and layer: ``{"seq": 0, "token": 5, "layer": 2, "experts": [17, 3, ...]}`` (``layer`` optional).

Statistics are counted *circularly* within each sequence (token T−1 is followed by token 0), so that popularity,
pair marginals and window-pattern frequencies are exactly consistent with one another (stationary); the bias is
O(D/T) for lags up to D.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from .stats import OverlapStats

__all__ = [
    "Trace",
    "activity",
    "check_trace_path",
    "empirical_unique",
    "layer_stats",
    "read_trace",
    "validate_routing",
    "write_trace",
]


@dataclass(frozen=True, eq=False)
class Trace:
    """Expert ids routed to, shape (sequences, tokens, layers, k); ids in [0, num_experts)."""

    experts: np.ndarray
    num_experts: int
    source: str = ""

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


def validate_routing(array, num_experts: int | None = None, where: str = "trace") -> Trace:
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
        raise ParameterError(f"{where}: need at least 1 sequence, 2 tokens, 1 layer and k >= 1; got shape {arr.shape}")
    if arr.min() < 0:
        pos = tuple(int(i) for i in np.argwhere(arr < 0)[0])
        raise ParameterError(f"{where}: negative expert id {int(arr[pos])} at [seq {pos[0]}, token {pos[1]}, "
                             f"layer {pos[2]}]; ids must be in [0, E)")
    top = int(arr.max()) + 1
    e = top if num_experts is None else int(num_experts)
    if top > e:
        pos = tuple(int(i) for i in np.argwhere(arr >= e)[0])
        raise ParameterError(f"{where}: expert id {int(arr[pos])} at [seq {pos[0]}, token {pos[1]}, layer {pos[2]}] "
                             f"is outside [0, {e}); give the model's expert count (num_experts) if it is larger")
    if k > e:
        raise ParameterError(f"{where}: each token lists k={k} experts but there are only E={e}")
    ordered = np.sort(arr, axis=-1)
    dup = ordered[..., 1:] == ordered[..., :-1]
    if dup.any():
        pos = tuple(int(i) for i in np.argwhere(dup)[0])
        raise ParameterError(f"{where}: token {pos[1]} of sequence {pos[0]} (layer {pos[2]}) routes to expert "
                             f"{int(ordered[pos])} twice; each token's k experts must be distinct")
    dtype = np.int16 if e <= np.iinfo(np.int16).max else np.int32
    out = arr.astype(dtype)
    out.setflags(write=False)
    return Trace(out, e, where)


def _read_jsonl(path: str, num_experts: int | None) -> Trace:
    records: dict = {}
    k_seen = None
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ParameterError(f"{path} line {lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise ParameterError(f"{path} line {lineno}: expected an object with seq, token, experts")
            for name in ("seq", "token", "experts"):
                if name not in rec:
                    raise ParameterError(f"{path} line {lineno}: missing field '{name}'")
            ids, tok, layer = rec["experts"], rec["token"], rec.get("layer", 0)
            if (not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
                    or not isinstance(tok, int) or not isinstance(layer, int) or tok < 0 or layer < 0):
                raise ParameterError(f"{path} line {lineno}: 'token' and 'layer' must be integers >= 0 and "
                                     f"'experts' a list of integer ids")
            if k_seen is None:
                k_seen = len(ids)
            if len(ids) != k_seen or not ids:
                raise ParameterError(f"{path} line {lineno}: {len(ids)} experts, but earlier tokens list {k_seen}; "
                                     f"every token must list the same k experts")
            key = (rec["seq"] if not isinstance(rec["seq"], list) else str(rec["seq"]), tok, layer)
            if key in records:
                raise ParameterError(f"{path} line {lineno}: duplicate record for seq {key[0]}, token {tok}, "
                                     f"layer {layer}")
            records[key] = ids
    if not records:
        raise ParameterError(f"{path}: no records")
    seqs = list(dict.fromkeys(key[0] for key in records))
    layers = sorted({key[2] for key in records})
    if layers != list(range(len(layers))):
        raise ParameterError(f"{path}: layers must be numbered 0..L-1; found {layers[:10]}")
    lengths = {}
    for sq in seqs:
        toks = sorted({key[1] for key in records if key[0] == sq})
        missing = sorted(set(range(toks[-1] + 1)) - set(toks))
        if missing:
            raise ParameterError(f"{path}: sequence {sq} is missing token {missing[0]}; tokens must be 0..T-1")
        lengths[sq] = len(toks)
    t = min(lengths.values())
    if len(set(lengths.values())) > 1:
        warnings.warn(f"{path}: sequences have different lengths ({t}..{max(lengths.values())} tokens); "
                      f"using the first {t} tokens of each", stacklevel=3)
    arr = np.empty((len(seqs), t, len(layers), k_seen), dtype=np.int64)
    for i, sq in enumerate(seqs):
        for tok in range(t):
            for layer in layers:
                ids = records.get((sq, tok, layer))
                if ids is None:
                    raise ParameterError(f"{path}: sequence {sq} token {tok} has no record for layer {layer}")
                arr[i, tok, layer] = ids
    return validate_routing(arr, num_experts, path)


def read_trace(path: str, num_experts: int | None = None) -> Trace:
    """Read and validate a routing trace (.npy, .npz or .jsonl)."""
    if not os.path.isfile(path):
        raise ParameterError(f"trace file '{path}' not found")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".jsonl":
            return _read_jsonl(path, num_experts)
        if ext == ".npy":
            return validate_routing(np.load(path, allow_pickle=False), num_experts, path)
        if ext == ".npz":
            with np.load(path, allow_pickle=False) as data:
                names = list(data.files)
                key = "experts" if "experts" in names else (names[0] if len(names) == 1 else None)
                if key is None:
                    raise ParameterError(f"{path}: expected an array named 'experts'; found {names}")
                if num_experts is None and "num_experts" in names:
                    num_experts = int(data["num_experts"])
                return validate_routing(data[key], num_experts, path)
    except (OSError, ValueError, EOFError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(f"cannot read trace '{path}': {exc}") from None
    raise ParameterError(f"unknown trace format '{ext}' for '{path}': use .npy, .npz or .jsonl")


_FORMATS = (".npy", ".npz", ".jsonl")


def check_trace_path(path: str) -> str:
    """The lower-case extension of a trace path to write; raises unless it is .npy, .npz or .jsonl."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in _FORMATS:
        raise ParameterError(f"unknown output format '{ext}' for '{path}': use .npy, .npz or .jsonl")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ParameterError(f"cannot write '{path}': folder '{folder}' does not exist")
    return ext


def write_trace(trace: Trace, path: str) -> None:
    """Write a trace as .npy, .npz (with num_experts) or .jsonl, chosen by the extension."""
    ext = check_trace_path(path)
    if ext == ".npy":
        np.save(path, np.asarray(trace.experts))
    elif ext == ".npz":
        np.savez_compressed(path, experts=np.asarray(trace.experts), num_experts=np.int64(trace.num_experts))
    elif ext == ".jsonl":
        with open(path, "w", encoding="utf-8") as fh:
            for s in range(trace.sequences):
                for t in range(trace.tokens):
                    for layer in range(trace.layers):
                        ids = [int(i) for i in trace.experts[s, t, layer]]
                        fh.write(json.dumps({"seq": s, "token": t, "layer": layer, "experts": ids}) + "\n")


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
    ids = trace.layer(layer)
    s, t, k = ids.shape
    if not 1 <= n_tokens <= t:
        raise ParameterError(f"windows of {n_tokens} tokens do not fit in sequences of {t} tokens")
    rng = np.random.default_rng(seed)
    means, stds = [], []
    for b in np.atleast_1d(np.asarray(batch, dtype=int)):
        distinct = b <= s  # B distinct sequences when there are enough of them
        seqs = np.argsort(rng.random((samples, s)), axis=1)[:, :b] if distinct else rng.integers(0, s, (samples, b))
        starts = rng.integers(0, t - n_tokens + 1, size=(samples, b))
        tok = starts[..., None] + np.arange(n_tokens)
        chosen = ids[seqs[..., None], tok].reshape(samples, -1)
        seen = np.zeros((samples, trace.num_experts), dtype=bool)
        seen[np.arange(samples)[:, None], chosen] = True
        count = seen.sum(axis=1)
        means.append(count.mean())
        stds.append(count.std(ddof=1) if samples > 1 else 0.0)
    return np.array(means), np.array(stds)
