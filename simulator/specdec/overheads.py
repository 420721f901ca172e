"""Engine per-round overheads of speculative decoding (docs/MODEL.md §4.5).

CUDA-graph padding staircase (mechanism ``graph_padding``). Engines replay CUDA graphs captured for a fixed list of
sizes; a pass whose size is not captured runs the graph of the next captured size (padding rows that are computed and
thrown away), and a pass above the largest captured size runs eagerly: the host launches every kernel
(``kernels.step.launch_eager`` each, L in all) while the GPU works through the queue, so the pass takes
max(T_graph, L) (launches overlap execution; assumed: the host issues kernels back to back). The capture lists are
the engine's (``graphs:`` of its file, engines/*.yaml; :class:`simulator.specs.engine.GraphCapture`, with its
source), read from the release the profile is bound to (``hw.engine_spec.graphs``): the engines' public defaults,

- vLLM (V1): ``compilation_config.cudagraph_capture_sizes`` counts *tokens*: 1, 2, 4, then multiples of 8 to 256 and
  of 16 to ``max_cudagraph_capture_size`` = 512. With speculative decoding the sizes are rounded to multiples of the
  uniform decode query length γ + 1 (``adjust_cudagraph_sizes_for_spec_decode``, vLLM PR #28315; the file's
  ``round_to_pass``), so a verify pass of B requests pads to the next captured multiple of γ + 1 and runs eagerly
  above 512 tokens. The rounding runs only for FULL decode graphs; a per-batch draft-length table forces piecewise
  graphs (``_maybe_override_dynamic_sd_cudagraph_mode``), so under a table (mechanism value ``table``, the file's
  ``per_batch_table``) the pass of B · s tokens replays the next *listed* size, B' = size / s requests, a fraction
  where s does not divide it (priced linearly between the whole batches either side).
- SGLang: ``cuda_graph_bs`` counts *requests*: 1, 2, 4, 8, 12, then multiples of 8 to ``cuda_graph_max_bs``
  (assumed 256: the default depends on GPU memory and TP size); a server launched with SD captures 1..8, then
  steps of 2 to 32, of 4 to 64 and of 8 (``server_args._generate_cuda_graph_batch_sizes``): ``sd_sizes``, used for
  the passes of a round (verify, draft) while the plain-decoding baseline keeps ``sizes``.
- TensorRT-LLM: ``cuda_graph_config.batch_sizes`` with ``enable_padding``: 1, 2, 4, then multiples of 8 to
  ``max_batch_size`` (assumed 128).

A profile without ``graphs`` for the engine models no padding (the pass is priced at its own batch).

Round overheads (mechanism ``round_overheads``): linear-attention (Gated DeltaNet) state checkpoints. A model with
linear-attention layers cannot roll its recurrent state back past a rejected draft, so engines keep the state after
every drafted position of the verify pass (vLLM's Mamba/GDN spec-decode path writes one state per speculative
token): γ extra fp32 states per request and linear layer, written once,

    T_gdn(B, γ) = γ · n_linear · (B / dp) · (h_v / tp) · d_k · d_v · 4 B / (BW_hbm · η_global)

(η_global: the profile's ``kernels.global_efficiency``, a streaming write). Rejection sampling is the profile's
``kernels.step.rejection_sampling`` (:func:`simulator.specdec.rounds.rejection_time`). KV rollback after a rejected
chain costs no copy in vLLM, SGLang or TRT-LLM (rejected slots are released by shortening the sequence), so it has
no term; DeepSeek-V3.2's sparse-attention indexer is part of every pass (:func:`simulator.cost.ops._indexer_ops`
scores all γ + 1 verify positions against the whole context), not an overhead.
"""

from __future__ import annotations

import functools
from dataclasses import fields, replace

import numpy as np

from ..cost.deployment import Deployment, Mechanisms
from ..cost.step import StepResult
from ..specs.engine import GraphCapture
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec

__all__ = ["gdn_checkpoint_time", "graph_batch", "padded_step"]


@functools.lru_cache(maxsize=4096)
def capture_requests(graphs: GraphCapture, tokens: int) -> tuple[float, ...]:
    """The captured batches in requests, increasing, of a pass of ``tokens`` tokens per request under the capture
    list ``graphs``: the sizes themselves (unit requests); (unit tokens, ``round_to_pass``) the sizes rounded up to
    multiples of ``tokens`` that stay within the largest size (vLLM's FULL decode graphs under SD,
    ``adjust_cudagraph_sizes_for_spec_decode``, PR #28315), in requests; (unit tokens, not rounded) each size in
    request-equivalents c / tokens (vLLM's piecewise graphs under a per-batch draft-length table: the pass of
    B · s tokens replays the next listed token count, a fraction of a request where s does not divide it)."""
    sizes, s = graphs.sizes, max(int(tokens), 1)
    if graphs.unit == "tokens" and graphs.round_to_pass:
        reqs = np.unique([-(-c // s) for c in sizes if -(-c // s) * s <= sizes[-1]] or [0])
    elif graphs.unit == "tokens":
        reqs = np.asarray(sizes, dtype=float) / s
    else:
        reqs = np.asarray(sizes)
    return tuple(float(r) for r in reqs if r > 0)


def graph_batch(graphs: GraphCapture, batch, tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(padded batch, eager) per batch point for a pass of ``tokens`` tokens per request under the capture list
    ``graphs`` (the engine file's ``graphs``): the batch of the captured graph the engine replays (≥ the batch),
    or the batch itself with eager = True above the cap. (:func:`padded_step` prices whole grids through
    :func:`_padded_batches`, the one implementation.)"""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    return _padded_batches(graphs, b, np.full(b.shape, float(tokens)), np.zeros(b.shape, dtype=bool))


def _padded_batches(graphs: GraphCapture, per_rank: np.ndarray, tokens: np.ndarray, speculative: np.ndarray):
    """:func:`graph_batch` at every point at once, each with its own pass length and capture list (plain decoding
    or an SD round's): the lists of the distinct (tokens, speculative) pairs side by side, padded with inf.
    Memoised (a sweep pads the same grid on every GPU of an engine); the arrays returned are read-only."""
    per_rank, tokens = np.asarray(per_rank, dtype=float), np.asarray(tokens, dtype=float)
    speculative = np.asarray(speculative, dtype=bool)
    return _padded_cached(graphs, per_rank.tobytes(), tokens.tobytes(), speculative.tobytes())


@functools.lru_cache(maxsize=1024)
def _padded_cached(graphs: GraphCapture, per_rank: bytes, tokens: bytes, speculative: bytes):
    per_rank, tokens = np.frombuffer(per_rank), np.frombuffer(tokens)
    padded, eager = _pad(graphs, per_rank, tokens, np.frombuffer(speculative, dtype=bool))
    padded.setflags(write=False)
    eager.setflags(write=False)
    return padded, eager


def _pad(graphs: GraphCapture, per_rank: np.ndarray, tokens: np.ndarray, speculative: np.ndarray):
    keys, inverse = np.unique(tokens * 2.0 + speculative, return_inverse=True)
    lists = [capture_requests(graphs.for_round(bool(k % 2)), int(k // 2)) for k in keys]
    table = np.full((len(lists), max(map(len, lists)) + 1), np.inf)
    for i, reqs in enumerate(lists):
        table[i, :len(reqs)] = reqs
    sizes = np.array([len(r) for r in lists])[inverse]
    rows = table[inverse]
    idx = (rows < per_rank[:, None]).sum(axis=1)  # searchsorted, side="left", row by row
    eager = idx >= sizes
    return np.where(eager, per_rank, rows[np.arange(idx.size), np.minimum(idx, np.maximum(sizes - 1, 0))]), eager


def padded_step(cache, model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, tokens, context: int,
                mech: Mechanisms, overlap=None, speculative=False) -> StepResult:
    """T(B, s) of a pass as the engine runs it: at the captured batch (graph_padding on) or as given (off).
    ``tokens`` is a scalar or an array aligned with ``batch``. Capture sizes apply per attention-DP rank (B / dp
    requests each); a batch whose per-rank share is already a captured size is priced as given. ``speculative``
    (a bool or an array aligned with ``batch``): the pass belongs to an SD round, so a server launched with SD
    captures it (``GraphCapture.sd_sizes`` where the profile states them)."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    s = np.broadcast_to(np.atleast_1d(np.asarray(tokens, dtype=float)), b.shape)
    graphs = hw.engine_spec.graphs
    if mech.graph_padding == "off" or not dep.cuda_graphs or graphs is None:
        return cache.step(model, hw, dep, b, s, context, mech, overlap)
    if mech.graph_padding == "table":  # a server serving a per-batch draft-length table (GraphCapture.for_table)
        graphs = graphs.for_table()
    sd = np.broadcast_to(np.atleast_1d(np.asarray(speculative, dtype=bool)), b.shape)
    per_rank = np.ceil(b / dep.dp)  # under attention DP every rank captures and replays its own batch
    padded, eager = _padded_batches(graphs, per_rank, np.rint(s), sd)
    pb = np.where(padded == per_rank, b, padded * dep.dp)
    if not eager.any():
        return _step(cache, model, hw, dep, pb, s, context, mech, overlap)
    # launches overlap the GPU's work: the pass takes max(T_graph, L), L = Σ per-kernel launch costs (T_eager −
    # T_graph); the eager points' launch-paying twins are priced in the same call, appended after the grid
    n = b.size
    both = _step(cache, model, hw, dep, np.concatenate([pb, pb[eager]]), np.concatenate([s, s[eager]]), context,
                 mech, overlap, np.arange(n + int(eager.sum())) >= n)
    res = both.rows(slice(0, n))
    launches = np.zeros(n)
    launches[eager] = both.time[n:] - res.time[eager]
    return replace(res, time=np.where(eager, np.maximum(res.time, launches), res.time))


def _step(cache, model, hw, dep, pb, s, context, mech, overlap, eager=None) -> StepResult:
    """T at the padded batch ``pb``. A fractional ``pb`` (a captured token count that the pass's s tokens per
    request do not divide, :func:`capture_requests`) is priced linearly between the whole batches either side,
    every part of the result alike (so breakdowns still add up): T(⌊p⌋) + (p − ⌊p⌋) · (T(⌈p⌉) − T(⌊p⌋)); the step
    model takes whole requests (docs/MODEL.md §4.5)."""
    lo = np.floor(pb)
    w = pb - lo
    if not (w > 0).any():
        return cache.step(model, hw, dep, pb, s, context, mech, overlap, eager)
    n = pb.size
    flags = None if eager is None else np.concatenate([eager, eager])
    both = cache.step(model, hw, dep, np.concatenate([lo, np.ceil(pb)]), np.concatenate([s, s]), context, mech,
                      overlap, flags)
    a, z = both.rows(slice(0, n)), both.rows(slice(n, 2 * n))

    def mix(x, y):
        return {k: x[k] + w * (y[k] - x[k]) for k in x} if isinstance(x, dict) else x + w * (y - x)
    return StepResult(**{f.name: mix(getattr(a, f.name), getattr(z, f.name)) for f in fields(StepResult)})


def gdn_checkpoint_time(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, drafted,
                        mech: Mechanisms) -> np.ndarray:
    """T_gdn (module docstring) over ``batch`` for ``drafted`` tokens (a count, or an array of counts: the result
    then has a row per count); 0 without linear-attention layers, with round_overheads off and where drafted ≤ 0."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    d = np.asarray(drafted, dtype=float)
    out = np.zeros(d.shape + b.shape)
    la = model.attention.linear
    if mech.round_overheads != "on" or la is None or not (d > 0).any():  # (before counting layers)
        return out
    n_lin = sum(1 for kind, _ in model.layer_layout if kind == "linear")
    if n_lin == 0:
        return out
    state = (b / dep.dp) * (la.value_heads // dep.tp) * la.key_head_dim * la.value_head_dim * 4.0
    eta = hw.kernels.global_efficiency
    d = np.maximum(d, 0.0)[..., None] if d.ndim else max(float(d), 0.0)
    return d * n_lin * state / (hw.hbm_bandwidth * eta)
