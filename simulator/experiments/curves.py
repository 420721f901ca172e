"""``paper-curves``: speedup vs batch for many MoE targets, prior vs refined, each curve's shape classified
(:mod:`.shapes`) against the two expectations (MoESD's prior: an interior peak; the study's refined: highest at low
batch), with a reason computed from the model's own numbers wherever a curve departs from them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.deployment import PRESETS
from ..cost.routing import model_overlap
from ..cost.step import step_time
from . import plots
from .outcome import Figure, Outcome, Table
from .runs import Resolved, at_gamma, best, fits, price, total_params_b, transferred_profile, try_resolve
from .schema import Experiment, seq
from .shapes import LOW, RISING, Shape, classify, interior, low_batch

TRANSFER = "refined (transferred overlap)"


@dataclass(frozen=True)
class Params:
    tolerance: float
    low_batch_max: int
    fallback_dtypes: tuple[str, ...]
    transfer_lags: tuple[float, ...]
    transfer_baseline: float
    transfer_label: str
    ratio_draft_len: int


def read(r, obj, path) -> Params:
    from ..specs.dtypes import FORMATS

    c = r.mapping(obj, path, ("tolerance", "low_batch_max", "fallback_dtypes", "transfer", "ratio_draft_len"),
                  ("tolerance", "low_batch_max", "transfer"))
    tp = r.join(path, "transfer")
    t = r.mapping(c["transfer"], tp, ("lags", "baseline", "label"), ("lags", "baseline", "label"))
    fb = seq(r, c, "fallback_dtypes", path, str, default=())
    for i, d in enumerate(fb):
        r.string({f"fallback_dtypes[{i}]": d}, f"fallback_dtypes[{i}]", path, options=FORMATS)
    return Params(r.number(c, "tolerance", path, low=0.0, high=0.5), r.integer(c, "low_batch_max", path, low=1),
                  fb, seq(r, t, "lags", tp, float, low=0.0, high=1.0), r.number(t, "baseline", tp, low=0.0, high=1.0),
                  r.string(t, "label", tp), r.integer(c, "ratio_draft_len", path, low=1, high=64, default=3))


def check(r, exp: Experiment) -> None:
    if set(exp.modes) != {"prior", "refined"}:
        raise r.fail("modes", f"is {list(exp.modes)}; curves compare prior and refined", "list both")
    if exp.params.ratio_draft_len not in exp.grid.draft_len:
        raise r.fail("curves.ratio_draft_len", f"is {exp.params.ratio_draft_len}, not in grid.draft_len",
                     "pick a draft length of the grid")


@dataclass(frozen=True)
class Row:
    resolved: Resolved
    note: str
    batch: np.ndarray
    results: dict  # variant -> SpecResult
    shapes: dict  # variant -> Shape
    moe_share: dict  # mode -> MoE share of the decode step at the smallest batch


def _deploy(t, exp: Experiment, p: Params) -> tuple[Resolved | None, str]:
    g = exp.grid
    first_err = ""
    for dtype in (None, *p.fallback_dtypes):
        r, err = try_resolve(t, exp, dtype=dtype)
        if r is not None:
            ok, why = fits(r, g.batch[:1], g.draft_len, g.context)
            if ok:
                note = "" if dtype is None else (f"{dtype} fallback: the default deployment does not fit "
                                                 f"({first_err})")
                return r, note
            err = why
        first_err = first_err or err
    return None, first_err


def run(exp: Experiment, ctx) -> Outcome:
    p, g = exp.params, exp.grid
    rows: list[Row] = []
    skipped: list[tuple[str, str]] = []
    for t in exp.targets:
        r, note = _deploy(t, exp, p)
        if r is None:
            skipped.append((t.model, note))
            continue
        ok, why = fits(r, g.batch, g.draft_len, g.context)
        if len(ok) < len(g.batch):
            note = (note + "; " if note else "") + f"batches above {ok[-1]:g} dropped (KV cache does not fit)"
        res = {m: price(r, ok, g.draft_len, g.context, m) for m in exp.modes}
        if r.model.overlap is None:
            ov = transferred_profile(r.model, p.transfer_lags, p.transfer_baseline)
            res[TRANSFER] = price(r, ok, g.draft_len, g.context, "refined", ov)
        else:
            res[TRANSFER] = res["refined"]
        shapes = {v: classify(x.batch, best(x)[1], p.tolerance) for v, x in res.items()}
        share = {}
        for m in exp.modes:
            st = step_time(r.model, r.hw, r.dep, ok[:1], [1], g.context, PRESETS[m], check_fit=False)
            share[m] = float(st.breakdown["moe"][0] / st.time[0])
        rows.append(Row(r, note, np.asarray(ok), res, shapes, share))
    shape_t = _shape_table(rows, skipped, p)
    curve_t = _curve_table(rows)
    figs = (Figure("speedup", "Speedup at the best draft length vs batch, per target: prior, refined, and refined "
                   "with the transferred overlap profile (models without routing statistics)",
                   lambda path: _plot(rows, exp, path)),)
    n = len(rows)
    prior_ok = sum(as_moesd(x.shapes["prior"], p) for x in rows)
    ref_ok = sum(low_batch(x.shapes["refined"], p.low_batch_max) for x in rows)
    tr_ok = sum(low_batch(x.shapes[TRANSFER], p.low_batch_max) for x in rows)
    keys = (("targets run / not deployable", f"{n} / {len(skipped)}"),
            (f"prior curves with an interior peak (B > {p.low_batch_max})", f"{prior_ok} of {n}"),
            ("prior curves that are concave in log2(B)", f"{sum(x.shapes['prior'].concave for x in rows)} of {n}"),
            (f"refined curves highest at low batch (B ≤ {p.low_batch_max})", f"{ref_ok} of {n}"),
            ("… with the transferred overlap profile", f"{tr_ok} of {n}"))
    return Outcome(exp.name, exp.title, exp.kind, exp.description, exp.question, keys, (shape_t, curve_t), figs,
                   _findings(rows, skipped, p), _settings(rows, exp, p))


def as_moesd(s: Shape, p: Params) -> bool:
    """MoESD's prior expectation: an interior peak at an intermediate batch (above the low-batch range)."""
    return interior(s) and s.peak_batch > p.low_batch_max


def _reason(x: Row, p: Params) -> str:
    """Why a curve departs from the expectation, from the model's own numbers at the smallest batch."""
    m, dep = x.resolved.model, x.resolved.dep
    per_rank = m.ffn.experts / dep.ep
    out = []
    for v, want, test in (("prior", "an interior peak above the low-batch range", lambda s: as_moesd(s, p)),
                          ("refined", "a low-batch peak", lambda s: low_batch(s, p.low_batch_max))):
        s: Shape = x.shapes[v]
        if test(s):
            continue
        res = x.results[v]
        j = at_gamma(res, p.ratio_draft_len) if p.ratio_draft_len in res.gammas else 0
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


def _shape_table(rows: list[Row], skipped, p: Params) -> Table:
    data = []
    for x in rows:
        m = x.resolved.model
        sp, sr, st = x.shapes["prior"], x.shapes["refined"], x.shapes[TRANSFER]
        data.append((m.name, f"{m.ffn.experts}/{m.ffn.top_k}" + (f"+{m.ffn.shared_experts}s" if m.ffn.shared_experts
                                                                 else ""),
                     total_params_b(m), x.resolved.label + (" †" if x.note else ""), sp.at_min, sr.at_min,
                     sp.description, sp.peak_batch, sr.description, sr.peak_batch,
                     "=" if m.overlap is not None else _short(st),
                     as_moesd(sp, p), low_batch(sr, p.low_batch_max), _reason(x, p)))
    for name, why in skipped:
        data.append((name, "", None, "not deployable", None, None, "", None, "", None, "", None, None, why))
    return Table("shapes", "Curve shapes (speedup at the best draft length per batch)",
                 ("model", "E/k", "params (B)", "deployment", "S(B=1) prior", "S(B=1) refined", "prior shape",
                  "prior peak B", "refined shape", "refined peak B", "transferred overlap", "prior as MoESD",
                  "refined low-batch", "reason"),
                 tuple(data), ("", "", "{:.0f}", "", "{:.2f}", "{:.2f}", "", "{:d}", "", "{:d}"),
                 note="† deployed in a fallback format or with batches dropped (see notes). 'transferred overlap': "
                      "shape of the refined curve when a model without routing statistics gets the transferred "
                      "lag profile ('=': the model ships its own).")


def _short(s: Shape) -> str:
    return s.label if s.at_min >= s.peak else f"{s.label} (max at B={s.peak_batch})"


def _curve_table(rows: list[Row]) -> Table:
    data = []
    for x in rows:
        for v, res in x.results.items():
            gam, spd = best(res)
            for i, b in enumerate(res.batch):
                data.append((x.resolved.model.name, v, int(b), int(gam[i]), float(spd[i]),
                             float(res.t_decode[i] * 1e6)))
    return Table("curves", "Speedup vs batch", ("model", "variant", "batch", "best draft length", "speedup",
                                                "T_decode us"), tuple(data), in_summary=False)


def _findings(rows: list[Row], skipped, p: Params) -> tuple[str, ...]:
    n = len(rows)
    fine = [x for x in rows if x.resolved.model.ffn.experts / x.resolved.dep.ep > 2]
    coarse = [x.resolved.model.name for x in rows if x.resolved.model.ffn.experts / x.resolved.dep.ep <= 2]
    prior_bad = [x.resolved.model.name for x in rows if not as_moesd(x.shapes["prior"], p)]
    dips = [x for x in rows if x.shapes["prior"].dip]
    ref_fine = sum(low_batch(x.shapes["refined"], p.low_batch_max) for x in fine)
    ref_bad = [x.resolved.model.name for x in fine if not low_batch(x.shapes["refined"], p.low_batch_max)]
    s1 = (f"Of {n} deployable targets, the prior model gives an interior peak for "
          f"{n - len(prior_bad)}" + (f" (exceptions: {', '.join(prior_bad)}; reasons in the table)" if prior_bad
                                     else "") + ". "
          f"The refined model puts the highest speedup at batch ≤ {p.low_batch_max} for {ref_fine} of the "
          f"{len(fine)} fine-grained targets (more than two experts per EP rank)"
          + (f"; not for {', '.join(ref_bad)}" if ref_bad else "") + ". "
          + (f"Coarse targets ({', '.join(coarse)}) hold one or two experts per rank, so the premise of both "
             "models (verification multiplies expert reads) does not apply to them. " if coarse else "")
          + (_dip_text(dips[0], len(dips), sum(x.shapes["prior"].concave for x in rows), n, p) if dips else ""))
    with_stats = [x.resolved.model.name for x in rows if x.resolved.model.overlap is not None]
    s2 = ("How sure: the curve shapes follow from the calibrated kernel costs (per-op errors in the validation "
          f"experiment) and from routing statistics that only {len(with_stats)} of the {n} targets ship "
          f"({', '.join(with_stats) or 'none'}); the 'transferred overlap' column shows how much of each shape rests "
          "on that input. "
          "Acceptance is one per-token α for all targets, so the level of each curve is an assumption while its "
          "shape (where the peak is) is the model's prediction.")
    s3 = ("Not deployable on 8×H100 in their native format: " + ", ".join(f"{a} ({b})" for a, b in skipped)
          if skipped else "Every target was deployed; models that need a smaller format than native are marked †.")
    return s1, s2, s3


def _dip_text(x: Row, k: int, conc: int, n: int, p: Params) -> str:
    s = x.shapes["prior"]
    res = x.results["prior"]
    j = at_gamma(res, p.ratio_draft_len)
    _, spd = best(res)
    i = int(np.argmin(spd[: int(np.argmax(spd)) + 1]))
    r = res.verify_decode_ratio[j]
    return (f"{conc} of {n} prior curves are concave in log2(B) over the whole grid (MoESD's picture): {k} of {n} "
            "first dip at small batch before their "
            f"interior peak (e.g. {x.resolved.model.name}: {s.at_min:.2f} at B={int(res.batch[0])}, "
            f"{spd[i]:.2f} at B={int(res.batch[i])}, peak {s.peak:.2f} at B={s.peak_batch}); T_verify/T_decode at "
            f"γ={p.ratio_draft_len} goes {r[0]:.2f} → {r[i]:.2f} over those batches, so verification gets relatively "
            "dearer before decode steps start to touch most experts (MoESD reports 'little or no gain at batch 1', "
            "consistent with a flat start).")


def _settings(rows: list[Row], exp: Experiment, p: Params) -> tuple[str, ...]:
    acc = exp.speculation.acceptance
    out = [f"hardware {', '.join(sorted({x.resolved.hw.display_name for x in rows}))}; deployment: the sweep's "
           "default rule (native format, else fp8_block; attention TP as large as the heads allow; EP = "
           "gcd(experts, 8)), fallback formats tried in order: "
           + (", ".join(p.fallback_dtypes) or "none"),
           f"drafter {exp.speculation.drafter}, acceptance {acc.label}" + (f" ({acc.source})" if acc.source else ""),
           f"batch {list(exp.grid.batch)}, draft length {list(exp.grid.draft_len)} (best per batch), context "
           f"{exp.grid.context} tokens",
           f"classification tolerance {p.tolerance:.0%}; 'low batch' = peak at B ≤ {p.low_batch_max}",
           f"transferred overlap ({p.transfer_label}): lag correlations λ(d) = (o(d) − s)/(1 − s) = "
           + ", ".join(f"{(o - p.transfer_baseline) / (1 - p.transfer_baseline):.3f}" for o in p.transfer_lags)
           + " applied with uniform popularity to models that ship no routing statistics",
           "routing statistics shipped: " + (", ".join(
               f"{x.resolved.model.name} (o(1) {model_overlap(x.resolved.model).lags[0]:.3f})" for x in rows
               if x.resolved.model.overlap is not None) or "none")]
    out += [f"{x.resolved.model.name}: {x.note}" for x in rows if x.note]
    return tuple(out)


def _plot(rows: list[Row], exp: Experiment, path) -> str:
    fig, axes = plots.figure(len(rows), ncols=4, panel=(3.6, 2.7),
                             title=f"Speedup vs batch (best draft length per batch); drafter "
                                   f"{exp.speculation.drafter}, {exp.speculation.acceptance.label}, context "
                                   f"{exp.grid.context}")
    for ax, x in zip(axes, rows, strict=True):
        for v, res in x.results.items():
            if v == TRANSFER and x.resolved.model.overlap is not None:
                continue
            ax.plot(res.batch, best(res)[1], label=v, markersize=3, **plots.MODE_STYLE[v])
        ax.axhline(1.0, color="0.5", linewidth=0.7, linestyle=":")
        plots.log2_batch(ax, x.batch)
        ax.set_title(f"{x.resolved.model.name} ({x.resolved.label})", fontsize=8)
        ax.set_ylabel("speedup (x)", fontsize=7)
    plots.legend_top(fig, axes[0] if rows[0].resolved.model.overlap is None else _with_transfer(axes, rows))
    return plots.save(fig, path)


def _with_transfer(axes, rows):
    for ax, x in zip(axes, rows, strict=True):
        if x.resolved.model.overlap is None:
            return ax
    return axes[0]
