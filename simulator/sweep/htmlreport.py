"""What the HTML report shows (docs/MODEL.md §5.6): views per (model, GPU, engine, drafter), every number priced on
the one pricing path, and the page itself (:func:`simulator.render.html.page`).

A view holds: the speedup at the best draft length per batch, prior and refined, with their bands and the batches
where SD pays (the refined band's low end > 1, the rule ``sweep`` prints); tokens/s per GPU against tokens/s per user
with the deployable table's K and without SD (:func:`.schedule.throughput_rows`; with ``isl``/``osl`` also the served
workload at concurrency 1..256, :func:`.serving.price_serving_grid`); the time per output token by part at each grid
batch, with SD (the refined best K's round / AL) and without (a decode step); the ``explain`` walk prior → refined at
batch 1 and its best K (:func:`.explain.explain_scenario`, Shapley left out); the draft-length table in the view's
engine's own syntax (:mod:`.engine_configs`) and the assumptions box.

Per-part times: the verify pass's op classes (:func:`simulator.pricing.price_pass` at B, K + 1 tokens, as the
round pads it) — attention, dense GEMM, experts (routed MoE), collectives, other ops (router, norms, embedding,
sampling, and any launch-bound remainder of an eager pass) — plus drafting (K draft steps, the extend pass and an
EAGLE-3 fusion), round kernels (rejection, sampling, KV slots, linear-attention checkpoints) and exposed host time;
they add up to T_round(B, K) exactly (the remainder of the pass is the "other ops" share). Without SD the same split
of the decode step T(B, 1) plus its exposed host time.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable

import numpy as np

from .. import __version__
from ..errors import SimulatorError
from ..pricing import Request, price_pass
from ..pricing.resolve import request as make_request
from ..specdec import best_gamma
from ..specs.kernels import DEFAULT_ENGINE
from .explain import explain_scenario
from .runner import DEFAULT_BATCH, DEFAULT_DRAFT_LEN, run_sweep
from .schedule import build_schedule, k_ranges, render, throughput_rows
from .serving import price_serving_grid

__all__ = ["PARTS", "build_report", "report_html"]

PARTS = ("attention", "dense GEMM", "experts", "collectives", "other ops", "draft", "round kernels", "host")
CLASS_PART = {"attention": "attention", "gemm": "dense GEMM", "moe": "experts", "collective": "collectives"}
CONTROLS = ("model", "gpu", "engine", "drafter")


def _f(a) -> list:
    return [round(float(x), 6) for x in np.asarray(a, dtype=float).ravel()]


def _pays(batch, low) -> list[list[float]]:
    """[left, right] spans (geometric midpoints between grid batches) of the batches where ``low`` > 1."""
    b = np.asarray(batch, dtype=float)
    edges = np.concatenate([[b[0] / 1.25], np.sqrt(b[:-1] * b[1:]), [b[-1] * 1.25]])
    return [[float(edges[lo - 1]), float(edges[hi])] for lo, hi, k in k_ranges(np.arange(1, b.size + 1),
                                                                                np.asarray(low) > 1.0) if k]


def _parts(st, extra: dict[str, np.ndarray], total: np.ndarray) -> dict[str, np.ndarray]:
    out = {p: np.zeros_like(total) for p in PARTS}
    for cls, v in st.breakdown.items():
        part = CLASS_PART.get(cls, "host" if cls == "host" else "other ops")
        out[part] = out[part] + np.asarray(v, dtype=float)
    for p, v in extra.items():
        out[p] = out[p] + v
    out["other ops"] = out["other ops"] + (total - sum(out.values()))  # eager launch-bound remainder, if any
    return out


def breakdown(case, k) -> dict:
    """µs per output token by part at each batch of ``case`` (module docstring), SD at draft length ``k`` per
    batch."""
    sc, r = case.scenario, case.result
    b = r.batch
    k = np.maximum(np.asarray(k, dtype=int), 1)
    gi = np.searchsorted(r.gammas, k)
    cols = np.arange(b.size)
    plain_st = price_pass(sc, b, 1, check_fit=False)
    zeros = np.zeros(b.size)
    host_dec = zeros if r.t_host_decode is None else r.t_host_decode
    plain = _parts(plain_st, {"host": host_dec}, r.t_decode + host_dec)
    sd = {p: np.zeros(b.size) for p in PARTS}
    for kk in np.unique(k):
        sel = k == kk
        st = price_pass(sc, b[sel], int(kk) + 1, check_fit=False, speculative=True)
        g, c = gi[sel], cols[sel]
        kern = r.t_reject[g] + (0 if r.t_kernels is None else r.t_kernels[g, c]) + (
            0 if r.t_overhead is None else r.t_overhead[g, c])
        host = zeros[sel] if r.t_host is None else r.t_host[g, c]
        part = _parts(st, {"draft": r.t_draft[g, c], "round kernels": kern, "host": host},
                      r.t_round[g, c] - 0.0)
        for p in PARTS:
            sd[p][sel] = part[p] / r.accept_length[g]
    us = 1e6
    return {"batch": [int(x) for x in b], "k": [int(x) for x in k], "categories": list(PARTS),
            "plain": {p: _f(plain[p] * us) for p in PARTS}, "sd": {p: _f(sd[p] * us) for p in PARTS}}


def _view(prior, refined, sched, err: str, drafter: str, isl, osl) -> dict:
    r, rp = refined.result, prior.result
    k_ref, s_ref = best_gamma(r.gammas, r.speedup)
    low = best_gamma(r.gammas, r.speedup_low)[1]
    view = {"title": f"{refined.model.name} on {refined.hardware.name}, {refined.deployment.label}, engine "
                     f"{refined.deployment.engine}, drafter {drafter}, acceptance {refined.scenario.accept.label}, "
                     f"context {refined.context}",
            "speedup": {"batch": _f(r.batch), "k": [int(x) for x in k_ref], "pays": _pays(r.batch, low),
                        "refined": _f(s_ref), "refined_low": _f(low),
                        "refined_high": _f(best_gamma(r.gammas, r.speedup_high)[1]),
                        "prior": _f(best_gamma(rp.gammas, rp.speedup)[1]),
                        "prior_low": _f(best_gamma(rp.gammas, rp.speedup_low)[1]),
                        "prior_high": _f(best_gamma(rp.gammas, rp.speedup_high)[1])}}
    if sched is not None:
        rows = throughput_rows(sched)
        view["throughput"] = {"batch": [x["batch"] for x in rows], "k": [x["k"] for x in rows],
                              **{f"{a}_{b}": _f([x[f"tokens_per_s_{a}_{b}"] for x in rows])
                                 for a in ("user", "gpu") for b in ("sd", "plain")}}
    else:  # no deployable table: the sweep's best K per batch
        gi = np.searchsorted(r.gammas, k_ref)
        tok = r.tokens_per_s_request[gi, np.arange(r.batch.size)]
        g = refined.deployment.gpus
        view["throughput"] = {"batch": [int(x) for x in r.batch], "k": [int(x) for x in k_ref],
                              "user_sd": _f(tok), "gpu_sd": _f(tok * r.batch / g),
                              "user_plain": _f(r.tokens_per_s_request[0]),
                              "gpu_plain": _f(r.tokens_per_s_request[0] * r.batch / g)}
    view["breakdown"] = breakdown(refined, k_ref)
    k1 = max(int(k_ref[0]), 1)
    a = explain_scenario(refined.scenario, batch=int(r.batch[0]), draft_len=k1, shapley=False)
    view["walk"] = {"batch": int(r.batch[0]), "k": k1, "steps": [s.name for s in a.steps],
                    "speedup": _f([s.speedup for s in a.steps]), "ratio": _f([s.decode_verify_ratio for s in a.steps]),
                    "t_round_us": _f([s.t_round_us for s in a.steps])}
    view["schedule"] = _schedule_view(sched, err, refined.deployment.engine)
    if isl is not None:
        view["serving"] = _serving(refined, isl, osl)
    dep = refined.deployment
    view["assumptions"] = {
        "acceptance source": refined.scenario.accept.label,
        "engine and version": f"{dep.engine} {dep.engine_version or '(newest documented)'}",
        "execution mode": f"SD rounds overlapped {r.sd_overlap or 'n/a'}, decode overlapped "
                          f"{r.decode_overlap or 'n/a'}",
        "routing model": f"{refined.scenario.mechanisms.routing} (refined: max-ent IPF overlap of the model's routing "
                         f"statistics; prior: uniform independent)",
        "deployment": f"{dep.label}, {dep.gpus} GPUs, context {refined.context} tokens",
        "band": "the ranged engine terms and the acceptance band, widened by the held-out error on the public SD "
                "corpus (docs/MODEL.md §4.6)",
        "tool version": f"moe-specdec-sim {__version__}",
        "date": _today()}
    return view


def _today() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible builds: the same inputs give the same file
    d = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else datetime.datetime.now()
    return d.date().isoformat()


def _schedule_view(sched, err: str, engine: str) -> dict:
    if sched is None:
        return {"summary": f"no {engine} table: {err}", "config": "", "ranges": []}
    c = sched.primary
    try:
        text = render(sched, engine)
    except SimulatorError as exc:
        text = f"({exc})"
    if engine == "sglang" and text and not text.startswith("("):
        from .schedule import launch_flags

        text = "launch flags: " + " ".join(launch_flags(sched, "sd_adaptive.json")) + "\n\nsd_adaptive.json:\n" + text
    best = k_ranges(c.batch, c.k_opt)
    return {"summary": f"{len(c.ranges())} ranges within {sched.tolerance:.0%} of the per-batch best (largest gap "
                       f"{c.gap.max():.2%}; the per-batch best has {len(best)} ranges); K = 0 where SD loses",
            "config": text, "ranges": [list(x) for x in c.ranges()]}


def _serving(case, isl, osl) -> dict:
    conc = [2**i for i in range(9)]
    g = price_serving_grid(case.scenario, conc, isl, osl, case.result.gammas[case.result.gammas >= 0])
    gpus = case.deployment.gpus
    per_gpu, per_user = g.tokens_per_s_gpu(gpus), g.tokens_per_s_user
    best = np.argmax(per_gpu[1:], axis=0) + 1
    cols = np.arange(len(conc))
    return {"concurrency": conc, "k": [int(g.gammas[i]) for i in best], "user_sd": _f(per_user[best, cols]),
            "gpu_sd": _f(per_gpu[best, cols]), "user_plain": _f(per_user[0]), "gpu_plain": _f(per_gpu[0])}


def build_report(models=None, hardware=None, request: Request | None = None, *, engines=None, drafters=None,
                 batch=DEFAULT_BATCH, draft_len=DEFAULT_DRAFT_LEN, tolerance: float = 0.01, isl=None, osl=None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """The report's data: one view per (model, GPU, engine, drafter) (module docstring). ``engines`` default: the
    request's engine if it names one, else the default study's (TensorRT-LLM; each further engine adds its sweep,
    tables, walks and breakdowns, ~1.3 s of CPU for the 22 default targets); ``drafters`` default: the request's."""
    t0 = time.perf_counter()
    req = make_request(request)
    named = dict(req.layout.options).get("engine")
    engines = tuple(engines or ((named,) if named else (DEFAULT_ENGINE,)))
    drafters = tuple(drafters or (str(getattr(req.drafter, "label", req.drafter)),))
    views, missing, keys = {}, {}, {c: [] for c in CONTROLS}
    for d in drafters:
        for e in engines:
            r = run_sweep(models, hardware, make_request(req, engine=e, drafter=d), batch=batch, draft_len=draft_len)
            for m, h, why in r.skipped:
                missing[f"{m}|{h}|{e}|{d}"] = why
            pairs: dict[tuple, dict] = {}
            for c in r.cases:
                pairs.setdefault((c.model.name, c.hardware.name), {})[c.mode] = c
            for (m, h), pr in pairs.items():
                sched, err = None, ""
                try:
                    sched = build_schedule(pr["refined"].model, pr["refined"].scenario.hardware,
                                           make_request(req, engine=e, drafter=d), batch=batch,
                                           draft_len=draft_len, fmt=e, tolerance=tolerance,
                                           contexts=(pr["refined"].context,))
                except SimulatorError as exc:
                    err = str(exc)
                views[f"{m}|{h}|{e}|{d}"] = _view(pr["prior"], pr["refined"], sched, err, d, isl, osl)
                for c, v in zip(CONTROLS, (m, h, e, d), strict=True):
                    if v not in keys[c]:
                        keys[c].append(v)
            if progress is not None:
                progress(f"report: {e} {d}: {len(views)} views, {time.perf_counter() - t0:.1f} s")
    if not views:
        raise SimulatorError("the report has no view: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    rows = [["model", "gpu", "engine", "drafter", "batch", "best_k", "speedup_prior", "speedup_refined",
             "speedup_refined_low", "speedup_refined_high", "table_k"]]
    for key, v in views.items():
        s, tk = v["speedup"], dict(zip(v["throughput"]["batch"], v["throughput"]["k"], strict=True))
        for i, b in enumerate(s["batch"]):
            rows.append([*key.split("|"), b, s["k"][i], s["prior"][i], s["refined"][i], s["refined_low"][i],
                         s["refined_high"][i], tk.get(int(b), "")])
    return {"controls": [{"name": c, "options": keys[c]} for c in CONTROLS], "views": views, "missing": missing,
            "all_csv": rows, "subtitle": f"{len(views)} views priced in {time.perf_counter() - t0:.1f} s by "
                                          f"moe-specdec-sim {__version__}: speculative decoding for sparse MoE "
                                          f"models, prior (MoESD-style) vs refined; switch views with the controls"}


def plan_data(pl) -> dict:
    """The plan's chart and text for the report (:mod:`.plan`)."""
    from .plan import launch_config

    def pts(ps):
        return {"user": _f([p.tokens_per_s_user for p in ps]), "gpu": _f([p.tokens_per_s_gpu for p in ps])}

    best = pl.best()
    fronts = {"front_no_sd": pts(pl.front(False)), "front_sd": pts(pl.front(True))}
    table = {k: [p.as_dict()[k] for p in pl.points] for k in pl.points[0].as_dict()}
    text = ("no configuration meets the SLA" if best is None else
            f"best under the SLA: {best.engine} {best.layout}, K = {best.k}, {best.concurrency} requests per replica: "
            f"{best.tokens_per_s_gpu:.1f} tok/s/GPU, {best.tokens_per_s_user:.1f} tok/s/user\nlaunch config: "
            f"{launch_config(best)}")
    return {"title": f"{pl.model} on up to {pl.budget} x {pl.hardware}, ISL {pl.isl:g} / OSL {pl.osl:g}: "
                     f"{len(pl.points)} points of {pl.layouts} layouts", **fronts, "all": pts(pl.points),
            "best": None if best is None else {"user": best.tokens_per_s_user, "gpu": best.tokens_per_s_gpu},
            "text": text, "table": table}


def report_html(data: dict | None = None, plan=None, title: str = "Speculative decoding on sparse MoE: report") -> str:
    """The page for report ``data`` (:func:`build_report`; default: the default study) and/or a ``plan``."""
    from ..render.html import page

    if data is None and plan is not None:  # the plan's own model on its GPU, every engine
        data = build_report([plan.model], [plan.hardware])
    data = dict(data if data is not None else build_report())
    if plan is not None:
        data["plan"] = plan_data(plan)
    return page(data, title)
