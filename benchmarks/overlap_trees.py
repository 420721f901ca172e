"""Draft trees: accuracy of the tree models against synthetic routers of two kinds, MoE-Spec's published unions as a
check with nothing fitted, and speed (library and CLI).

    python benchmarks/overlap_trees.py [--out benchmarks/results/overlap_trees.md]

Accuracy: each router's lag overlaps o(1..4) and per-expert popularity are measured on a chain trace of the same
router (400 sequences x 128 tokens) and are all the prediction is given (pooled overlaps, lift rule, the trace's
popularity); the truth is a Monte-Carlo count over independent draws of the tree. Routers (E = 64, k = 8, skewed
popularity): the AR(1) Gaussian tree router of simulator.traces.synth_tree (hidden state on the tree, top-k of a
linear read-out; ρ = 0.5, 0.8, 0.95, with and without a per-request share) and the set-Markov router (no Gaussian
latent: each node keeps its parent's experts with a Gumbel-rank bonus, plus a per-request working set).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from simulator.overlap import OverlapStats, clear_tree_cache, full_tree, predict_tree
from simulator.traces import layer_stats
from simulator.traces.synth_tree import route_tree, router_trace, set_router, tree_empirical_unique, tree_router

E, K, SKEW = 64, 8, 0.2
ROUTERS = [
    ("AR(1) ρ=0.5", lambda: tree_router(E, K, persistence=0.5, skew=SKEW, seed=1)),
    ("AR(1) ρ=0.8", lambda: tree_router(E, K, persistence=0.8, skew=SKEW, seed=1)),
    ("AR(1) ρ=0.95", lambda: tree_router(E, K, persistence=0.95, skew=SKEW, seed=1)),
    ("AR(1) ρ=0.8, c=0.3", lambda: tree_router(E, K, persistence=0.8, context=0.3, skew=SKEW, seed=1)),
    ("set-Markov stick 2, WS 16", lambda: set_router(E, K, stick=2.0, boost=1.5, working=16, skew=SKEW)),
    ("set-Markov stick 3, no WS", lambda: set_router(E, K, stick=3.0, boost=0.0, working=0, skew=SKEW)),
]
SHAPES = [(2, 2, 2), (4, 2, 1), (2, 2, 2, 2), (3, 3, 2), (2, 2, 2, 2, 2), (4, 4, 3), (2,) * 7]
BATCHES = (1, 4)
METHODS = ("auto", "latent", "stationary", "ipf")  # auto: the default (latent, or stationary on binary memory)
IPF_MAX_NODES = 31  # ipf takes seconds per fit beyond this (benchmarks/results history) and refuses wide cliques
LAGS = 4
MOE_SPEC = {31: 39, 255: 54}  # MoE-Spec (arXiv 2602.16052) on OLMoE-1B-7B; docs/sources/published.md addendum
OLMOE_LAG1 = 0.418  # OLMoE adjacent-token overlap (unverified, docs/sources/published.md)
COHERE = (0.381, 0.329, 0.301, 0.299)  # routing/cohere-128x8.yaml: the study's reference long-lag shape


def accuracy(lines: list) -> dict:
    errors: dict = {}
    rows = []
    for name, make in ROUTERS:
        router = make()
        trace = router_trace(router, 400, 128, seed=2)
        measured = layer_stats(trace, 0, max_lag=LAGS)
        stats = OverlapStats(measured.popularity, K, measured.overlaps)
        lines.append(f"- {name}: Σπ²/k = {stats.skew:.3f}, o(1..{LAGS}) = "
                     + ", ".join(f"{o:.3f}" for o in measured.overlaps))
        for shape in SHAPES:
            parents = full_tree(shape)
            n = len(parents)
            routing = route_tree(router, parents, 3000 if n < 200 else 1500, seed=3)
            preds = {}
            for m in METHODS:
                if m == "ipf" and n > IPF_MAX_NODES:
                    continue
                try:
                    preds[m] = predict_tree(stats, parents, list(BATCHES), method=m)
                except Exception as exc:  # ipf refuses trees whose cliques would be too large
                    print(f"  {m} on {shape}: {exc}", file=sys.stderr)
            for i, b in enumerate(BATCHES):
                mc, se = tree_empirical_unique(routing, E, b)
                cells = []
                for m in METHODS:
                    if m not in preds:
                        cells.append("—")
                        continue
                    u = float(np.atleast_1d(preds[m].unique_experts)[i])
                    errors.setdefault((name, m), []).append(u / mc - 1)
                    cells.append(f"{u:.2f} ({100 * (u / mc - 1):+.1f}%)")
                ind = float(np.atleast_1d(preds["latent"].independent)[i])
                cells[0] += f" [{preds['auto'].method}]"
                rows.append(f"| {name} | {','.join(map(str, shape))} | {n} | {b} | {mc:.2f} ± {se:.2f} | "
                            + " | ".join(cells) + f" | {ind:.2f} |")
            print(f"accuracy {name} {shape}", file=sys.stderr)
    lines += ["", "| router | tree | nodes | B | Monte-Carlo ± s.e. | " + " | ".join(METHODS) + " | independent |",
              "|---|---|---:|---:|---:|" + "---:|" * (len(METHODS) + 1)] + rows
    return errors


def moe_spec(lines: list) -> None:
    """OLMoE (64 experts, top-8, uniform popularity assumed) from its adjacent-token overlap alone, and with the
    study's central long-lag assumption (o(d) = o(1)·o_Cohere(d)/o_Cohere(1)); nothing is fitted to 39/54."""
    central = tuple(round(OLMOE_LAG1 * o / COHERE[0], 3) for o in COHERE)
    lines += ["| statistics given | tree | nodes | latent | ipf / stationary (pairwise) | measured | latent error |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for label, lags in (("o(1) = 0.418 only", (OLMOE_LAG1,)), (f"o(1..4) = {', '.join(map(str, central))}", central)):
        stats = OverlapStats.from_overlaps(64, 8, lags)
        for depth, n in ((4, 31), (7, 255)):
            parents = full_tree((2,) * depth)
            lat = float(predict_tree(stats, parents).unique_experts)
            pair = predict_tree(stats, parents, method="stationary" if len(lags) > 1 else "ipf")
            lines.append(f"| {label} | binary, depth {depth} | {n} | {lat:.1f} | {float(pair.unique_experts):.1f} "
                         f"({pair.method}) | {MOE_SPEC[n]} | {100 * (lat / MOE_SPEC[n] - 1):+.1f}% |")


def _random_tree(n: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    return (-1,) + tuple(int(rng.integers(0, v)) for v in range(1, n))


def speed(lines: list) -> None:
    rng = np.random.default_rng(0)
    weights = rng.pareto(1.5, 128) + 0.05
    lags8 = (0.45, 0.38, 0.34, 0.31, 0.3, 0.29, 0.28, 0.28)
    skewed = OverlapStats.from_overlaps(128, 8, lags8, weights)
    uniform = OverlapStats.from_overlaps(128, 8, lags8)
    many = {e: OverlapStats.from_overlaps(e, 8, lags8, rng.pareto(1.5, e) + 0.05) for e in (1024, 4096)}
    trees = [("2,2,2,2", full_tree((2, 2, 2, 2))), ("2^7", full_tree((2,) * 7)), ("4,4,4,3", full_tree((4, 4, 4, 3))),
             ("random 255 (seed 1)", _random_tree(255, 1)), ("random 255 (seed 2)", _random_tree(255, 2)),
             ("path 255", (-1,) + tuple(range(254)))]
    predict_tree(uniform, full_tree((2,)), 1)  # imports and first-call costs outside the timings
    lines += [f"Load average before the runs: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs. 8 lags; "
              "popularity: 128, 1024 or 4096 distinct Pareto weights (capped at 1 where needed) or uniform.", "",
              "| popularity | tree | nodes | cold (s) | new tree, same statistics (s) | cached (s) |",
              "|---|---|---:|---:|---:|---:|"]
    worst = 0.0
    cases = [("128 distinct", skewed, trees), ("uniform", uniform, trees)]
    cases += [(f"{e} distinct (binned)", st, trees[1::2]) for e, st in many.items()]
    for label, stats, shapes in cases:
        for name, parents in shapes:
            cold = []
            for _ in range(3):
                clear_tree_cache()
                t0 = time.process_time()
                predict_tree(stats, parents, 1)
                cold.append(time.process_time() - t0)
            clear_tree_cache()
            predict_tree(stats, full_tree((3,)), 1)  # the statistics' parameters cached
            t0 = time.process_time()
            predict_tree(stats, parents, 1)
            new = time.process_time() - t0
            t0 = time.process_time()
            predict_tree(stats, parents, 4)
            again = time.process_time() - t0
            worst = max(worst, float(np.median(cold)))
            lines.append(f"| {label} | {name} | {len(parents)} | {np.median(cold):.3f} | {new:.3f} | {again:.4f} |")
    lines += ["", f"- Slowest cold prediction (CPU seconds, median of 3): {worst:.3f} s against the target 0.5 s: "
              f"{'met' if worst <= 0.5 else 'missed'}.", ""]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pop.txt")
        np.savetxt(path, weights)
        cmd = [sys.executable, "-m", "simulator", "overlap", "predict", "--experts", "128", "--top-k", "8", "--tree",
               "2,2,2,2", "--overlap", ",".join(map(str, lags8)), "--popularity", path]
        walls, cpus = [], []
        for _ in range(3):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            walls.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    lines.append(f"- The issue's command (`overlap predict --experts 128 --top-k 8 --tree 2,2,2,2 --overlap <8 lags> "
                 f"--popularity <128 weights>`, was ~2.5 min): CPU {np.median(cpus):.2f} s, wall "
                 f"{np.median(walls):.2f} s (median of 3; the target is 1 s; wall time includes waiting for the "
                 "shared CPUs).")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/overlap_trees.md")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    acc: list = []
    errors = accuracy(acc)
    ms: list = []
    moe_spec(ms)
    spd: list = []
    speed(spd)
    summary = ["| router | model | mean abs error | worst | cases |", "|---|---|---:|---:|---:|"]
    strong = {m: [] for m in METHODS}
    for (name, m), errs in errors.items():
        a = np.abs(errs)
        summary.append(f"| {name} | {m} | {100 * a.mean():.1f}% | {100 * a.max():.1f}% | {a.size} |")
        strong[m] += list(a)
    over = [f"- All routers, {m}: mean {100 * np.mean(v):.1f}%, worst {100 * np.max(v):.1f}% over {len(v)} cases "
            f"(targets 6% / 10%)." for m, v in strong.items() if v]
    text = ["# Draft trees: accuracy, MoE-Spec and speed", "",
            f"Generated by `python benchmarks/overlap_trees.py` in {time.perf_counter() - t0:.0f} s. Tree shapes "
            "B1,B2,..: the root, B1 children, each with B2 children, … (docs/MODEL.md §2.15–2.16). Errors are "
            f"prediction / Monte-Carlo − 1 over the shapes and batch sizes {', '.join(map(str, BATCHES))}. Every "
            "prediction is given only the pooled lag overlaps o(1..4) and the per-expert popularity measured on a "
            "chain trace of the router. ipf (pairwise maximum entropy) only up to "
            f"{IPF_MAX_NODES} nodes.", "",
            "## Accuracy against synthetic tree routers (E = 64, k = 8)", "", *summary, "", *over, "",
            "Statistics given:", "", *acc, "",
            "## MoE-Spec (OLMoE-1B-7B, 64 experts, top-8): nothing fitted", "",
            "Tree shapes are not published; full binary trees of 31 and 255 nodes are assumed (with lag 1 only the "
            "pairwise model depends on the node count alone). The second statistics row is the study's central "
            "long-lag assumption (experiments/moe-spec-trees.yaml: o(1) times the long-lag shape of cohere-128x8), "
            "fixed before this model existed.", "", *ms, "",
            "## Speed (this machine; CPU seconds of the process)", "", *spd, ""]
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(text))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
