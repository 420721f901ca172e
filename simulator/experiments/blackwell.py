"""``blackwell-whatif``: the targets on other GPUs (spec-derived what-if profiles) and formats, and an attribution
of the change by variants that alter one thing at a time (HBM bandwidth, L2, peak FLOP/s, NVLink, HBM capacity,
fixed costs, 4-bit experts), from the base GPU towards the target GPU and back."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from ..cost.whatif import derive_kernels
from ..specs.catalog import load_hardware
from ..specs.dtypes import FORMATS
from ..specs.kernels import Collective, KernelClass, Kernels
from . import plots
from .outcome import Figure, Outcome, Table
from .runs import at_gamma, best, fits, price, try_resolve
from .schema import Experiment, Target, check_name, seq

TIME_PARAMS = ("per_local_expert", "per_token", "per_parallel")


@dataclass(frozen=True)
class Params:
    hardware: tuple[str, ...]
    dtypes: tuple[str, ...]
    compare_from: int  # advantage = S(smallest batch) − max S over batches ≥ compare_from
    ratio_draft_len: int
    model: str
    base: str
    target: str
    dtype: str
    four_bit: str
    fixed_cost_scale: float


def read(r, obj, path) -> Params:
    w = r.mapping(obj, path, ("hardware", "dtypes", "compare_from", "ratio_draft_len", "attribution"),
                  ("hardware", "dtypes", "attribution"))
    hws = seq(r, w, "hardware", path, str)
    for i, h in enumerate(hws):
        check_name(r, f"{path}.hardware[{i}]", h, "hardware")
    dts = seq(r, w, "dtypes", path, str)
    for i, d in enumerate(dts):
        r.string({f"dtypes[{i}]": d}, f"dtypes[{i}]", path, options=FORMATS)
    ap = r.join(path, "attribution")
    a = r.mapping(w["attribution"], ap, ("model", "base", "target", "dtype", "four_bit", "fixed_cost_scale"),
                  ("model", "base", "target", "dtype", "four_bit", "fixed_cost_scale"))
    return Params(hws, dts, r.integer(w, "compare_from", path, low=2, default=8),
                  r.integer(w, "ratio_draft_len", path, low=1, high=64, default=3),
                  check_name(r, f"{ap}.model", r.string(a, "model", ap), "model"),
                  check_name(r, f"{ap}.base", r.string(a, "base", ap), "hardware"),
                  check_name(r, f"{ap}.target", r.string(a, "target", ap), "hardware"),
                  r.string(a, "dtype", ap, options=FORMATS), r.string(a, "four_bit", ap, options=FORMATS),
                  r.number(a, "fixed_cost_scale", ap, low=0.0, high=10.0))


def check(r, exp: Experiment) -> None:
    p = exp.params
    if p.ratio_draft_len not in exp.grid.draft_len:
        raise r.fail("hardware_whatif.ratio_draft_len", "is not in grid.draft_len", "add it to the grid")
    if not any(b >= p.compare_from for b in exp.grid.batch):
        raise r.fail("hardware_whatif.compare_from", f"is {p.compare_from}, above every batch of the grid",
                     "lower it or extend grid.batch")


def scale_fixed(k: Kernels, f: float) -> Kernels:
    """Every fixed cost of a profile (kernel floors, per-expert/token/parallel terms, collective latencies,
    per-step costs) multiplied by ``f``."""
    def kc(c: KernelClass) -> KernelClass:
        params = {n: (v * f if n in TIME_PARAMS else v) for n, v in c.params.items()}
        return replace(c, fixed=c.fixed * f, params=MappingProxyType(params))

    classes = {n: MappingProxyType({v: kc(c) for v, c in vs.items()}) for n, vs in k.classes.items()}
    cols = {n: Collective(c.latency * f, c.latency_per_gpu * f, c.efficiency,
                          None if c.large_latency is None else c.large_latency * f, c.large_efficiency)
            for n, c in k.collectives.items()}
    return replace(k, classes=MappingProxyType(classes), collectives=MappingProxyType(cols),
                   step=MappingProxyType({n: v * f for n, v in k.step.items()}))


def variants(base, target, p: Params) -> list[tuple[str, str, object, str]]:
    """(group, label, hardware profile, dtype): one change at a time from ``base`` towards ``target`` and from
    ``target`` back to ``base``. HBM bandwidth changes re-derive the byte-indexed kernel curves by the what-if rule."""
    def bw(h, src):
        h2 = h.with_changes(hbm_bandwidth=src.hbm_bandwidth)
        return h2.with_changes(kernels=derive_kernels(h2, base))

    changes = {
        "HBM bandwidth": bw,
        "L2 (size, partitions, bandwidth)": lambda h, s: h.with_changes(l2_size=s.l2_size,
                                                                         l2_partitions=s.l2_partitions,
                                                                         l2_bandwidth=s.l2_bandwidth),
        "peak FLOP/s": lambda h, s: h.with_changes(peak_flops=s.peak_flops),
        "NVLink bandwidth": lambda h, s: h.with_changes(link_bandwidth=s.link_bandwidth),
        "HBM capacity": lambda h, s: h.with_changes(hbm_capacity=s.hbm_capacity),
    }
    f = p.fixed_cost_scale
    out = [("base", f"{base.name} (base)", base, p.dtype)]
    out += [("one change", f"{base.name} + {target.name} {n}", fn(base, target), p.dtype) for n, fn in changes.items()]
    out.append(("hypothetical", f"{base.name}, fixed costs x{f:g}",
                base.with_changes(kernels=scale_fixed(base.kernels, f)), p.dtype))
    out.append(("target", f"{target.name} (all spec changes)", target, p.dtype))
    out += [("one reverted", f"{target.name} with {base.name} {n}", fn(target, base), p.dtype)
            for n, fn in changes.items()]
    out.append(("hypothetical", f"{target.name}, fixed costs x{f:g}",
                target.with_changes(kernels=scale_fixed(target.kernels, f)), p.dtype))
    out.append(("4-bit", f"{target.name} + 4-bit experts ({p.four_bit})", target, p.four_bit))
    return out


@dataclass(frozen=True)
class Metrics:
    s_low: float
    peak_batch: int
    advantage: float
    ratio: float
    s_at: dict


def metrics(res, p: Params) -> Metrics:
    _, s = best(res)
    b = res.batch
    hi = b >= p.compare_from
    j = at_gamma(res, p.ratio_draft_len)
    return Metrics(float(s[0]), int(b[int(np.argmax(s))]), float(s[0] - s[hi].max()),
                   float(1 / res.verify_decode_ratio[j, 0]), {int(x): float(y) for x, y in zip(b, s, strict=True)})


def _grid_rows(exp: Experiment):
    p, g = exp.params, exp.grid
    rows, curves, skipped = [], {}, []
    for t in exp.targets:
        for h in p.hardware:
            for d in p.dtypes:
                r, err = try_resolve(t, exp, hardware=h, dtype=d)
                if r is not None:
                    ok, why = fits(r, g.batch, g.draft_len, g.context)
                    err = "" if ok else why
                if err:
                    skipped.append((t.model, h, d, _short_reason(err)))
                    continue
                m = {}
                for mode in exp.modes:
                    m[mode] = metrics(price(r, ok, g.draft_len, g.context, mode), p)
                    curves[(t.model, h, d, mode)] = m[mode].s_at
                rf, pr = m.get("refined"), m.get("prior")
                note = "" if len(ok) == len(g.batch) else f"batches above {ok[-1]:g} dropped"
                rows.append((t.model, h, d, r.label, pr.s_low if pr else None, rf.s_low if rf else None,
                             rf.peak_batch if rf else None, rf.advantage if rf else None, rf.ratio if rf else None,
                             pr.ratio if pr else None, rf.s_at.get(16) if rf else None, note))
    return rows, curves, skipped


def _short_reason(err: str) -> str:
    """The part of a deployment error that says why (after the last ': ' of a nested message), one clause."""
    tail = err.rsplit("': ", 1)[-1] if "': " in err else err
    return tail.split("; ")[0][:140]


def _attribution(exp: Experiment):
    p, g = exp.params, exp.grid
    base, target = load_hardware(p.base), load_hardware(p.target)
    t = Target(model=p.model, hardware=p.base)
    rows = []
    for group, label, hw, dtype in variants(base, target, p):
        r, err = try_resolve(t, exp, hardware=hw, dtype=dtype)
        if r is None:
            rows.append((group, label, dtype, None, None, None, None, None, err[:160]))
            continue
        ok, why = fits(r, g.batch, g.draft_len, g.context)
        res = {m: metrics(price(r, ok, g.draft_len, g.context, m), p) for m in exp.modes}
        rf = res["refined"]
        rows.append((group, label, dtype, rf.s_low, rf.advantage, rf.ratio, rf.peak_batch,
                     res["prior"].s_low if "prior" in res else None, ""))
    b0 = rows[0]
    out = []
    for x in rows:
        d = (None, None, None) if x[3] is None else (x[3] - b0[3], x[4] - b0[4], x[5] - b0[5])
        out.append((*x[:6], *d, *x[6:]))
    return out


def run(exp: Experiment, ctx) -> Outcome:
    p, g = exp.params, exp.grid
    grid_rows, curves, skipped = _grid_rows(exp)
    b0 = g.batch[0]
    grid_t = Table("grid", f"Targets × GPUs × formats (refined unless marked; S = best speedup, advantage = S(B={b0}) "
                   f"− max S over B ≥ {p.compare_from})",
                   ("model", "GPU", "format", "deployment", f"prior S(B={b0})", f"refined S(B={b0})",
                    "refined peak B", "low-batch advantage", f"refined T_dec/T_ver (γ={p.ratio_draft_len})",
                    f"prior T_dec/T_ver (γ={p.ratio_draft_len})", "refined S(B=16)", "note"),
                   tuple(grid_rows), ("", "", "", "", "{:.2f}", "{:.2f}", "{:d}", "{:+.2f}", "{:.3f}", "{:.3f}",
                                      "{:.2f}", ""))
    skip_t = Table("not_run", "Combinations that cannot run", ("model", "GPU", "format", "why"), tuple(skipped))
    attr = _attribution(exp)
    attr_t = Table("attribution", f"One change at a time: {p.model}, refined (Δ against {p.base} {p.dtype})",
                   ("group", "variant", "format", f"S(B={b0})", "advantage", "T_dec/T_ver", f"Δ S(B={b0})",
                    "Δ advantage", "Δ T_dec/T_ver", "peak B", f"prior S(B={b0})", "note"), tuple(attr),
                   ("", "", "", "{:.3f}", "{:+.3f}", "{:.3f}", "{:+.3f}", "{:+.3f}", "{:+.3f}", "{:d}", "{:.2f}", ""))
    figs = (Figure("low_batch", f"Refined speedup at B={b0} per target, GPU and format",
                   lambda path: _plot_bars(grid_rows, exp, path)),
            Figure("attribution", f"One-change-at-a-time attribution for {p.model} (refined S at B={b0})",
                   lambda path: _plot_attr(attr, exp, path)))
    keys, findings = _findings(grid_rows, attr, exp)
    settings = (f"GPUs {', '.join(p.hardware)} (Blackwell profiles are spec-derived what-ifs: the H100 kernel-curve "
                "shapes rescaled by each GPU's bandwidth, H100 fixed costs kept; see docs/MODEL.md §3.8)",
                f"formats {', '.join(p.dtypes)}; deployment by the sweep's default rule with the format forced",
                f"drafter {exp.speculation.drafter}, acceptance {exp.speculation.acceptance.label}; batch "
                f"{list(g.batch)}, draft length {list(g.draft_len)} (best per batch), context {g.context}",
                f"fixed-cost variant: every fixed cost x{p.fixed_cost_scale:g}, hypothetical (no source says how "
                "Blackwell launch floors compare with Hopper's)")
    return Outcome(exp.name, exp.title, exp.kind, exp.description, exp.question, keys, (grid_t, skip_t, attr_t),
                   figs, findings, settings)


def _findings(grid_rows, attr, exp):
    p = exp.params
    refined = {(r[0], r[1], r[2]): r[5] for r in grid_rows if r[5] is not None}
    adv = {(r[0], r[1], r[2]): r[7] for r in grid_rows if r[7] is not None}
    base_key = (p.base, p.dtype)
    comps = []
    for hw in p.hardware:
        for d in p.dtypes:
            if (hw, d) == base_key:
                continue
            pairs = [(refined[(m, hw, d)], refined[(m, *base_key)], adv[(m, hw, d)], adv[(m, *base_key)])
                     for (m, h2, d2) in refined if (h2, d2) == (hw, d) and (m, *base_key) in refined]
            if pairs:
                up = sum(a > b for a, b, _, _ in pairs)
                adv_up = sum(c > e for _, _, c, e in pairs)
                mean = float(np.mean([a - b for a, b, _, _ in pairs]))
                comps.append((hw, d, up, adv_up, len(pairs), mean))
    one = [x for x in attr if x[0] == "one change" and x[3] is not None]
    top = max(one, key=lambda x: abs(x[6])) if one else None
    full = next((x for x in attr if x[0] == "target"), None)
    four = next((x for x in attr if x[0] == "4-bit"), None)
    hyp = next((x for x in attr if x[0] == "hypothetical" and x[1].startswith(p.target)), None)
    keys = tuple((f"{hw} {d} vs {p.base} {p.dtype}: refined S(B=1) up / advantage up",
                  f"{up} / {au} of {n} targets (mean ΔS {mean:+.2f})") for hw, d, up, au, n, mean in comps)
    if full and full[3] is not None:
        keys += ((f"{p.model}: {p.base} → {p.target} ΔS(B=1)", f"{full[6]:+.3f}"),)
    if top:
        keys += ((f"largest single spec change ({p.model})", f"{top[1]}: ΔS(B=1) {top[6]:+.3f}"),)
    if four and four[3] is not None:
        keys += ((f"{p.target} + 4-bit experts ΔS(B=1)", f"{four[6]:+.3f}"),)
    s1 = (f"Does the low-batch advantage grow? Against {p.base} in {p.dtype} (targets that run there): " + "; ".join(
        f"on {hw} in {d} the refined speedup at the smallest batch is higher for {up} of {n} targets (mean change "
        f"{mean:+.2f}) and the low-batch advantage grows for {au}" for hw, d, up, au, n, mean in comps)
        + ". " + _profile_diffs(p, grid_rows))
    def dS(group):
        return [(x[1], x[6]) for x in attr if x[0] == group and x[3] is not None]

    base_row = attr[0]
    s2 = (f"Attribution for {p.model} (refined, change of the speedup at the smallest batch against {p.base} "
          f"{p.dtype}, S = {base_row[3]:.2f}, T_dec/T_ver = {base_row[5]:.3f}): "
          + (f"all of {p.target}'s spec changes {full[6]:+.3f} (T_dec/T_ver {full[5]:.3f}); " if full and full[3]
             is not None else "")
          + "one change from the base: " + ", ".join(f"{n.split(' + ')[-1].replace(p.target + ' ', '')} {v:+.3f}"
                                                     for n, v in dS("one change"))
          + f"; one change reverted from {p.target}: "
          + ", ".join(f"without {n.split(' with ')[-1].replace(p.base + ' ', '')} {v:+.3f}"
                      for n, v in dS("one reverted"))
          + (f"; {p.target} with 4-bit experts ({p.four_bit}) {four[6]:+.3f}, i.e. {four[6] - full[6]:+.3f} over "
             f"{p.target} in {p.dtype} (T_dec/T_ver {four[5]:.3f})" if four and full and four[3] is not None
             and full[3] is not None else "")
          + "; hypothetical fixed costs: " + ", ".join(f"{n} {v:+.3f}" for n, v in dS("hypothetical")) + ". "
          + (f"The change that drives it is **{top[1].split(' + ')[-1].replace(p.target + ' ', '')}**: the what-if "
             "rule keeps H100's fixed costs, so more bandwidth shrinks only the byte-proportional part of both passes "
             "and the verify pass, whose extra cost is mostly expert bytes, moves closer to a decode step (the "
             "fixed-cost amortisation mechanism, amplified); 4-bit experts act the same way by halving expert bytes. "
             "L2 size has no effect at batch 1 because the model charges no weight re-reads below one GEMM tile "
             "(128 rows) per expert, so there is nothing for a larger L2 to absorb." if top else ""))
    ratio = load_hardware(p.target).hbm_bandwidth / load_hardware(p.base).hbm_bandwidth
    s3 = ("How sure: these are what-if predictions, never checked against Blackwell measurements. The what-if rule "
          f"keeps {p.base}'s fixed costs (launch floors, collective latencies, host overhead); with {ratio:.1f}× the "
          "bandwidth those fixed costs become a larger share of a step, which is why the hypothetical fixed-cost "
          "variant is shown"
          + (f" (with every fixed cost x{p.fixed_cost_scale:g} on {p.target}, the gain over {p.base} is "
             f"{hyp[6]:+.3f} instead of {full[6]:+.3f})" if hyp and full and hyp[3] is not None and full[3] is not None
             else "")
          + ". nvfp4 kernels use the fp8_block MoE kernel parameters (no fp4 measurement exists), and the B300 L2 "
            "size is assumed equal to B200's.")
    return keys, (s1, s2, s3)


FIELDS = (("hbm_bandwidth", "HBM bandwidth", 1e12, "TB/s"), ("hbm_capacity", "HBM capacity", 1e9, "GB"),
          ("l2_size", "L2", 1e6, "MB"), ("l2_bandwidth", "L2 bandwidth", 1e12, "TB/s"),
          ("link_bandwidth", "NVLink", 1e9, "GB/s"))


def _profile_diffs(p: Params, grid_rows) -> str:
    """How the non-base GPUs of the grid differ from each other (spec fields that enter the model)."""
    others = [h for h in p.hardware if h != p.base]
    if len(others) < 2:
        return ""
    a, b = load_hardware(others[0]), load_hardware(others[1])
    diffs = [f"{label} {getattr(a, f) / sc:.4g} vs {getattr(b, f) / sc:.4g} {unit}" for f, label, sc, unit in FIELDS
             if getattr(a, f) != getattr(b, f)]
    diffs += [f"{d} peak {a.peak_flops.get(d, 0) / 1e12:.0f} vs {b.peak_flops.get(d, 0) / 1e12:.0f} TFLOPS"
              for d in sorted(set(a.peak_flops) | set(b.peak_flops)) if a.peak_flops.get(d) != b.peak_flops.get(d)]
    sa = {(r[0], r[2]): r[5] for r in grid_rows if r[1] == a.name and r[5] is not None}
    sb = {(r[0], r[2]): r[5] for r in grid_rows if r[1] == b.name and r[5] is not None}
    gap = max((abs(sa[k] - sb[k]) for k in sa if k in sb), default=float("nan"))
    return (f"{b.name} differs from {a.name} in: {'; '.join(diffs) or 'nothing the model uses'}; their refined "
            f"speedups at the smallest batch differ by at most {gap:.3f}.")


def _plot_bars(grid_rows, exp, path) -> str:
    p = exp.params
    models = list(dict.fromkeys(r[0] for r in grid_rows))
    vals = {(r[0], r[1], r[2]): r[5] for r in grid_rows}
    combos = [(h, d) for h in p.hardware for d in p.dtypes if any(vals.get((m, h, d)) for m in models)]
    fig, (ax,) = plots.figure(1, panel=(max(8.0, 1.1 * len(models)), 4.2),
                              title=f"Refined speedup at B={exp.grid.batch[0]} (best draft length)")
    width = 0.8 / len(combos)
    for k, (h, d) in enumerate(combos):
        ys = [vals.get((m, h, d)) for m in models]
        xs = [i + k * width for i, y in enumerate(ys) if y is not None]
        ax.bar(xs, [y for y in ys if y is not None], width, color=plots.PALETTE[k % len(plots.PALETTE)],
               label=f"{h} {d}")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))])
    ax.set_xticklabels(models, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("speedup (x)", fontsize=8)
    ax.axhline(1.0, color="0.5", linewidth=0.7, linestyle=":")
    ax.grid(True, axis="y", alpha=0.3)
    top = max((v for v in vals.values() if v is not None), default=1.0)
    ax.set_ylim(0, top * 1.22)
    ax.legend(fontsize=7, ncol=len(combos), loc="upper center")
    fig.subplots_adjust(bottom=0.25)
    return plots.save(fig, path)


def _plot_attr(attr, exp, path) -> str:
    rows = [x for x in attr if x[3] is not None]
    fig, (ax,) = plots.figure(1, panel=(8.0, 0.32 * len(rows) + 1.2),
                              title=f"{exp.params.model}: change of refined S(B={exp.grid.batch[0]}) against "
                                    f"{exp.params.base} {exp.params.dtype}")
    ys = np.arange(len(rows))[::-1]
    ax.barh(ys, [x[6] for x in rows], color=["#1b9e77" if x[6] >= 0 else "#d95f02" for x in rows])
    ax.set_yticks(ys)
    ax.set_yticklabels([x[1] for x in rows], fontsize=7)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_xlabel("Δ speedup at the smallest batch", fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    fig.subplots_adjust(left=0.45)
    return plots.save(fig, path)
