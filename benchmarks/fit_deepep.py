"""Fit the DeepEP dispatch/combine collectives of a profile to aiconfigurator-core's measured tables.

    python benchmarks/fit_deepep.py [--wheel PATH] [--gpu h100_sxm] [--version 0.5.6.post2]

Reads ``systems/data/<gpu>/comm/sglang/<version>/wideep_deepep_{ll,normal}_perf.parquet`` (SGLang's DeepEP
benchmark: tokens per rank, hidden, top-k, 8·node_num ranks; the normal table at each SM count: the fastest is
kept) from the installed ``aiconfigurator-core`` package or its wheel, and fits ``latency, efficiency,
fabric_latency, fabric_latency_per_doubling, fabric_efficiency`` of one collective per mode (dispatch and combine
rows together, relative least squares) with :func:`simulator.cost.engine.collective_seconds` — the formula the step
model prices. Prints the YAML entries and the error per mode, phase and node count (docs/MODEL.md §3.9). Needs
pandas + pyarrow (``pip install ".[calibrate]"``). Never run it on the b300_sxm or gb300 tables.
"""

from __future__ import annotations

import argparse
import io
import zipfile
from dataclasses import replace
from types import MappingProxyType

import numpy as np
from scipy.optimize import least_squares

from simulator.cost.deployment import Mechanisms
from simulator.cost.engine import collective_seconds
from simulator.specs import load_hardware
from simulator.specs.kernels import Collective

HELD_OUT = ("b300_sxm", "gb300")
DISPATCH_BYTES, COMBINE_BYTES = 1.0 + 4.0 / 128, 2.0  # fp8 + fp32 scale per 128 channels; bf16
PROFILE = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "gb200": "gb200"}


def read_table(wheel: str | None, gpu: str, version: str, mode: str):
    import pandas as pd
    rel = f"systems/data/{gpu}/comm/sglang/{version}/wideep_deepep_{mode}_perf.parquet"
    if wheel:
        with zipfile.ZipFile(wheel) as z:
            return pd.read_parquet(io.BytesIO(z.read(f"aiconfigurator_core/{rel}")))
    import importlib.resources as ir
    return pd.read_parquet(ir.files("aiconfigurator_core").joinpath(rel))


def rows(df, mode: str):
    """(wire bytes, ranks, measured seconds, phase) arrays."""
    if mode == "normal":
        df = df.groupby(["node_num", "hidden_size", "num_token", "num_topk", "num_experts"], as_index=False).agg(
            dispatch=("dispatch_transmit_us", "min"), combine=("combine_transmit_us", "min"))
    else:
        df = df.rename(columns={"dispatch_avg_t_us": "dispatch", "combine_avg_t_us": "combine"})
    out = []
    for phase, b in (("dispatch", DISPATCH_BYTES), ("combine", COMBINE_BYTES)):
        wire = df["num_token"] * df["num_topk"] * df["hidden_size"] * b
        out.append((wire.to_numpy(float), 8 * df["node_num"].to_numpy(int), df[phase].to_numpy(float) * 1e-6,
                    np.array([phase] * len(df))))
    return tuple(np.concatenate(x) for x in zip(*out, strict=True))


def predict(hw, th, wire, n, key):
    fab = {} if len(th) < 5 else {"fabric_latency": th[2] * 1e-6, "fabric_latency_per_doubling": th[3] * 1e-6,
                                  "fabric_efficiency": th[4]}
    col = Collective(th[0] * 1e-6, 0.0, th[1], **fab)
    cols = dict(hw.kernels.collectives)
    cols[key] = col
    h = hw.with_changes(kernels=replace(hw.kernels, collectives=MappingProxyType(cols)))
    return np.array([collective_seconds(key, w, int(g), h, Mechanisms())[0] for w, g in zip(wire, n, strict=True)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", default=None)
    ap.add_argument("--gpu", default="h100_sxm")
    ap.add_argument("--version", default="0.5.6.post2")
    a = ap.parse_args()
    if a.gpu in HELD_OUT:
        raise SystemExit(f"--gpu: {a.gpu} is held out for what-if validation; fit another GPU")
    hw = load_hardware(PROFILE[a.gpu])
    for mode, key in (("ll", "deepep_low_latency"), ("normal", "deepep_normal")):
        wire, n, y, phase = rows(read_table(a.wheel, a.gpu, a.version, mode), mode)
        if mode == "normal":
            # Normal kernels forward a token once per remote node (NVLink fan-out there), so their fabric bytes
            # are not the all-to-all share this form prices: fit the one-node rows only (docs/MODEL.md §3.9).
            keep = n == 8
            wire, n, y, phase = wire[keep], n[keep], y[keep], phase[keep]
        nf = 5 if mode == "ll" and len(set(n)) > 1 else 2  # fabric terms need rows of several node counts
        x0, lo, hi = [15.0, 0.5, 15.0, 5.0, 0.8][:nf], [0, 0.01, 0, 0, 0.01][:nf], [500, 1, 500, 100, 1][:nf]
        fit = least_squares(lambda th, w=wire, g=n, t=y, k=key: predict(hw, th, w, g, k) / t - 1.0,
                            x0=x0, bounds=(lo, hi))
        th = fit.x
        err = np.abs(predict(hw, th, wire, n, key) / y - 1.0)
        text = f"{key}: latency {th[0]:.3g} us, efficiency {th[1]:.3g}"
        if nf == 5:
            text += (f", fabric_latency {th[2]:.3g} us, fabric_latency_per_doubling {th[3]:.3g} us, "
                     f"fabric_efficiency {th[4]:.3g}")
        print(text)
        print(f"  {len(y)} rows, MAPE {100 * err.mean():.1f}%, max {100 * err.max():.0f}%")
        for ph in ("dispatch", "combine"):
            for g in sorted(set(n)):
                m = (phase == ph) & (n == g)
                print(f"  {ph:8s} {g:3d} GPUs: {m.sum():3d} rows, MAPE {100 * err[m].mean():5.1f}%")


if __name__ == "__main__":
    main()
