"""``whatif`` analysis: the grid's targets on several GPUs and formats (refined speedup at the smallest batch and the
low-batch advantage), and a one-change-at-a-time attribution: variants that copy one group of spec fields
(:data:`simulator.sweep.HARDWARE_GROUPS`) from the base GPU towards the target GPU and back, a hypothetical
fixed-cost scale, and 4-bit experts (:func:`simulator.sweep.variants.one_change_variants`), each priced through the
sweep's one pricing path."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, replace

import numpy as np

from ..params import Interval, Param, param_field
from ..pricing import NO_EDIT
from ..render import study_figures
from ..render.outcome import Figure, Part, Table
from ..specs.catalog import load_hardware
from ..specs.dtypes import FORMATS
from ..specs.settings import choice, loadable, on_grid
from ..sweep.variants import one_change_variants
from .grid import deploy_target, price_target
from .schema import Target


@dataclass(frozen=True)
class Attribution:
    model: str = loadable("model")
    base: str = loadable("hardware")
    target: str = loadable("hardware")
    dtype: str = choice(FORMATS)
    four_bit: str = choice(FORMATS)
    fixed_cost_scale: float = param_field(Param(Interval(float, 0.0, 10.0)))


@dataclass(frozen=True)
class Settings:
    attribution: Attribution
    compare_from: int = param_field(Param(Interval(int, 2, None)), 8)  # advantage = S(B min) − max S(B ≥ this)
    ratio_draft_len: int = on_grid("draft_len", 3)


def check(r, study, s: Settings) -> None:
    if not any(b >= s.compare_from for b in study.grid.batch):
        raise r.fail("analyses.whatif.compare_from", f"is {s.compare_from}, above every batch of the grid",
                     "lower it or extend grid.batch")


Metrics = namedtuple("Metrics", "s_low peak_batch advantage ratio s16")  # advantage: S(B min) − max S(B ≥ from)
GridRow = namedtuple("GridRow", "model gpu format deployment prior_s s peak advantage ratio prior_ratio s16 note")
AttrRow = namedtuple("AttrRow", "group label format s advantage ratio ds dadvantage dratio peak prior_s note")


def metrics(res, p: Settings) -> Metrics:
    """Best speedup at the smallest batch, its peak batch, the advantage, T_decode/T_verify at ratio_draft_len and
    the smallest batch, S(B=16)."""
    _, s = res.best()
    b = res.batch
    j = int(np.flatnonzero(res.gammas == p.ratio_draft_len)[0])
    return Metrics(float(s[0]), int(b[int(np.argmax(s))]), float(s[0] - s[b >= p.compare_from].max()),
                   float(1 / res.verify_decode_ratio[j, 0]), float(s[b == 16][0]) if 16 in b else None)


def _grid_rows(study, priced, p: Settings):
    rows, skipped = [], []
    for t in study.grid.all_targets:
        for h in study.grid.hardware or ("h100-sxm",):
            for d in study.grid.dtype or (None,):
                pts = {md: pt for md in study.grid.modes if (pt := priced.find(t.model, md, "", h, d)) is not None}
                if not pts:
                    why = next(w for mm, hh, dd, w in priced.skipped if (mm, hh, dd) == (t.model, h, d))
                    skipped.append((t.model, h, d, _short_reason(why)))
                    continue
                m = {md: metrics(pt.case.result, p) for md, pt in pts.items()}
                rf, pr = m.get("refined"), m.get("prior")
                case = next(iter(pts.values())).case
                ok = case.result.batch
                note = "" if len(ok) == len(study.grid.batch) else f"batches above {ok[-1]:g} dropped"
                rows.append(GridRow(t.model, h, d, case.deployment.label, pr and pr.s_low, rf and rf.s_low,
                                    rf and rf.peak_batch, rf and rf.advantage, rf and rf.ratio, pr and pr.ratio,
                                    rf and rf.s16, note))
    return rows, skipped


def _short_reason(err: str) -> str:
    """The part of a deployment error that says why (after the last ': ' of a nested message), one clause."""
    tail = err.rsplit("': ", 1)[-1] if "': " in err else err
    return tail.split("; ")[0][:140]


def _attribution(study, ctx, p: Settings) -> list[AttrRow]:
    a = p.attribution
    t = Target(model=a.model, hardware=a.base)
    rows, base = [], None
    for group, label, hw, dtype, v in one_change_variants(load_hardware(a.base), load_hardware(a.target), a.dtype,
                                                           a.four_bit, a.fixed_cost_scale):
        hw, v = v.hardware.apply(hw), replace(v, hardware=NO_EDIT)  # deploy on the edited GPU
        dtype = dtype or a.dtype
        dd, err = deploy_target(study, t, hw, dtype, fallbacks=())
        if dd is None:
            rows.append(AttrRow(group, label, dtype, *[None] * 8, err[:160]))
            continue
        res = {m: metrics(price_target(study, ctx, dd, m, v).result, p) for m in study.grid.modes}
        rf = res["refined"]
        base = base or rf
        rows.append(AttrRow(group, label, dtype, rf.s_low, rf.advantage, rf.ratio, rf.s_low - base.s_low,
                            rf.advantage - base.advantage, rf.ratio - base.ratio, rf.peak_batch,
                            res["prior"].s_low if "prior" in res else None, ""))
    return rows


def run(exp, priced, ctx, p: Settings) -> Part:
    g, a = exp.grid, p.attribution
    grid_rows, skipped = _grid_rows(exp, priced, p)
    b0 = g.batch[0]
    grid_t = Table("grid", f"Targets × GPUs × formats (refined unless marked; S = best speedup, advantage = S(B={b0}) "
                   f"− max S over B ≥ {p.compare_from})",
                   ("model", "GPU", "format", "deployment", f"prior S(B={b0})", f"refined S(B={b0})",
                    "refined peak B", "low-batch advantage", f"refined T_dec/T_ver (γ={p.ratio_draft_len})",
                    f"prior T_dec/T_ver (γ={p.ratio_draft_len})", "refined S(B=16)", "note"),
                   tuple(grid_rows), ("", "", "", "", "{:.2f}", "{:.2f}", "{:d}", "{:+.2f}", "{:.3f}", "{:.3f}",
                                      "{:.2f}", ""))
    skip_t = Table("not_run", "Combinations that cannot run", ("model", "GPU", "format", "why"), tuple(skipped))
    attr = _attribution(exp, ctx, p)
    attr_t = Table("attribution", f"One change at a time: {a.model}, refined (Δ against {a.base} {a.dtype})",
                   ("group", "variant", "format", f"S(B={b0})", "advantage", "T_dec/T_ver", f"Δ S(B={b0})",
                    "Δ advantage", "Δ T_dec/T_ver", "peak B", f"prior S(B={b0})", "note"), tuple(attr),
                   ("", "", "", "{:.3f}", "{:+.3f}", "{:.3f}", "{:+.3f}", "{:+.3f}", "{:+.3f}", "{:d}", "{:.2f}", ""))
    figs = (Figure("low_batch", f"Refined speedup at B={b0} per target, GPU and format",
                   lambda path: study_figures.whatif_bars(grid_rows, exp, path)),
            Figure("attribution", f"One-change-at-a-time attribution for {a.model} (refined S at B={b0})",
                   lambda path: study_figures.whatif_attribution(attr, exp, path)))
    ns = values(grid_rows, attr, exp, p)
    return Part(tables=(grid_t, skip_t, attr_t), figures=figs, values=ns)


def values(grid_rows: list[GridRow], attr: list[AttrRow], exp, p: Settings) -> dict:
    """The named numbers of the what-if prose (experiments/blackwell-whatif.yaml)."""
    a = p.attribution
    s = {(r.model, r.gpu, r.format): r for r in grid_rows if r.s is not None}
    comps = []
    for hw in exp.grid.hardware:
        for d in exp.grid.dtype:
            pairs = [(r, s[(m, a.base, a.dtype)]) for (m, h, f), r in s.items()
                     if (h, f) == (hw, d) != (a.base, a.dtype) and (m, a.base, a.dtype) in s]
            if pairs:
                comps.append(dict(hw=hw, d=d, up=sum(r.s > b.s for r, b in pairs), n=len(pairs),
                                  au=sum(r.advantage > b.advantage for r, b in pairs),
                                  mean=float(np.mean([r.s - b.s for r, b in pairs]))))
    ran = [x for x in attr if x.s is not None]
    one = [x for x in ran if x.group == "one change"]
    top = max(one, key=lambda x: abs(x.ds)) if one else None
    full, four = (next((x for x in ran if x.group == grp), None) for grp in ("target", "4-bit"))

    def change(x):  # the spec group a one-change row names
        return x.label.split(" + ")[-1].replace(a.target + " ", "")

    hws = [load_hardware(h) for h in exp.grid.hardware]
    whatif = [h.label for h in hws if h.what_if]
    four_ran = {r.gpu for r in grid_rows if r.format == a.four_bit and r.s is not None}
    no_fp4 = [h.name for h in hws if h.name in four_ran and a.four_bit not in h.kernels.classes["moe"]]
    others = [load_hardware(h) for h in exp.grid.hardware if h != a.base][:2]
    sg = [{(r.model, r.format): r.s for r in grid_rows if r.gpu == h.name and r.s is not None} for h in others]
    return dict(
        a=a, comps=comps, full=full, four=four, top=top, top_change=change(top) if top else "",
        four_more=bool(four and full and four.ds > full.ds), base=attr[0],
        hyp=next((x for x in ran if x.group == "hypothetical" and x.label.startswith(a.target)), None),
        one=[{"c": change(x), "ds": x.ds} for x in one],
        l2=(l2 := next((x.ds for x in one if change(x).startswith("L2")), 0.0)),
        l2_abs=abs(l2),
        reverted=[{"c": x.label.split(" with ")[-1].replace(a.base + " ", ""), "ds": x.ds} for x in ran
                  if x.group == "one reverted"], hyps=[x._asdict() for x in ran if x.group == "hypothetical"],
        whatif=whatif, no_fp4=no_fp4, many_whatif=len(whatif) > 1, many_nofp4=len(no_fp4) > 1,
        four_gain=four.ds - full.ds if four and full else 0.0, target_whatif=load_hardware(a.target).what_if,
        bw_ratio=load_hardware(a.target).hbm_bandwidth / load_hardware(a.base).hbm_bandwidth,
        assumed=[f"{h.name} {k.split('.')[-1]}" for h in hws for k, pv in h.provenance.items()
                 if pv.source == "assumed" and k.split(".")[0] in ("memory", "cache", "compute", "interconnect")],
        kinds=[{"n": h.name, "what_if": h.what_if, "g": h.grounding, "src": h.grounding.split(":")[-1]} for h in hws],
        groundings=[{"h": h, "g": load_hardware(h).grounding} for h in exp.grid.hardware], others=len(others) > 1,
        oa=others[0].name if others else "", ob=others[-1].name if others else "",
        diffs=[{"label": label, "x": getattr(others[0], f) / sc, "y": getattr(others[1], f) / sc, "unit": unit}
               for f, label, sc, unit in FIELDS if getattr(others[0], f) != getattr(others[1], f)]
        + [{"label": f"{d} peak", "x": others[0].peak_flops.get(d, 0) / 1e12, "y": others[1].peak_flops.get(d, 0)
            / 1e12, "unit": "TFLOPS"} for d in sorted(set(others[0].peak_flops) | set(others[1].peak_flops))
           if others[0].peak_flops.get(d) != others[1].peak_flops.get(d)] if len(others) > 1 else [],
        gap=max((abs(sg[0][k] - sg[1][k]) for k in sg[0] if k in sg[1]), default=float("nan")) if len(sg) > 1
        else 0.0)


FIELDS = (("hbm_bandwidth", "HBM bandwidth", 1e12, "TB/s"), ("hbm_capacity", "HBM capacity", 1e9, "GB"),
          ("l2_size", "L2", 1e6, "MB"), ("l2_bandwidth", "L2 bandwidth", 1e12, "TB/s"),
          ("link_bandwidth", "NVLink", 1e9, "GB/s"))
