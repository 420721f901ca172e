"""``curve_shapes`` analysis: speedup vs batch per target, prior vs refined, each curve classified programmatically
against the two expectations (MoESD's prior: an interior peak; the study's refined: highest at low batch), with a
reason computed from the model's own numbers wherever a curve departs from them (definitions: docs/MODEL.md §6.4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.routing import model_overlap
from ..overlap.lag_profile import lift
from ..params import Interval, Param, param_field
from ..pricing import class_times
from ..render import study_figures
from ..render.outcome import Figure, Part, Table, table
from ..render.template import fill
from ..specs.derived import param_counts
from ..specs.settings import on_grid, positive, variant_name
from ..sweep.curve_shape import INTERIOR, LOW, Shape, classify, low_batch

TRANSFER = "refined (transferred overlap)"


@dataclass(frozen=True)
class Settings:
    tolerance: float = param_field(Param(Interval(float, 0.0, 0.5)))
    low_batch_max: int = positive()
    ratio_draft_len: int = on_grid("draft_len", 3)
    transfer: str = variant_name("")  # the grid variant giving models without routing statistics a transferred profile
    reason: str = "{v}: {s.label} at B={s.peak_batch}"  # template of the shapes table's reason column (per departure)


@dataclass(frozen=True)
class Row:
    model: object
    dep: object
    hw: object
    note: str
    batch: np.ndarray
    results: dict  # series -> SpecResult
    shapes: dict  # series -> Shape
    moe_share: dict  # mode -> MoE share of the decode step at the smallest batch


def as_moesd(s: Shape, p: Settings) -> bool:
    """MoESD's prior expectation: an interior peak at an intermediate batch (above the low-batch range)."""
    return s.label == INTERIOR and s.peak_batch > p.low_batch_max


def run(study, priced, ctx, p: Settings) -> Part:
    rows: list[Row] = []
    for name in priced.models():
        pts = {md: priced.find(name, md) for md in ("prior", "refined")}
        tr = priced.find(name, "refined", p.transfer) if p.transfer else None
        ref = pts["refined"]
        res = {md: x.case.result for md, x in pts.items()}
        res[TRANSFER] = (tr or ref).case.result
        c = ref.case
        share = {md: (t := class_times(c.scenario, md, c.result.batch[:1], 1))["moe"] / t["total"]
                 for md in ("prior", "refined")}
        rows.append(Row(c.model, c.deployment, c.hardware, ref.note, c.result.batch, res,
                        {v: classify(x.batch, x.best()[1], p.tolerance) for v, x in res.items()}, share))
    skipped = [(m, why) for m, _, _, why in priced.skipped]
    figs = (Figure("speedup", "Speedup at the best draft length vs batch, per target: prior, refined, and refined "
                   "with the transferred overlap profile (models without routing statistics)",
                   lambda path: study_figures.curve_shapes(rows, study, path, TRANSFER)),)
    tv = next((e.spec.overlap for e in priced.variants if e.name == p.transfer), None)
    return Part(tables=(_shape_table(rows, skipped, p), _curve_table(rows)), figures=figs,
                values=values(rows, skipped, p) | {"tv": tv, "lam": lift(tv.shape, tv.shape_baseline) if tv else ()})


def _reason(x: Row, p: Settings) -> str:
    """Why a curve departs from the expectation (``p.reason`` filled from the model's own numbers at the smallest
    batch); "as expected" when it does not."""
    out = []
    for v, ok in (("prior", as_moesd(x.shapes["prior"], p)), ("refined", low_batch(x.shapes["refined"],
                                                                                      p.low_batch_max))):
        res, j = x.results[v], 0
        if ok:
            continue
        if p.ratio_draft_len in res.gammas:
            j = int(np.flatnonzero(res.gammas == p.ratio_draft_len)[0])
        out.append(fill(p.reason, dict(
            v=v, s=x.shapes[v], b0=int(x.batch[0]), ud=float(res.unique_decode_rank[0]), share=x.moe_share[v],
            uv=float(res.unique_verify_rank[j, 0]), vd=float(res.verify_decode_ratio[j, 0]), p=p,
            per_rank=x.model.ffn.experts / x.dep.ep, bare=v == "refined" and x.model.overlap is None,
            low_prior=v == "prior" and x.shapes[v].label == LOW, tokens=p.ratio_draft_len + 1, tr=x.shapes[TRANSFER],
            tr_low=low_batch(x.shapes[TRANSFER], p.low_batch_max))))
    return "; ".join(out) if out else "as expected"


def _shape_table(rows: list[Row], skipped, p: Settings) -> Table:
    data = []
    for x in rows:
        m = x.model
        sp, sr, st = x.shapes["prior"], x.shapes["refined"], x.shapes[TRANSFER]
        data.append((m.name, f"{m.ffn.experts}/{m.ffn.top_k}" + (f"+{m.ffn.shared_experts}s" if m.ffn.shared_experts
                                                                 else ""),
                     param_counts(m).total / 1e9, x.dep.label + (" †" if x.note else ""), sp.at_min, sr.at_min,
                     sp.description, sp.peak_batch, sr.description, sr.peak_batch,
                     "=" if m.overlap is not None else _short(st),
                     as_moesd(sp, p), low_batch(sr, p.low_batch_max), _reason(x, p)))
    for name, why in skipped:
        data.append((name, "", None, "not deployable", None, None, "", None, "", None, "", None, None, why))
    return table("shapes", "Curve shapes (speedup at the best draft length per batch)", "model; E/k; params (B)|.0f; "
                 "deployment; S(B=1) prior|.2f; S(B=1) refined|.2f; prior shape; prior peak B|d; refined shape; "
                 "refined peak B|d; transferred overlap; prior as MoESD; refined low-batch; reason", data)


def _short(s: Shape) -> str:
    return s.label if s.at_min >= s.peak else f"{s.label} (max at B={s.peak_batch})"


def _curve_table(rows: list[Row]) -> Table:
    data = []
    for x in rows:
        for v, res in x.results.items():
            gam, spd = res.best()
            for i, b in enumerate(res.batch):
                data.append((x.model.name, v, int(b), int(gam[i]), float(spd[i]),
                             float(res.t_decode[i] * 1e6)))
    return table("curves", "Speedup vs batch", "model; variant; batch; best draft length; speedup; T_decode us", data,
                 in_summary=False)


def values(rows: list[Row], skipped, p: Settings) -> dict:
    """The named numbers of the curve-shape prose (experiments/paper-curves.yaml)."""
    fine = [x for x in rows if x.model.ffn.experts / x.dep.ep > 2]
    dips = [x for x in rows if x.shapes["prior"].dip]
    out = dict(n=len(rows), nskip=len(skipped), nfine=len(fine),
               prior_ok=sum(as_moesd(x.shapes["prior"], p) for x in rows),
               concave=sum(x.shapes["prior"].concave for x in rows),
               ref_ok=sum(low_batch(x.shapes["refined"], p.low_batch_max) for x in rows),
               tr_ok=sum(low_batch(x.shapes[TRANSFER], p.low_batch_max) for x in rows),
               coarse=[x.model.name for x in rows if x.model.ffn.experts / x.dep.ep <= 2],
               prior_bad=[x.model.name for x in rows if not as_moesd(x.shapes["prior"], p)],
               ref_fine=sum(low_batch(x.shapes["refined"], p.low_batch_max) for x in fine),
               ref_bad=[x.model.name for x in fine if not low_batch(x.shapes["refined"], p.low_batch_max)],
               ndips=len(dips), nstats=sum(x.model.overlap is not None for x in rows),
               with_stats=[x.model.name for x in rows if x.model.overlap is not None],
               skipped=[{"m": a, "why": b} for a, b in skipped], hws=sorted({x.hw.display_name for x in rows}),
               shipped=[{"m": x.model.name, "o": model_overlap(x.model).lags[0]} for x in rows
                        if x.model.overlap is not None], notes=[{"m": x.model.name, "note": x.note} for x in rows
                                                                if x.note], dip=None)
    out["prior_good"] = out["n"] - len(out["prior_bad"])
    if dips:
        x, res = dips[0], dips[0].results["prior"]
        sh, (_, spd) = x.shapes["prior"], res.best()
        i = int(np.argmin(spd[: int(np.argmax(spd)) + 1]))
        r = res.verify_decode_ratio[int(np.flatnonzero(res.gammas == p.ratio_draft_len)[0])]
        out["dip"] = dict(name=x.model.name, at_min=sh.at_min, b0=int(res.batch[0]), si=spd[i], bi=int(res.batch[i]),
                          peak=sh.peak, peak_batch=sh.peak_batch, r0=r[0], ri=r[i])
    return out
