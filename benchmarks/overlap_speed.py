"""Speed of the overlap-model fits (E = 128, k = 8, published lag profile o(1..4) = 0.381, 0.329, 0.301, 0.299).

Writes benchmarks/results/overlap_speed.md. Targets (issue 3): IPF for n = 16 under 0.2 s, junction tree for
n = 256 under 0.1 s. Run:  python benchmarks/overlap_speed.py
"""

from __future__ import annotations

import os
import platform
import statistics
import time

from simulator.overlap import OverlapStats, clear_cache, fit_window
from simulator.overlap.junction import junction_tree

OVERLAPS = (0.381, 0.329, 0.301, 0.299)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "overlap_speed.md")


def timed(func, repeats: int = 3) -> tuple:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), result


def cold(stats, n, method):
    def run():
        clear_cache()
        junction_tree.cache_clear()
        return fit_window(stats, n, method)

    return run


def main() -> None:
    rows = []
    for label, pop in (("uniform (1 distinct expert)", "uniform"), ("skew:0.118 (128 distinct experts)",
                                                                   "skew:0.118")):
        stats = OverlapStats.from_overlaps(128, 8, OVERLAPS, pop)
        for n, method, repeats in ((4, "ipf", 5), (8, "ipf", 3), (12, "ipf", 2), (16, "ipf", 1 if "skew" in pop
                                                                                   else 3),
                                   (16, "junction", 5), (256, "junction", 5), (256, "markov", 5)):
            best, median, fit = timed(cold(stats, n, method), repeats)
            rows.append((label, method, n, best, median, fit.iterations, fit.max_error))
        clear_cache()
        fit_window(stats, 16, "junction")  # stationary fit cached; the tree for n = 256 is not
        junction_tree.cache_clear()
        best, median, fit = timed(lambda s=stats: fit_window(s, 256, "junction"), 1)
        rows.append((label, "junction, stationary fit cached, new n", 256, best, median, 0, fit.max_error))
    lines = [
        "# Overlap model: fit speed",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        "E = 128, k = 8, o(1..4) = 0.381, 0.329, 0.301, 0.299; every time is a cold fit (caches cleared) "
        "unless stated. Targets: IPF n = 16 < 0.2 s, junction tree n = 256 < 0.1 s.",
        "",
        "| popularity | method | n | best (s) | median (s) | iterations | max constraint error |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for label, method, n, best, median, it, err in rows:
        lines.append(f"| {label} | {method} | {n} | {best:.4f} | {median:.4f} | {it} | {err:.1e} |")
    lines += ["", "Iterations: IPF sweeps (window-block sweeps for n >= 8 with constraints narrower than the "
              "window), Newton steps of the stationary fit for the junction tree."]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
