"""The SD validation's checks beside the per-row errors (docs/MODEL.md §7.2): the slope of the speedup against
concurrency per source, the public engine A/Bs (:mod:`.engine_ab`), and the findings sentences of the report.

**Slopes.** A source's validated rows of one configuration (source, target, GPU, layout, drafter, draft shape,
dataset: everything but the batch) measured at three or more concurrencies (or batches) form a curve S(c). Its check
compares the held-out prediction with the measurement at the ends, c_min and c_max:

    sign:   sign(S(c_max) − S(c_min)) predicted as measured (a flat measurement, |ratio − 1| ≤ 1%, takes either)
    ratio:  |R_pred / R_meas − 1| ≤ 15%,   R = S(c_max) / S(c_min)

Rows set apart form curves too; they are shown, never counted in the targets.
"""

from __future__ import annotations

import numpy as np

from .engine_ab import TOLERANCE, validate_ab
from .sd_fit import Outcome, Validation
from .sd_speedup import _config

__all__ = ["FLAT", "SLOPE_RATIO", "ab_rows", "findings", "markdown", "slope_checks"]

MIN_POINTS = 3  # concurrencies a curve needs
SLOPE_RATIO = 0.15  # the tolerance on S(c_max) / S(c_min)
FLAT = 0.01  # a measured end-to-end ratio within 1% of 1 has no sign


def slope_checks(v: Validation, apart: bool = False) -> list[dict]:
    """Every curve of ``v``'s validated rows (``apart``: of the rows set apart) with three or more concurrencies."""
    curves: dict[tuple, list[Outcome]] = {}
    for o in (v.apart if apart else v.priced):
        curves.setdefault(_config(o.row), []).append(o)
    out = []
    for os in curves.values():
        by_c = {}
        for o in os:  # one point per concurrency: the mean of a concurrency's rows
            by_c.setdefault(float(o.setup.concurrency), []).append(o)
        if len(by_c) < MIN_POINTS:
            continue
        cs = sorted(by_c)
        meas = [float(np.mean([o.measured for o in by_c[c]])) for c in cs]
        pred = [float(np.mean([o.held_out for o in by_c[c]])) for c in cs]
        rm, rp = meas[-1] / meas[0], pred[-1] / pred[0]
        sign_ok = abs(rm - 1.0) <= FLAT or np.sign(rm - 1.0) == np.sign(rp - 1.0)
        err = rp / rm - 1.0
        first = by_c[cs[0]][0]
        out.append({"source": first.row.source_key, "author": first.row.author, "rows": [o.row.id for o in os],
                    "concurrency": cs, "measured": meas, "held_out": pred, "ratio_measured": rm,
                    "ratio_held_out": rp, "ratio_error": err, "sign_right": bool(sign_ok),
                    "within": bool(sign_ok and abs(err) <= SLOPE_RATIO),
                    "label": f"{first.setup.model} {first.row.gpu_count}x{first.row.gpu} "
                             f"{first.row.drafter_kind} {_shape(first)}"})
    return out


def _shape(o: Outcome) -> str:
    s = o.setup
    return f"γ={s.gamma}" if s.parents is None else f"tree {len(s.parents)} nodes"


def ab_rows() -> list[dict]:
    """The public engine A/Bs priced arm by arm (measured/engines/ab.csv)."""
    return [{"id": r.row.id, "engine": r.row.engine, "version": r.row.engine_version, "mechanism": r.row.mechanism,
             "model": r.row.model, "gpu": f"{r.row.gpu_count}x{r.row.gpu}", "batch": r.row.batch,
             "measured": r.row.measured, "predicted": r.predicted, "error": r.error, "within": r.within,
             "t_off_ms": None if r.t_off is None else r.t_off * 1e3,
             "t_on_ms": None if r.t_on is None else r.t_on * 1e3, "reason": r.reason, "url": r.row.url,
             "assumed": r.row.assumed} for r in validate_ab()]


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(s: dict) -> list[str]:
    """The report's sections on the slopes and the engine A/Bs."""
    L = ["## Slopes against concurrency (held out by author)", "",
         f"Every configuration measured at {MIN_POINTS} or more concurrencies (or batches): the speedup at the "
         f"smallest and the largest, and their ratio R = S(c_max) / S(c_min), measured and held out. Right: the "
         f"sign of R − 1 as measured (a measured |R − 1| ≤ {FLAT:.0%} takes either) and R within "
         f"{SLOPE_RATIO:.0%}. Rows set apart are shown below the line, not counted.", "",
         "| source | configuration | concurrencies | measured S | held out S | R measured | R held out | "
         "R error | right |", "|---|---|---|---|---|---:|---:|---:|---|"]
    for c in s["slopes"] + [{**c, "source": c["source"] + " (set apart)"} for c in s["slopes_apart"]]:
        L.append(f"| {c['source']} | {c['label']} | {', '.join(f'{x:g}' for x in c['concurrency'])} | "
                 + ", ".join(f"{x:.2f}" for x in c["measured"]) + " | "
                 + ", ".join(f"{x:.2f}" for x in c["held_out"])
                 + f" | {c['ratio_measured']:.3f} | {c['ratio_held_out']:.3f} | {_pct(c['ratio_error'])} | "
                 + ("yes" if c["within"] else "**no**" + ("" if c["sign_right"] else " (sign)")) + " |")
    L += ["", "## Engine A/Bs (measured/engines/ab.csv; never fitted)", "",
          "One mechanism of one engine switched off and on in one deployment, both arms priced: the ratio "
          f"time(off) / time(on) of a plain step (`decode_overlap`) or an SD round (`sd_overlap`). Within: "
          f"{TOLERANCE:.0%}. What the source does not state (the GPU, the draft shape) is in `assumed`.", "",
          "| A/B | engine | mechanism | model, GPUs, batch | measured | priced (off / on ms) | error | within | "
          "assumed |", "|---|---|---|---|---:|---|---:|---|---|"]
    for a in s["engine_ab"]:
        priced = "-" if a["predicted"] is None else (f"{a['predicted']:.3f} ({a['t_off_ms']:.2f} / "
                                                     f"{a['t_on_ms']:.2f})")
        L.append(f"| [{a['id']}]({a['url']}) | {a['engine']} {a['version']} | {a['mechanism']} | {a['model']}, "
                 f"{a['gpu']}, B={a['batch']} | {a['measured']:.3f} | {priced} | {_pct(a['error'])} | "
                 f"{'yes' if a['within'] else '**no**'} | {a['assumed'] or a['reason']} |")
    return L


def findings(s: dict) -> list[str]:
    """Sentences computed from the summary: where the error is, what a round costs, what the fit wants."""
    out = []
    rows = s["rows_detail"]
    missed = [k for k, t in s["targets"].items() if not t["met"]]
    out.append(f"{len(s['targets']) - len(missed)} of {len(s['targets'])} targets met"
               + (f"; not met: {', '.join(missed)}." if missed else "."))
    b = s["error_band"]
    if b:
        out.append(f"Band coverage held out: {b['covered_params_only']}/{b['rows']} with the parameter / acceptance "
                   f"band alone, {b['covered']}/{b['rows']} widened by the model's error (split-conformal by author, "
                   f"stated coverage {100 * b['coverage']:.0f}%).")
    if rows:
        errs = sorted(rows, key=lambda r: -abs(r["error_held_out"]))
        total = sum(abs(r["error_held_out"]) for r in rows)
        top = errs[:5]
        share = sum(abs(r["error_held_out"]) for r in top) / total if total else 0.0
        named = ", ".join(r["id"] + " " + _pct(r["error_held_out"]) for r in top)
        out.append(f"The five largest held-out errors ({named}) carry {_pct(share)} of the summed |error| of the "
                   f"{len(rows)} rows.")
    for e in sorted({r["engine"] for r in rows}):
        st = [r["round_in_steps"] for r in rows if r["engine"] == e and r["round_in_steps"] is not None]
        if st:
            m, p = np.median([x[0] for x in st]), np.median([x[1] for x in st])
            out.append(f"{e}: a round costs {m:.2f} plain decode steps by the median row (AL / measured speedup) "
                       f"and {p:.2f} as priced held out ({len(st)} rows).")
    for p in s["params"]:
        if p["verdict"].startswith("at the"):
            w = s["diagnostic"]["params"].get(p["engine"], {}).get(p["param"])
            out.append(f"{p['engine']} `{p['param']}` fits at the {p['verdict'][7:]} of its range "
                       f"({p['low_ms']:.3f}–{p['high_ms']:.3f} ms)"
                       + (f"; with the range widened the rows want {w:.3f} ms." if w is not None else "."))
    for e in sorted({p["engine"] for p in s["params"] if p["rows"]}):
        ps = [p for p in s["params"] if p["engine"] == e and p["rows"]]
        pinned = [f"`{p['param']}`" for p in ps if p["verdict"] == "pinned"]
        loose = [f"`{p['param']}` ({p['verdict']})" for p in ps if p["verdict"] != "pinned"]
        out.append(f"{e}: the data pin {', '.join(pinned) or 'no parameter'}; they cannot pin "
                   f"{', '.join(loose) or 'nothing'}.")
    for c in s["slopes"]:
        out.append(f"Slope {c['source']} ({c['label']}, c = {c['concurrency'][0]:g}…{c['concurrency'][-1]:g}): "
                   f"S(c_max) / S(c_min) measured {c['ratio_measured']:.3f}, held out {c['ratio_held_out']:.3f} "
                   f"({_pct(c['ratio_error'])}" + ("" if c["sign_right"] else ", the wrong sign") + ").")
    for a in s["engine_ab"]:
        out.append(f"A/B {a['id']}: measured {a['measured']:.3f}, priced "
                   + ("not priced: " + a["reason"] if a["predicted"] is None else
                      f"{a['predicted']:.3f} ({_pct(a['error'])})") + ".")
    for g in s["diagnostic"]["groups"]:
        out.append(f"With the ranges widened (diagnostic, not used) {g['engine']} would reach "
                   f"{_pct(g['mean_abs_error_held_out'])} held out and call {g['losses_predicted']}/{g['losses']} "
                   "losses.")
    return out


