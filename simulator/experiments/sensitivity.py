"""``overlap-sensitivity``: the refined speedup as the adjacent-token routing overlap o(1) is swept, and the
overlap at which the curve's shape flips (the batch of the highest speedup moves from an intermediate batch to the
smallest one), located by bisection between grid points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.routing import OverlapInput
from ..errors import SimulatorError
from ..overlap import parse_popularity
from ..overlap.popularity import independent_overlap
from . import plots
from .outcome import Figure, Outcome, Table
from .runs import at_gamma, best, price, resolve, scaled_profile
from .schema import Experiment, seq

PROFILES = ("cohere", "markov")


@dataclass(frozen=True)
class Params:
    lag1: tuple[float, ...]
    profiles: tuple[str, ...]
    shape_lags: tuple[float, ...]
    shape_baseline: float
    popularity: str
    report_batches: tuple[int, ...]
    ratio_draft_len: int
    resolution: float
    study_range: tuple[float, ...]
    independent_range: tuple[float, ...]


def read(r, obj, path) -> Params:
    keys = ("lag1", "profiles", "shape", "popularity", "report_batches", "ratio_draft_len", "resolution",
            "study_range", "independent_range")
    s = r.mapping(obj, path, keys, ("lag1", "profiles", "shape", "popularity", "report_batches"))
    sp = r.join(path, "shape")
    sh = r.mapping(s["shape"], sp, ("lags", "baseline", "source"), ("lags", "baseline"))
    profiles = seq(r, s, "profiles", path, str)
    for i, x in enumerate(profiles):
        r.string({f"profiles[{i}]": x}, f"profiles[{i}]", path, options=PROFILES)
    return Params(tuple(sorted(seq(r, s, "lag1", path, float, low=0.0, high=1.0, min_len=2))), profiles,
                  seq(r, sh, "lags", sp, float, low=0.0, high=1.0), r.number(sh, "baseline", sp, low=0.0, high=1.0),
                  r.string(s, "popularity", path), seq(r, s, "report_batches", path, int, low=1),
                  r.integer(s, "ratio_draft_len", path, low=1, high=64, default=3),
                  r.number(s, "resolution", path, low=1e-4, high=0.1, default=0.002),
                  seq(r, s, "study_range", path, float, low=0, high=1, default=(0.20, 0.45), unique=False),
                  seq(r, s, "independent_range", path, float, low=0, high=1, default=(0.04, 0.12), unique=False))


def check(r, exp: Experiment) -> None:
    p = exp.params
    missing = [b for b in p.report_batches if b not in exp.grid.batch]
    if missing:
        raise r.fail("overlap_sensitivity.report_batches", f"has {missing}, not in grid.batch", "add them to the grid")
    if p.ratio_draft_len not in exp.grid.draft_len:
        raise r.fail("overlap_sensitivity.ratio_draft_len", "is not in grid.draft_len", "add it to the grid")
    if "refined" not in exp.modes:
        raise r.fail("modes", "must include refined (the prior routes uniformly: overlap has no effect)",
                     "add refined")


@dataclass(frozen=True)
class Point:
    model: str
    profile: str
    lag1: float
    lags: tuple
    batch: np.ndarray
    speedup: np.ndarray  # best over γ, per batch
    ratio: float  # T_decode/T_verify at the smallest batch, ratio draft length
    error: str = ""

    @property
    def peak_batch(self) -> int:
        return int(self.batch[int(np.argmax(self.speedup))])


def _point(r, exp: Experiment, profile: str, o1: float, baseline: float) -> Point:
    p, g = exp.params, exp.grid
    lags = scaled_profile(o1, baseline, p.shape_lags, p.shape_baseline, profile)
    try:
        res = price(r, g.batch, g.draft_len, g.context, "refined", OverlapInput(lags, p.popularity))
    except SimulatorError as exc:
        return Point(r.model.name, profile, o1, lags, np.asarray(g.batch), np.full(len(g.batch), np.nan), np.nan,
                     str(exc))
    j = at_gamma(res, p.ratio_draft_len)
    return Point(r.model.name, profile, o1, lags, res.batch, best(res)[1], float(1 / res.verify_decode_ratio[j, 0]))


def _flips(r, exp, profile, pts: list[Point], baseline: float) -> list[tuple[float, int, int]]:
    """(o(1) at the flip, peak batch below it, peak batch above it) for each grid interval where 'peak at the
    smallest batch' changes, refined by bisection to ``resolution``."""
    out = []
    ok = [x for x in pts if not x.error]
    for a, b in zip(ok, ok[1:], strict=False):
        lo_low, hi_low = a.peak_batch == a.batch[0], b.peak_batch == b.batch[0]
        if lo_low == hi_low:
            continue
        lo, hi = a, b
        while hi.lag1 - lo.lag1 > exp.params.resolution:
            mid = _point(r, exp, profile, 0.5 * (lo.lag1 + hi.lag1), baseline)
            if mid.error:
                break
            if (mid.peak_batch == mid.batch[0]) == lo_low:
                lo = mid
            else:
                hi = mid
        out.append((0.5 * (lo.lag1 + hi.lag1), lo.peak_batch, hi.peak_batch))
    return out


def run(exp: Experiment, ctx) -> Outcome:
    p = exp.params
    points: list[Point] = []
    flips: list[tuple[str, str, float, int, int]] = []
    bases = {}
    for t in exp.targets:
        r = resolve(t, exp)
        baseline = independent_overlap(parse_popularity(p.popularity, r.model.ffn.experts, r.model.ffn.top_k),
                                       r.model.ffn.top_k)
        bases[r.model.name] = (baseline, r)
        for prof in p.profiles:
            pts = [_point(r, exp, prof, o1, baseline) for o1 in p.lag1]
            points += pts
            flips += [(r.model.name, prof, *f) for f in _flips(r, exp, prof, pts, baseline)]
    bi = [int(np.flatnonzero(np.asarray(exp.grid.batch) == b)[0]) for b in p.report_batches]
    rows = tuple((x.model, x.profile, x.lag1, *(float(x.speedup[i]) for i in bi), x.peak_batch if not x.error
                  else None, x.ratio, ", ".join(f"{v:.3f}" for v in x.lags), x.error) for x in points)
    table = Table("sensitivity", "Refined speedup (best draft length) vs lag-1 overlap",
                  ("model", "profile", "o(1)", *(f"S(B={b})" for b in p.report_batches), "peak batch",
                   f"T_decode/T_verify (B={exp.grid.batch[0]}, γ={p.ratio_draft_len})", "lags o(1..D)", "error"),
                  rows, ("", "", "{:.3f}", *["{:.2f}"] * len(bi), "{:d}", "{:.3f}", "", ""))
    flip_t = Table("flips", "Where the curve shape flips (peak moves to the smallest batch)",
                   ("model", "profile", "o(1) at flip", "peak batch below", "peak batch above"), tuple(flips),
                   ("", "", "{:.3f}", "{:d}", "{:d}"))
    figs = (Figure("speedup_vs_overlap", "Refined speedup at the report batches vs lag-1 overlap; grey band: the "
                   "study's measured range; hatched: independent-routing baselines; dashed: flip points",
                   lambda path: _plot_overlap(points, flips, exp, path)),
            Figure("curves", "Refined speedup vs batch at selected overlaps (Cohere-shaped profile)",
                   lambda path: _plot_curves(points, exp, path)))
    keys = tuple((f"flip: {m} ({prof})", f"o(1) ≈ {o:.3f} (peak B={a} → B={b})") for m, prof, o, a, b in flips)
    keys += tuple((f"{m}: independent baseline (popularity {p.popularity})", f"{bases[m][0]:.4f}") for m in bases)
    return Outcome(exp.name, exp.title, exp.kind, exp.description, exp.question, keys, (table, flip_t), figs,
                   _findings(points, flips, exp, bases), _settings(exp, bases))


def _findings(points, flips, exp, bases) -> tuple[str, ...]:
    p = exp.params
    out = []
    for m in bases:
        for prof in p.profiles:
            pts = [x for x in points if x.model == m and x.profile == prof and not x.error]
            if not pts:
                continue
            s = [(x.lag1, x.speedup) for x in pts]
            b = p.report_batches
            i1 = exp.grid.batch.index(b[0])
            iN = exp.grid.batch.index(b[-1])
            fl = [f for f in flips if f[0] == m and f[1] == prof]
            part = (f"{m}, {prof} profile: as o(1) goes from {s[0][0]:.3f} to {s[-1][0]:.3f}, the refined speedup at "
                    f"B={b[0]} goes from {s[0][1][i1]:.2f} to {s[-1][1][i1]:.2f} and at B={b[-1]} from "
                    f"{s[0][1][iN]:.2f} to {s[-1][1][iN]:.2f}. ")
            if fl:
                part += "The shape flips at " + "; ".join(
                    f"o(1) ≈ {o:.3f} (peak from B={a} to B={bb})" for _, _, o, a, bb in fl) + ". "
            else:
                pk = sorted({x.peak_batch for x in pts})
                part += f"No flip in this range (peak batch {', '.join(map(str, pk))} throughout). "
            part += _second_peak(pts, np.asarray(exp.grid.batch))
            out.append(part)
    out.append("How sure: overlap only changes which experts a verify pass touches, so the large-batch speedup is "
               "insensitive to it once a decode step already touches most experts; the flip point depends on the "
               "calibrated fixed costs (which set how much a verify pass costs beyond its expert reads) and on the "
               "lag-profile shape (compare the two profiles). Points below the independent baseline are "
               "anti-correlated routing (no evidence for it in published data).")
    return tuple(out)


def _second_peak(pts: list[Point], batch: np.ndarray) -> str:
    """Text on the curve's local maximum above B=2 (MoESD's saturation peak) across the overlap range."""
    peaks = []
    for x in pts:
        s = x.speedup
        inner = [i for i in range(1, len(s) - 1) if batch[i] > 2 and s[i] >= s[i - 1] and s[i] >= s[i + 1]]
        if inner:
            i = max(inner, key=lambda j: s[j])
            peaks.append((float(s[i]), int(batch[i])))
    if not peaks:
        return "At every overlap the curve falls from B=1 without a second peak."
    if len(peaks) < len(pts):
        return "Over part of the range the curve falls from B=1 without a second peak."
    vals = [v for v, _ in peaks]
    where = "/".join(str(b) for b in sorted({b for _, b in peaks}))
    text = f"The competing peak sits at B={where} with S = {min(vals):.2f}–{max(vals):.2f} across the whole range"
    if max(vals) - min(vals) < 0.02:
        text += (": there a decode step already touches most of a rank's experts, so overlap moves only the "
                 "low-batch end of the curve")
    return text + "."


def _settings(exp, bases) -> tuple[str, ...]:
    p = exp.params
    return (
        "targets: " + "; ".join(f"{m} ({r.label} on {r.hw.display_name})" for m, (_, r) in bases.items()),
        f"o(1) grid {', '.join(f'{x:g}' for x in p.lag1)}; popularity {p.popularity} (independent baseline: "
        + ", ".join(f"{m} {b:.4f}" for m, (b, _) in bases.items()) + ")",
        "profile 'cohere': o(d) = s + λ(1)·(λ_C(d)/λ_C(1))·(1 − s) with the Cohere blog's lag correlations "
        f"λ_C(d) from o = {', '.join(f'{x:g}' for x in p.shape_lags)} over s = {p.shape_baseline:g}; 'markov': lag 1 "
        "only, so the maximum-entropy law is a first-order Markov chain (λ(d) = λ(1)^d), realisable by construction",
        f"drafter {exp.speculation.drafter}, acceptance {exp.speculation.acceptance.label}; batch "
        f"{list(exp.grid.batch)}, draft length {list(exp.grid.draft_len)} (best per batch), context {exp.grid.context}",
        f"flip located by bisection to ±{p.resolution / 2:g} in o(1)",
    )


def _plot_overlap(points, flips, exp, path) -> str:
    p = exp.params
    models = list(dict.fromkeys(x.model for x in points))
    fig, axes = plots.figure(len(models), ncols=3, panel=(5.0, 3.8),
                             title="Refined speedup vs adjacent-token overlap o(1)")
    styles = {"cohere": "-", "markov": "--"}
    for ax, m in zip(axes, models, strict=True):
        ax.axvspan(*p.study_range[:2], color="0.85", label="study's measured range")
        ax.axvspan(*p.independent_range[:2], facecolor="none", hatch="//", edgecolor="0.6",
                   label="independent-routing range")
        for k, b in enumerate(p.report_batches):
            i = exp.grid.batch.index(b)
            for prof in p.profiles:
                pts = [x for x in points if x.model == m and x.profile == prof and not x.error]
                ax.plot([x.lag1 for x in pts], [x.speedup[i] for x in pts], linestyle=styles[prof], marker="o",
                        markersize=3, color=plots.PALETTE[k], label=f"B={b}, {prof}")
        for mm, prof, o, _, _ in flips:
            if mm == m:
                ax.axvline(o, color="0.3", linestyle=styles[prof], linewidth=0.8)
        ax.set_title(m, fontsize=9)
        ax.set_xlabel("lag-1 overlap o(1)", fontsize=8)
        ax.set_ylabel("speedup (x)", fontsize=8)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7, loc="best")
    return plots.save(fig, path)


def _plot_curves(points, exp, path) -> str:
    p = exp.params
    models = list(dict.fromkeys(x.model for x in points))
    fig, axes = plots.figure(len(models), ncols=3, panel=(5.0, 3.8),
                             title="Refined speedup vs batch at selected o(1) (profile: " + p.profiles[0] + ")")
    for ax, m in zip(axes, models, strict=True):
        pts = [x for x in points if x.model == m and x.profile == p.profiles[0] and not x.error]
        idx = sorted(set(np.linspace(0, len(pts) - 1, min(6, len(pts))).round().astype(int).tolist()))
        pick = [pts[i] for i in idx]
        for k, x in enumerate(pick):
            ax.plot(x.batch, x.speedup, marker="o", markersize=3, color=plots.PALETTE[k % len(plots.PALETTE)],
                    label=f"o(1)={x.lag1:.3f}")
        plots.log2_batch(ax, exp.grid.batch)
        ax.set_title(m, fontsize=9)
        ax.set_ylabel("speedup (x)", fontsize=8)
        ax.legend(fontsize=7)
    return plots.save(fig, path)
