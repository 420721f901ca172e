"""Speed of the default ``sweep``: wall time, points per second, peak memory, where the time goes.

    python benchmarks/sweep_speed.py [--repeat 3] [--out benchmarks/results/sweep_speed.md]

Measures, on this machine:
1. in-process ``run_sweep()`` (the default study): the first, cold call (YAML parsing, overlap fits) and warm
   repeats (cached), points/s, the number of step evaluations (``cost.step.resolved_step``, what StepCache calls)
   and the share of time inside them;
2. end to end ``python -m simulator sweep`` in a fresh interpreter with ``--no-plots`` and with figures (includes
   interpreter start-up, imports and YAML loading);
3. peak memory: Python allocations during ``run_sweep()`` (tracemalloc) and the peak resident set of the CLI run.
Writes a Markdown report. No assertions: the numbers are reported, not tested.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cli(args: list[str], outdir: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one fresh-interpreter CLI run."""
    code = ("import resource, sys, time; t = time.perf_counter(); from simulator.cli import main; "
            f"rc = main(['sweep', '--quiet', '--force', '--out', {outdir!r}, *{args!r}]); "
            "w = time.perf_counter() - t; "
            "print(f'BENCH {w} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr); "
            "sys.exit(rc)")
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ))
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"CLI run failed: {res.stderr.strip()[-500:]}")
    line = [x for x in res.stderr.splitlines() if x.startswith("BENCH ")][-1]
    return wall, int(line.split()[2]) / 1024.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sweep_speed.md"))
    ap.add_argument("--note", default="", help="a line of context added to the report")
    args = ap.parse_args()

    t_import = time.perf_counter()
    from simulator.specdec import rounds
    from simulator.sweep import run_sweep

    t_import = time.perf_counter() - t_import
    t_cold = time.perf_counter()
    first = run_sweep()  # cold: YAML parsing and overlap fits are paid here, then cached in the process
    t_cold = time.perf_counter() - t_cold
    points = len(first)
    walls = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        run_sweep()
        walls.append(time.perf_counter() - t)
    best, med = min(walls), statistics.median(walls)

    # time inside resolved_step, and number of evaluations
    prof = cProfile.Profile()
    calls = {"n": 0}
    orig = rounds.resolved_step

    def counted(*a, **k):
        calls["n"] += 1
        return orig(*a, **k)

    rounds.resolved_step = counted
    try:
        prof.enable()
        run_sweep()
        prof.disable()
    finally:
        rounds.resolved_step = orig
    st = pstats.Stats(prof)
    total = st.total_tt
    in_step = next((v[3] for k, v in st.stats.items() if k[2] == "resolved_step" and "cost" in k[0]), float("nan"))
    top = sorted(((v[3], f"{Path(k[0]).name}:{k[2]}") for k, v in st.stats.items() if "simulator" in k[0]
                  and "cost" in k[0]), reverse=True)[:6]

    tracemalloc.start()
    run_sweep()
    _, peak_py = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    with tempfile.TemporaryDirectory() as tmp:
        noplot = [_cli(["--no-plots"], tmp) for _ in range(args.repeat)]
        plots = [_cli([], tmp) for _ in range(max(1, args.repeat - 1))]
    cli_np = min(w for w, _ in noplot)
    cli_p = min(w for w, _ in plots)
    rss_np = max(r for _, r in noplot)
    rss_p = max(r for _, r in plots)

    cpu = platform.processor() or platform.machine()
    lines = [
        "# Default sweep speed",
        "",
        f"Machine: {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}. Command: `python benchmarks/sweep_speed.py "
        f"--repeat {args.repeat}`.",
        *([args.note] if args.note else []),
        "",
        f"Default study: {points} points ({len(first.cases)} model x mode cases, "
        f"{len({c.model.name for c in first.cases})} models; skipped: "
        f"{', '.join(sorted({m for m, _, _ in first.skipped})) or 'none'}).",
        "",
        "| measurement | value |",
        "|---|---|",
        f"| `run_sweep()` in process, first (cold) call | {t_cold:.3f} s ({points / t_cold:,.0f} points/s) |",
        f"| `run_sweep()` in process, warm (catalog and overlap fits cached), best of {args.repeat} | "
        f"{best:.3f} s ({points / best:,.0f} points/s) |",
        f"| `run_sweep()` in process, warm, median | {med:.3f} s |",
        f"| step evaluations per sweep (resolved_step) | {calls['n']} |",
        f"| share of warm sweep time inside resolved_step (cProfile) | {in_step / total:.0%} |",
        f"| `python -m simulator sweep --no-plots`, fresh interpreter, best | {cli_np:.2f} s |",
        f"| `python -m simulator sweep` with 3 figures, fresh interpreter, best | {cli_p:.2f} s |",
        f"| figures alone (difference) | {cli_p - cli_np:.2f} s |",
        f"| import of simulator.sweep (in this process) | {t_import:.2f} s |",
        f"| peak Python allocations during `run_sweep()` (tracemalloc) | {peak_py / 2**20:.1f} MiB |",
        f"| peak RSS, CLI without / with figures | {rss_np:.0f} / {rss_p:.0f} MiB |",
        "",
        "Largest cumulative times inside the cost engine (one profiled warm sweep, seconds, profiler overhead "
        "included):",
        "",
        *[f"- `{name}`: {t:.3f}" for t, name in top],
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
