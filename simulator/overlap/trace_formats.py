"""Reading routing traces: NumPy arrays, JSON Lines, and the routing dumps of SGLang and vLLM (docs/MODEL.md §2.9).

Formats (``read_trace(..., format=...)``; ``auto`` chooses by extension and content):

``npy`` / ``npz``
    An integer array [sequences, tokens, layers, k] or [sequences, tokens, k]; in ``.npz`` the array is named
    ``experts`` (or is the only array), optionally with a scalar ``num_experts``.
``jsonl``
    One record per token and layer: ``{"seq": 0, "token": 5, "layer": 2, "experts": [17, 3, ...]}``.
``sglang``
    The per-token dump of SGLang's expert-distribution recorder (``--expert-distribution-recorder-mode
    per_token``; sgl-project/sglang, python/sglang/srt/eplb/expert_distribution.py): a ``torch.save`` file
    ``{"records": [...], "last_physical_to_logical_map": [layers, physical experts]}`` whose records (one per
    forward pass) hold ``topk_ids_of_layer`` [layers, tokens, 8] (physical expert ids, −1 where empty),
    ``positions``, ``extend_seq_lens`` and ``forward_mode``; or the same exported to ``.npz`` (``SGLANG_EXPORT``).
``vllm``
    vLLM's routed-experts capture (``enable_return_routed_experts``; vllm-project/vllm, vllm/outputs.py
    ``CompletionOutput.routed_experts``): one int32 array [tokens, layers, k] of logical ids per request, saved by
    the user as the arrays of an ``.npz`` (``VLLM_EXPORT``), a ``torch.save``'d list, or JSON Lines with a
    ``routed_experts`` field per request.

Engine dumps hold sequences of different lengths; they are cut into windows of ``seq_tokens`` consecutive tokens
(default ``DEFAULT_SEQ_TOKENS``), the shorter remainders dropped. PyTorch files are read only when PyTorch is
installed; otherwise the error gives the one-line export to ``.npz``.
"""

from __future__ import annotations

import json
import os
import warnings
import zipfile

import numpy as np

from ..errors import ParameterError
from ..validation import Interval, Options, Param, check_params
from .traces import Trace, validate_routing

__all__ = [
    "DEFAULT_SEQ_TOKENS",
    "FORMATS",
    "SGLANG_EXPORT",
    "VLLM_EXPORT",
    "detect_format",
    "read_trace",
    "sglang_sequences",
    "vllm_sequences",
    "windows",
]

FORMATS = ("auto", "npy", "npz", "jsonl", "sglang", "vllm")
FORMAT = Param(Options(FORMATS))
DEFAULT_SEQ_TOKENS = 64
SEQ_TOKENS = Param(Interval(int, 2, None), None, unit="tokens")
TORCH_EXTENSIONS = (".pt", ".pth")

# sglang/srt/model_executor/forward_batch_info.py: ForwardMode(IntEnum) EXTEND=1, DECODE=2, MIXED=3, IDLE=4, ...
SGLANG_DECODE = 2
SGLANG_RECORD_KEYS = ("topk_ids_of_layer", "positions", "extend_seq_lens", "forward_mode", "forward_pass_id")

SGLANG_EXPORT = (
    "python -c \"import sys,torch,numpy as n;d=torch.load(sys.argv[1],map_location='cpu',weights_only=True);"
    "a={'physical_to_logical_map':n.asarray(d['last_physical_to_logical_map'])};"
    "[a.update({f'{k}_{i}':n.asarray(r[k]) for k in ('topk_ids_of_layer','positions','extend_seq_lens',"
    "'forward_mode','forward_pass_id') if r.get(k) is not None}) for i,r in enumerate(d['records'])];"
    "n.savez(sys.argv[2],**a)\" DUMP.pt DUMP.npz"
)
VLLM_EXPORT = "np.savez('routes.npz', *[o.outputs[0].routed_experts for o in outputs])"


def read_trace(path: str, num_experts: int | None = None, *, format: str = "auto",
               seq_tokens: int | None = None) -> Trace:
    """Read and validate a routing trace (see the module docstring for the formats).

    ``num_experts`` states the expert count E (ids outside [0, E) are rejected, counted); without it E comes from
    the file (``num_experts`` in an .npz, the physical-to-logical map of an SGLang dump) or is inferred as the
    largest id + 1 when the ids are dense enough (:mod:`simulator.overlap.traces`). ``seq_tokens``: window length
    for engine dumps (default ``DEFAULT_SEQ_TOKENS``)."""
    check_params("read_trace", {"format": format, "seq_tokens": seq_tokens},
                 {"format": FORMAT, "seq_tokens": SEQ_TOKENS})
    if not os.path.exists(path):
        raise ParameterError(f"trace file '{path}' not found")
    if not os.path.isfile(path):
        raise ParameterError(f"trace '{path}' is not a file; give a trace file ({', '.join(FORMATS[1:])})")
    fmt = detect_format(path) if format == "auto" else format
    try:
        if fmt == "jsonl":
            return _read_jsonl(path, num_experts)
        if fmt == "sglang":
            records, p2l = _sglang_data(path)
            seqs, layer_ids, skipped = sglang_sequences(records, p2l, where=path)
            if num_experts is None and p2l is not None and np.size(p2l):
                num_experts = int(np.max(p2l)) + 1  # stated by the dump: every logical expert has a replica
            note = f"; {skipped} forward passes of other modes skipped" if skipped else ""
            return _engine_trace(seqs, layer_ids, num_experts, seq_tokens, path, note)
        if fmt == "vllm":
            seqs, layer_ids = vllm_sequences(_vllm_arrays(path), where=path)
            return _engine_trace(seqs, layer_ids, num_experts, seq_tokens, path, "")
        data = _load_numpy(path)
        if fmt == "npy" or not isinstance(data, dict):
            if isinstance(data, dict):
                raise ParameterError(f"{path}: an .npz archive, not an .npy array; use format npz")
            return validate_routing(data, num_experts, path)
        names = list(data)
        key = "experts" if "experts" in names else (names[0] if len(names) == 1 else None)
        if key is None:
            raise ParameterError(f"{path}: expected an array named 'experts'; found {names[:8]}")
        if num_experts is None and "num_experts" in names:
            num_experts = _scalar(data["num_experts"], path, "num_experts")
        return validate_routing(data[key], num_experts, path)
    except UnicodeDecodeError:
        raise ParameterError(f"{path}: not UTF-8 text; a .jsonl trace is JSON Lines") from None
    except (OSError, EOFError, MemoryError) as exc:
        raise ParameterError(f"cannot read trace '{path}': {type(exc).__name__}") from None


def detect_format(path: str) -> str:
    """The format of a trace file from its extension and, where one extension serves several formats, its
    content (array names of an .npz, the fields of the first JSON record, the structure of a PyTorch file)."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        return "npy"
    if ext == ".jsonl":
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = next((line for line in fh if line.strip()), "")
        try:
            rec = json.loads(first)
        except json.JSONDecodeError:
            return "jsonl"  # the reader reports the bad line
        return "vllm" if isinstance(rec, dict) and "routed_experts" in rec else "jsonl"
    if ext == ".npz":
        names = list(_load_numpy(path))
        if any(n.startswith("topk_ids_of_layer") for n in names):
            return "sglang"
        if "experts" in names or len(names) == 1:
            return "npz"
        return "vllm"
    if ext in TORCH_EXTENSIONS:
        data = _load_torch(path, "a PyTorch file")
        return "sglang" if isinstance(data, dict) and "records" in data else "vllm"
    raise ParameterError(f"unknown trace format '{ext}' for '{path}': use .npy, .npz, .jsonl or an engine dump "
                         f"(.pt), or name the format ({', '.join(FORMATS[1:])})")


# ----------------------------------------------------------------------------------------------- file loading


def _load_numpy(path: str):
    """An .npy array or an .npz archive as a dict of arrays; never unpickles."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        if magic.startswith(b"PK"):
            with np.load(path, allow_pickle=False) as data:
                return {name: data[name] for name in data.files}
        if magic == b"\x93NUMPY":
            return np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc):
            raise ParameterError(f"{path}: holds Python objects (pickled), which are not read; save plain integer "
                                 f"arrays") from None
        raise ParameterError(f"{path}: not a valid NumPy .npy/.npz file (damaged or truncated)") from None
    except (EOFError, zipfile.BadZipFile):
        raise ParameterError(f"{path}: not a valid NumPy .npy/.npz file (damaged or truncated)") from None
    except OSError as exc:
        raise ParameterError(f"cannot read '{path}': {(exc.strerror or type(exc).__name__).lower()}") from None
    raise ParameterError(f"{path}: not a NumPy .npy/.npz file")


def _to_numpy(obj):
    """torch tensors inside nested lists/dicts -> numpy arrays (other values unchanged)."""
    if hasattr(obj, "detach") and hasattr(obj, "cpu"):
        return obj.detach().cpu().numpy()
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_numpy(v) for v in obj]
    return obj


def _load_torch(path: str, what: str):
    try:
        import torch
    except ImportError:
        export = SGLANG_EXPORT if "SGLang" in what else SGLANG_EXPORT + f" (vLLM arrays: {VLLM_EXPORT})"
        raise ParameterError(f"{path}: {what} needs PyTorch to read (pip install torch), or export it to .npz "
                             f"where PyTorch is installed: {export}") from None
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure of the unpickler is a bad file
        raise ParameterError(f"{path}: not a readable PyTorch file ({type(exc).__name__})") from None
    return _to_numpy(data)


def _scalar(value, path: str, name: str) -> int:
    arr = np.asarray(value)
    if arr.size != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"{path}: '{name}' must be one integer; got an array of shape {arr.shape}")
    return int(arr.reshape(()))


# ----------------------------------------------------------------------------------------------------- SGLang


def _sglang_data(path: str):
    """(records, physical_to_logical_map or None) from a torch.save'd dump or its .npz export."""
    if os.path.splitext(path)[1].lower() in TORCH_EXTENSIONS:
        data = _load_torch(path, "an SGLang expert-distribution dump")
        if not isinstance(data, dict) or "records" not in data:
            raise ParameterError(f"{path}: not an SGLang per-token dump (no 'records'); record with "
                                 f"--expert-distribution-recorder-mode per_token")
        return list(data["records"]), data.get("last_physical_to_logical_map")
    data = _load_numpy(path)
    if not isinstance(data, dict):
        raise ParameterError(f"{path}: an SGLang dump is a .pt file or its .npz export ({SGLANG_EXPORT})")
    by_index: dict = {}
    for name, value in data.items():
        for key in SGLANG_RECORD_KEYS:
            if name.startswith(key + "_") and name[len(key) + 1:].isdigit():
                by_index.setdefault(int(name[len(key) + 1:]), {})[key] = value
    records = [by_index[i] for i in sorted(by_index)]
    return records, data.get("physical_to_logical_map", data.get("last_physical_to_logical_map"))


def sglang_sequences(records, physical_to_logical=None, *, where: str = "sglang dump"):
    """Token sequences of an SGLang per-token dump: (list of [tokens, layers, k] arrays, layer ids, passes skipped).

    Each record is one forward pass: ``topk_ids_of_layer`` [layers, tokens, 8] with the ids of the pass's tokens,
    −1 where empty. An extend (prefill) pass is cut into its requests by ``extend_seq_lens``; each piece is a run of
    consecutive tokens of one request. Decode passes (``forward_mode`` 2) hold one token per request, in the
    batch's order; consecutive decode passes with the same number of tokens, every position one higher, continue
    the same requests (SGLang keeps a running batch in order), otherwise new sequences start. Other passes (idle,
    target-verify, draft) are skipped. Physical ids become logical through ``physical_to_logical[layer, id]``.
    Layers and columns that are −1 throughout (dense layers; k < 8) are dropped, and so are tokens whose ids are
    all −1 (padding)."""
    if not isinstance(records, (list, tuple)) or not records:
        raise ParameterError(f"{where}: no forward-pass records; record with --expert-distribution-recorder-mode "
                             f"per_token between /start_expert_distribution_record and /stop_...")
    if any(not isinstance(r, dict) or "topk_ids_of_layer" not in r for r in records):
        kind = "per_pass/stat" if any(isinstance(r, dict) and "global_physical_count" in r for r in records) \
            else "another"
        raise ParameterError(f"{where}: a {kind} recording (expert counts, no per-token routing); record with "
                             f"--expert-distribution-recorder-mode per_token")
    order = sorted(range(len(records)), key=lambda i: (int(np.asarray(records[i].get("forward_pass_id", i))), i))
    p2l = None if physical_to_logical is None else np.asarray(physical_to_logical)
    pieces, open_chains, prev_pos, skipped = [], None, None, 0
    for i in order:
        rec = records[i]
        ids = np.asarray(rec["topk_ids_of_layer"])
        if ids.ndim != 3 or not np.issubdtype(ids.dtype, np.integer):
            raise ParameterError(f"{where}: record {i}: 'topk_ids_of_layer' must be an integer array [layers, "
                                 f"tokens, k]; got shape {ids.shape}, dtype {ids.dtype}")
        if np.any(ids < -1):
            raise ParameterError(f"{where}: record {i}: expert id {int(ids.min())}; ids are >= 0, or -1 where empty")
        ids = _logical(ids, p2l, where, i).transpose(1, 0, 2)  # [tokens, layers, k]
        n = ids.shape[0]
        try:
            pos = np.asarray(rec.get("positions", np.arange(n)), dtype=np.int64).reshape(-1)
            esl = rec.get("extend_seq_lens")
            lens = None if esl is None else np.asarray(esl, dtype=np.int64).reshape(-1)
            mode = int(np.asarray(rec.get("forward_mode", 0), dtype=np.int64).reshape(()))
        except (TypeError, ValueError, OverflowError):
            raise ParameterError(f"{where}: record {i}: 'positions', 'extend_seq_lens' and 'forward_mode' must be "
                                 f"integers") from None
        if n == 0:
            continue
        if mode == SGLANG_DECODE:
            if open_chains is not None and len(open_chains) == n and len(pos) == n and np.all(pos == prev_pos + 1):
                for chain, tok in zip(open_chains, ids, strict=True):
                    chain.append(tok)
            else:
                open_chains = [[tok] for tok in ids]
                pieces.extend(open_chains)
            prev_pos = pos
            continue
        open_chains = None
        if lens is None or lens.sum() != n or np.any(lens < 0):
            skipped += 1
            continue
        for start, length in zip(np.cumsum(lens) - lens, lens, strict=True):
            pieces.append(list(ids[start:start + length]))
    seqs = [np.stack(p) for p in pieces if p]
    if not seqs:
        raise ParameterError(f"{where}: no extend or decode passes with routing found ({skipped} skipped)")
    seqs, layer_ids = _drop_empty(seqs, where)
    return seqs, layer_ids, skipped


def _logical(ids: np.ndarray, p2l, where: str, index: int) -> np.ndarray:
    if p2l is None:
        return ids
    if p2l.ndim != 2 or p2l.shape[0] != ids.shape[0]:
        raise ParameterError(f"{where}: the physical-to-logical map is shaped {p2l.shape}, but the records have "
                             f"{ids.shape[0]} layers")
    valid = ids >= 0
    if np.any(ids[valid] >= p2l.shape[1]):
        raise ParameterError(f"{where}: record {index} has physical expert id {int(ids.max())} but the map has "
                             f"{p2l.shape[1]} physical experts (disable shared-expert fusion when recording)")
    layer = np.broadcast_to(np.arange(ids.shape[0])[:, None, None], ids.shape)
    out = np.full(ids.shape, -1, dtype=np.int64)
    out[valid] = p2l[layer[valid], ids[valid]]
    return out


def _drop_empty(seqs, where: str, empty: int = -1):
    """Drop layers and id columns that are ``empty`` in every token of every sequence, then tokens whose ids are
    all empty; any empty id left is an error. Returns (sequences, kept layer ids)."""
    layers, k = seqs[0].shape[1:]
    if any(s.shape[1:] != (layers, k) for s in seqs):
        raise ParameterError(f"{where}: sequences differ in layers or k")
    filled_layer = np.zeros(layers, bool)
    filled_col = np.zeros(k, bool)
    for s in seqs:
        mask = s != empty
        filled_layer |= mask.any(axis=(0, 2))
        filled_col |= mask.any(axis=(0, 1))
    if not filled_layer.any():
        raise ParameterError(f"{where}: no routed expert ids in the dump")
    out = []
    for s in seqs:
        s = s[:, filled_layer][:, :, filled_col]
        keep = (s != empty).any(axis=(1, 2))
        out.append(s[keep])
    holes = sum(int(np.count_nonzero(s == empty)) for s in out)
    if holes:
        raise ParameterError(f"{where}: {holes} empty ({empty}) expert ids among routed tokens; every token must "
                             f"list its k experts")
    return [s for s in out if len(s)], tuple(int(i) for i in np.flatnonzero(filled_layer))


# ------------------------------------------------------------------------------------------------------- vLLM


def _vllm_arrays(path: str) -> list:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".jsonl":
        arrays = []
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ParameterError(f"{path} line {lineno}: not valid JSON ({exc.msg})") from None
                if not isinstance(rec, dict) or "routed_experts" not in rec:
                    raise ParameterError(f"{path} line {lineno}: expected an object with 'routed_experts' "
                                         f"[tokens][layers][k]")
                try:
                    ids = np.asarray(rec["routed_experts"])
                except (TypeError, ValueError, OverflowError):
                    ids = None
                if ids is None or ids.ndim != 3 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
                    raise ParameterError(f"{path} line {lineno}: 'routed_experts' must be a rectangular list "
                                         f"[tokens][layers][k] of integer ids")
                arrays.append(ids)
        return arrays
    if ext in TORCH_EXTENSIONS:
        data = _load_torch(path, "a torch.save'd list of vLLM routed_experts arrays")
    else:
        data = _load_numpy(path)
    if isinstance(data, dict):
        data = data.get("routed_experts", [data[name] for name in sorted(data, key=_natural)])
    if isinstance(data, np.ndarray):
        data = [data]
    return [np.asarray(a) for a in data]


def _natural(name: str):
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else -1, name)


def vllm_sequences(arrays, *, where: str = "vllm routed_experts"):
    """Sequences of vLLM's per-request ``routed_experts`` arrays [tokens, layers, k] (logical ids, captured before
    the EPLB logical-to-physical mapping; the prompt's tokens then the generated ones but the last). Layers that
    are 0 throughout are layers the capturer never wrote (dense layers: its buffer starts at zero) and are
    dropped. Returns (sequences, kept layer ids)."""
    seqs = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if a.ndim != 3 or not (np.issubdtype(a.dtype, np.integer) or a.size == 0):
            raise ParameterError(f"{where}: request {i}: routed_experts must be an integer array [tokens, layers, "
                                 f"k]; got shape {a.shape}, dtype {a.dtype}")
        if a.shape[0]:
            seqs.append(a.astype(np.int64))
    if not seqs:
        raise ParameterError(f"{where}: no requests with routed experts")
    if any(np.any(s < 0) for s in seqs):
        raise ParameterError(f"{where}: negative expert ids; vLLM's routed_experts are ids >= 0")
    layers = seqs[0].shape[1]
    if any(s.shape[1:] != seqs[0].shape[1:] for s in seqs):
        raise ParameterError(f"{where}: requests differ in layers or k")
    written = np.zeros(layers, bool)
    for s in seqs:
        written |= (s != 0).any(axis=(0, 2))
    if not written.any():
        raise ParameterError(f"{where}: every id is 0: nothing was captured")
    return [s[:, written] for s in seqs], tuple(int(i) for i in np.flatnonzero(written))


# ---------------------------------------------------------------------------------------------------- windows


def windows(seqs, seq_tokens: int | None, where: str):
    """Cut sequences [T_i, layers, k] into windows of ``seq_tokens`` consecutive tokens: array [S, T, layers, k];
    also the number of tokens left over (remainders shorter than a window)."""
    t = DEFAULT_SEQ_TOKENS if seq_tokens is None else int(seq_tokens)
    longest = max(len(s) for s in seqs)
    if longest < t:
        raise ParameterError(f"{where}: the longest sequence has {longest} tokens, fewer than the window of {t} "
                             f"(seq_tokens); choose seq_tokens of at most {longest}")
    parts = [s[: len(s) // t * t].reshape(-1, t, *s.shape[1:]) for s in seqs if len(s) >= t]
    dropped = sum(len(s) for s in seqs) - sum(p.shape[0] * t for p in parts)
    return np.concatenate(parts), dropped


def _engine_trace(seqs, layer_ids, num_experts, seq_tokens, where: str, note: str) -> Trace:
    arr, dropped = windows(seqs, seq_tokens, where)
    total = sum(len(s) for s in seqs)
    if dropped or note:
        unused = f"; {dropped} of {total} tokens in shorter remainders not used" if dropped else ""
        warnings.warn(f"{where}: {len(seqs)} sequences cut into {arr.shape[0]} windows of {arr.shape[1]} tokens"
                      f"{unused}{note}", stacklevel=3)
    return validate_routing(arr, num_experts, where, layer_ids=layer_ids)


# ------------------------------------------------------------------------------------------------ JSON Lines


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


