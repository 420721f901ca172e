"""``traffic`` analysis: routing statistics of traffic types whose overlap comes from a seeded synthetic router
(grid variants with ``overlap: {trace: ...}``, measured by :func:`.grid.measured_trace`), the maximum-entropy
predictors' accuracy on those traces (:func:`simulator.overlap.evaluate_trace`), and the refined speedup each
variant gives (routing alone, and with the type's published acceptance)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..overlap import PREDICTORS, evaluate_trace
from ..render import figures as plots
from .grid import lift, measured_trace
from .outcome import Figure, Part, Table, trend
from .schema import on_grid, positive, variant_name


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
    stats_t = Table("statistics", "Measured routing statistics of each traffic type",
                    ("type", "persistence", "context", "skew (target)", "independent overlap",
                     *(f"o({d})" for d in range(1, max_lag + 1)), "lag-1 correlation λ(1)"),
                    tuple((n, t.persistence, t.context, t.skew, ind, *o, float(lift(o[0], ind)))
                          for n, t, o, ind, _ in meas)
                    + ((p.reference, None, None, None, None, *ref_lags[:max_lag], None),),
                    ("", "{:.2f}", "{:.2f}", "{:.3f}", "{:.3f}", *["{:.3f}"] * max_lag, "{:.3f}"))
    acc_rows = [(n, row.n_tokens, row.batch, row.empirical, *(row.rel_error(k) for k in PREDICTORS))
                for n, _, _, _, rep in meas for row in rep.rows]
    acc_t = Table("ipf_accuracy", "Unique experts: empirical (trace) vs predictions, relative error",
                  ("type", "tokens n", "batch", "empirical", *PREDICTORS), tuple(acc_rows),
                  ("", "{:d}", "{:d}", "{:.2f}", *["{:+.1%}"] * len(PREDICTORS)))
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
    sp_t = Table("speedup", f"{model} on {c0.hardware.display_name} ({c0.deployment.label}), refined, per variant",
                 ("variant", *(f"S(B={b})" for b in p.report_batches), "peak B",
                  f"T_dec/T_ver (B={g.batch[0]}, γ={p.ratio_draft_len})",
                  f"experts per layer, verify (B={g.batch[0]}, γ={p.ratio_draft_len})"), tuple(sp_rows),
                 ("", *["{:.2f}"] * len(bi), "{:d}", "{:.3f}", "{:.1f}"))
    a, b = p.types[0], p.types[1]
    diff = []
    for (va, vb), label in (((a, b), "routing only (same acceptance)"),
                            (tuple(p.with_acceptance[:2]), "routing + published acceptance")):
        if va and vb:
            sa, sb = runs[va].best()[1], runs[vb].best()[1]
            diff.append((f"{b} − {a}", label, *(float(sb[i] - sa[i]) for i in bi)))
    diff_t = Table("difference", f"Speedup difference, {b} minus {a}",
                   ("comparison", "variant", *(f"ΔS(B={x})" for x in p.report_batches)), tuple(diff),
                   ("", "", *["{:+.3f}"] * len(bi)))
    mae = {n: rep.mean_abs_error() for n, _, _, _, rep in meas}
    figs = (Figure("lags", "Lag overlaps o(d) of each traffic type (solid), the published reference (black) and "
                   "each type's independent baseline (dotted)", lambda path: _plot_lags(meas, p.reference, ref_lags,
                                                                                         path)),
            Figure("speedup", "Refined speedup vs batch per variant", lambda path: _plot_speedup(runs, g, path)))
    keys = tuple((f"{n}: o(1) / independent", f"{o[0]:.3f} / {ind:.3f}") for n, _, o, ind, _ in meas)
    keys += tuple((f"{d[0]}, {d[1]}", " / ".join(f"B={x}: {v:+.3f}" for x, v in zip(p.report_batches, d[2:],
                                                                                    strict=True))) for d in diff)
    keys += tuple((f"IPF mean |error| on {k} (pairs / pooled)", f"{v['pairs']:.1%} / {v['pooled']:.1%}")
                  for k, v in mae.items())
    settings = tuple(f"**{n}**: synth_trace(persistence={t.persistence:g}, context={t.context:g}, skew={t.skew:g}), "
                     f"{t.experts} experts, top-{t.top_k}, hidden {t.hidden}, {t.sequences} sequences × {t.tokens} "
                     f"tokens, seed {t.seed}" for n, t, _, _, _ in meas)
    settings += (f"cost: {model} on {c0.hardware.display_name}, {c0.deployment.label}, refined, the measured lags and "
                 f"popularity skew of each type; drafter {study.speculation.drafter}, default acceptance "
                 f"{study.speculation.acceptance.label}; batch {list(g.batch)}, draft length {list(g.draft_len)}, "
                 f"context {g.context}",
                 f"IPF check: windows of n = {list(p.n_tokens)} tokens, batch {list(p.eval_batch)}, {p.samples} "
                 "samples per point")
    return Part(keys, (stats_t, sp_t, diff_t, acc_t), figs, findings(meas, diff, mae, ref_lags), settings)


def findings(meas, diff, mae, ref_lags) -> tuple[str, ...]:
    (na, _, oa, _, _), (nb, _, ob, _, _) = meas[0], meas[1]
    s1 = (f"The {nb} traffic's adjacent tokens share {ob[0]:.0%} of their experts against {oa[0]:.0%} for {na} "
          f"(published reference {ref_lags[0]:.0%}): {trend(oa[0], ob[0], 'more', 'less', 'as much')} overlap. "
          + " ".join(f"{d[0]}, {d[1]}: " + ", ".join(f"ΔS = {v:+.2f}" for v in d[2:]) + "." for d in diff))
    route, both = (abs(diff[0][2]), abs(diff[1][2])) if len(diff) > 1 else (abs(diff[0][2]), 0.0)
    s2 = (f"At the smallest batch the routing effect ({route:.2f}) is "
          f"{trend(both - route, route, 'larger', 'smaller', 'as large')} than the acceptance effect "
          f"({abs(both - route):.2f}): more overlap only removes expert reads from the verify pass, while acceptance "
          "scales every round's accepted tokens.") if len(diff) > 1 else ""
    s3 = ("How sure: the traces are synthetic; the generator settings are choices that represent each type "
          "(documented above), not measurements of agent traffic. The pair-marginal max-ent predictor matches the "
          "traces' unique-expert counts with mean |error| "
          + ", ".join(f"{k} {v['pairs']:.1%} (pooled statistics {v['pooled']:.1%})" for k, v in mae.items()) + ".")
    return tuple(x for x in (s1, s2, s3) if x)


def _plot_lags(meas, ref_name, ref_lags, path) -> str:
    series = [(n, np.arange(1, len(o) + 1), o, {"color": plots.PALETTE[k]}) for k, (n, _, o, _, _) in enumerate(meas)]
    series.append((ref_name, np.arange(1, len(ref_lags) + 1), ref_lags, {"marker": "s", "color": "black"}))

    def baselines(ax, _):
        for k, (_, _, _, ind, _) in enumerate(meas):
            ax.axhline(ind, color=plots.PALETTE[k], linestyle=":", linewidth=0.8)
        ax.set_ylim(0, 1)

    return plots.line_figure(path, {"": series}, "Lag overlap o(d) by traffic type", panel=(6.0, 4.0),
                             xlabel="lag d (tokens)", ylabel="o(d) = E|S_t ∩ S_t+d| / k", decorate=baselines)


def _plot_speedup(runs, g, path) -> str:
    series = [(n, c.result.batch, c.best()[1], {"color": plots.PALETTE[k % len(plots.PALETTE)]})
              for k, (n, c) in enumerate(runs.items())]
    return plots.line_figure(path, {"": series}, "Refined speedup vs batch by traffic variant", panel=(6.5, 4.2),
                             log2=True)
