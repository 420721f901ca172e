"""``traffic`` analysis: routing statistics of traffic types whose overlap comes from a seeded synthetic router
(grid variants with ``overlap: {trace: ...}``, measured by :func:`simulator.traces.synth.measured_trace`), the
maximum-entropy predictors' accuracy on those traces (:func:`simulator.traces.evaluate_trace`), and the refined
speedup each variant gives (routing alone, and with the type's published acceptance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..overlap.lag_profile import lift
from ..render import study_figures
from ..render.outcome import Figure, Part, table
from ..specs.settings import on_grid, positive, variant_name
from ..traces import PREDICTORS, evaluate_trace
from ..traces.synth import measured_trace


@dataclass(frozen=True)
class Settings:
    types: tuple[str, ...] = variant_name()  # grid variants (routing only) with a trace overlap, first two compared
    with_acceptance: tuple[str, ...] = variant_name()  # the same types with their published acceptance (same order)
    reference: str = variant_name()  # grid variant with the published lag overlaps
    n_tokens: tuple[int, ...] = positive()
    eval_batch: tuple[int, ...] = positive()
    report_batches: tuple[int, ...] = on_grid("batch")
    samples: int = positive(1000)
    window: int = positive(3)
    ratio_draft_len: int = on_grid("draft_len", 3)


def run(study, priced, ctx, p: Settings) -> Part:
    g = study.grid
    model = priced.models()[0]
    specs = {e.name: e.spec for e in priced.variants}
    meas = []
    for name in p.types:
        t = specs[name].overlap.trace
        tr, st = measured_trace(t)
        rep = evaluate_trace(tr, p.n_tokens, p.eval_batch, window=p.window, samples=p.samples, seed=t.seed,
                             predictors=PREDICTORS)
        meas.append((name, t, tuple(float(o) for o in st.overlaps), float(st.skew), rep))
    max_lag = max(len(m[2]) for m in meas)
    ref_lags = specs[p.reference].overlap.lags
    stats_t = table("statistics", "Measured routing statistics of each traffic type", "type; persistence|.2f; "
                    "context|.2f; skew (target)|.3f; independent overlap|.3f; " + "".join(
                        f"o({d})|.3f; " for d in range(1, max_lag + 1)) + "lag-1 correlation λ(1)|.3f",
                    [(n, t.persistence, t.context, t.skew, ind, *o, float(lift(o[0], ind))) for n, t, o, ind, _ in meas]
                    + [(p.reference, None, None, None, None, *ref_lags[:max_lag], None)])
    acc_rows = [(n, row.n_tokens, row.batch, row.empirical, *(row.rel_error(k) for k in PREDICTORS))
                for n, _, _, _, rep in meas for row in rep.rows]
    acc_t = table("ipf_accuracy", "Unique experts: empirical (trace) vs predictions, relative error", "type; tokens "
                  "n|d; batch|d; empirical|.2f" + "".join(f"; {k}|+.1%" for k in PREDICTORS), acc_rows)
    names = (*p.types, *p.with_acceptance, p.reference)
    runs = {n: priced.find(model, "refined", n).case for n in names}
    bi = [g.batch.index(b) for b in p.report_batches]
    sp_rows = []
    for n, c in runs.items():
        _, s = c.best()
        sp_rows.append((n, *(float(s[i]) for i in bi), int(c.result.batch[int(np.argmax(s))]),
                        c.decode_verify(p.ratio_draft_len, 0),
                        float(c.result.unique_verify[c.at_gamma(p.ratio_draft_len), 0])))
    c0 = runs[p.types[0]]
    at = f"(B={g.batch[0]}, γ={p.ratio_draft_len})"
    sp_t = table("speedup", f"{model} on {c0.hardware.display_name} ({c0.deployment.label}), refined, per variant",
                 "variant; " + "".join(f"S(B={b})|.2f; " for b in p.report_batches)
                 + f"peak B|d; T_dec/T_ver {at}|.3f; "
                 f"experts per layer, verify {at}|.1f", sp_rows)
    a, b = p.types[0], p.types[1]
    diff = []
    for (va, vb), label in (((a, b), "routing only (same acceptance)"),
                            (tuple(p.with_acceptance[:2]), "routing + published acceptance")):
        if va and vb:
            sa, sb = runs[va].best()[1], runs[vb].best()[1]
            diff.append((f"{b} − {a}", label, *(float(sb[i] - sa[i]) for i in bi)))
    diff_t = table("difference", f"Speedup difference, {b} minus {a}", "comparison; variant" + "".join(
        f"; ΔS(B={x})|+.3f" for x in p.report_batches), diff)
    mae = {n: rep.mean_abs_error() for n, _, _, _, rep in meas}
    figs = (Figure("lags", "Lag overlaps o(d) of each traffic type (solid), the published reference (black) and "
                   "each type's independent baseline (dotted)",
                   lambda path: study_figures.traffic_lags(meas, p.reference, ref_lags, path)),
            Figure("speedup", "Refined speedup vs batch per variant",
                   lambda path: study_figures.traffic_speedup(runs, g, path)))
    return Part(tables=(stats_t, sp_t, diff_t, acc_t), figures=figs,
                values=values(meas, diff, mae, ref_lags, p.report_batches) | {"model": model, "c0": c0})


def values(meas, diff, mae, ref_lags, batches) -> dict:
    """The named numbers of the traffic prose (experiments/agent-traffic.yaml)."""
    (na, _, oa, _, _), (nb, _, ob, _, _) = meas[0], meas[1]
    route, both = (abs(diff[0][2]), abs(diff[1][2])) if len(diff) > 1 else (abs(diff[0][2]), 0.0)
    return dict(a={"n": na, "o1": oa[0]}, b={"n": nb, "o1": ob[0]}, ref0=ref_lags[0], odiff=ob[0] - oa[0],
                many=len(diff) > 1, route=route, acc_eff=abs(both - route), rcmp=route - (both - route),
                diff=[{"name": d[0], "label": d[1], "vals": d[2:],
                       "at": [{"b": x, "v": v} for x, v in zip(batches, d[2:], strict=True)]} for d in diff],
                mae=[{"k": k, **v} for k, v in mae.items()],
                meas=[{"n": n, "t": t, "o1": o[0], "ind": ind} for n, t, o, ind, _ in meas])
