"""``headline`` analysis: T_decode / T_verify of one deployment under the prior and refined models next to the
published values, the prior → refined attribution (``explain``), the per-op-class cost of a verify pass, and the
refined ratio across a bracket of overlap variants. Nothing is fitted to the published numbers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.routing import model_overlap
from ..cost.step import CLASSES
from ..pricing import class_times
from ..render import study_figures
from ..render.outcome import Figure, Part, Table, table
from ..specs.settings import fraction, on_grid, positive, variant_name
from ..sweep import plot_waterfall
from ..sweep.explain import explain_scenario
from ..sweep.table import tidy_columns


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
    model, hw, dep, o = ref.model, ref.hardware, ref.deployment, model_overlap(ref.model)
    gam, b0 = s.study.draft_len, s.batch
    bi = int(np.flatnonzero(ref.result.batch == b0)[0])
    cols = tidy_columns(list(res.values()))
    ratios = table("ratios", "T_decode / T_verify by draft length (batch grid of the file)", "mode; batch|d; draft "
                   "length|d; AL|.2f; T_decode us|.0f; T_verify us|.0f; T_verify/T_decode|.3f; T_decode/T_verify|.3f; "
                   "experts decode|.1f; experts verify|.1f; experts decode (rank)|.2f; experts verify (rank)|.2f; "
                   "speedup|.2f", zip(*[cols[c].tolist() if c else (1 / cols["verify_decode_ratio"]).tolist() for c in (
                       "mode", "batch", "draft_len", "accept_length", "t_decode_us", "t_verify_us",
                       "verify_decode_ratio", "", "unique_experts_decode", "unique_experts_verify",
                       "unique_experts_decode_rank", "unique_experts_verify_rank", "speedup")], strict=True))
    pred = {md: c.decode_verify(gam, bi) for md, c in res.items()}
    pub = {"prior": s.study.prior, "refined": s.study.refined}
    comp = table("study_comparison", f"Against the study (batch {b0}, draft length {gam})", "mode; predicted "
                 "T_decode/T_verify|.3f; study|.2f; error (pred - study)|+.3f; relative error|+.1%",
                 ((md, pred[md], pub[md], pred[md] - pub[md], pred[md] / pub[md] - 1) for md in pub))
    attr = explain_scenario(ref.scenario, batch=b0, draft_len=s.explain_draft_len)
    walk = table("walk", f"Prior → refined, one mechanism at a time (batch {b0}, draft length {s.explain_draft_len})",
                 "step; T_decode us|.0f; T_verify us|.0f; T_decode/T_verify|.3f; change|+.3f; speedup|.2f; change in "
                 "speedup|+.2f", ((st.name, st.t_decode_us, st.t_verify_us, st.decode_verify_ratio,
                                   q and st.decode_verify_ratio - q.decode_verify_ratio, st.speedup,
                                   q and st.speedup - q.speedup)
                                  for q, st in zip((None, *attr.steps), attr.steps, strict=False)))
    ratio, speed = attr.shapley
    shap = table("shapley", f"Shapley attribution (order-independent) of the prior → refined change, batch "
                 f"{attr.batch}, draft length {attr.draft_len}", "mechanism; T_decode/T_verify: Shapley|+.3f; ratio: "
                 "first|+.3f; ratio: last|+.3f; speedup: Shapley|+.3f; speedup: first|+.3f; speedup: last|+.3f",
                 [(p, ratio.contributions[p], ratio.first[p], ratio.last[p], speed.contributions[p], speed.first[p],
                   speed.last[p]) for p in ratio.contributions] + [("total", ratio.total, None, None, speed.total,
                                                                     None, None)])
    readings = table("prior_readings", "The prior under each reading of MoESD's fitted terms (docs/MODEL.md §3.6)",
                     "reading; T_decode/T_verify|.3f; error (pred - study)|+.3f; speedup|.2f",
                     ((r, q, q - pub["prior"], sp) for r, q, sp in attr.prior_range))
    brk = _breakdown(ref.scenario, b0, gam)
    bracket = {e.lag1: priced.find(m, "refined", e.name).case.decode_verify(gam, bi)
               for e in priced.variants if e.spec.name == s.bracket}
    br_t = table("overlap_bracket", "Refined T_decode/T_verify across the study's measured overlap range",
                 "lag-1 overlap o(1)|.3f; refined T_decode/T_verify|.3f", bracket.items())
    place = _placements(priced, m, ref, s, gam, bi)
    pl_t = table("placement", f"Refined T_decode/T_verify by expert placement (batch {b0}, draft length {gam})",
                 "placement; busiest-rank experts decode|.2f; busiest-rank experts verify|.2f; refined "
                 "T_decode/T_verify|.3f", ((k, *v) for k, v in place.items()))
    figs = (Figure("waterfall", f"explain waterfall: {model.display_name} on {hw.display_name}, batch {b0}, draft "
                   f"length {s.explain_draft_len}", lambda path: plot_waterfall(attr, path)),
            Figure("ratio", "T_decode / T_verify vs draft length, prior and refined, with the study's values",
                   lambda path: study_figures.headline_ratio(res, s, bi, path)))
    ud, uv = float(ref.result.unique_decode_rank[bi]), float(ref.result.unique_verify_rank[ref.at_gamma(gam), bi])
    return Part(tables=(comp, readings, walk, shap, brk, ratios, br_t) + ((pl_t,) if len(place) > 1 else ()),
                figures=figs, values=values(pred, pub, gam, attr, brk, bracket, ud, uv, place, s.why) | dict(
                    model=model, hw=hw, dep=dep, ref=ref, lags=o.lags, nlags=len(o.lags), popularity=o.popularity,
                    acc=study.grid.all_targets[0].acceptance or study.speculation.acceptance,
                    sp={md: c.result.speedup[c.at_gamma(gam), bi] for md, c in res.items()}))


def _placements(priced, m: str, ref, s: Settings, gam: int, bi: int) -> dict[str, tuple[float, float, float]]:
    """placement label -> (busiest-rank experts decode, verify, refined T_decode/T_verify): the file's deployment
    first, then each placement variant."""
    def row(c) -> tuple[float, float, float]:
        return (float(c.result.unique_decode_rank[bi]), float(c.result.unique_verify_rank[c.at_gamma(gam), bi]),
                c.decode_verify(gam, bi))

    def label(dep) -> str:
        return dep.placement + (f" +{dep.redundant_experts} replicas" if dep.redundant_experts else "")

    cases = [priced.find(m, "refined", e.name).case for e in priced.variants if e.spec.name in s.placements]
    return {f"{label(ref.deployment)} (file)": row(ref)} | {label(c.deployment): row(c) for c in cases}


def _breakdown(sc, batch: int, gamma: int) -> Table:
    res = {}
    for md in ("prior", "refined"):
        dec, ver = (class_times(sc, md, [batch], n) for n in (1, gamma + 1))
        res[md] = {c: (dec[c] * 1e6, ver[c] * 1e6) for c in (*CLASSES, "total")}
    return table("breakdown", f"Where the verify pass costs more than a decode step (batch {batch}, {gamma + 1} "
                 "tokens per request), µs on the critical path", "op class; prior decode|.0f; prior verify|.0f; prior "
                 "extra|.0f; refined decode|.0f; refined verify|.0f; refined extra|.0f",
                 ((c, pr[0], pr[1], pr[1] - pr[0], rf[0], rf[1], rf[1] - rf[0]) for c in (*CLASSES, "total")
                  if max((pr := res["prior"][c]) + (rf := res["refined"][c])) > 0))


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
