"""Adaptive draft length exported to engines, and the throughput view (docs/MODEL.md §5, "Schedules").

:func:`build_schedule` prices one deployment through the one pricing path (:func:`simulator.pricing.price`) at EVERY
integer batch 1..B_max (B_max = the largest batch of the grid that fits memory), for each context; the best draft
length per batch is the γ ≥ 1 of the largest speedup, or K = 0 where that speedup is ≤ 1 (SD does not pay). Because
every batch is priced there is no interpolation between grid points: a range is a run of equal K. Draft trees
(``trees``: parent lists) are priced the same way (a tree scenario) and reported per batch
beside the best chain.

Deployable tables (:mod:`.deployable`): within ``tolerance`` (default 1%) of the per-batch best speedup the fewer
ranges and the smaller K win, K = 0 exactly where SD loses, and each engine's table rules hold; the per-batch optimum
is kept beside it (``k_opt``).

Formats (:mod:`.engine_configs`, every field with the engine source it was read in): ``vllm`` (SpeculativeConfig
fields), ``trtllm`` (the ``speculative_config`` YAML with ``draft_len_schedule``), ``sglang`` (the adaptive-mode
config file, its launch flags printed), ``json`` (everything, per context). Each engine format is priced on its own
engine's kernels and modes; a format for another engine than the one named is refused (:func:`engine_for`).

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
from . import engine_configs as ec
from .deployable import TOLERANCE, deployable
from .runner import DEFAULT_BATCH, DEFAULT_DRAFT_LEN, deploy, grid_values, in_mode

__all__ = ["FORMATS", "Schedule", "build_schedule", "dynamic_cost", "engine_config", "engine_for", "k_ranges",
           "schedule_cost", "schedule_json", "throughput_rows", "vllm_config"]

FORMATS = ("vllm", "trtllm", "sglang", "json")
FORMAT = Param(Options(FORMATS))
DEFAULT_TOLERANCE = 0.01  # a deployable table may give up 1% of the per-batch best speedup (issue 27)
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
    k: np.ndarray  # the deployable table's K per batch (0: SD does not pay), :mod:`.deployable`
    speedup: np.ndarray  # speedup at that K (1 where K = 0)
    best_chain_speedup: np.ndarray  # the best chain's speedup even where it is ≤ 1
    tokens_user: np.ndarray  # tokens/s per request with the schedule's K
    tokens_user_plain: np.ndarray  # tokens/s per request without SD
    tree: list = field(default_factory=list)  # per batch: (label, speedup) of the best tree, when trees are swept
    gammas: np.ndarray = field(default_factory=lambda: np.zeros(0, int))  # draft lengths priced (0 first)
    speedup_all: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (gammas, batch) speedups
    k_opt: np.ndarray | None = None  # the per-batch best K (0 where SD loses), before the deployable rule
    # (gammas, batch) speedups of one static K everywhere (no per-batch table; :func:`table_scenario`): the
    # same as speedup_all where the engine captures a table's passes as a static length's
    speedup_static: np.ndarray | None = None

    def ranges(self) -> list[tuple[int, int, int]]:
        return k_ranges(self.batch, self.k)

    @property
    def gap(self) -> np.ndarray:
        """1 − speedup at the table's K / the per-batch best (0 where SD loses: plain decoding either way)."""
        best = np.where(self.best_chain_speedup > 1.0, self.best_chain_speedup, 1.0)
        return 1.0 - self.speedup / best


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
    tolerance: float = DEFAULT_TOLERANCE
    fmt: str = "json"  # the format whose table rules the deployable table meets

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
    """The engine a schedule prices: an engine format's own (refused in one line when another engine is named: a
    table priced on one engine's kernels and modes is not another engine's), else the one named, else None (the
    deployment's default)."""
    own = fmt if fmt in ec.ENGINE_FORMATS else None
    if own and engine is not None and engine != own:
        raise ParameterError(f"--format {fmt} writes {own}'s config, priced on {own}'s kernels and modes, but the "
                             f"engine given is {engine}; drop --engine, give --engine {own}, or use --format {engine}",
                             owner="schedule", param="format")
    return own or engine


def check_layout(fmt: str | None, dep: Deployment) -> None:
    """vLLM drops ``num_speculative_tokens_per_batch_size`` under data parallelism (vLLM test
    ``test_dynamic_sd_is_disabled_with_data_parallel``: the schedule is set to None with a warning); SGLang's
    adaptive mode refuses attention DP (``adaptive_unsupported_reason``)."""
    rules = ec.ENGINE_FORMATS.get(fmt or "")
    if rules is not None and not rules.dp_allowed and dep.dp > 1:
        what = ("vLLM disables dynamic speculative decoding under data parallelism" if fmt == "vllm" else
                "SGLang's adaptive speculative mode does not run with attention DP")
        raise ParameterError(f"the {fmt} format needs a layout without data parallelism: {what}, and this deployment "
                             f"({dep.label}) has dp = {dep.dp}; give a layout with tp = gpus (e.g. --gpus {dep.tp} "
                             f"--tp {dep.tp}) or use the json format", owner=f"{fmt}_config", param="format")


def table_rules(fmt: str | None, hw: HardwareProfile, n: int) -> dict:
    """The deployable-table rules of ``fmt`` over batches 1..n (:func:`.deployable.deployable` keywords)."""
    rules = ec.ENGINE_FORMATS.get(fmt or "")
    if rules is None:
        return {}
    graphs = hw.engine_spec.graphs
    capture = graphs.for_round(True).sizes if (graphs is not None and graphs.unit == "requests") else ()
    return {"starts": ec.range_starts(rules, tuple(capture), n), "first_is_max": rules.first_is_max}


def table_scenario(sc):
    """``sc`` as the engine runs a per-batch draft-length table: graph padding with the capture its file states for
    a table (``graphs.per_batch_table``: vLLM's V1 runner forces piecewise graphs, sizes not rounded to γ + 1;
    docs/MODEL.md §4.5), or None when that capture is a static length's (or padding is off): one matrix prices both."""
    graphs = sc.hw.engine_spec.graphs
    if sc.mechanisms.graph_padding != "on" or graphs is None or graphs.for_table() == graphs:
        return None
    return sc.force((("graph_padding", "table"),))


def build_schedule(model: ModelSpec, hw: HardwareProfile, request: Request | None = None, *, batch=DEFAULT_BATCH,
                   draft_len=DEFAULT_DRAFT_LEN, contexts=(1024,), mode: str = "refined", trees=(),
                   fmt: str | None = None, tolerance: float = DEFAULT_TOLERANCE, **knobs) -> Schedule:
    """The schedule of one deployment (module docstring); ``contexts[0]`` is the one engines take. ``request``
    carries every other knob (layout, engine, placement, drafter, acceptance, statistics, forced mechanisms), as in
    :func:`.runner.run_sweep`; keyword ``knobs`` change it (:func:`simulator.pricing.request`). ``fmt``: the format
    it is for (its engine, :func:`engine_for`; its layout rule, :func:`check_layout`, applied before pricing; its
    table rules, :func:`table_rules`); ``tolerance``: the deployable table's allowance (:mod:`.deployable`)."""
    req = make_request(request, **knobs)
    TOLERANCE.check(tolerance, "tolerance", "build_schedule")
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
    sc_table = table_scenario(sc)  # the table's passes as the engine captures them (None: as a static length's)
    cache = StepCache()
    out, notes = [], []
    for ctx in contexts:  # each context's own batches 1..B_max(context): a long context never cuts a short one
        fit, why_c = (ok, why) if ctx == max(contexts) else fitting_batches(sc, every, n_max, int(ctx))
        if len(fit) < len(every):
            notes.append(f"context {ctx}: batches above {fit[-1]:g} do not fit ({why_c})")
        dense = np.arange(1, int(fit[-1]) + 1)
        sc_ctx = sc.edit(context=int(ctx))
        r_static = price(sc_ctx, dense, np.concatenate([[0], gam]), cache=cache).result
        r = r_static if sc_table is None else price(sc_table.edit(context=int(ctx)), dense,
                                                    np.concatenate([[0], gam]), cache=cache).result
        k_opt, best = r.best()
        k_opt = np.where(best > 1.0, k_opt, 0)
        k = deployable(r.gammas, r.speedup, tolerance, **table_rules(fmt, sc.hw, dense.size))
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
        out.append(ContextSchedule(int(ctx), dense, k, r.speedup[idx, cols], best, tok_user, plain, tree_best,
                                   r.gammas, r.speedup, k_opt, r_static.speedup))
    shown = np.asarray([b for b in grid if b <= max(c.batch[-1] for c in out)], dtype=int)
    return Schedule(model, sc.hw, sc.deployment, sc.drafter.label, sc.accept.label, shown, tuple(out), tuple(notes),
                    float(tolerance), fmt or "json")


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


def _paying(s: Schedule) -> list[tuple[int, int, int]]:
    c = s.primary
    if not np.any(c.k > 0):
        best = float(c.best_chain_speedup.max())
        raise InfeasibleError(f"speculative decoding does not pay at any batch 1..{int(c.batch[-1])} for "
                              f"{s.model.name} on {s.hardware.name} (best speedup {best:.3f}); serve without a "
                              f"speculative config")
    return c.ranges()


def engine_config(s: Schedule, fmt: str, draft_model: str | None = None) -> dict:
    """The config ``fmt`` loads (:mod:`.engine_configs`) from the schedule's deployable table at its first context:
    vLLM's SpeculativeConfig fields, TensorRT-LLM's ``speculative_config``, SGLang's adaptive config. Refused under
    a layout the format cannot serve (:func:`check_layout`) and when SD pays at no batch."""
    check_layout(fmt, s.deployment)
    kind = parse_drafter(s.drafter).kind
    writer = {"vllm": ec.vllm_config, "trtllm": ec.trtllm_config}.get(fmt)
    if writer is not None:
        return writer(_paying(s), kind, draft_model)
    return ec.sglang_adaptive(_paying(s))


def vllm_config(s: Schedule, draft_model: str | None = None) -> dict:
    """vLLM's ``SpeculativeConfig`` fields (:func:`engine_config`)."""
    return engine_config(s, "vllm", draft_model)


def launch_flags(s: Schedule, config_path: str | None = None, draft_model: str | None = None) -> list[str]:
    """SGLang's launch flags for the schedule (the adaptive mode with ``config_path`` when the table varies K)."""
    return ec.sglang_flags(_paying(s), parse_drafter(s.drafter).kind, draft_model, config_path, s.deployment.dp)


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
    fixed = c.speedup_all if c.speedup_static is None else c.speedup_static  # no table: a static length's graphs
    j = int(np.argmax(np.mean(np.log(fixed[sd]), axis=1)))
    kstat, static = int(c.gammas[sd][j]), fixed[sd][j]
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
        k_opt = c.k if c.k_opt is None else c.k_opt
        per_batch = [{"batch": int(b), "k": int(k), "speedup": float(sp), "k_best": int(ko),
                      "best_chain_speedup": float(bc), "gap": float(g)}
                     for b, k, sp, ko, bc, g in zip(c.batch, c.k, c.speedup, k_opt, c.best_chain_speedup, c.gap,
                                                    strict=True)]
        for row, t in zip(per_batch, c.tree, strict=False):
            row["best_tree"], row["best_tree_speedup"] = t
        ctxs.append({"context": c.context, "ranges": [[lo, hi, k] for lo, hi, k in c.ranges()],
                     "ranges_best": [[lo, hi, k] for lo, hi, k in k_ranges(c.batch, k_opt)],
                     "max_gap": float(c.gap.max()), "per_batch": per_batch, "throughput": throughput_rows(s, c),
                     "schedule_cost": schedule_cost(s, c)})
    return {"generated_by": ec.GENERATED_BY, "model": s.model.name, "hardware": s.hardware.name,
            "deployment": s.deployment.label,
            "engine": s.deployment.engine, "gpus": s.deployment.gpus, "drafter": s.drafter,
            "acceptance": s.acceptance, "tolerance": s.tolerance, "table_rules": s.fmt,
            "rule": "every batch 1..B_max priced; k_best = argmax speedup over draft lengths >= 1, 0 where it is "
            "<= 1; k = the deployable table: K = 0 exactly where SD loses, elsewhere within the tolerance of the best "
            "speedup, fewest ranges, then the smaller K (docs/MODEL.md 5.3b)", "notes": list(s.notes), "contexts": ctxs}


def render(s: Schedule, fmt: str, draft_model: str | None = None) -> str:
    """The file text of ``fmt``: JSON (vllm, sglang, json) or the YAML TensorRT-LLM's extra_llm_api_options takes."""
    FORMAT.check(fmt, "format", "render")
    if fmt == "json":
        return json.dumps(schedule_json(s), indent=2) + "\n"
    cfg = engine_config(s, fmt, draft_model)
    if fmt == "trtllm":
        c = s.primary
        notes = [f"written by {ec.GENERATED_BY}",
                 f"{s.model.name} on {s.hardware.name} ({s.deployment.label}), drafter {s.drafter}, {s.acceptance}; "
                 f"context {c.context}; deployable table within {s.tolerance:.1%} of the per-batch best",
                 "pass as: trtllm-serve MODEL --extra_llm_api_options THIS_FILE",
                 f"format read in {ec.ENGINE_FORMATS['trtllm'].source}"]
        if ec.DRAFT_MODEL_PLACEHOLDER in str(cfg.get("speculative_model", "")):
            notes.append("replace speculative_model with the draft checkpoint (or give --draft-model)")
        return ec.trtllm_yaml(cfg, notes)
    return json.dumps(cfg, indent=2) + "\n"


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
