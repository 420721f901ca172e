"""``overlap_sweep`` analysis: the refined speedup as the adjacent-token routing overlap o(1) is swept (the grid's
overlap variants, expanded over ``lag1`` × ``profile``), and the overlap at which the curve's shape flips (the batch
of the highest speedup moves from an intermediate batch to the smallest one), located by bisection between grid
points; each bisection point is priced through the same path as the grid."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..params import Interval, Param, param_field
from ..render import study_figures
from ..render.outcome import Figure, Part, table
from ..specs.settings import on_grid, variant_name
from .grid import baseline, build_variant, deploy_target, price_target


@dataclass(frozen=True)
class Settings:
    variant: str = variant_name()  # the grid's overlap variant (with lag1 and profile lists)
    report_batches: tuple[int, ...] = on_grid("batch")
    ratio_draft_len: int = on_grid("draft_len", 3)
    resolution: float = param_field(Param(Interval(float, 1e-4, 0.1)), 0.002)
    study_range: tuple[float, ...] = (0.20, 0.45)
    independent_range: tuple[float, ...] = (0.04, 0.12)


@dataclass(frozen=True)
class Point:
    model: str
    profile: str
    lag1: float
    lags: tuple
    batch: np.ndarray
    speedup: np.ndarray  # best over γ, per batch
    ratio: float  # T_decode/T_verify at the smallest batch, ratio draft length

    @property
    def peak_batch(self) -> int:
        return int(self.batch[int(np.argmax(self.speedup))])


def _point(case, e, s: Settings) -> Point:
    """The point of an expanded overlap variant ``e`` from its priced case."""
    res = case.result
    return Point(case.model.name, e.profile, e.lag1, build_variant(e, case.model).overlap.lags, res.batch,
                 res.best()[1], case.decode_verify(s.ratio_draft_len, 0))


def _flips(study, ctx, dd, e, pts: list[Point], s: Settings) -> list[tuple[float, int, int]]:
    """(o(1) at the flip, peak batch below it, peak batch above it) for each grid interval where 'peak at the
    smallest batch' changes, refined by bisection to ``resolution``."""
    out = []
    for a, b in zip(pts, pts[1:], strict=False):
        lo_low, hi_low = a.peak_batch == a.batch[0], b.peak_batch == b.batch[0]
        if lo_low == hi_low:
            continue
        lo, hi = a, b
        while hi.lag1 - lo.lag1 > s.resolution:
            o1 = 0.5 * (lo.lag1 + hi.lag1)
            ex = replace(e, lag1=o1, name=f"{e.spec.name} {e.profile} o(1)={o1:g}")
            mid = _point(price_target(study, ctx, dd, "refined", build_variant(ex, dd.model)), ex, s)
            if (mid.peak_batch == mid.batch[0]) == lo_low:
                lo = mid
            else:
                hi = mid
        out.append((0.5 * (lo.lag1 + hi.lag1), lo.peak_batch, hi.peak_batch))
    return out


def run(study, priced, ctx, p: Settings) -> Part:
    points: list[Point] = []
    flips: list[tuple[str, str, float, int, int]] = []
    bases = {}
    exps = [e for e in priced.variants if e.spec.name == p.variant]
    for t in study.grid.all_targets:
        dd, _ = deploy_target(study, t)
        bases[dd.model.name] = (baseline(exps[0].spec.overlap, dd.model), dd)
        for prof in dict.fromkeys(e.profile for e in exps):
            pts = [_point(priced.find(dd.model.name, "refined", e.name).case, e, p) for e in exps if e.profile == prof]
            points += pts
            e0 = next(x for x in exps if x.profile == prof)
            flips += [(dd.model.name, prof, *f) for f in _flips(study, ctx, dd, e0, pts, p)]
    g = study.grid
    bi = [int(np.flatnonzero(np.asarray(g.batch) == b)[0]) for b in p.report_batches]
    rows = tuple((x.model, x.profile, x.lag1, *(float(x.speedup[i]) for i in bi), x.peak_batch, x.ratio,
                  ", ".join(f"{v:.3f}" for v in x.lags)) for x in points)
    sens = table("sensitivity", "Refined speedup (best draft length) vs lag-1 overlap", "model; profile; o(1)|.3f; "
                 + "".join(f"S(B={b})|.2f; " for b in p.report_batches) + "peak batch|d; T_decode/T_verify "
                 f"(B={g.batch[0]}, γ={p.ratio_draft_len})|.3f; lags o(1..D)", rows)
    flip_t = table("flips", "Where the curve shape flips (peak moves to the smallest batch)", "model; profile; o(1) "
                   "at flip|.3f; peak batch below|d; peak batch above|d", flips)
    figs = (Figure("speedup_vs_overlap", "Refined speedup at the report batches vs lag-1 overlap; grey band: the "
                   "study's measured range; hatched: independent-routing baselines; dashed: flip points",
                   lambda path: study_figures.speedup_vs_overlap(points, flips, study, p, path)),
            Figure("curves", "Refined speedup vs batch at selected overlaps (Cohere-shaped profile)",
                   lambda path: study_figures.overlap_curves(points, study, p, path)))
    i1, i_n = (g.batch.index(b) for b in (p.report_batches[0], p.report_batches[-1]))
    curves = [dict(m=m, prof=prof, o0=pts[0].lag1, on=pts[-1].lag1, a0=pts[0].speedup[i1], an=pts[-1].speedup[i1],
                   b0=pts[0].speedup[i_n], bn=pts[-1].speedup[i_n], second=_second_peak(pts, np.asarray(g.batch)),
                   flips=[{"o": f[2], "a": f[3], "b": f[4]} for f in flips if f[:2] == (m, prof)],
                   peaks=sorted({x.peak_batch for x in pts}))
              for m in bases for prof in dict.fromkeys(x.profile for x in points)
              if (pts := [x for x in points if x.model == m and x.profile == prof])]
    return Part(tables=(sens, flip_t), figures=figs, values=dict(
        curves=curves, flips=[dict(zip(("m", "prof", "o", "a", "b"), f, strict=True)) for f in flips],
        o=exps[0].spec.overlap, half=p.resolution / 2, lags=sorted(exps[0].spec.overlap.lag1),
        bases=[{"m": m, "b": b, "label": dd.dep.label, "hw": dd.hw.display_name} for m, (b, dd) in bases.items()]))


def _second_peak(pts: list[Point], batch: np.ndarray) -> dict:
    """The curve's local maxima above B=2 (MoESD's saturation peak) across the overlap range."""
    peaks = []
    for x in pts:
        s = x.speedup
        inner = [i for i in range(1, len(s) - 1) if batch[i] > 2 and s[i] >= s[i - 1] and s[i] >= s[i + 1]]
        if inner:
            i = max(inner, key=lambda j: s[j])
            peaks.append((float(s[i]), int(batch[i])))
    vals = [v for v, _ in peaks] or [0.0]
    return dict(none=not peaks, part=0 < len(peaks) < len(pts), lo=min(vals), hi=max(vals),
                where=sorted({b for _, b in peaks}), flat=max(vals) - min(vals) < 0.02)
