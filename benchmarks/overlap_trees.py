"""Draft trees: accuracy of the tree prediction against a synthetic tree router, and speed (the MoE-Spec comparison is
the study experiments/moe-spec-trees.yaml, in docs/RESULTS.md).

    python benchmarks/overlap_trees.py [--out benchmarks/results/overlap_trees.md]

Accuracy: the router of :mod:`simulator.overlap.synth_tree` (E=64, k=8, hidden 32, uniform popularity); its lag
statistics o(1..4) are measured on a chain trace of the same router (2000 sequences x 256 tokens) and fed to the
tree prediction with uniform popularity (the router is calibrated uniform); the Monte-Carlo count draws 8000 trees
per shape. Speed: wall time of a cold fit (caches cleared), median of REPEATS runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from simulator.overlap import OverlapStats, fit_persistent, full_tree, layer_stats, predict_tree
from simulator.overlap.synth_tree import route_tree, router_trace, tree_empirical_unique, tree_router

E, K = 64, 8
SHAPES = [(2, 2, 2), (4, 2, 1), (8,), (2, 2, 2, 2), (2, 2, 2, 2, 2)]
SETTINGS = [(0.5, 0.0), (0.8, 0.0), (0.5, 0.3)]  # (persistence ρ, persistent share c)
BATCHES = (1, 4)
REPEATS = 5  # cold runs per auto timing (median reported)


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
    """Cold (caches cleared: junction trees, chain fits) and again (same statistics, another batch size) wall time;
    cold is the median of REPEATS runs (ipf: one run)."""
    from simulator.overlap import tree as tree_module
    from simulator.overlap.maxent.tree_ipf import tree_junction as tj

    cohere = OverlapStats.from_overlaps(128, 8, (0.381, 0.329, 0.301, 0.299), "skew:0.118")
    uni = OverlapStats(np.full(E, K / E), K, (0.572, 0.436, 0.352, 0.294))
    predict_tree(cohere, full_tree((2,)), 1)  # imports and first-call costs outside the timings
    cold: dict = {}
    lines += [f"Load average before the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.", "",
              "| statistics | distinct experts | tree | nodes | method (resolved) | lags used | cold (s) | again (s) |",
              "|---|---:|---|---:|---|---:|---:|---:|"]
    for label, stats, distinct in (("Cohere 128x8 (skew 0.118)", cohere, 128), ("uniform 64x8", uni, 1)):
        for shape in ((2, 2, 2, 2, 2), (4, 4, 3), (2,) * 7, (4, 4, 4, 3)):
            parents = full_tree(shape)
            for method in ("auto", "ipf"):
                if method == "ipf" and (distinct > 1 and len(parents) > 40):
                    continue
                times = []
                for _ in range(REPEATS if method == "auto" else 1):
                    tj.cache_clear()
                    tree_module._Q_CACHE.clear()
                    t0 = time.perf_counter()
                    res = predict_tree(stats, parents, 1, method=method)
                    times.append(time.perf_counter() - t0)
                warm = "—"
                if method == "auto":
                    cold.setdefault(len(parents) > 100, []).append(float(np.median(times)))
                    # again: the same statistics (the chain fit is cached; ipf fits are not)
                    t0 = time.perf_counter()
                    predict_tree(stats, parents, 4, method=method)
                    warm = f"{time.perf_counter() - t0:.3f}"
                lines.append(f"| {label} | {distinct} | {','.join(map(str, shape))} | {len(parents)} | {method} "
                             f"({res.method}) | {res.lags_used} | {float(np.median(times)):.3f} | {warm} |")
                print(f"speed {label[:6]} {shape} {method} {float(np.median(times)):.2f}s", file=sys.stderr)
    lines.append("")
    for big, target in ((False, 0.1), (True, 0.5)):
        worst = max(cold[big])
        lines.append(f"- Default method (auto), {'255–277' if big else '63–69'} nodes: slowest cold median "
                     f"{worst:.3f} s against the target {target} s: {'met' if worst < target else 'missed'}.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/overlap_trees.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    acc: list = []
    errors = accuracy(acc)
    spd: list = []
    speed(spd)
    summary = ["| router | predictor | mean abs error | worst |", "|---|---|---:|---:|"]
    for (rho, ctx, m), errs in errors.items():
        a = np.abs(errs)
        summary.append(f"| ρ={rho}, c={ctx} | {m} | {100 * a.mean():.1f}% | {100 * a.max():.1f}% |")
    text = ["# Draft trees: accuracy and speed", "",
            "Generated by `python benchmarks/overlap_trees.py` in "
            f"{time.perf_counter() - t0:.0f} s. Tree shapes B1,B2,..: the root, B1 children, each with B2 children, "
            "… (docs/MODEL.md §2.15). Errors are prediction / Monte-Carlo − 1 over the shapes and batch sizes "
            f"{', '.join(map(str, BATCHES))}.", "",
            "## Accuracy against the synthetic tree router", "", *summary, "", "Statistics:", "", *acc, "",
            "## Speed (this machine; cold: caches cleared; again: same statistics, another batch size)", "",
            *spd, "",
            "## MoE-Spec comparison", "",
            "In docs/RESULTS.md (study experiments/moe-spec-trees.yaml, analysis tree_unions).", ""]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(text))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
