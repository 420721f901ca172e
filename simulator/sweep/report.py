"""Per-case summary of a sweep (speedup at the smallest batch, best γ, peak, where SD stops paying) and the compact
text table ``sweep`` prints."""

from __future__ import annotations

import numpy as np

from ..pricing import resolved_line
from ..render.textable import WIDTH, Col, render
from ..specdec import best_gamma, pays_up_to
from ..specdec.tree import tree_label


def summarize(result) -> list[dict]:
    """One dict per (model, hardware, deployment, mode); speedups are at the best γ of the grid per batch."""
    out = []
    for c in result.cases:
        r, d = c.result, c.deployment
        gam, spd = best_gamma(r.gammas, r.speedup)
        i = int(np.argmax(spd))
        # SD pays where the low end of the band is > 1 (at the γ best for it); the band straddles 1 where the low
        # end is <= 1 < the high end (docs/MODEL.md §4.6)
        low = best_gamma(r.gammas, r.speedup if r.speedup_low is None else r.speedup_low)[1]
        high = best_gamma(r.gammas, r.speedup if r.speedup_high is None else r.speedup_high)[1]
        # the band shown beside S: at the row's own draft length (the γ of S at the smallest batch)
        g0 = int(np.flatnonzero(r.gammas == gam[0])[0])
        band0 = [float((r.speedup if x is None else x)[g0, 0]) for x in (r.speedup_low, r.speedup_high)]
        up_to = pays_up_to(r.batch, low)
        paying = r.batch[low > 1.0]
        out.append({
            "model": c.model.name, "hardware": c.hardware.name, "grounding": c.hardware.grounding,
            "deployment": d.label, "gpus": d.gpus, "engine": d.engine, "engine_version": c.engine_version,
            "dtype": d.dtype, "tp": d.tp, "dp": d.dp, "ep": d.ep, "placement": d.placement,
            "tree": "" if c.scenario.tree is None else tree_label(c.scenario.tree), "variant": c.variant,
            "mode": c.mode, "reference": c.is_reference, "acceptance": c.scenario.accept.label,
            "batch_min": int(r.batch[0]), "batch_max": int(r.batch[-1]),
            "speedup_min_batch": float(spd[0]), "best_gamma_min_batch": int(gam[0]),
            "peak_speedup": float(spd[i]), "peak_batch": int(r.batch[i]), "peak_gamma": int(gam[i]),
            "pays_from": int(paying.min()) if paying.size else None,
            "pays_up_to": None if up_to is None else int(up_to),
            "pays_at_max": bool(low[-1] > 1.0),
            "speedup_low_min_batch": band0[0], "speedup_high_min_batch": band0[1],
            "batches": [int(x) for x in r.batch], "pays": [int(x) for x in paying],
            "straddles": [int(x) for x in r.batch[(low <= 1.0) & (high > 1.0)]],
        })
    return out


def runs(batches, grid) -> str:
    """``batches`` (a subset of the batch ``grid``) as runs of consecutive grid batches: ``a-b`` is every grid batch
    from a to b, ``a`` one alone, runs joined by ``,`` (e.g. ``1,4-128`` on 1, 2, 4, …, 256 without 2)."""
    pos = np.flatnonzero(np.isin(np.asarray(grid), np.asarray(batches, dtype=float)))
    parts, start = [], None
    for k, p in enumerate(pos):
        start = p if start is None else start
        if k + 1 == len(pos) or pos[k + 1] != p + 1:
            a, b = int(grid[start]), int(grid[p])
            parts.append(f"{a}" if a == b else f"{a}-{b}")
            start = None
    return ",".join(parts)


def _pays(s: dict) -> str:
    """The grid batches where the low end of the best speedup is > 1, as runs (:func:`runs`; ``+``: still paying at
    the largest batch; ``never``: at none), then ``~`` and the runs of batches where the band straddles 1."""
    grid = s["batches"]
    text = runs(s["pays"], grid) + ("+" if s["pays_at_max"] else "") if s["pays"] else "never"
    return text + (f" ~{runs(s['straddles'], grid)}" if s["straddles"] else "")


def resolved_lines(result, most: int = 4) -> list[str]:
    """The deployment rule's result: one ``resolved: …`` line per model × GPU when there are at most ``most``
    (the same line ``step`` and ``explain`` print), else one line pointing at the deployment column."""
    deps = {(c.model.name, c.hardware.name): c.deployment for c in result.cases}
    if len(deps) == 1:
        return [resolved_line(next(iter(deps.values())), result.context)]
    if len(deps) <= most:
        return [f"{resolved_line(d, result.context)} ({m} on {h})" for (m, h), d in deps.items()]
    gpus = sorted({d.gpus for d in deps.values()})
    each = f"{gpus[0]} GPUs each, " if len(gpus) == 1 else ""
    return [f"resolved: {each}the deployment column per row, context {result.context}"]


def format_table(result, *, width: int = WIDTH, wide: bool = False) -> str:
    """The compact table: one line per model × hardware × deployment, modes side by side as ``prior / refined``;
    fitted to ``width`` columns (``wide``: every column in full)."""
    rows = summarize(result)
    modes = list(dict.fromkeys(s["mode"] for s in rows))
    groups: dict[tuple, dict[str, dict]] = {}
    for s in rows:
        hw = s["hardware"] if s["grounding"] == "calibrated" else f"{s['hardware']} ({s['grounding']})"
        groups.setdefault((s["model"] + (f" [{s['variant']}]" if s["variant"] else ""), hw, s["gpus"],
                           s["deployment"], s["reference"]), {})[s["mode"]] = s

    def join(per: dict, fn) -> str:
        return "/".join(fn(per[m]) if m in per else "-" for m in modes)

    bmin = min(s["batch_min"] for s in rows)
    uniform = len({k[2] for k in groups}) == 1  # one GPU count: the resolved line states it, the column may hide
    cols = (Col("model", "<", wrap=True), Col("hardware", "<", wrap=True, short="gpu"),
            Col("GPUs", drop=3 if uniform else 0),
            Col("deployment", "<", wrap=True, short="deploy"),
            Col(f"S@B={bmin}"), Col(f"band@B={bmin}", drop=2, short="band"),
            Col(f"best g@B={bmin}", drop=1, short=f"g@B={bmin}"), Col("peak S@B", short="peak"),
            Col("SD pays for B", "<", wrap=True, short="pays for B"))
    lines = []
    for (model, hw, gpus, dep, ref), per in groups.items():
        lines.append((
            model + (" *" if ref else ""), hw, str(gpus), dep,
            join(per, lambda s: f"{s['speedup_min_batch']:.2f}"),
            join(per, lambda s: f"{s['speedup_low_min_batch']:.2f}-{s['speedup_high_min_batch']:.2f}"),
            join(per, lambda s: str(s["best_gamma_min_batch"])),
            join(per, lambda s: f"{s['peak_speedup']:.2f}@{s['peak_batch']}"),
            join(per, _pays),
        ))
    g = result.cases[0].result.gammas
    shown = [x for x in g if x in (1, 3, int(g.max()))]
    accs = [f"{label} ({', '.join(f'AL({x})={a:.2f}' for x, a in zip(shown, acc.accept_length(shown), strict=True))})"
            for label, acc, _ in result.acceptances]
    title = (f"Speculative decoding, columns {' / '.join(modes)}: drafter {result.drafter.label}, acceptance "
             f"{accs[0] if len(accs) == 1 else 'of each target (below)'}, context "
             f"{result.context} tokens; S = speedup at the best draft length g per batch; 'SD pays for B' = the "
             f"batches of the grid whose band's low end is > 1 at the draft length best for it, as runs (a-b: every "
             f"grid batch from a to b; +: still > 1 at the largest batch; never: at none), then ~ and the runs where "
             f"the band straddles 1; band = S's low-high at the row's g over the public ranges of the engine terms "
             f"and the acceptance, widened by the model's held-out error on the public SD corpus "
             f"(docs/MODEL.md §4.1, §4.6, docs/SD_VALIDATION.md)")
    notes = resolved_lines(result)
    if len(accs) > 1:  # the default of each target: its own public logs, else its family's (docs/MODEL.md §4.1)
        notes += [f"acceptance: {a}" for a in accs]
    executed = sorted({(c.deployment.engine, c.result.sd_overlap, c.result.decode_overlap) for c in result.cases
                       if c.result.sd_overlap})
    if executed:
        notes.append("execution mode priced (docs/MODEL.md §4.6; --sd-overlap / --decode-overlap): " + "; ".join(
            f"{e}: SD rounds overlapped {sd}, decode overlapped {dec}" for e, sd, dec in executed))
    errs = sorted({(c.deployment.engine, *c.result.model_error) for c in result.cases
                   if getattr(c.result, "model_error", (0.0, 0.0)) != (0.0, 0.0)})
    if errs:
        notes.append("model-error band (the refined model's held-out error on the public SD corpus, "
                     "specdec.engine_round.MODEL_ERROR): " + "; ".join(
                         f"{e}: x{np.exp(lo):.3f}-x{np.exp(hi):.3f} beyond the parameter band" for e, lo, hi in errs))
    if any(k[4] for k in groups):
        notes.append("* reference deployment of the study (Qwen3-235B-A22B FP8, attention TP8 + MoE EP8, H100 SXM)")
    return render(cols, lines, title=title, notes=notes, width=width, wide=wide)
