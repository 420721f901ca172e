"""Engine per-round overheads of speculative decoding (docs/MODEL.md §4.5).

CUDA-graph padding staircase (mechanism ``graph_padding``). Engines replay CUDA graphs captured for a fixed list of
sizes; a pass whose size is not captured runs the graph of the next captured size (padding rows that are computed and
thrown away), and a pass above the largest captured size runs eagerly: the host launches every kernel
(``kernels.step.launch_eager`` each, L in all) while the GPU works through the queue, so the pass takes
max(T_graph, L) (launches overlap execution; assumed: the host issues kernels back to back). The capture lists are
engine parameters of the hardware profile (``kernels.graphs`` for the default engine, ``engines.<engine>.kernels.
graphs`` for the others; :class:`simulator.specs.kernels.GraphCapture`, each with its source), read through
``HardwareProfile.for_engine``: the engines' public defaults,

- vLLM (V1): ``compilation_config.cudagraph_capture_sizes`` counts *tokens*: 1, 2, 4, then multiples of 8 to 256 and
  of 16 to ``max_cudagraph_capture_size`` = 512. With speculative decoding the sizes are rounded to multiples of the
  uniform decode query length γ + 1 (``adjust_cudagraph_sizes_for_spec_decode``, vLLM PR #28315), so a verify pass
  of B requests pads to the next captured multiple of γ + 1 and runs eagerly above 512 tokens.
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

from dataclasses import replace

import numpy as np

from ..cost.deployment import Deployment, Mechanisms
from ..cost.step import StepResult
from ..specs.hardware import HardwareProfile
from ..specs.kernels import GraphCapture
from ..specs.model import ModelSpec

__all__ = ["gdn_checkpoint_time", "graph_batch", "padded_step"]


def graph_batch(graphs: GraphCapture, batch, tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(padded batch, eager) per batch point for a pass of ``tokens`` tokens per request under the capture list
    ``graphs`` (the engine's ``kernels.graphs``): the batch of the captured graph the engine replays (≥ the batch),
    or the batch itself with eager = True above the cap."""
    sizes, unit = graphs.sizes, graphs.unit
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    s = max(int(tokens), 1)
    if unit == "tokens":  # sizes rounded up to multiples of s, at most the largest size (vLLM PR #28315)
        cap = sizes[-1]
        reqs = np.unique([-(-c // s) for c in sizes if -(-c // s) * s <= cap] or [0])
    else:
        reqs = np.asarray(sizes)
    reqs = reqs[reqs > 0]
    idx = np.searchsorted(reqs, b, side="left")
    eager = idx >= reqs.size
    padded = np.where(eager, b, reqs[np.minimum(idx, reqs.size - 1)] if reqs.size else b)
    return padded.astype(float), eager


def padded_step(cache, model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, tokens, context: int,
                mech: Mechanisms, overlap=None, speculative=False) -> StepResult:
    """T(B, s) of a pass as the engine runs it: at the captured batch (graph_padding on) or as given (off).
    ``tokens`` is a scalar or an array aligned with ``batch``. Capture sizes apply per attention-DP rank (B / dp
    requests each); a batch whose per-rank share is already a captured size is priced as given. ``speculative``
    (a bool or an array aligned with ``batch``): the pass belongs to an SD round, so a server launched with SD
    captures it (``GraphCapture.sd_sizes`` where the profile states them)."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    s = np.broadcast_to(np.atleast_1d(np.asarray(tokens, dtype=float)), b.shape)
    graphs = hw.for_engine(dep.engine).kernels.graphs
    if mech.graph_padding != "on" or not dep.cuda_graphs or graphs is None:
        return cache.step(model, hw, dep, b, s, context, mech, overlap)
    sd = np.broadcast_to(np.atleast_1d(np.asarray(speculative, dtype=bool)), b.shape)
    pb, eager = b.copy(), np.zeros(b.shape, dtype=bool)
    per_rank = np.ceil(b / dep.dp)  # under attention DP every rank captures and replays its own batch
    for x in np.unique(s):
        for flag in (False, True):
            rows = (s == x) & (sd == flag)
            if rows.any():
                padded, eager[rows] = graph_batch(graphs.for_round(flag), per_rank[rows], int(x))
                pb[rows] = np.where(padded == per_rank[rows], b[rows], padded * dep.dp)
    res = cache.step(model, hw, dep, pb, s, context, mech, overlap)
    if eager.any():  # launches overlap the GPU's work: the pass takes max(T_graph, L), L = Σ per-kernel launch costs
        launches = cache.step(model, hw, replace(dep, cuda_graphs=False), pb, s, context, mech, overlap).time - res.time
        res = replace(res, time=np.where(eager, np.maximum(res.time, launches), res.time))
    return res


def gdn_checkpoint_time(model: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, drafted,
                        mech: Mechanisms) -> np.ndarray:
    """T_gdn (module docstring) over ``batch``; 0 without linear-attention layers or with round_overheads off."""
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    la = model.attention.linear
    if mech.round_overheads != "on" or la is None or drafted <= 0:  # (before counting layers: once per γ per case)
        return np.zeros_like(b)
    n_lin = sum(1 for kind, _ in model.layer_layout if kind == "linear")
    if n_lin == 0:
        return np.zeros_like(b)
    state = (b / dep.dp) * (la.value_heads // dep.tp) * la.key_head_dim * la.value_head_dim * 4.0
    eta = hw.for_engine(dep.engine).kernels.global_efficiency
    return drafted * n_lin * state / (hw.hbm_bandwidth * eta)
