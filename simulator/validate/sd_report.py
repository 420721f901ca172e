"""Summaries of the SD-corpus validation (:mod:`.sd_fit`): per engine and mode, per source, the fitted parameters,
the six sd-validation cases and the issue's targets, as a dict (``--json``), text lines and Markdown
(docs/SD_VALIDATION.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..specdec.engine_round import FIT_COMMAND, FITTED, ROUND_PARAMS
from . import sd_band
from .sd_fit import FIT_PARAMS, SIX_CASES, WIDEN, Outcome, Validation, fitted_bands

__all__ = ["TARGETS", "findings", "markdown", "run", "summary", "text_lines"]

# The targets (issue 17, "Done when").
TARGETS = {"held_out_mean_abs_error": 0.15, "band_coverage": 0.80, "six_case_error": 0.25}
WHICH = ("central", "fitted", "held_out")


def _mean_abs(os: list[Outcome], which: str) -> float | None:
    return float(np.mean([abs(o.error(which)) for o in os])) if os else None


def _group(os: list[Outcome]) -> dict:
    losses = [o for o in os if o.measured < 1]
    banded = [o for o in os if o.band is not None]
    covered = [o for o in banded if o.band[0] <= o.measured <= o.band[1]]
    return {"rows": len(os), "sources": len({o.row.source_key for o in os}),
            **{f"mean_abs_error_{w}": _mean_abs(os, w) for w in WHICH},
            "bias_held_out": float(np.mean([o.error("held_out") for o in os])) if os else None,
            "losses": len(losses), "losses_predicted": sum(o.held_out < 1 for o in losses),
            "false_losses": sum(o.held_out < 1 <= o.measured for o in os),
            "band_rows": len(banded), "band_covered": len(covered),
            "band_coverage": len(covered) / len(banded) if banded else None}


def run(path=None, progress=None) -> dict:
    """Read a corpus (default: the bundled one), validate it and summarise (``python -m simulator validate sd``);
    ``progress``: a callback for progress lines (rows priced, then the fits)."""
    from .sd_corpus import bundled_corpus_path, read_corpus
    from .sd_fit import validate_sd

    rows = read_corpus(path)
    name = Path(path).name if path is not None else "measured/sd/" + bundled_corpus_path().name
    return summary(validate_sd(rows, name, progress=progress))


def summary(v: Validation) -> dict:
    pr = v.priced
    groups = {}
    for o in pr:
        groups.setdefault((o.row.engine, o.mode), []).append(o)
    by_src = {}
    for o in v.outcomes:
        by_src.setdefault(o.row.source_key, []).append(o)
    params = []
    wanted = fitted_bands(v)
    for e, f in v.fits.items():
        verdict = f.pinned()
        for i, n in enumerate(FIT_PARAMS):
            b = getattr(ROUND_PARAMS[e], n)
            used = FITTED.get(e, {}).get(n, b)
            fold = [fs[e].values[i] for fs in v.folds.values() if e in fs and fs[e].rows]
            params.append({"engine": e, "param": n, "low_ms": b.low * 1e3, "central_ms": b.central * 1e3,
                           "high_ms": b.high * 1e3, "fitted_ms": float(f.values[i]) * 1e3,
                           "sigma_ms": None if not np.isfinite(f.sigma[i]) else float(f.sigma[i]) * 1e3,
                           "folds_ms": [float(min(fold)) * 1e3, float(max(fold)) * 1e3] if fold else None,
                           "used_ms": [used.low * 1e3, used.central * 1e3, used.high * 1e3],
                           "rows": f.rows, "sources": f.sources, "verdict": verdict[i]})
    six = []
    ids = {o.row.id: o for o in pr}
    for c in SIX_CASES:
        o = ids.get(c)
        six.append({"id": c, "priced": o is not None, "measured": o.measured if o else None,
                    "held_out": o.held_out if o else None, "error": o.error("held_out") if o else None})
    overall = _group(pr)
    cov = overall["band_coverage"]
    targets = {
        "held_out_mean_abs_error": (overall["mean_abs_error_held_out"], TARGETS["held_out_mean_abs_error"],
                                    overall["mean_abs_error_held_out"] is not None
                                    and overall["mean_abs_error_held_out"] <= TARGETS["held_out_mean_abs_error"]),
        "every_loss_predicted": (f"{overall['losses_predicted']}/{overall['losses']}", "all",
                                 overall["losses_predicted"] == overall["losses"]),
        "band_coverage": (cov, TARGETS["band_coverage"], cov is not None and cov >= TARGETS["band_coverage"]),
        "six_cases_within": (sum(s["error"] is not None and abs(s["error"]) <= TARGETS["six_case_error"]
                                 for s in six), len(six),
                             all(s["error"] is not None and abs(s["error"]) <= TARGETS["six_case_error"]
                                 for s in six)),
    }
    return {
        "corpus": v.corpus, "rows": len(v.outcomes), "priced": len(pr),
        "not_priced": {o.row.id: f"{o.status}: {o.reason}" for o in v.outcomes
                       if o.status not in ("priced", "assumed")},
        "assumed_al": {**_group(v.assumed), "detail": [_row(o) for o in v.assumed]},
        "overall": overall,
        "groups": [{"engine": e, "mode": m, **_group(os)} for (e, m), os in sorted(groups.items())],
        "sources": [{"source": s, "rows": len(os), "priced": sum(o.status == "priced" for o in os),
                     **{k: _group([o for o in os if o.status == "priced"])[k]
                        for k in ("mean_abs_error_central", "mean_abs_error_held_out", "losses",
                                  "losses_predicted")}} for s, os in by_src.items()],
        "params": params, "six_cases": six, "fitted_table_matches": fitted_matches(wanted),
        "targets": {k: {"value": a, "target": b, "met": bool(c)} for k, (a, b, c) in targets.items()},
        "rows_detail": [_row(o) for o in pr],
        "diagnostic": _diagnostic(v),
        "error_band": sd_band.summary(v),
    }


def fitted_matches(wanted: dict, rtol: float = 1e-4) -> bool:
    """Whether :data:`~simulator.specdec.engine_round.FITTED` holds this fit's :func:`~.sd_fit.fitted_bands`
    (same engines and parameters, every end within ``rtol`` of the range width)."""
    if {e: set(d) for e, d in wanted.items()} != {e: set(d) for e, d in FITTED.items() if d}:
        return False
    for e, d in wanted.items():
        for n, ends in d.items():
            b, width = FITTED[e][n], getattr(ROUND_PARAMS[e], n).high - getattr(ROUND_PARAMS[e], n).low
            if any(abs(x - y) > rtol * width for x, y in zip(ends, (b.low, b.central, b.high), strict=True)):
                return False
    return True


def _diagnostic(v: Validation) -> dict:
    """The fit with the public ranges widened (lower bounds 0, upper × WIDEN): what the data want; never used."""
    out = {"widen": WIDEN, "params": {e: {n: float(f.values[i]) * 1e3 for i, n in enumerate(FIT_PARAMS)}
                                      for e, f in v.wide.items()}, "groups": []}
    groups = {}
    for o in v.priced:
        if o.row.id in v.wide_held_out:
            groups.setdefault(o.row.engine, []).append(o)
    for e, os in sorted(groups.items()):
        errs = [v.wide_held_out[o.row.id] / o.measured - 1 for o in os]
        losses = [o for o in os if o.measured < 1]
        out["groups"].append({"engine": e, "rows": len(os), "mean_abs_error_held_out": float(np.mean(np.abs(errs))),
                              "losses": len(losses),
                              "losses_predicted": sum(v.wide_held_out[o.row.id] < 1 for o in losses)})
    return out


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
                   f"band alone, {b['covered']}/{b['rows']} widened by the model's error (split-conformal by source, "
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
    for g in s["diagnostic"]["groups"]:
        out.append(f"With the ranges widened (diagnostic, not used) {g['engine']} would reach "
                   f"{_pct(g['mean_abs_error_held_out'])} held out and call {g['losses_predicted']}/{g['losses']} "
                   "losses.")
    return out


def _row(o: Outcome) -> dict:
    s = o.setup
    compare = s.compare + (" (no lengths)" if s.level == "step" and o.row.level == "serving" else "")
    return {"id": o.row.id, "source": o.row.source_key, "engine": o.row.engine, "mode": o.mode,
            "compare": compare, "concurrency": s.concurrency, "draft": _draft(o), "accept_length": s.accept_length,
            "al_from": s.al_from, "isl": s.isl, "osl": s.osl, "measured": o.measured, "central": o.central,
            "fitted": o.fitted, "held_out": o.held_out, "error_held_out": o.error("held_out"),
            "step_level": o.step_level,
            "band": list(o.band) if o.band else None,
            # a round's cost in plain steps, AL / speedup: what the row implies and what the model prices
            "round_in_steps": None if s.accept_length is None else [s.accept_length / o.measured,
                                                                    s.accept_length / o.held_out],
            "measured_above_al": s.accept_length is not None and o.measured > s.accept_length}


def _draft(o: Outcome) -> str:
    s = o.setup
    return (f"{s.drafter} γ={s.gamma}" if s.parents is None else
            f"{s.drafter} tree {len(s.parents)} nodes depth {s.gamma}")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _f(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def text_lines(s: dict) -> list[str]:
    """The CLI's table: per engine and mode, then the targets."""
    o = s["overall"]
    apart, missed = len(s["assumed_al"]["detail"]), len(s["not_priced"])
    out = [f"rows: {s['rows']}; priced {s['priced'] + apart} ({s['priced']} validated, {apart} apart: no AL stated); "
           f"not priced {missed} (why: at the end)",
           "errors per engine and mode: the engines' central parameters / fitted in-sample / held out by source",
           f"{'engine':<7} {'mode':<20} {'rows':>4} {'src':>3} {'central':>8} {'fit':>8} {'held out':>8} "
           f"{'losses':>7} {'band':>7}"]
    for g in s["groups"] + [{"engine": "all", "mode": "", **o}]:
        out.append(f"{g['engine']:<7} {g['mode']:<20} {g['rows']:>4} {g['sources']:>3} "
                   f"{_pct(g['mean_abs_error_central']):>8} {_pct(g['mean_abs_error_fitted']):>8} "
                   f"{_pct(g['mean_abs_error_held_out']):>8} {g['losses_predicted']:>3}/{g['losses']:<3} "
                   f"{_pct(g['band_coverage']):>7}")
    for p in s["params"]:
        if p["rows"]:
            out.append(f"fit {p['engine']} {p['param']}: {p['fitted_ms']:.3f} ms in {p['low_ms']:.3f}-"
                       f"{p['high_ms']:.3f} ({p['verdict']})")
    for c in s["six_cases"]:
        out.append(f"case {c['id']}: measured {_f(c['measured'])}, held out {_f(c['held_out'])} "
                   f"({_pct(c['error'])})")
    for k, t in s["targets"].items():
        val = t["value"] if isinstance(t["value"], str) else (_pct(t["value"]) if isinstance(t["value"], float)
                                                               else str(t["value"]))
        out.append(f"target {k}: {val} (target {t['target']}) {'met' if t['met'] else 'NOT met'}")
    return out + not_priced_lines(s["not_priced"])


def not_priced_lines(not_priced: dict, most: int = 8, width: int = 100) -> list[str]:
    """Why rows were not priced: one line per reason (most frequent first, at most ``most``) with its count, each
    within ``width`` columns; the rest counted in one line (every row and its reason: --json or --report)."""
    reasons: dict[str, list[str]] = {}
    for rid, why in not_priced.items():
        reasons.setdefault(why, []).append(rid)
    ranked = sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    out = []
    for why, ids in ranked[:most]:
        line = f"not priced ({len(ids)}): {why}"
        out.append(line if len(line) <= width else line[: width - 3] + "...")
    if len(ranked) > most:
        rest = sum(len(ids) for _, ids in ranked[most:])
        out.append(f"not priced ({rest}): {len(ranked) - most} other reasons (every row and reason: --json or "
                   "--report)")
    return out


REPORT_COMMAND = "python -m simulator validate sd --report docs/SD_VALIDATION.md"  # what wrote docs/SD_VALIDATION.md


def markdown(s: dict, intro: str = "", command: str = REPORT_COMMAND) -> str:
    """The report of :func:`run`'s summary ``s``; ``command``: the command that writes it (named in its first
    lines)."""
    L = ["# SD validation: predicted vs measured speedups over the public corpus", "",
         f"Generated by `{command}` (docs/MODEL.md §7.2). "
         "Error = predicted / measured − 1. *central*: the engines' central round parameters "
         "(`specdec/engine_round.py` `ROUND_PARAMS`, before the fit); *fit*: fitted on every source, the values the "
         "pricing path uses (`engine_round.FITTED`); *held out*: each source "
         "predicted by the fit on the other sources (leave-one-source-out). Losses: measured < 1, and of those how "
         "many the held-out prediction calls a loss. Band: the held-out prediction's `speedup_low`–`speedup_high` "
         "(every ranged term at both ends of its band, and a borrowed AL's band, widened by the model's error "
         "from the other sources' rows: \"The model-error band\" below).", ""]
    if intro:
        L += [intro, ""]
    b = s["error_band"]
    L += ["## Targets", "", "Without the model-error band: the same held-out predictions with the "
          "parameter / acceptance band alone (the band before `MODEL_ERROR`; the other targets use only the central "
          "predictions, which the band does not move).", "",
          "| target | value | without the model-error band | goal | met |", "|---|---|---|---|---|"]
    for k, t in s["targets"].items():
        val = t["value"] if isinstance(t["value"], str) else (_pct(t["value"]) if isinstance(t["value"], float)
                                                               else str(t["value"]))
        before = (_pct(b["covered_params_only"] / b["rows"]) if k == "band_coverage" and b and b["rows"] else val)
        goal = _pct(t["target"]) if isinstance(t["target"], float) else str(t["target"])
        L.append(f"| {k} | {val} | {before} | {goal} | {'yes' if t['met'] else '**no**'} |")
    L += ["", "## Findings (computed from the tables below)", ""] + [f"- {f}" for f in findings(s)]
    L += ["", "## Per engine and execution mode", "",
          "| engine | mode | rows | sources | central | fit | held out | bias (held out) | losses predicted | "
          "false losses | band coverage |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for g in s["groups"] + [{"engine": "**all**", "mode": "", **s["overall"]}]:
        L.append(f"| {g['engine']} | {g['mode']} | {g['rows']} | {g['sources']} | "
                 f"{_pct(g['mean_abs_error_central'])} | {_pct(g['mean_abs_error_fitted'])} | "
                 f"{_pct(g['mean_abs_error_held_out'])} | {_pct(g['bias_held_out'])} | "
                 f"{g['losses_predicted']}/{g['losses']} | {g['false_losses']} | "
                 f"{g['band_covered']}/{g['band_rows']} ({_pct(g['band_coverage'])}) |")
    L += ([""] + sd_band.markdown(s["error_band"], FIT_COMMAND)) if s["error_band"] else []
    L += ["", "## Fitted round parameters (per engine; ms)", "",
          "Range: the public evidence (low / central / high); where it bounds a parameter from one side only, the "
          "other end is a physical ceiling (the Band's source in `engine_round.py` says which). Used: the band the "
          "pricing path reads (`engine_round.FITTED`: central = the all-source fit, low–high = the held-out spread, "
          "folds joined with ± one-σ, clipped to the range; a parameter no row moves, or the rows cannot place, "
          "keeps its public band). "
          f"`FITTED` matches this fit: **{'yes' if s['fitted_table_matches'] else 'NO: copy the fit into it'}** "
          f"(regenerate: `{FIT_COMMAND}`).", "",
          "| engine | parameter | range (low / central / high) | fitted (all sources) | one-σ | "
          "held-out folds (min–max) | used (low / central / high) | rows / sources | verdict |",
          "|---|---|---|---:|---:|---|---|---|---|"]
    for p in s["params"]:
        folds = "-" if p["folds_ms"] is None else f"{p['folds_ms'][0]:.3f}–{p['folds_ms'][1]:.3f}"
        L.append(f"| {p['engine']} | `{p['param']}` | {p['low_ms']:.3f} / {p['central_ms']:.3f} / "
                 f"{p['high_ms']:.3f} | {p['fitted_ms']:.3f} | {_f(p['sigma_ms'], '{:.3f}')} | {folds} | "
                 + " / ".join(f"{x:.3f}" for x in p["used_ms"]) + f" | {p['rows']} / {p['sources']} | {p['verdict']} |")
    d = s["diagnostic"]
    L += ["", f"## Diagnostic: the fit with the public ranges widened (lower bounds 0, upper × {d['widen']:g})", "",
          "What the rows want if the parameters were free; never used to predict (the ranges above are the "
          "evidence).", "", "| engine | " + " | ".join(f"`{n}` (ms)" for n in FIT_PARAMS)
          + " | held out mean abs error | losses predicted |", "|---|" + "---:|" * (len(FIT_PARAMS) + 2)]
    for g in d["groups"]:
        vals = d["params"][g["engine"]]
        L.append(f"| {g['engine']} | " + " | ".join(f"{vals[n]:.3f}" for n in FIT_PARAMS)
                 + f" | {_pct(g['mean_abs_error_held_out'])} | {g['losses_predicted']}/{g['losses']} |")
    L += ["", "## The six sd-validation cases (held out)", "", "| corpus id | measured | held out | error | "
          "within 25% |", "|---|---:|---:|---:|---|"]
    for c in s["six_cases"]:
        ok = c["error"] is not None and abs(c["error"]) <= TARGETS["six_case_error"]
        L.append(f"| {c['id']} | {_f(c['measured'])} | {_f(c['held_out'])} | {_pct(c['error'])} | "
                 f"{'yes' if ok else '**no**'} |")
    L += ["", "## Per source", "", "| source | rows | priced | central | held out | losses predicted |",
          "|---|---:|---:|---:|---:|---:|"]
    for r in s["sources"]:
        L.append(f"| {r['source']} | {r['rows']} | {r['priced']} | {_pct(r['mean_abs_error_central'])} | "
                 f"{_pct(r['mean_abs_error_held_out'])} | {r['losses_predicted']}/{r['losses']} |")
    L += ["", "## Rows", "", "Compared: the serving-level speedup (throughput or TPOT) or the step level; "
          "\"(no lengths)\": a serving measurement whose ISL/OSL the source does not state, compared at the step "
          "level; a serving row's central prediction shows the step-level speedup at batch C beside it. "
          "Round in steps: AL / speedup, what one round costs in plain decode steps as the row implies it "
          "and as the held-out model prices it.", ""]
    L += _row_table(s["rows_detail"])
    a = s["assumed_al"]
    L += ["", "## Rows priced with an assumed acceptance (no AL stated; not fitted, not in the targets)", "",
          f"The pricing path's default acceptance for the row's drafter family and target kind "
          f"(`specdec.default_acceptance`, with its band) stands in for the unstated AL: "
          f"{a['rows']} rows, mean |error| with the fitted "
          f"parameters {_pct(a['mean_abs_error_fitted'])}; losses called {a['losses_predicted']}/{a['losses']} "
          "(the held-out column is the all-source fit: these rows are never fitted).", ""]
    L += _row_table(a["detail"]) if a["detail"] else ["- none"]
    L += ["", "## Rows not priced", ""]
    L += [f"- `{k}`: {why}" for k, why in s["not_priced"].items()] or ["- none"]
    return "\n".join(L) + "\n"


def _row_table(rows: list[dict]) -> list[str]:
    L = ["| id | mode | compared | C | drafter | AL | ISL/OSL | measured | central (step level) | held out | error | "
         "band | round in steps: measured / held out |",
         "|---|---|---|---:|---|---:|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        al = ("default" if r["accept_length"] is None else f"{r['accept_length']:.2f}"
              + ("" if r["al_from"] == "row" else f" (from {r['al_from']})"))
        lens = "-" if r["osl"] is None else f"{r['isl']}/{r['osl']}"
        band = "-" if r["band"] is None else f"{r['band'][0]:.2f}–{r['band'][1]:.2f}"
        L.append(f"| {r['id']} | {r['mode']} | {r['compare']} | {r['concurrency']} | {r['draft']} | {al} | {lens} | "
                 f"{r['measured']:.2f} | {r['central']:.2f}{_step(r)} | {r['held_out']:.2f} | "
                 f"{_pct(r['error_held_out'])} | {band} | {_steps(r)} |")
    return L


def _step(r: dict) -> str:
    """The step-level speedup at batch C beside a serving-level prediction (central parameters)."""
    return "" if r["compare"].startswith("step") else f" ({r['step_level']:.2f})"


def _steps(r: dict) -> str:
    if r["round_in_steps"] is None:
        return "-"
    m, p = r["round_in_steps"]
    return f"{m:.2f} / {p:.2f}" + (" (measured > AL: not a decode-only ratio)" if r["measured_above_al"] else "")
