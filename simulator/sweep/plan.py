"""``plan``: which layout *and* speculative-decoding setting to deploy for a model, a GPU, a GPU budget and an SLA
(docs/MODEL.md §5.5).

The search: every replica size g ≤ the budget (powers of two, and the budget itself) × attention TP/DP (tp divides
g and the heads) × MoE EP (ep = g or 1) × engine × all-to-all (the engine's default, and DeepEP low-latency under
attention DP where the profile has it), each resolved through the one deployment rule (layouts the model, the GPU or
the memory refuse are skipped and counted); per layout ONE serving grid (:func:`.serving.price_serving_grid`: one
:func:`simulator.pricing.price` call over every decode batch the workloads need, draft lengths 0..K_max, and one
prefill chunk) gives every (draft length, concurrency) point: tokens/s per GPU = throughput / g, tokens/s per user
= 1 / TPOT, TPOT, TTFT. Nothing is priced twice. The Pareto fronts (per GPU vs per user) are taken over the points
without SD (K = 0) and with SD (K ≥ 1); the best configuration under the SLA (TPOT and/or TTFT limits) is the
point of the most tokens/s per GPU that meets it, reported with the best one without SD and its launch config.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import InfeasibleError, ParameterError, SimulatorError
from ..params import Interval, Param
from ..pricing import Request, Scenario, fitting_batches, resolve_hardware, resolve_models
from ..pricing.resolve import request as make_request
from ..pricing.resolve import scenario_for
from ..specdec import StepCache
from ..specs.catalog import ENGINES
from . import engine_configs as ec
from .serving import decode_context, price_serving_grid

__all__ = ["CONCURRENCY", "Plan", "PlanPoint", "launch_config", "pareto", "plan"]

CONCURRENCY = tuple(2**i for i in range(10))  # 1 … 512 concurrent requests per replica
MAX_K = 8
GPUS = Param(Interval(int, 1, 4096), unit="GPUs")
MS = Param(Interval(float, 0.0, None), None, unit="ms")


@dataclass(frozen=True)
class PlanPoint:
    """One priced (layout, engine, draft length, concurrency)."""

    scenario: Scenario = field(repr=False, compare=False)
    engine: str
    layout: str
    gpus: int  # GPUs of one replica
    k: int  # draft length (0: no SD)
    concurrency: int  # requests in flight per replica
    tokens_per_s_gpu: float
    tokens_per_s_user: float
    tpot_ms: float
    ttft_ms: float
    meets_sla: bool

    def as_dict(self) -> dict:
        return {f: getattr(self, f) for f in ("engine", "layout", "gpus", "k", "concurrency", "tokens_per_s_gpu",
                                              "tokens_per_s_user", "tpot_ms", "ttft_ms", "meets_sla")}


@dataclass(frozen=True)
class Plan:
    model: str
    hardware: str
    budget: int
    isl: float
    osl: float
    tpot_ms: float | None
    ttft_ms: float | None
    drafter: str
    acceptance: str
    points: tuple[PlanPoint, ...]
    skipped: tuple[str, ...]
    layouts: int  # layouts priced (each once)
    seconds: float

    def front(self, sd: bool) -> list[PlanPoint]:
        return pareto([p for p in self.points if (p.k > 0) == sd])

    def best(self, sd: bool | None = None) -> PlanPoint | None:
        ok = [p for p in self.points if p.meets_sla and (sd is None or (p.k > 0) == sd)]
        return max(ok, key=lambda p: (p.tokens_per_s_gpu, p.tokens_per_s_user)) if ok else None


def pareto(points) -> list[PlanPoint]:
    """The points no other beats on both tokens/s per GPU and tokens/s per user, by tokens/s per user."""
    pts = sorted(points, key=lambda p: (-p.tokens_per_s_user, -p.tokens_per_s_gpu))
    out, best = [], -math.inf
    for p in pts:
        if p.tokens_per_s_gpu > best:
            out.append(p)
            best = p.tokens_per_s_gpu
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(budget: int, engines) -> list[dict]:
    """Candidate layout knobs (module docstring), before the deployment rule checks them."""
    sizes = sorted({2**i for i in range(int(math.log2(budget)) + 1)} | {budget})
    out = []
    for g in sizes:
        for tp in _divisors(g):
            for ep in sorted({g, 1}):
                for eng in engines:
                    for a2a in ("auto", "deepep_low_latency") if g // tp > 1 else ("auto",):
                        if ec.layout_supported(eng, tp, g // tp, a2a):
                            out.append({"gpus": g, "tp": tp, "dp": g // tp, "ep": ep, "engine": eng,
                                        "all_to_all": a2a})
    return out


def plan(model, hardware, gpus: int, *, isl: float = 1024, osl: float = 1024, tpot_ms: float | None = None,
         ttft_ms: float | None = None, engines=ENGINES, request: Request | None = None,
         concurrency=CONCURRENCY, max_k: int = MAX_K, progress: Callable[[str], None] | None = None,
         **knobs) -> Plan:
    """Search layouts × SD settings for ``model`` on ``gpus`` GPUs of ``hardware`` (module docstring)."""
    t0 = time.perf_counter()
    GPUS.check(gpus, "gpus", "plan")
    MS.check(tpot_ms, "tpot", "plan")
    MS.check(ttft_ms, "ttft", "plan")
    for e in engines:
        if e not in ENGINES:
            raise ParameterError(f"the 'engine' parameter of plan must be one of {', '.join(ENGINES)}. Got {e!r}",
                                 owner="plan", param="engine")
    if osl <= 0 or isl < 0:
        raise ParameterError(f"plan needs isl >= 0 and osl > 0 tokens; got isl {isl:g}, osl {osl:g}", owner="plan",
                             param="osl")
    (m,) = resolve_models([model])
    (hw,) = resolve_hardware([hardware])
    base = make_request(request, context=decode_context(isl, osl), **knobs)
    cache = StepCache()
    points, skipped, seen, priced = [], [], set(), 0
    cands = layouts(int(gpus), engines)
    for i, lay in enumerate(cands):
        try:
            sc = scenario_for(m, hw, base.edit(**lay))
        except SimulatorError as exc:
            skipped.append(f"{lay}: {exc}")
            continue
        key = (sc.deployment, sc.engine)
        if key in seen:  # two knob sets the rule resolves to one deployment: priced once
            continue
        seen.add(key)
        fit, why = fitting_batches(sc, concurrency, max_k + 1, int(isl + osl))
        if not fit:
            skipped.append(f"{sc.deployment.label}: {why}")
            continue
        try:
            grid = price_serving_grid(sc, fit, isl, osl, range(0, max_k + 1), cache=cache)
        except SimulatorError as exc:  # a layout the cost model cannot price at these batches: counted, not hidden
            skipped.append(f"{sc.deployment.label} {sc.engine}: {exc}")
            continue
        priced += 1
        g = sc.deployment.gpus
        per_gpu, per_user = grid.tokens_per_s_gpu(g), grid.tokens_per_s_user
        tpot, ttft = grid.point.tpot_sd * 1e3, grid.ttft * 1e3
        ok = np.ones_like(tpot, dtype=bool)
        if tpot_ms is not None:
            ok &= tpot <= tpot_ms
        if ttft_ms is not None:
            ok &= ttft <= ttft_ms
        for gi, k in enumerate(grid.gammas):
            for ci, c in enumerate(grid.concurrency):
                points.append(PlanPoint(sc, sc.engine, sc.deployment.label, g, int(k), int(c), float(per_gpu[gi, ci]),
                                        float(per_user[gi, ci]), float(tpot[gi, ci]), float(ttft[gi, ci]),
                                        bool(ok[gi, ci])))
        if progress is not None:
            progress(f"plan: {i + 1}/{len(cands)} layouts, {len(points)} points, {time.perf_counter() - t0:.1f} s")
    if not points:
        raise InfeasibleError(f"no layout of {m.name} fits {gpus} x {hw.name}: " + (skipped[0] if skipped else ""))
    first = points[0].scenario
    return Plan(m.name, hw.name, int(gpus), float(isl), float(osl), tpot_ms, ttft_ms, first.drafter.label,
                first.accept.label, tuple(points), tuple(skipped), priced, time.perf_counter() - t0)


def launch_config(p: PlanPoint, draft_model: str | None = None) -> dict:
    """What to launch for a point: the engine's parallel flags and its speculative config at the point's static K
    (:mod:`.engine_configs`; none without SD), and how many replicas the budget holds."""
    d = p.scenario.deployment
    out = {"engine": p.engine, "layout": p.layout, "parallel": ec.parallel_args(p.engine, d.tp, d.dp, d.ep,
                                                                                 d.all_to_all)}
    if p.k > 0:
        kind = p.scenario.drafter.kind
        ranges = [(1, max(p.concurrency, 1), p.k)]
        if p.engine == "vllm":
            out["speculative_config"] = ec.vllm_config(ranges, kind, draft_model)
        elif p.engine == "trtllm":
            out["speculative_config"] = ec.trtllm_config(ranges, kind, draft_model)
        else:
            out["flags"] = ec.sglang_flags(ranges, kind, draft_model)
    return out
