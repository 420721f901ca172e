"""Sweep speed against aiconfigurator's 9-point SDK sweep, measured side by side in one run (issue 13 item 7).

    python benchmarks/compare_aiconfigurator.py [--repeat 5] [--aic-python PATH] [--out benchmarks/results/...md]

The reference ("aic"): aiconfigurator-core 0.12's Python SDK, in a fresh interpreter, compiling Qwen3-235B-A22B-FP8 on
H100 SXM with TRT-LLM at TP8/EP8 and pricing one decode step (``mode="static_gen"``, isl 1024, osl 2) at the 9 batch
sizes 1, 2, 4, ..., 256 — the same model, GPU, deployment, context and batch grid as our default study's reference
case::

    from aiconfigurator_core.sdk.engine import EngineHandle
    h = EngineHandle.compile("Qwen/Qwen3-235B-A22B-FP8", "h100_sxm", "trtllm", tp_size=8, moe_ep_size=8)
    [h.run_static(batch_size=b, isl=1024, osl=2, mode="static_gen") for b in (1, 2, 4, ..., 256)]

It runs in whatever interpreter has ``aiconfigurator_core`` (``--aic-python``, else this one); without it the
report says "aiconfigurator not installed" and gives our numbers alone. Nothing is fitted to aiconfigurator: it is
only timed.

Ours, each in a fresh interpreter (start-up, imports, YAML, fits, pricing, writing included):
- the default ``sweep`` with its figures, and with ``--no-plots``;
- the 63,872-point sweep: 10 GPUs × the 20 bundled MoE targets × 11 batches (1..1024) × 16 draft lengths, both
  modes, ``--no-plots`` (points that do not fit a GPU are dropped by the sweep, as the issue's count was);
- in process: that sweep priced twice, the second (warm: catalog, overlap fits and expert loads cached) per point.

Runs are interleaved (aic, ours, aic, ours, ...) and the best of ``--repeat`` is reported, as wall time and as CPU
time (user + system of the child process: steadier on a shared machine). Ratios are ours / aic. No assertions.
Children run with their bytecode cached, as an installed package has it (``ENV``: simulator/ is byte-compiled first,
and a PYTHONDONTWRITEBYTECODE=1 environment is not passed on).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPUS = ("a100-sxm", "b200", "b300", "gb200", "h100-pcie", "h100-sxm", "h200-sxm", "mi300x", "mi325x", "mi355x")
MODELS = ("dbrx", "deepseek-v2", "deepseek-v3", "glm-4.5-air", "glm-4.5", "gpt-oss-120b", "gpt-oss-20b", "kimi-k2",
          "ling-flash-2.0", "llama-4-maverick", "llama-4-scout", "minimax-m2", "mixtral-8x22b", "mixtral-8x7b",
          "olmoe-1b-7b", "qwen2-57b-a14b", "qwen3-235b-a22b", "qwen3-30b-a3b", "qwen3-coder-480b-a35b",
          "qwen3-next-80b-a3b")
BIG = ["--model", ",".join(MODELS), "--hardware", ",".join(GPUS), "--batch", ",".join(str(2**i) for i in range(11)),
       "--draft-len", ",".join(str(g) for g in range(1, 17))]

# Each probe prints one JSON line: wall seconds inside the interpreter is not used (start-up counts), only its
# peak RSS; wall and CPU are measured from outside.
_RSS = "import resource, json; print(json.dumps({'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"
AIC = ("from aiconfigurator_core.sdk.engine import EngineHandle\n"
       "h = EngineHandle.compile('Qwen/Qwen3-235B-A22B-FP8', 'h100_sxm', 'trtllm', tp_size=8, moe_ep_size=8)\n"
       "r = [h.run_static(batch_size=b, isl=1024, osl=2, mode='static_gen')\n"
       "     for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]\n"
       "assert len(r) == 9 and all(x[2] > 0 for x in r)\n" + _RSS)
OURS = ("import sys, io, contextlib\nfrom simulator.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(sys.argv[1:])\n"
        "assert rc == 0, rc\n" + _RSS)
WARM = ("import json, sys, time\nfrom simulator.sweep import run_sweep\n"
        f"kw = dict(models={list(MODELS)!r}, hardware={list(GPUS)!r}, batch=[2**i for i in range(11)], "
        "draft_len=range(1, 17))\n"
        "out = {}\n"
        "for label in ('cold', 'warm'):\n"
        "    w, c = time.perf_counter(), time.process_time()\n"
        "    r = run_sweep(**kw)\n"
        "    out[label] = (time.perf_counter() - w, time.process_time() - c)\n"
        "out['points'] = len(r)\n"
        "out['heavy'] = sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'networkx', 'matplotlib'})\n"
        "print(json.dumps(out))\n")


# Children run with bytecode caching as in an ordinary install (pip compiles on install; aiconfigurator's package
# has its .pyc files): an environment with PYTHONDONTWRITEBYTECODE=1 would otherwise recompile our ~90 modules from
# source on every start (~0.07 s) and time the compiler. ``main`` byte-compiles simulator/ once before timing.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(python: str, code: str, args=(), cwd=ROOT) -> dict:
    """Wall and CPU seconds (user + system of the child) and the child's JSON line."""
    before = os.times()
    t = time.perf_counter()
    res = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=ENV)
    wall = time.perf_counter() - t
    after = os.times()
    if res.returncode != 0:
        raise SystemExit(f"benchmark run failed ({python} {' '.join(args)[:80]}): {res.stderr.strip()[-800:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    out.update(wall=wall, cpu=(after.children_user - before.children_user) + (after.children_system -
                                                                               before.children_system))
    return out


def _aic_python(arg: str | None) -> str | None:
    for py in ([arg] if arg else []) + [os.environ.get("AIC_PYTHON", ""), sys.executable]:
        if py and subprocess.run([py, "-c", "import aiconfigurator_core"], capture_output=True).returncode == 0:
            return py
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--aic-python", help="interpreter with aiconfigurator-core installed (default: $AIC_PYTHON, "
                                         "then this one)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compare_aiconfigurator.md"))
    args = ap.parse_args()
    aic_py = _aic_python(args.aic_python)
    runs: dict[str, list[dict]] = {"aic": [], "with": [], "without": [], "big": []}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "simulator")], env=ENV, check=False,
                   capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            if aic_py:
                runs["aic"].append(_run(aic_py, AIC, cwd=tmp))
            runs["with"].append(_run(sys.executable, OURS, ["sweep", "--quiet", "--force", "--out", f"{tmp}/a"]))
            if aic_py:
                runs["aic"].append(_run(aic_py, AIC, cwd=tmp))
            runs["without"].append(_run(sys.executable, OURS, ["sweep", "--no-plots", "--quiet", "--force", "--out",
                                                               f"{tmp}/b"]))
            runs["big"].append(_run(sys.executable, OURS, ["sweep", *BIG, "--no-plots", "--quiet", "--force",
                                                           "--out", f"{tmp}/c"]))
        big_csv = Path(f"{tmp}/c/sweep.csv")
        big_points = sum(1 for _ in big_csv.open()) - 1
    warm = _run(sys.executable, WARM)
    best = {k: (min(r["wall"] for r in v), min(r["cpu"] for r in v), max(r["rss_mb"] for r in v))
            for k, v in runs.items() if v}

    def ratio(k: str, i: int) -> str:
        return f"{best[k][i] / best['aic'][i]:.2f}×" if "aic" in best else "n/a"

    names = {"aic": "aiconfigurator-core 0.12 SDK, 9 decode points (reference)",
             "with": "`sweep` default study, with its 3 figures", "without": "`sweep` default study, `--no-plots`",
             "big": f"`sweep` {big_points:,} points (10 GPUs × 20 MoE models × 11 batches × 16 draft lengths), "
                    "`--no-plots`"}
    lines = [
        "# Sweep speed against aiconfigurator (side by side, one run)", "",
        f"Machine: {os.cpu_count()} CPUs ({platform.machine()}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; load average at the end {os.getloadavg()[0]:.1f}. "
        f"Command: `python benchmarks/compare_aiconfigurator.py --repeat {args.repeat}`"
        + (f" (aiconfigurator from `{aic_py}`)." if aic_py else "."), "",
        "Fresh interpreter per run, interleaved, best of the repeats. Wall time depends on the machine's load; CPU "
        "time (user + system of the child) is the steadier measure on a shared machine. Ratios: ours / aiconfigurator. "
        "Both with their bytecode cached (simulator/ byte-compiled before timing, as an install does).",
        "",
    ]
    if not aic_py:
        lines += ["**aiconfigurator not installed**: no reference run, no ratios (install aiconfigurator-core in "
                  "some interpreter and pass it with `--aic-python`).", ""]
    lines += ["| run | wall s | ratio (wall) | CPU s | ratio (CPU) | peak RSS MB |", "|---|---|---|---|---|---|"]
    for k in ("aic", "with", "without", "big"):
        if k in best:
            w, c, r = best[k]
            lines.append(f"| {names[k]} | {w:.2f} | {ratio(k, 0) if k != 'aic' else '1'} | {c:.2f} | "
                         f"{ratio(k, 1) if k != 'aic' else '1'} | {r:.0f} |")
    n = warm["points"]
    lines += [
        "",
        f"In process, the {n:,}-point sweep priced twice (`run_sweep`, no writing): first call "
        f"{warm['cold'][0]:.2f} s wall / {warm['cold'][1]:.2f} s CPU ({warm['cold'][1] / n * 1e6:.1f} µs/point CPU, "
        f"YAML, overlap fits and expert loads included); warm call {warm['warm'][0]:.2f} s wall / "
        f"{warm['warm'][1]:.2f} s CPU = **{warm['warm'][1] / n * 1e6:.1f} µs/point** CPU "
        f"({warm['warm'][0] / n * 1e6:.1f} µs/point wall). Heavy modules imported by pricing: "
        f"{', '.join(warm['heavy']) or 'none (no scipy, networkx, matplotlib)'}.",
        "",
        "Targets (issue 13 item 7): default sweep with figures faster than aiconfigurator's 9-point sweep (ratio < 1); "
        "the 64k-point sweep at most 2× it; warm pricing under 20 µs/point; peak RSS under 300 MB for 64k points.",
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
