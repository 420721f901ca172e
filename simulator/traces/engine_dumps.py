"""From an engine's routing dump to token sequences: the pure mapping of SGLang's per-token expert-distribution
records and vLLM's per-request routed_experts arrays to arrays [tokens, layers, k] of logical expert ids, and the
cut of sequences into equal windows (docs/MODEL.md §2.9). File reading is in :mod:`simulator.traces.formats`.
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

__all__ = ["DEFAULT_SEQ_TOKENS", "SGLANG_DECODE", "sglang_sequences", "vllm_sequences", "windows"]

DEFAULT_SEQ_TOKENS = 64
# sglang/srt/model_executor/forward_batch_info.py: ForwardMode(IntEnum) EXTEND=1, DECODE=2, MIXED=3, IDLE=4, ...
SGLANG_DECODE = 2


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
