"""Adaptive draft length exported to engines, and the throughput view (docs/MODEL.md §5, "Schedules").

:func:`build_schedule` prices one deployment through the one pricing path (:func:`simulator.pricing.price`) at EVERY
integer batch 1..B_max (B_max = the largest batch of the grid that fits memory), for each context; the best draft
length per batch is the γ ≥ 1 of the largest speedup, or K = 0 where that speedup is ≤ 1 (SD does not pay). Because
every batch is priced there is no interpolation between grid points: a range is a run of equal K. Draft trees
(``trees``: parent lists) are priced the same way (a tree scenario) and reported per batch
beside the best chain.

Formats (:func:`vllm_config`, :func:`schedule_json`):
- vLLM: the ``SpeculativeConfig`` fields vLLM declares (vllm/config/speculative.py):
  ``num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None``, a list of inclusive
  ``[range_start, range_end, K]`` from 1 (validated by ``validate_and_normalize_dynamic_sd_schedule`` in
  vllm/v1/spec_decode/dynamic/utils.py: a list, 3-item entries, positive, sorted, non-overlapping, first range from
  1, K ≥ 0), and ``num_speculative_tokens`` (> 0), the startup maximum the scheduled K is clamped to, written as the
  table's largest K. Priced with vLLM's kernels unless another engine is named (:func:`engine_for`); refused for
  data-parallel layouts (vLLM disables dynamic SD under data parallelism). vLLM has no merged context-length
  schedule (RFC #48627): the context axis goes to the JSON format only.
- SGLang: no static batch → draft-length table (its adaptive controller, PRs #21599 / #24055, picks
  ``speculative_num_steps`` at run time from an accept-length moving average): refused, use JSON.

The schedule's own cost (:func:`dynamic_cost`, vLLM issue #49548) is reported beside it on vLLM: the speedup of the
dynamic schedule, of a static K (the same config without the per-batch table) and of plain decoding, per batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ..cost.deployment import Deployment
from ..errors import InfeasibleError, ParameterError
from ..params import Options, Param
from ..pricing import Request, price
from ..pricing.deploy import fitting_batches
from ..pricing.resolve import request as make_request
from ..specdec import StepCache, parse_drafter
from ..specdec.tree import tree_label
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .runner import DEFAULT_BATCH, DEFAULT_DRAFT_LEN, deploy, grid_values, in_mode

__all__ = ["FORMATS", "Schedule", "build_schedule", "dynamic_cost", "engine_for", "k_ranges", "schedule_cost",
           "schedule_json", "throughput_rows", "vllm_config"]

FORMATS = ("vllm", "sglang", "json")
FORMAT = Param(Options(FORMATS))
SGLANG_REFUSAL = ("SGLang has no static batch-size -> draft-length table (its adaptive controller, PRs #21599 and "
                  "#24055, picks speculative_num_steps at run time); use --format json")
FORMAT_ENGINE = {"vllm": "vllm"}  # the engine whose kernels a format prices unless another is named
# vLLM's SpeculativeConfig.method per drafter kind (vllm/config/speculative.py SpeculativeMethod); none for ratio:C
VLLM_METHOD = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram", "model": "draft_model"}
# Cost of a dynamic-SD schedule on vLLM (vllm-project/vllm issue #49548; docs/MODEL.md §5.3b): TPOT with a
# num_speculative_tokens_per_batch_size schedule that never drafts (K = 0) vs no SD, 1x H100 NVL, vLLM 0.27.1 V1
# runner, gemma-4-31B FP8: 14.374 -> 15.317 ms at concurrency 2, 77.164 -> 93.820 ms at 189.
DYNAMIC_COST_K0 = ((2, 15.317 / 14.374 - 1), (189, 93.820 / 77.164 - 1))
# Same issue, first report: Qwen3.5-122B MTP k = 2, one stream, static K = 2 59.6 tok/s vs the dynamic schedule
# 50.0 tok/s (the FULL_AND_PIECEWISE -> PIECEWISE CUDA-graph downgrade dynamic SD forces on the V1 runner).
DYNAMIC_COST_PIECEWISE = 59.6 / 50.0 - 1


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
    gammas: np.ndarray = field(default_factory=lambda: np.zeros(0, int))  # draft lengths priced (0 first)
    speedup_all: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (gammas, batch) speedups

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


def engine_for(fmt: str | None, engine: str | None) -> str | None:
    """The engine a schedule prices: the one named, else the format's own (vLLM's kernels for the vllm format),
    else None (the deployment's default)."""
    return engine if engine is not None else FORMAT_ENGINE.get(fmt or "")


def check_layout(fmt: str | None, dep: Deployment) -> None:
    """The vllm format needs dp = 1: vLLM drops ``num_speculative_tokens_per_batch_size`` under data parallelism
    (vLLM test ``test_dynamic_sd_is_disabled_with_data_parallel``: the schedule is set to None with a warning)."""
    if fmt == "vllm" and dep.dp > 1:
        raise ParameterError(f"the vllm format needs a layout without data parallelism: vLLM disables dynamic "
                             f"speculative decoding under data parallelism, and this deployment ({dep.label}) has "
                             f"dp = {dep.dp}; give a layout with tp = gpus (e.g. --gpus {dep.tp} --tp {dep.tp}) or use "
                             f"the json format",
                             owner="vllm_config", param="format")


def build_schedule(model: ModelSpec, hw: HardwareProfile, request: Request | None = None, *, batch=DEFAULT_BATCH,
                   draft_len=DEFAULT_DRAFT_LEN, contexts=(1024,), mode: str = "refined", trees=(),
                   fmt: str | None = None, **knobs) -> Schedule:
    """The schedule of one deployment (module docstring); ``contexts[0]`` is the one engines take. ``request``
    carries every other knob (layout, engine, placement, drafter, acceptance, statistics, forced mechanisms), as in
    :func:`.runner.run_sweep`; keyword ``knobs`` change it (:func:`simulator.pricing.request`). ``fmt``: the format
    it is for (its engine unless the request names one, :func:`engine_for`; its layout rule, :func:`check_layout`,
    applied before pricing)."""
    req = make_request(request, **knobs)
    if fmt is not None:
        FORMAT.check(fmt, "format", "build_schedule")
        named = dict(req.layout.options).get("engine")
        if engine_for(fmt, named) is not None:
            req = req.edit(engine=engine_for(fmt, named))
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
    check_layout(fmt, sc.deployment)
    if not ok:
        raise InfeasibleError(f"{model.name} on {hw.name}: no batch fits ({why})")
    sc = in_mode(sc, mode, req)
    cache = StepCache()
    out, notes = [], []
    for ctx in contexts:  # each context's own batches 1..B_max(context): a long context never cuts a short one
        fit, why_c = (ok, why) if ctx == max(contexts) else fitting_batches(sc, every, n_max, int(ctx))
        if len(fit) < len(every):
            notes.append(f"context {ctx}: batches above {fit[-1]:g} do not fit ({why_c})")
        dense = np.arange(1, int(fit[-1]) + 1)
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
        out.append(ContextSchedule(int(ctx), dense, k, np.where(k > 0, best, 1.0), best, tok_user, plain, tree_best,
                                   r.gammas, r.speedup))
    shown = np.asarray([b for b in grid if b <= max(c.batch[-1] for c in out)], dtype=int)
    return Schedule(model, sc.hw, sc.deployment, sc.drafter.label, sc.accept.label, shown, tuple(out), tuple(notes))


def throughput_rows(s: Schedule, context: ContextSchedule | None = None) -> list[dict]:
    """Per grid batch: tokens/s per user and per GPU, with SD (the schedule's K) and without (K = 0)."""
    c = context or s.primary
    gpus = s.deployment.gpus
    rows = []
    for b in s.grid[s.grid <= c.batch[-1]]:  # the context's batches that fit
        i = int(b) - 1
        rows.append({"batch": int(b), "k": int(c.k[i]), "speedup": float(c.speedup[i]),
                     "tokens_per_s_user_sd": float(c.tokens_user[i]),
                     "tokens_per_s_user_plain": float(c.tokens_user_plain[i]),
                     "tokens_per_s_gpu_sd": float(c.tokens_user[i] * b / gpus),
                     "tokens_per_s_gpu_plain": float(c.tokens_user_plain[i] * b / gpus)})
    return rows


def vllm_config(s: Schedule) -> dict:
    """The ``SpeculativeConfig`` fields for vLLM (module docstring): ``method`` (the drafter priced, where vLLM
    has one), ``num_speculative_tokens`` (the table's largest K) and ``num_speculative_tokens_per_batch_size`` as a
    list of inclusive [start, end, K] from 1. Refused under data parallelism and when SD pays at no batch."""
    check_layout("vllm", s.deployment)
    c = s.primary
    if not np.any(c.k > 0):
        best = float(c.best_chain_speedup.max())
        raise InfeasibleError(f"speculative decoding does not pay at any batch 1..{int(c.batch[-1])} for "
                              f"{s.model.name} on {s.hardware.name} (best speedup {best:.3f}); serve without "
                              f"speculative_config")
    cfg: dict = {}
    method = VLLM_METHOD.get(parse_drafter(s.drafter).kind)
    if method:
        cfg["method"] = method
    cfg["num_speculative_tokens"] = int(c.k.max())
    cfg["num_speculative_tokens_per_batch_size"] = [[lo, hi, k] for lo, hi, k in c.ranges()]
    return cfg


def dynamic_cost(batch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(central, low, high) fractional TPOT cost τ(B) of serving with a dynamic-SD schedule on vLLM, whatever K it
    schedules (docs/MODEL.md §5.3b). Central = low: :data:`DYNAMIC_COST_K0` (issue #49548, K = 0 vs no SD)
    interpolated linearly in log B between its two concurrencies, constant outside them; high: at least
    :data:`DYNAMIC_COST_PIECEWISE` (the same issue's single-stream dynamic-vs-static measurement)."""
    b = np.asarray(batch, dtype=float)
    (b0, t0), (b1, t1) = DYNAMIC_COST_K0
    x = np.clip((np.log(b) - np.log(b0)) / (np.log(b1) - np.log(b0)), 0.0, 1.0)
    tau = t0 + x * (t1 - t0)
    return tau, tau, np.maximum(tau, DYNAMIC_COST_PIECEWISE)


def schedule_cost(s: Schedule, context: ContextSchedule | None = None) -> dict | None:
    """What the schedule's own cost does on vLLM (None on other engines: no public measurement; or when the
    schedule never speculates). Per batch, speedups over plain decoding of: the dynamic schedule, S(B, K(B)) /
    (1 + τ(B)) (K = 0: 1 / (1 + τ)), with τ's band; one static K for every batch (no per-batch table, no schedule
    cost: the K ≥ 1 of the best geometric-mean speedup over 1..B_max); plain decoding (1). ``fastest``: the batch
    ranges where each is the fastest, at the central τ and at the band's high end."""
    c = context or s.primary
    kmax = int(c.k.max())
    if s.deployment.engine != "vllm" or kmax == 0:
        return None
    tau, _, tau_hi = dynamic_cost(c.batch)
    dyn, dyn_lo = c.speedup / (1.0 + tau), c.speedup / (1.0 + tau_hi)
    sd = c.gammas >= 1  # the static K: the one draft length with the best geometric-mean speedup over 1..B_max
    j = int(np.argmax(np.mean(np.log(c.speedup_all[sd]), axis=1)))
    kstat, static = int(c.gammas[sd][j]), c.speedup_all[sd][j]
    names = ("dynamic schedule", f"static K={kstat}", "no SD")

    def fastest(d):
        return [(lo, hi, names[i]) for lo, hi, i in k_ranges(c.batch, np.argmax(np.stack([d, static, 0 * d + 1]),
                                                                                 axis=0))]
    rows = [{"batch": int(b), "k": int(k), "tau": float(t), "tau_high": float(th), "dynamic_speedup": float(d),
             "dynamic_speedup_low": float(dl), "static_speedup": float(st)}
            for b, k, t, th, d, dl, st in zip(c.batch, c.k, tau, tau_hi, dyn, dyn_lo, static, strict=True)]
    return {"source": "vllm-project/vllm issue #49548", "static_k": kstat, "per_batch": rows,
            "fastest": fastest(dyn), "fastest_at_high_cost": fastest(dyn_lo)}


def cost_note(cost: dict | None) -> str:
    """One line saying what the schedule's cost does (for the printed table)."""
    if cost is None:
        return ""

    def say(ranges):
        return "; ".join(f"{name} {lo}-{hi}" for lo, hi, name in ranges)
    (b0, t0), (b1, t1) = DYNAMIC_COST_K0
    names = {n for *_, n in cost["fastest"] + cost["fastest_at_high_cost"]}
    hint = (f"; the table never pays for its cost: serve num_speculative_tokens = {cost['static_k']} without it"
            if "dynamic schedule" not in names and "no SD" not in names else "")
    return (f"schedule cost (vLLM #49548: a dynamic-SD schedule costs TPOT even at K = 0, +{t0:.1%} at concurrency "
            f"{b0}, +{t1:.1%} at {b1}; up to +{DYNAMIC_COST_PIECEWISE:.1%} single-stream): fastest per batch "
            f"{say(cost['fastest'])} (at the high end of the cost: {say(cost['fastest_at_high_cost'])}){hint}")


def schedule_json(s: Schedule) -> dict:
    """Everything: per context the ranges and the per-batch table (batch, best K, speedup, best tree), and the
    throughput view per context."""
    ctxs = []
    for c in s.contexts:
        per_batch = [{"batch": int(b), "k": int(k), "speedup": float(sp), "best_chain_speedup": float(bc)}
                     for b, k, sp, bc in zip(c.batch, c.k, c.speedup, c.best_chain_speedup, strict=True)]
        for row, t in zip(per_batch, c.tree, strict=False):
            row["best_tree"], row["best_tree_speedup"] = t
        ctxs.append({"context": c.context, "ranges": [[lo, hi, k] for lo, hi, k in c.ranges()],
                     "per_batch": per_batch, "throughput": throughput_rows(s, c), "schedule_cost": schedule_cost(s, c)})
    return {"generated_by": GENERATED_BY, "model": s.model.name, "hardware": s.hardware.name,
            "deployment": s.deployment.label,
            "engine": s.deployment.engine, "gpus": s.deployment.gpus, "drafter": s.drafter,
            "acceptance": s.acceptance, "rule": "every batch 1..B_max priced; K = argmax speedup over draft lengths "
            ">= 1, 0 where it is <= 1; ranges are runs of equal K", "notes": list(s.notes), "contexts": ctxs}


GENERATED_BY = "python -m simulator schedule"  # the JSON format's "generated_by" (a later run may replace the file)


def is_schedule_file(path) -> bool:
    """Whether ``path`` holds a schedule this command writes: the JSON format (its ``generated_by``), or vLLM's
    fields and nothing else (:func:`vllm_config`: vLLM refuses other keys, so the file carries no mark)."""
    from pathlib import Path

    p = Path(path)
    if p.stat().st_size > 1 << 24:
        return False
    doc = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not doc:
        return False
    return doc.get("generated_by") == GENERATED_BY or set(doc) <= {"method", "num_speculative_tokens",
                                                                    "num_speculative_tokens_per_batch_size"}


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
