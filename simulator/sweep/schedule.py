"""Adaptive draft length exported to engines, and the throughput view (docs/MODEL.md §5, "Schedules").

:func:`build_schedule` prices one deployment through the one pricing path (:func:`simulator.pricing.price`) at EVERY
integer batch 1..B_max (B_max = the largest batch of the grid that fits memory), for each context; the best draft
length per batch is the γ ≥ 1 of the largest speedup, or K = 0 where that speedup is ≤ 1 (SD does not pay). Because
every batch is priced there is no interpolation between grid points: a range is a run of equal K. Draft trees
(``trees``: parent lists) are priced the same way (a tree scenario) and reported per batch
beside the best chain.

Formats (:func:`vllm_config`, :func:`schedule_json`):
- vLLM (``speculative_config`` keys from vLLM PR #32374 "Add Dynamic SD"): ``num_speculative_tokens_per_batch_size``
  maps inclusive ``"a-b"`` batch ranges to K; ``num_speculative_tokens`` is the startup maximum (buffers; the
  scheduled K is clamped to it), so it is written as the largest K of the table. vLLM has no merged context-length
  schedule (``num_speculative_tokens_per_seq_len`` is an open PR, #54801; RFC #48627): the context axis goes to
  the JSON format only.
- SGLang: no static batch → draft-length table (its adaptive controller, PRs #21599 / #24055, picks
  ``speculative_num_steps`` at run time from an accept-length moving average): refused, use JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ..cost.deployment import Deployment
from ..errors import InfeasibleError, ParameterError
from ..pricing import Request, price
from ..pricing.resolve import request as make_request
from ..specdec import StepCache
from ..specdec.tree import tree_label
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from ..validation import Options, Param
from .runner import DEFAULT_BATCH, DEFAULT_DRAFT_LEN, deploy, grid_values, in_mode

__all__ = ["FORMATS", "Schedule", "build_schedule", "k_ranges", "schedule_json", "throughput_rows", "vllm_config"]

FORMATS = ("vllm", "sglang", "json")
FORMAT = Param(Options(FORMATS))
SGLANG_REFUSAL = ("SGLang has no static batch-size -> draft-length table (its adaptive controller, PRs #21599 and "
                  "#24055, picks speculative_num_steps at run time); use --format json")


@dataclass(frozen=True)
class ContextSchedule:
    """Best draft length at every batch 1..B_max for one context."""

    context: int
    batch: np.ndarray  # 1..B_max
    k: np.ndarray  # best K per batch (0: SD does not pay)
    speedup: np.ndarray  # speedup of the best chain (1 where K = 0)
    best_chain_speedup: np.ndarray  # the best chain's speedup even where it is ≤ 1
    tokens_user: np.ndarray  # tokens/s per request with the schedule's K
    tokens_user_plain: np.ndarray  # tokens/s per request without SD
    tree: list = field(default_factory=list)  # per batch: (label, speedup) of the best tree, when trees are swept

    def ranges(self) -> list[tuple[int, int, int]]:
        return k_ranges(self.batch, self.k)


@dataclass(frozen=True)
class Schedule:
    model: ModelSpec
    hardware: HardwareProfile
    deployment: Deployment
    drafter: str
    acceptance: str
    grid: np.ndarray  # batches shown in the throughput view
    contexts: tuple[ContextSchedule, ...]
    notes: tuple[str, ...] = ()

    @property
    def primary(self) -> ContextSchedule:
        return self.contexts[0]


def k_ranges(batch, k) -> list[tuple[int, int, int]]:
    """Inclusive (lo, hi, K) runs of equal K over consecutive batches 1..B_max (contiguous from 1)."""
    b = np.asarray(batch, dtype=int)
    k = np.asarray(k, dtype=int)
    if b.size == 0 or b[0] != 1 or np.any(np.diff(b) != 1):
        raise ParameterError("k_ranges needs every batch 1..B_max", owner="k_ranges", param="batch")
    cuts = np.flatnonzero(np.diff(k)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts - 1, [b.size - 1]])
    return [(int(b[s]), int(b[e]), int(k[s])) for s, e in zip(starts, ends, strict=True)]


def build_schedule(model: ModelSpec, hw: HardwareProfile, request: Request | None = None, *, batch=DEFAULT_BATCH,
                   draft_len=DEFAULT_DRAFT_LEN, contexts=(1024,), mode: str = "refined", trees=(), **knobs) -> Schedule:
    """The schedule of one deployment (module docstring); ``contexts[0]`` is the one engines take. ``request``
    carries every other knob (layout, engine, placement, drafter, acceptance, statistics, forced mechanisms), as in
    :func:`.runner.run_sweep`; keyword ``knobs`` change it (:func:`simulator.pricing.request`)."""
    req = make_request(request, **knobs)
    grid = grid_values(batch, "batch")
    gam = grid_values(draft_len, "draft_len")
    gam = gam[gam >= 1]
    if gam.size == 0:
        raise ParameterError("the 'draft_len' parameter of build_schedule needs at least one draft length >= 1; got "
                             f"{list(draft_len)}", owner="build_schedule", param="draft_len")
    if not contexts:
        raise ParameterError("build_schedule needs at least one context", owner="build_schedule", param="context")
    n_max = max([int(gam.max()) + 1] + [len(t) for t in trees])
    every = np.arange(1, int(grid.max()) + 1)
    sc, ok, why = deploy(model, hw, req.edit(context=max(contexts)), every, n_max - 1)
    if not ok:
        raise InfeasibleError(f"{model.name} on {hw.name}: no batch fits ({why})")
    sc = in_mode(sc, mode, req)
    notes = [f"batches above {ok[-1]:g} do not fit at context {max(contexts)} ({why})"] if len(ok) < len(every) else []
    dense = np.arange(1, int(ok[-1]) + 1)
    cache = StepCache()
    out = []
    for ctx in contexts:
        sc_ctx = sc.edit(context=int(ctx))
        r = price(sc_ctx, dense, np.concatenate([[0], gam]), cache=cache).result
        k, best = r.best()
        k = np.where(best > 1.0, k, 0)
        idx = np.searchsorted(r.gammas, k)
        cols = np.arange(dense.size)
        tok_user = r.tokens_per_s_request[idx, cols]
        plain = r.tokens_per_s_request[0]
        tree_best = []
        if trees:
            res = [price(sc_ctx.edit(tree=t), dense, cache=cache) for t in trees]
            spd = np.stack([c.result.speedup[0] for c in res])
            j = np.argmax(spd, axis=0)
            tree_best = [(tree_label(trees[i]), float(spd[i, c])) for c, i in enumerate(j)]
        out.append(ContextSchedule(int(ctx), dense, k, np.where(k > 0, best, 1.0), best, tok_user, plain, tree_best))
    shown = np.asarray([b for b in grid if b <= dense[-1]], dtype=int)
    return Schedule(model, sc.hw, sc.deployment, sc.drafter.label, sc.accept.label, shown, tuple(out), tuple(notes))


def throughput_rows(s: Schedule, context: ContextSchedule | None = None) -> list[dict]:
    """Per grid batch: tokens/s per user and per GPU, with SD (the schedule's K) and without (K = 0)."""
    c = context or s.primary
    gpus = s.deployment.gpus
    rows = []
    for b in s.grid:
        i = int(b) - 1
        rows.append({"batch": int(b), "k": int(c.k[i]), "speedup": float(c.speedup[i]),
                     "tokens_per_s_user_sd": float(c.tokens_user[i]),
                     "tokens_per_s_user_plain": float(c.tokens_user_plain[i]),
                     "tokens_per_s_gpu_sd": float(c.tokens_user[i] * b / gpus),
                     "tokens_per_s_gpu_plain": float(c.tokens_user_plain[i] * b / gpus)})
    return rows


def vllm_config(s: Schedule) -> dict:
    """The ``speculative_config`` fragment for vLLM (module docstring); refuses when SD pays at no batch."""
    c = s.primary
    if not np.any(c.k > 0):
        best = float(c.best_chain_speedup.max())
        raise InfeasibleError(f"speculative decoding does not pay at any batch 1..{int(c.batch[-1])} for "
                              f"{s.model.name} on {s.hardware.name} (best speedup {best:.3f}); serve without "
                              f"speculative_config")
    table = {f"{lo}-{hi}": k for lo, hi, k in c.ranges()}
    return {"speculative_config": {"num_speculative_tokens": int(c.k.max()),
                                   "num_speculative_tokens_per_batch_size": table}}


def schedule_json(s: Schedule) -> dict:
    """Everything: per context the ranges and the per-batch table (batch, best K, speedup, best tree), and the
    throughput view per context."""
    ctxs = []
    for c in s.contexts:
        per_batch = [{"batch": int(b), "k": int(k), "speedup": float(sp), "best_chain_speedup": float(bc)}
                     for b, k, sp, bc in zip(c.batch, c.k, c.speedup, c.best_chain_speedup, strict=True)]
        for row, t in zip(per_batch, c.tree, strict=False):
            row["best_tree"], row["best_tree_speedup"] = t
        ctxs.append({"context": c.context, "ranges": [{"batch": f"{lo}-{hi}", "k": k} for lo, hi, k in c.ranges()],
                     "per_batch": per_batch, "throughput": throughput_rows(s, c)})
    return {"model": s.model.name, "hardware": s.hardware.name, "deployment": s.deployment.label,
            "engine": s.deployment.engine, "gpus": s.deployment.gpus, "drafter": s.drafter,
            "acceptance": s.acceptance, "rule": "every batch 1..B_max priced; K = argmax speedup over draft lengths "
            ">= 1, 0 where it is <= 1; ranges are runs of equal K", "notes": list(s.notes), "contexts": ctxs}


def render(s: Schedule, fmt: str) -> str:
    """The file text of ``fmt`` (vllm | sglang | json)."""
    FORMAT.check(fmt, "format", "render")
    if fmt == "sglang":
        raise ParameterError(SGLANG_REFUSAL, owner="render", param="format")
    obj = vllm_config(s) if fmt == "vllm" else schedule_json(s)
    return json.dumps(obj, indent=2) + "\n"


def plot_throughput(s: Schedule, path) -> str:
    """tokens/s per GPU against tokens/s per user, with and without SD, over the grid batches."""
    from matplotlib.figure import Figure

    from ..render.figures import save

    rows = throughput_rows(s)
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.subplots()
    for key, label, style in (("plain", "without SD", "o--"), ("sd", "with SD (schedule's K)", "s-")):
        x = [r[f"tokens_per_s_user_{key}"] for r in rows]
        y = [r[f"tokens_per_s_gpu_{key}"] for r in rows]
        ax.plot(x, y, style, label=label, ms=4)
        if key == "sd":
            for r, xi, yi in zip(rows, x, y, strict=True):
                ax.annotate(f"B{r['batch']} K{r['k']}", (xi, yi), fontsize=6, xytext=(3, 3),
                            textcoords="offset points")
    ax.set_xlabel("tokens/s per user")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title(f"{s.model.name} on {s.hardware.name}, {s.deployment.label}, context {s.primary.context}",
                 fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, path)
