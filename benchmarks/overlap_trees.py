"""Draft trees: accuracy of the tree prediction against a synthetic tree router, speed, and the MoE-Spec comparison.

    python benchmarks/overlap_trees.py [--out benchmarks/results/overlap_trees.md]

Accuracy: the router of :mod:`simulator.overlap.synth_tree` (E=64, k=8, hidden 32, uniform popularity); its lag
statistics o(1..4) are measured on a chain trace of the same router (2000 sequences x 256 tokens) and fed to the
tree prediction with uniform popularity (the router is calibrated uniform); the Monte-Carlo count draws 8000 trees
per shape. Speed: wall time of a cold fit (caches cleared). MoE-Spec: OLMoE-1B-7B (64 experts, top-8) from its
public adjacent-token overlap only, with and without an assumed persistent component.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from simulator.overlap import OverlapStats, Persistent, fit_persistent, full_tree, layer_stats, predict_tree
from simulator.overlap.synth_tree import route_tree, router_trace, tree_empirical_unique, tree_router

E, K = 64, 8
SHAPES = [(2, 2, 2), (4, 2, 1), (8,), (2, 2, 2, 2), (2, 2, 2, 2, 2)]
SETTINGS = [(0.5, 0.0), (0.8, 0.0), (0.5, 0.3)]  # (persistence ρ, persistent share c)
BATCHES = (1, 4)


def accuracy(lines: list) -> dict:
    errors: dict = {}
    rows = []
    for rho, ctx in SETTINGS:
        router = tree_router(E, K, persistence=rho, context=ctx, seed=1)
        trace = router_trace(router, 2000, 256, seed=2)
        overlaps = layer_stats(trace, 0, max_lag=4).overlaps
        stats = OverlapStats(np.full(E, K / E), K, overlaps)
        pers = fit_persistent(trace) if ctx else None
        for shape in SHAPES:
            parents = full_tree(shape)
            routing = route_tree(router, parents, 8000, seed=3)
            preds = {m: predict_tree(stats, parents, list(BATCHES), method=m) for m in ("ipf", "stationary")}
            if pers is not None:
                preds["ipf+persistent"] = predict_tree(stats, parents, list(BATCHES), method="ipf", persistent=pers)
            for i, b in enumerate(BATCHES):
                mc, se = tree_empirical_unique(routing, E, b)
                cells = []
                for m, p in preds.items():
                    u = float(np.atleast_1d(p.unique_experts)[i])
                    err = u / mc - 1
                    errors.setdefault((rho, ctx, m), []).append(err)
                    cells.append(f"{u:.2f} ({100 * err:+.1f}%)")
                ind = float(np.atleast_1d(preds["ipf"].independent)[i])
                rows.append(f"| ρ={rho}, c={ctx} | {','.join(map(str, shape))} | {len(parents)} | {b} | "
                            f"{mc:.2f} ± {se:.2f} | " + " | ".join(cells + ["—"] * (3 - len(cells))) +
                            f" | {ind:.2f} |")
            print(f"accuracy ρ={rho} c={ctx} {shape}", file=sys.stderr)
        if pers is not None:
            lines.append(f"- ρ={rho}, c={ctx}: measured o(1..4) = {', '.join(f'{o:.3f}' for o in overlaps)}; "
                         f"fit_persistent: floor {pers.floor:.3f}, share {pers.share:.3f}")
        else:
            lines.append(f"- ρ={rho}, c={ctx}: measured o(1..4) = {', '.join(f'{o:.3f}' for o in overlaps)}")
    lines += ["", "| router | tree | nodes | B | Monte-Carlo ± s.e. | ipf | stationary | ipf + persistent | "
              "independent |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"] + rows
    return errors


def speed(lines: list) -> None:
    from simulator.overlap.maxent.tree_ipf import tree_junction as tj

    cohere = OverlapStats.from_overlaps(128, 8, (0.381, 0.329, 0.301, 0.299), "skew:0.118")
    uni = OverlapStats(np.full(E, K / E), K, (0.572, 0.436, 0.352, 0.294))
    lines += ["| statistics | tree | nodes | method | lags used | time (s) |", "|---|---|---:|---|---:|---:|"]
    for label, stats in (("Cohere 128x8 (skew 0.118, 128 distinct experts)", cohere),
                         ("uniform 64x8 (1 distinct expert)", uni)):
        for shape in ((2, 2, 2, 2, 2), (4, 4, 3), (2,) * 7, (4, 4, 4, 3)):
            parents = full_tree(shape)
            for method in ("auto", "ipf"):
                if method == "ipf" and (label.startswith("Cohere") and len(parents) > 40):
                    continue
                tj.cache_clear()
                t0 = time.perf_counter()
                res = predict_tree(stats, parents, 1, method=method)
                dt = time.perf_counter() - t0
                lines.append(f"| {label} | {','.join(map(str, shape))} | {len(parents)} | {res.method} | "
                             f"{res.lags_used} | {dt:.3f} |")
                print(f"speed {label[:6]} {shape} {method} {dt:.2f}s", file=sys.stderr)


def moe_spec(lines: list) -> None:
    o1 = 0.418
    stats = OverlapStats.from_overlaps(E, K, (o1,))
    sizes = {31: (2, 2, 2, 2), 255: (2,) * 7}
    measured = {31: 39, 255: 54}
    lines += ["| tree | nodes | MoE-Spec measured | independent | max-ent, lag 1 only | + persistent f=0.20 | "
              "f=0.25 | f=0.30 | f=0.35 |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, shape in sizes.items():
        parents = full_tree(shape)
        base = predict_tree(stats, parents)
        cells = [f"{float(base.unique_experts):.1f}"]
        for f in (0.20, 0.25, 0.30, 0.35):
            cells.append(f"{float(predict_tree(stats, parents, persistent=Persistent(f)).unique_experts):.1f}")
        lines.append(f"| binary, depth {len(shape)} | {n} | {measured[n]} | {float(base.independent):.1f} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Working-set share h for the pure working set (cold experts unused): h = (k/E)/f = "
              + ", ".join(f"{0.125 / f:.2f} at f={f}" for f in (0.20, 0.25, 0.30, 0.35)) + ".", ""]
    lines += ["Same floors with a smaller hot set, share h/2 (cold experts then keep part of their popularity):", "",
              "| nodes | f=0.20 | f=0.25 | f=0.30 | f=0.35 |", "|---:|---:|---:|---:|---:|"]
    for n, shape in sizes.items():
        parents = full_tree(shape)
        cells = []
        for f in (0.20, 0.25, 0.30, 0.35):
            share = 0.5 * (K / E) / f
            cells.append(f"{float(predict_tree(stats, parents, persistent=Persistent(f, share)).unique_experts):.1f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/overlap_trees.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    acc: list = []
    errors = accuracy(acc)
    spd: list = []
    speed(spd)
    spec: list = []
    moe_spec(spec)
    summary = ["| router | predictor | mean abs error | worst |", "|---|---|---:|---:|"]
    for (rho, ctx, m), errs in errors.items():
        a = np.abs(errs)
        summary.append(f"| ρ={rho}, c={ctx} | {m} | {100 * a.mean():.1f}% | {100 * a.max():.1f}% |")
    text = ["# Draft trees: accuracy, speed, MoE-Spec comparison", "",
            "Generated by `python benchmarks/overlap_trees.py` in "
            f"{time.perf_counter() - t0:.0f} s. Tree shapes B1,B2,..: the root, B1 children, each with B2 children, "
            "… (docs/MODEL.md §2.15). Errors are prediction / Monte-Carlo − 1 over the shapes and batch sizes "
            f"{', '.join(map(str, BATCHES))}.", "",
            "## Accuracy against the synthetic tree router", "", *summary, "", "Statistics:", "", *acc, "",
            "## Speed (one cold fit, this machine)", "", *spd, "",
            "## MoE-Spec comparison (OLMoE-1B-7B, 64 experts, top-8)", "", *spec, ""]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(text))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
