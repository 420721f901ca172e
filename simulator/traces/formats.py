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
from ..params import Interval, Options, Param, check_params
from .engine_dumps import DEFAULT_SEQ_TOKENS, sglang_sequences, vllm_sequences, windows
from .trace import Trace, validate_routing

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
SEQ_TOKENS = Param(Interval(int, 2, None), None, unit="tokens")
TORCH_EXTENSIONS = (".pt", ".pth")

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


# ------------------------------------------------------------------------------------------------------- vLLM


def _vllm_arrays(path: str) -> list:
    ext = os.path.splitext(path)[1].lower()
    if ext == ".jsonl":
        arrays = []
        for lineno, rec in _jsonl_records(path):
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


def _jsonl_records(path: str):
    """(line number, parsed object) of every non-blank line of a JSON Lines file; a bad line is one error."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise ParameterError(f"{path} line {lineno}: not valid JSON ({exc.msg})") from None


def _natural(name: str):
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else -1, name)


# -------------------------------------------------------------------------------------------------- engine trace


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
    for lineno, rec in _jsonl_records(path):
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


