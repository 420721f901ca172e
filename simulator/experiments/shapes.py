"""``curve_shapes`` analysis: speedup vs batch per target, prior vs refined, each curve classified programmatically
against the two expectations (MoESD's prior: an interior peak; the study's refined: highest at low batch), with a
reason computed from the model's own numbers wherever a curve departs from them (definitions: docs/MODEL.md §6.4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.deployment import PRESETS
from ..cost.routing import model_overlap
from ..pricing import price_pass
from ..render import figures as plots
from ..specs.derived import param_counts
from ..validation import Interval, Param
from .grid import lift
from .outcome import Figure, Part, Table
from .schema import on_grid, param_field, positive, variant_name

LOW, INTERIOR, RISING = "low-batch peak", "interior peak", "rising"


@dataclass(frozen=True)
class Shape:
    label: str
    peak_batch: int
    peak: float
    at_min: float
    at_max: float
    unimodal: bool
    concave: bool
    dip: bool

    @property
    def description(self) -> str:
        q = [w for w, on in (("unimodal", self.unimodal), ("concave", self.concave),
                             ("dip at small batch", self.dip)) if on]
        return self.label + (f" ({', '.join(q)})" if q else "")


def classify(batch, speedup, tol: float = 0.01) -> Shape:
    """Label (low-batch peak, rising, interior peak) and qualifiers (unimodal, concave in log2 B, dip at small batch)
    of a best-speedup-vs-batch curve; values within the relative tolerance ``tol`` count as ties."""
    b = np.asarray(batch, float)
    s = np.asarray(speedup, float)
    i = int(np.argmax(s))
    peak = float(s[i])
    if s[0] >= peak * (1 - tol):
        label = LOW
    elif s[-1] >= peak * (1 - tol):
        label = RISING
    else:
        label = INTERIOR
    band = tol * peak
    d = np.diff(s)
    unimodal = bool(np.all(d[:i] >= -band) and np.all(d[i:] <= band))
    concave = bool(s.size < 3 or np.all(np.diff(d) <= band))
    low_idx = int(np.argmin(s[: i + 1]))
    dip = bool(0 < low_idx < i and s[low_idx] < s[0] - band and peak > s[0] + band)
    return Shape(label, int(b[i]), peak, float(s[0]), float(s[-1]), unimodal, concave, dip)


def low_batch(shape: Shape, low_batch_max: int) -> bool:
    """The study's refined expectation: the highest speedup at low batch (peak batch ≤ ``low_batch_max``, or the
    smallest batch tied with the peak)."""
    return shape.label == LOW or shape.peak_batch <= low_batch_max


# -- the analysis ---------
TRANSFER = "refined (transferred overlap)"


@dataclass(frozen=True)
class Settings:
    tolerance: float = param_field(Param(Interval(float, 0.0, 0.5)))
    low_batch_max: int = positive()
    ratio_draft_len: int = on_grid("draft_len", 3)
    transfer: str = variant_name("")  # the grid variant giving models without routing statistics a transferred profile


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
        share = {}
        for md in ("prior", "refined"):
            st = price_pass(c.scenario.edit(mode=md, mechanisms=PRESETS[md]), c.result.batch[:1], 1,
                            check_fit=False)
            share[md] = float(st.breakdown["moe"][0] / st.time[0])
        rows.append(Row(c.model, c.deployment, c.hardware, ref.note, c.result.batch, res,
                        {v: classify(x.batch, x.best()[1], p.tolerance) for v, x in res.items()}, share))
    skipped = [(m, why) for m, _, _, why in priced.skipped]
    n = len(rows)
    prior_ok = sum(as_moesd(x.shapes["prior"], p) for x in rows)
    ref_ok = sum(low_batch(x.shapes["refined"], p.low_batch_max) for x in rows)
    tr_ok = sum(low_batch(x.shapes[TRANSFER], p.low_batch_max) for x in rows)
    keys = (("targets run / not deployable", f"{n} / {len(skipped)}"),
            (f"prior curves with an interior peak (B > {p.low_batch_max})", f"{prior_ok} of {n}"),
            ("prior curves that are concave in log2(B)", f"{sum(x.shapes['prior'].concave for x in rows)} of {n}"),
            (f"refined curves highest at low batch (B ≤ {p.low_batch_max})", f"{ref_ok} of {n}"),
            ("… with the transferred overlap profile", f"{tr_ok} of {n}"))
    figs = (Figure("speedup", "Speedup at the best draft length vs batch, per target: prior, refined, and refined "
                   "with the transferred overlap profile (models without routing statistics)",
                   lambda path: _plot(rows, study, path)),)
    return Part(keys, (_shape_table(rows, skipped, p), _curve_table(rows)), figs, findings(rows, skipped, p),
                _settings(rows, study, p, priced))


def _reason(x: Row, p: Settings) -> str:
    """Why a curve departs from the expectation, from the model's own numbers at the smallest batch."""
    m, dep = x.model, x.dep
    per_rank = m.ffn.experts / dep.ep
    out = []
    for v, want, test in (("prior", "an interior peak above the low-batch range", lambda s: as_moesd(s, p)),
                          ("refined", "a low-batch peak", lambda s: low_batch(s, p.low_batch_max))):
        s: Shape = x.shapes[v]
        if test(s):
            continue
        res = x.results[v]
        j = int(np.flatnonzero(res.gammas == p.ratio_draft_len)[0]) if p.ratio_draft_len in res.gammas else 0
        ud, uv = float(res.unique_decode_rank[0]), float(res.unique_verify_rank[j, 0])
        vd = float(res.verify_decode_ratio[j, 0])
        why = (f"{v}: {s.label} at B={s.peak_batch}, not {want}; at B={int(x.batch[0])} the busiest EP rank reads "
               f"{ud:.1f} experts in decode and {uv:.1f} in a verify of {p.ratio_draft_len + 1} tokens, "
               f"T_verify/T_decode {vd:.2f}, MoE {x.moe_share[v]:.0%} of the decode step")
        if per_rank <= 2:
            why += (f"; coarse MoE: {per_rank:g} expert(s) per EP rank, so a verify pass cannot touch many more "
                    "experts per rank than a decode step; the routing mechanism behind both expectations is weak "
                    "and the shape is set by the other costs (attention, shared/dense layers, collectives, drafting)")
        elif v == "refined" and m.overlap is None:
            tr = x.shapes[TRANSFER]
            why += ("; no routing statistics for this model, so refined routes tokens independently"
                    + ("; with the transferred overlap it becomes a low-batch peak" if low_batch(tr, p.low_batch_max)
                       else f"; with the transferred overlap still {tr.label} at B={tr.peak_batch}"))
            if x.moe_share[v] > 0.5:
                why += " (expert reads dominate the step, so fixed costs amortise little of verification's extra reads)"
        elif s.label == RISING:
            why += ("; the prior's per-expert floor keeps every step expensive until the ranks' experts are all "
                    "touched, and nothing becomes compute-bound within the grid")
        elif s.label == LOW and v == "prior":
            why += "; the prior's per-expert floor makes decode expensive enough that verify is relatively cheap"
        out.append(why)
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
    return Table("shapes", "Curve shapes (speedup at the best draft length per batch)",
                 ("model", "E/k", "params (B)", "deployment", "S(B=1) prior", "S(B=1) refined", "prior shape",
                  "prior peak B", "refined shape", "refined peak B", "transferred overlap", "prior as MoESD",
                  "refined low-batch", "reason"),
                 tuple(data), ("", "", "{:.0f}", "", "{:.2f}", "{:.2f}", "", "{:d}", "", "{:d}"))


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
    return Table("curves", "Speedup vs batch", ("model", "variant", "batch", "best draft length", "speedup",
                                                "T_decode us"), tuple(data), in_summary=False)


def findings(rows: list[Row], skipped, p: Settings) -> tuple[str, ...]:
    n = len(rows)
    fine = [x for x in rows if x.model.ffn.experts / x.dep.ep > 2]
    coarse = [x.model.name for x in rows if x.model.ffn.experts / x.dep.ep <= 2]
    prior_bad = [x.model.name for x in rows if not as_moesd(x.shapes["prior"], p)]
    dips = [x for x in rows if x.shapes["prior"].dip]
    ref_fine = sum(low_batch(x.shapes["refined"], p.low_batch_max) for x in fine)
    ref_bad = [x.model.name for x in fine if not low_batch(x.shapes["refined"], p.low_batch_max)]
    s1 = (f"Of {n} deployable targets, the prior model gives an interior peak for "
          f"{n - len(prior_bad)}" + (f" (exceptions: {', '.join(prior_bad)}; reasons in the table)" if prior_bad
                                     else "") + ". "
          f"The refined model puts the highest speedup at batch ≤ {p.low_batch_max} for {ref_fine} of the "
          f"{len(fine)} fine-grained targets (more than two experts per EP rank)"
          + (f"; not for {', '.join(ref_bad)}" if ref_bad else "") + ". "
          + (f"Coarse targets ({', '.join(coarse)}) hold one or two experts per rank, so the premise of both "
             "models (verification multiplies expert reads) does not apply to them. " if coarse else "")
          + (_dip_text(dips[0], len(dips), sum(x.shapes["prior"].concave for x in rows), n, p) if dips else ""))
    with_stats = [x.model.name for x in rows if x.model.overlap is not None]
    s2 = ("How sure: the curve shapes follow from the calibrated kernel costs (per-op errors in the validation "
          f"experiment) and from routing statistics that only {len(with_stats)} of the {n} targets ship "
          f"({', '.join(with_stats) or 'none'}); the 'transferred overlap' column shows how much of each shape rests "
          "on that input. "
          "Acceptance is one per-token α for all targets, so the level of each curve is an assumption while its "
          "shape (where the peak is) is the model's prediction.")
    s3 = ("Not deployable on 8×H100 in their native format: " + ", ".join(f"{a} ({b})" for a, b in skipped)
          if skipped else "Every target was deployed; models that need a smaller format than native are marked †.")
    return s1, s2, s3


def _dip_text(x: Row, k: int, conc: int, n: int, p: Settings) -> str:
    s = x.shapes["prior"]
    res = x.results["prior"]
    j = int(np.flatnonzero(res.gammas == p.ratio_draft_len)[0])
    _, spd = res.best()
    i = int(np.argmin(spd[: int(np.argmax(spd)) + 1]))
    r = res.verify_decode_ratio[j]
    return (f"{conc} of {n} prior curves are concave in log2(B) over the whole grid (MoESD's picture): {k} of {n} "
            "first dip at small batch before their "
            f"interior peak (e.g. {x.model.name}: {s.at_min:.2f} at B={int(res.batch[0])}, "
            f"{spd[i]:.2f} at B={int(res.batch[i])}, peak {s.peak:.2f} at B={s.peak_batch}); T_verify/T_decode at "
            f"γ={p.ratio_draft_len} goes {r[0]:.2f} → {r[i]:.2f} over those batches, so verification gets relatively "
            "dearer before decode steps start to touch most experts (MoESD reports 'little or no gain at batch 1', "
            "consistent with a flat start).")


def _settings(rows: list[Row], exp, p: Settings, priced) -> tuple[str, ...]:
    acc = exp.speculation.acceptance
    tv = next((e.spec.overlap for e in priced.variants if e.name == p.transfer), None)
    out = [f"hardware {', '.join(sorted({x.hw.display_name for x in rows}))}; deployment: the sweep's "
           "default rule (native format, else fp8_block; attention TP as large as the heads allow; EP = "
           "gcd(experts, 8)), fallback formats tried in order: "
           + (", ".join(exp.grid.fallback_dtypes) or "none"),
           f"drafter {exp.speculation.drafter}, acceptance {acc.label}" + (f" ({acc.source})" if acc.source else ""),
           f"batch {list(exp.grid.batch)}, draft length {list(exp.grid.draft_len)} (best per batch), context "
           f"{exp.grid.context} tokens",
           f"classification tolerance {p.tolerance:.0%}; 'low batch' = peak at B ≤ {p.low_batch_max}",
           *([f"transferred overlap (grid variant '{p.transfer}'): lag correlations λ(d) = (o(d) − s)/(1 − s) = "
              + ", ".join(f"{x:.3f}" for x in lift(tv.shape, tv.shape_baseline))
              + f" applied with {tv.popularity} popularity to models that ship no routing statistics"] if tv else []),
           "routing statistics shipped: " + (", ".join(
               f"{x.model.name} (o(1) {model_overlap(x.model).lags[0]:.3f})" for x in rows
               if x.model.overlap is not None) or "none")]
    out += [f"{x.model.name}: {x.note}" for x in rows if x.note]
    return tuple(out)


def _plot(rows: list[Row], exp, path) -> str:
    panels = {f"{x.model.name} ({x.dep.label})": [(v, r.batch, r.best()[1], plots.style(v, 0))
                                                 for v, r in x.results.items()
                                                 if v != TRANSFER or x.model.overlap is None] for x in rows}
    sp = exp.speculation
    return plots.line_figure(path, panels, f"Speedup vs batch (best draft length per batch); drafter {sp.drafter}, "
                             f"{sp.acceptance.label}, context {exp.grid.context}", ncols=4, panel=(3.6, 2.7),
                             log2=True, legend="top", decorate=lambda ax, _: ax.axhline(1.0, color="0.5",
                                                                                         linewidth=0.7, linestyle=":"))
