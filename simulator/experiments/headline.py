"""``headline`` analysis: T_decode / T_verify of one deployment under the prior and refined models next to the
published values, the prior → refined attribution (``explain``), the per-op-class cost of a verify pass, and the
refined ratio across a bracket of overlap variants. Nothing is fitted to the published numbers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.deployment import PRESETS
from ..cost.routing import model_overlap
from ..cost.step import CLASSES
from ..pricing import price_pass
from ..render import figures as plots
from ..sweep import plot_waterfall
from ..sweep.explain import explain_scenario
from .outcome import Figure, Part, Table, tidy_table
from .schema import fraction, on_grid, positive, variant_name


@dataclass(frozen=True)
class Published:
    draft_len: int = on_grid("draft_len")
    prior: float = fraction()
    refined: float = fraction()
    source: str = ""


@dataclass(frozen=True)
class Settings:
    study: Published
    batch: int = on_grid("batch", 1)
    explain_draft_len: int = positive(3)
    bracket: str = variant_name("")  # the grid's overlap variants (expanded over lag1) that bracket the refined ratio
    placements: tuple[str, ...] = variant_name(())  # the grid's variants that change the expert placement
    why: dict | None = None  # mechanism -> why it moves the ratio (docs/MODEL.md §3.6), said of the largest one


def check(r, study, s: Settings) -> None:
    if len(study.grid.all_targets) != 1:
        raise r.fail("grid", "has more than one target; the headline analysis reads exactly one", "keep one")


def run(study, priced, ctx, s: Settings) -> Part:
    m = priced.models()[0]
    res = {md: priced.find(m, md).case for md in ("prior", "refined")}
    ref = res["refined"]
    model, hw, dep = ref.model, ref.hardware, ref.deployment
    gam, b0 = s.study.draft_len, s.batch
    bi = int(np.flatnonzero(ref.result.batch == b0)[0])
    ratios = tidy_table("ratios", "T_decode / T_verify by draft length (batch grid of the file)", res.values(), (
        ("mode", "mode", ""), ("batch", "batch", "{:d}"), ("draft length", "draft_len", "{:d}"),
        ("AL", "accept_length", "{:.2f}"), ("T_decode us", "t_decode_us", "{:.0f}"),
        ("T_verify us", "t_verify_us", "{:.0f}"), ("T_verify/T_decode", "verify_decode_ratio", "{:.3f}"),
        ("T_decode/T_verify", lambda c: 1 / c["verify_decode_ratio"], "{:.3f}"),
        ("experts decode", "unique_experts_decode", "{:.1f}"), ("experts verify", "unique_experts_verify", "{:.1f}"),
        ("experts decode (rank)", "unique_experts_decode_rank", "{:.2f}"),
        ("experts verify (rank)", "unique_experts_verify_rank", "{:.2f}"), ("speedup", "speedup", "{:.2f}")))
    pred = {md: c.decode_verify(gam, bi) for md, c in res.items()}
    pub = {"prior": s.study.prior, "refined": s.study.refined}
    comp = Table("study_comparison", f"Against the study (batch {b0}, draft length {gam})",
                 ("mode", "predicted T_decode/T_verify", "study", "error (pred - study)", "relative error"),
                 tuple((md, pred[md], pub[md], pred[md] - pub[md], pred[md] / pub[md] - 1) for md in pub),
                 ("", "{:.3f}", "{:.2f}", "{:+.3f}", "{:+.1%}"))
    attr = explain_scenario(ref.scenario, batch=b0, draft_len=s.explain_draft_len)
    walk_rows, prev = [], None
    for st in attr.steps:
        walk_rows.append((st.name, st.t_decode_us, st.t_verify_us, st.decode_verify_ratio,
                          None if prev is None else st.decode_verify_ratio - prev.decode_verify_ratio, st.speedup,
                          None if prev is None else st.speedup - prev.speedup))
        prev = st
    walk = Table("walk", f"Prior → refined, one mechanism at a time (batch {b0}, draft length {s.explain_draft_len})",
                 ("step", "T_decode us", "T_verify us", "T_decode/T_verify", "change", "speedup", "change in speedup"),
                 tuple(walk_rows), ("", "{:.0f}", "{:.0f}", "{:.3f}", "{:+.3f}", "{:.2f}", "{:+.2f}"))
    shap, readings = _shapley_tables(attr, pub["prior"])
    brk = _breakdown(ref.scenario, b0, gam)
    bracket = {e.lag1: priced.find(m, "refined", e.name).case.decode_verify(gam, bi)
               for e in priced.variants if e.spec.name == s.bracket}
    br_t = Table("overlap_bracket", "Refined T_decode/T_verify across the study's measured overlap range",
                 ("lag-1 overlap o(1)", "refined T_decode/T_verify"), tuple(bracket.items()), ("{:.3f}", "{:.3f}"))
    place = _placements(priced, m, ref, s, gam, bi)
    pl_t = Table("placement", f"Refined T_decode/T_verify by expert placement (batch {b0}, draft length {gam})",
                 ("placement", "busiest-rank experts decode", "busiest-rank experts verify",
                  "refined T_decode/T_verify"),
                 tuple((k, *v) for k, v in place.items()), ("", "{:.2f}", "{:.2f}", "{:.3f}"))
    figs = (Figure("waterfall", f"explain waterfall: {model.display_name} on {hw.display_name}, batch {b0}, draft "
                   f"length {s.explain_draft_len}", lambda path: plot_waterfall(attr, path)),
            Figure("ratio", "T_decode / T_verify vs draft length, prior and refined, with the study's values",
                   lambda path: _plot_ratio(res, s, bi, path)))
    acc = study.grid.all_targets[0].acceptance or study.speculation.acceptance
    ud, uv = float(ref.result.unique_decode_rank[bi]), float(ref.result.unique_verify_rank[ref.at_gamma(gam), bi])
    tables = (comp, readings, walk, shap, brk, ratios, br_t) + ((pl_t,) if len(place) > 1 else ())
    ns = values(pred, pub, gam, attr, brk, bracket, ud, uv, place, s.why or {})
    ns.update(model=model, hw=hw, dep=dep, ref=ref, acc=acc, lags=model_overlap(model).lags, nlags=len(model_overlap(model).lags),
              popularity=model_overlap(model).popularity,
              sp={md: res[md].result.speedup[res[md].at_gamma(gam), bi] for md in res})
    return Part(tables=tables, figures=figs, values=ns)


def _shapley_tables(attr, study_prior: float) -> tuple[Table, Table]:
    """The order-independent attribution beside the walk, and the prior under each of its readings."""
    ratio, speed = attr.shapley
    shap = Table("shapley", f"Shapley attribution (order-independent) of the prior → refined change, batch "
                 f"{attr.batch}, draft length {attr.draft_len}",
                 ("mechanism", "T_decode/T_verify: Shapley", "ratio: first", "ratio: last", "speedup: Shapley",
                  "speedup: first", "speedup: last"),
                 tuple((p, ratio.contributions[p], ratio.first[p], ratio.last[p], speed.contributions[p],
                        speed.first[p], speed.last[p]) for p in ratio.contributions)
                 + (("total", ratio.total, None, None, speed.total, None, None),),
                 ("", *["{:+.3f}"] * 6))
    readings = Table("prior_readings", "The prior under each reading of MoESD's fitted terms (docs/MODEL.md §3.6)",
                     ("reading", "T_decode/T_verify", "error (pred - study)", "speedup"),
                     tuple((r, q, q - study_prior, sp) for r, q, sp in attr.prior_range),
                     ("", "{:.3f}", "{:+.3f}", "{:.2f}"))
    return shap, readings


def _placements(priced, m: str, ref, s: Settings, gam: int, bi: int) -> dict[str, tuple[float, float, float]]:
    """placement label -> (busiest-rank experts decode, verify, refined T_decode/T_verify): the file's deployment
    first, then each placement variant."""
    def row(c) -> tuple[float, float, float]:
        return (float(c.result.unique_decode_rank[bi]), float(c.result.unique_verify_rank[c.at_gamma(gam), bi]),
                c.decode_verify(gam, bi))

    def label(dep) -> str:
        return dep.placement + (f" +{dep.redundant_experts} replicas" if dep.redundant_experts else "")

    out = {f"{label(ref.deployment)} (file)": row(ref)}
    for e in priced.variants:
        if e.spec.name in s.placements:
            c = priced.find(m, "refined", e.name).case
            out[label(c.deployment)] = row(c)
    return out


def _breakdown(sc, batch: int, gamma: int) -> Table:
    rows, res = [], {}
    for md in ("prior", "refined"):
        s = sc.edit(mode=md, mechanisms=PRESETS[md])
        dec, ver = (price_pass(s, [batch], n, check_fit=False) for n in (1, gamma + 1))
        res[md] = {c: (float(dec.breakdown[c][0]) * 1e6, float(ver.breakdown[c][0]) * 1e6) for c in CLASSES}
        res[md]["total"] = (float(dec.time[0]) * 1e6, float(ver.time[0]) * 1e6)
    for c in (*CLASSES, "total"):
        pr, rf = res["prior"][c], res["refined"][c]
        if max(pr + rf) > 0:
            rows.append((c, pr[0], pr[1], pr[1] - pr[0], rf[0], rf[1], rf[1] - rf[0]))
    return Table("breakdown", f"Where the verify pass costs more than a decode step (batch {batch}, {gamma + 1} "
                 "tokens per request), µs on the critical path",
                 ("op class", "prior decode", "prior verify", "prior extra", "refined decode", "refined verify",
                  "refined extra"), tuple(rows), ("", *["{:.0f}"] * 6))


def values(pred: dict, pub: dict, gam: int, attr, brk: Table, bracket: dict, ud: float, uv: float,
           place: dict | None = None, why: dict | None = None) -> dict:
    """The named numbers of the headline prose (experiments/paper-headline.yaml)."""
    steps, place, why = attr.steps, place or {}, why or {}
    deltas = [{"n": st.name.replace("+ ", ""), "d": st.decode_verify_ratio - q.decode_verify_ratio}
              for q, st in zip(steps, steps[1:], strict=False)]
    top = max(deltas, key=lambda x: abs(x["d"]))
    extra = {row[0]: row[6] for row in brk.rows}
    ratio, _ = attr.shapley
    rng = sorted(attr.prior_range, key=lambda r: r[1])
    lo_b, hi_b = min(bracket.values(), default=0.0), max(bracket.values(), default=0.0)
    pr = {k: v[2] for k, v in place.items()}
    plo, phi = min(pr, key=pr.get, default=""), max(pr, key=pr.get, default="")
    return dict(
        pred=pred, pub=pub, err={md: pred[md] - pub[md] for md in pub}, gam=gam, tokens=gam + 1, ud=ud, uv=uv,
        readings=[{"r": r, "q": q} for r, q, _ in attr.prior_range], lo={"r": rng[0][0], "q": rng[0][1]},
        hi={"r": rng[-1][0], "q": rng[-1][1]}, deltas=deltas, top={**top, "why": why.get(
            top["n"].split("=")[0], "see docs/MODEL.md §3.6")},
        shap=[{"n": n, "v": v} for n, v in ratio.contributions.items()],
        order=[{"n": n, "first": ratio.first[n], "last": ratio.last[n]} for n in ratio.contributions
               if abs(ratio.first[n] - ratio.last[n]) >= 0.0005],
        extra=extra.get("total", 0.0), extra_abs=abs(extra.get("total", 0.0)),
        top3=[{"c": c, "v": v} for c, v in sorted(((c, v) for c, v in extra.items() if c != "total"),
                                                   key=lambda x: -x[1])[:3]],
        l2=(l2 := dict((d["n"].split("=")[0], d["d"]) for d in deltas).get("l2", 0.0)), l2_abs=abs(l2),
        bracket=[{"o": o, "v": v} for o, v in bracket.items()], blo=lo_b, bhi=hi_b,
        omin=min(bracket, default=0.0), omax=max(bracket, default=0.0), inside=lo_b <= pub["refined"] <= hi_b,
        bdir=pub["refined"] - hi_b, few_place=len(place) < 2, many_place=len(place) > 1,
        place=[{"k": k, "v": v[1], "r": v[2]} for k, v in place.items()], plo=plo, phi=phi,
        pmove=pr.get(phi, 0.0) - pr.get(plo, 0.0), preach=bool(pr) and pr[plo] <= pub["refined"] <= pr[phi],
        pdir=pub["refined"] - pr.get(phi, 0.0))


def _plot_ratio(res, s: Settings, bi: int, path) -> str:
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

