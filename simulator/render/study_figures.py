"""The figures of the bundled studies (PNG, Matplotlib's object-oriented API through :mod:`.figures`): each takes
the rows an analysis computed and draws them; nothing here prices or reads a study file."""

from __future__ import annotations

import numpy as np

from ..calibrate.measured import ALL_TRT, CALIB, SGLANG, VLLM
from . import figures as plots


def curve_shapes(rows, exp, path, transfer: str) -> str:
    """Speedup at the best draft length vs batch per target (``transfer``: drawn only for models without routing
    statistics)."""
    panels = {f"{x.model.name} ({x.dep.label})": [(v, r.batch, r.best()[1], plots.style(v, 0))
                                                 for v, r in x.results.items()
                                                 if v != transfer or x.model.overlap is None] for x in rows}
    sp = exp.speculation
    return plots.batch_panels(path, panels, f"Speedup vs batch (best draft length per batch); drafter {sp.drafter}, "
                              f"{sp.acceptance.label}, context {exp.grid.context}", "speedup over plain decoding (x)",
                              refs=(plots.NO_SPEEDUP,))


def headline_ratio(res, s, bi: int, path) -> str:
    """T_decode / T_verify vs draft length, prior and refined, with the study's published values."""
    series = [(f"{md} (model)", c.result.gammas, 1 / c.result.verify_decode_ratio[:, bi], plots.style(md))
              for md, c in res.items()]
    series += [(f"{md} (study)", [s.study.draft_len], [v], {"linestyle": "", "marker": "X", "markersize": 11,
                                                            "color": plots.style(md)["color"]})
               for md, v in (("prior", s.study.prior), ("refined", s.study.refined))]

    def axes(ax, _):
        ax.set_ylim(0, 1.05)
        ax.set_xticks(list(res["prior"].result.gammas))

    return plots.line_figure(path, {"": series}, f"T_decode / T_verify vs draft length (batch {s.batch}); study at "
                             f"draft length {s.study.draft_len}", panel=(6.0, 4.0),
                             xlabel="draft length γ (verify pass of γ+1 tokens)", ylabel="T_decode / T_verify",
                             decorate=axes)


def whatif_bars(grid_rows, exp, path) -> str:
    models = list(dict.fromkeys(r.model for r in grid_rows))
    vals = {(r.model, r.gpu, r.format): r.s for r in grid_rows}
    combos = [(h, d) for h in exp.grid.hardware for d in exp.grid.dtype if any(vals.get((m, h, d)) for m in models)]
    fig, (ax,) = plots.grid_figure(1, panel=(max(8.0, 1.1 * len(models)), 4.2),
                              title=f"Refined speedup at B={exp.grid.batch[0]} (best draft length)")
    width = 0.8 / len(combos)
    for k, (h, d) in enumerate(combos):
        ys = [vals.get((m, h, d)) for m in models]
        xs = [i + k * width for i, y in enumerate(ys) if y is not None]
        ax.bar(xs, [y for y in ys if y is not None], width, color=plots.PALETTE[k % len(plots.PALETTE)],
               label=f"{h} {d}")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))])
    ax.set_xticklabels(models, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("speedup (x)", fontsize=8)
    ax.axhline(1.0, color="0.5", linewidth=0.7, linestyle=":")
    ax.grid(True, axis="y", alpha=0.3)
    top = max((v for v in vals.values() if v is not None), default=1.0)
    ax.set_ylim(0, top * 1.22)
    ax.legend(fontsize=7, ncol=len(combos), loc="upper center")
    fig.subplots_adjust(bottom=0.25)
    return plots.save(fig, path, dpi=100)


def whatif_attribution(attr, exp, path) -> str:
    rows = [x for x in attr if x.s is not None]
    fig, (ax,) = plots.grid_figure(1, panel=(8.0, 0.32 * len(rows) + 1.2),
                              title=f"{exp.analyses['whatif'].attribution.model}: change of refined S(B="
                                    f"{exp.grid.batch[0]}) against {exp.analyses['whatif'].attribution.base} "
                                    f"{exp.analyses['whatif'].attribution.dtype}")
    ys = np.arange(len(rows))[::-1]
    ax.barh(ys, [x.ds for x in rows], color=[plots.PALETTE[0] if x.ds >= 0 else plots.PALETTE[1] for x in rows])
    ax.set_yticks(ys)
    ax.set_yticklabels([x.label for x in rows], fontsize=7)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_xlabel("Δ speedup at the smallest batch", fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.subplots_adjust(left=0.45)
    return plots.save(fig, path, dpi=100)


def speedup_vs_overlap(points, flips, exp, p, path) -> str:
    styles = {"cohere": "-", "markov": "--"}
    profs = list(dict.fromkeys(x.profile for x in points))
    panels = {m: [(f"B={b}, {prof}", *zip(*[(x.lag1, x.speedup[exp.grid.batch.index(b)]) for x in points
                                            if (x.model, x.profile) == (m, prof)], strict=True),
                   {"linestyle": styles[prof], "color": plots.PALETTE[k]})
                  for k, b in enumerate(p.report_batches) for prof in profs]
              for m in dict.fromkeys(x.model for x in points)}

    def bands(ax, m):
        ax.axvspan(*p.study_range[:2], color="0.85", label="study's measured range")
        ax.axvspan(*p.independent_range[:2], facecolor="none", hatch="//", edgecolor="0.6",
                   label="independent-routing range")
        for o in (f[2] for f in flips if f[0] == m):
            ax.axvline(o, color="0.3", linestyle=styles[next(f[1] for f in flips if f[2] == o)], linewidth=0.8)

    return plots.line_figure(path, panels, "Refined speedup vs adjacent-token overlap o(1)",
                             xlabel="lag-1 overlap o(1)", decorate=bands)


def overlap_curves(points, exp, p, path) -> str:
    first = points[0].profile
    panels = {}
    for m in dict.fromkeys(x.model for x in points):
        pts = [x for x in points if x.model == m and x.profile == first]
        idx = sorted(set(np.linspace(0, len(pts) - 1, min(6, len(pts))).round().astype(int).tolist()))
        panels[m] = [(f"o(1)={pts[i].lag1:.3f}", pts[i].batch, pts[i].speedup,
                      {"color": plots.PALETTE[k % len(plots.PALETTE)]}) for k, i in enumerate(idx)]
    return plots.line_figure(path, panels, f"Refined speedup vs batch at selected o(1) (profile: {first})",
                             log2=True, legend="each")


def traffic_lags(meas, ref_name, ref_lags, path) -> str:
    series = [(n, np.arange(1, len(o) + 1), o, {"color": plots.PALETTE[k]}) for k, (n, _, o, _, _) in enumerate(meas)]
    series.append((ref_name, np.arange(1, len(ref_lags) + 1), ref_lags, {"marker": "s", "color": "black"}))

    def baselines(ax, _):
        for k, (_, _, _, ind, _) in enumerate(meas):
            ax.axhline(ind, color=plots.PALETTE[k], linestyle=":", linewidth=0.8)
        ax.set_ylim(0, 1)

    return plots.line_figure(path, {"": series}, "Lag overlap o(d) by traffic type", panel=(6.0, 4.0),
                             xlabel="lag d (tokens)", ylabel="o(d) = E|S_t ∩ S_t+d| / k", decorate=baselines)


def traffic_speedup(runs, g, path) -> str:
    series = [(n, c.result.batch, c.best()[1], {"color": plots.PALETTE[k % len(plots.PALETTE)]})
              for k, (n, c) in enumerate(runs.items())]
    return plots.line_figure(path, {"": series}, "Refined speedup vs batch by traffic variant", panel=(6.5, 4.2),
                             log2=True)


def per_op_scatter(samples, path) -> str:
    ops = list(dict.fromkeys(s.op for s in samples))
    fig, axes = plots.grid_figure(len(ops), ncols=2, panel=(5.2, 4.4), title="Predicted vs measured per-op latency, "
                                  "H100 SXM (diagonal: exact; dotted: ±20%)")
    style = {CALIB: ("#1b9e77", "o", 1.0), ALL_TRT: ("#999999", ".", 1.0), SGLANG: ("#d95f02", "x", 0.6),
             VLLM: ("#7570b3", "+", 0.6)}
    for ax, op in zip(axes, ops, strict=True):
        lo, hi = np.inf, 0.0
        for set_name in (ALL_TRT, SGLANG, VLLM, CALIB):
            sel = [s for s in samples if s.op == op and s.set == set_name]
            if not sel:
                continue
            m = np.concatenate([s.measured for s in sel])
            pr = np.concatenate([s.predicted for s in sel])
            c, mk, a = style[set_name]
            ax.scatter(m, pr, s=4, c=c, marker=mk, alpha=a, linewidths=0.5, label=f"{set_name} ({m.size})")
            lo, hi = min(lo, m.min(), pr.min()), max(hi, m.max(), pr.max())
        xs = np.array([lo, hi])
        ax.plot(xs, xs, color="black", linewidth=0.8)
        ax.plot(xs, xs * 1.2, color="black", linewidth=0.6, linestyle=":")
        ax.plot(xs, xs / 1.2, color="black", linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op, fontsize=9)
        ax.set_xlabel("measured (µs)", fontsize=8)
        ax.set_ylabel("predicted (µs)", fontsize=8)
        ax.grid(True, alpha=0.3, which="major")
        ax.legend(fontsize=6, loc="upper left", markerscale=2)
    return plots.save(fig, path, dpi=100)
