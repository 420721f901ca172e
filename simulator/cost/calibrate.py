"""Calibration of the H100 SXM kernel parameters on ``measured-h100/`` (``python -m simulator calibrate``).

Every fit prices the measured rows with the engine's own :func:`~simulator.cost.engine.op_time` (through the op
builders of :mod:`simulator.cost.opviews`) and minimises the relative error with ``scipy.optimize.least_squares``,
so the written parameters are exactly what the engine uses. Reference engine: TRT-LLM 1.3.0rc20. Row filters,
forms and the resulting errors are documented in docs/MODEL.md ("Calibration") and in the generated report.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
from scipy.optimize import least_squares

from ..errors import ConfigError
from ..specs.hardware import HardwareProfile
from ..specs.kernels import Collective, Curve, KernelClass
from .deployment import Mechanisms
from .engine import collective_seconds, op_time
from .opviews import attention_op, balanced_routing, gemm_op, moe_op

REFINED = Mechanisms()
FRAMEWORK, VERSION = "TRTLLM", "1.3.0rc20"
DTYPE_NAMES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "w4a16_mxfp4": "mxfp4"}
PAR_GRID = tuple(2.0 ** j for j in range(-2, 15))  # points of tabulated "parallel" curves
MOE_FIT_MIN_BYTES = 100e6  # MoE rows streaming less may be L2-warm in the benchmark (docs/MODEL.md)
MOE_TILE_ROWS = 128.0


@dataclass(frozen=True)
class Fit:
    """One fitted kernel variant with its errors (MAPE as fractions)."""

    cls: str
    variant: str
    kernel: KernelClass | Collective
    rows: int
    mape_fit: float  # on the rows it was fitted on
    mape_loso: float  # leave-one-shape-out on the same rows
    mape_all: float  # all rows of this op/variant
    filter: str
    shape_key: str
    notes: dict = field(default_factory=dict)


def read_csv(path: Path) -> list[dict]:
    try:
        with open(path, newline="") as fh:
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        raise ConfigError(str(path), "", "does not exist",
                          "pass --data with the measured-h100 folder (../shared/reference/measured-h100)") from None


def col(rows: list[dict], name: str, kind=float) -> np.ndarray:
    return np.array([kind(r[name]) for r in rows])


def mape(pred, meas) -> float:
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.mean(np.abs(pred - meas) / meas))


def _with_class(hw: HardwareProfile, cls: str, variant: str, kc: KernelClass) -> HardwareProfile:
    k = hw.kernels
    table = dict(k.classes.get(cls, {}))
    table[variant] = kc
    classes = dict(k.classes)
    classes[cls] = MappingProxyType(table)
    return hw.with_changes(kernels=replace(k, classes=MappingProxyType(classes)))


def _fit(residual_of: Callable, x0, lo, hi, groups: np.ndarray, fit_mask: np.ndarray):
    """Least squares on relative error; returns (theta, mape_fit, mape_loso)."""
    def solve(mask):
        r = least_squares(lambda th: residual_of(th, mask), x0, bounds=(lo, hi), loss="soft_l1", f_scale=0.05)
        return r.x

    theta = solve(fit_mask)
    m_fit = float(np.mean(np.abs(residual_of(theta, fit_mask))))
    errs = []
    for g in np.unique(groups[fit_mask]):
        hold = fit_mask & (groups == g)
        if hold.sum() == fit_mask.sum():
            continue
        th = solve(fit_mask & ~hold)
        errs.append(np.abs(residual_of(th, hold)))
    m_loso = float(np.mean(np.concatenate(errs))) if errs else float("nan")
    return theta, m_fit, m_loso


def _par_curve(eta_max: float, a: float, scale: float, source: str) -> Curve:
    ys = [float(np.clip(eta_max * (1.0 - a * np.exp(-x / scale)), 1e-3, 1.0)) for x in PAR_GRID]
    return Curve("parallel", PAR_GRID, tuple(ys), source)


# --- GEMM ---------------------------------------------------------------------------------------------------------
def fit_gemm(rows: list[dict], hw: HardwareProfile, dtype_csv: str, source: str) -> Fit:
    r = [x for x in rows if x["framework"] == FRAMEWORK and x["version"] == VERSION and x["gemm_dtype"] == dtype_csv]
    dtype = DTYPE_NAMES[dtype_csv]
    m, n, k, y = col(r, "m"), col(r, "n"), col(r, "k"), col(r, "latency_us") * 1e-6
    op = gemm_op(m, n, k, dtype)
    groups = n * 1e6 + k

    def kernel(th):
        t0, eta, n0, mu, q = th
        return KernelClass(t0 * 1e-6, _par_curve(eta, 1.0, n0, source), Curve.constant("rows", mu, source),
                           MappingProxyType({"combine_q": q}))

    def res(th, mask):
        h = _with_class(hw, "gemm", dtype, kernel(th))
        return (op_time(op, h, REFINED).time[mask] - y[mask]) / y[mask]

    mask = np.ones(len(y), bool)
    th, mf, ml = _fit(res, [4.0, 0.85, 10.0, 0.7, 3.0], [0.0, 0.3, 0.5, 0.1, 1.0], [50.0, 1.0, 200.0, 1.0, 20.0],
                      groups, mask)
    h = _with_class(hw, "gemm", dtype, kernel(th))
    return Fit("gemm", dtype, kernel(th), len(y), mf, ml, mape(op_time(op, h, REFINED).time, y), "all TRT-LLM rows",
               "(n, k)",
               {"eta_max": th[1], "tiles_scale": th[2], "mu": th[3], "q": th[4]})


# --- MoE ----------------------------------------------------------------------------------------------------------
def moe_rows(rows: list[dict], dtype_csv: str) -> list[dict]:
    r = [x for x in rows if x["framework"] == FRAMEWORK and x["version"] == VERSION and x["moe_dtype"] == dtype_csv
         and x["distribution"] == "balanced"]
    return drop_spikes(r, ("model", "moe_tp_size", "moe_ep_size"), "num_tokens")


def drop_spikes(rows: list[dict], series: tuple[str, ...], x: str, factor: float = 3.0) -> list[dict]:
    """Remove isolated glitches: a row more than ``factor`` times slower than both neighbours in its series."""
    by: dict[tuple, list[dict]] = {}
    for row in rows:
        by.setdefault(tuple(row[s] for s in series), []).append(row)
    keep = []
    for seq in by.values():
        seq.sort(key=lambda q: float(q[x]))
        lat = [float(q["latency_us"]) for q in seq]
        for i, row in enumerate(seq):
            nb = [lat[j] for j in (i - 1, i + 1) if 0 <= j < len(seq)]
            if nb and all(lat[i] > factor * v for v in nb):
                continue
            keep.append(row)
    return keep


def moe_row_op(r: list[dict], dtype: str, compute: str | None = None):
    T = col(r, "num_tokens", int)
    E, K = col(r, "num_experts", int), col(r, "topk", int)
    tp, ep = col(r, "moe_tp_size", int), col(r, "moe_ep_size", int)
    routed = np.array([balanced_routing(int(t), int(e), int(k), int(p)) for t, e, k, p in zip(T, E, K, ep,
                                                                                               strict=True)])
    return moe_op(col(r, "hidden_size"), col(r, "inter_size"), E, K, T, dtype, tp, ep, routed[:, 0], routed[:, 1],
                  compute=compute, tile_rows=MOE_TILE_ROWS)


def fit_moe(rows: list[dict], hw: HardwareProfile, dtype_csv: str, source: str, compute_mu: Curve) -> Fit:
    r = moe_rows(rows, dtype_csv)
    dtype = DTYPE_NAMES[dtype_csv]
    compute = "bf16" if dtype == "mxfp4" else None  # W4A16 on Hopper: bf16 tensor cores
    op = moe_row_op(r, dtype, compute)
    y = col(r, "latency_us") * 1e-6
    groups = np.array([hash((q["model"], q["moe_tp_size"], q["moe_ep_size"])) for q in r])
    fit_mask = np.asarray(op.weight_bytes) >= MOE_FIT_MIN_BYTES

    def kernel(th):
        f0, fe, eta, eta_act = th
        return KernelClass(f0 * 1e-6, Curve.constant("bytes", eta, source), compute_mu,
                           MappingProxyType({"per_local_expert": fe * 1e-6, "activation_efficiency": eta_act,
                                             "tile_rows": MOE_TILE_ROWS}))

    def res(th, mask):
        h = _with_class(hw, "moe", dtype, kernel(th))
        return (op_time(op, h, REFINED).time[mask] - y[mask]) / y[mask]

    th, mf, ml = _fit(res, [25.0, 0.1, 0.9, 0.3], [0.0, 0.0, 0.3, 0.01], [200.0, 5.0, 1.0, 1.0], groups, fit_mask)
    h = _with_class(hw, "moe", dtype, kernel(th))
    return Fit("moe", dtype, kernel(th), int(fit_mask.sum()), mf, ml, mape(op_time(op, h, REFINED).time, y),
               f"TRT-LLM balanced rows streaming >= {MOE_FIT_MIN_BYTES / 1e6:.0f} MB of weights",
               "(model, tp, ep)", {"rows_total": len(y)})


# --- attention ----------------------------------------------------------------------------------------------------
def fit_attention(rows: list[dict], hw: HardwareProfile, kv_csv: str, source: str) -> Fit:
    r = [x for x in rows if x["framework"] == FRAMEWORK and x["version"] == VERSION and x["kv_cache_dtype"] == kv_csv
         and int(x["window_size"]) == 0]
    kv_dtype = DTYPE_NAMES[kv_csv]
    b, h, kvh, hd, L = (col(r, c) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim", "kv_len"))
    op = attention_op(b, h, kvh, hd, L, kv_dtype)
    y = col(r, "latency_us") * 1e-6
    groups = h * 1000 + kvh
    fit_mask = L >= 256

    def kernel(th):
        t0, c_par, eta, a, scale = th
        return KernelClass(t0 * 1e-6, _par_curve(eta, a, scale, source), None,
                           MappingProxyType({"per_parallel": c_par * 1e-9}))

    def res(th, mask):
        hh = _with_class(hw, "attention", kv_dtype, kernel(th))
        return (op_time(op, hh, REFINED).time[mask] - y[mask]) / y[mask]

    th, mf, ml = _fit(res, [9.0, 5.0, 0.9, 0.5, 4.0], [0.0, 0.0, 0.3, 0.0, 0.1], [50.0, 200.0, 1.0, 0.999, 1000.0],
                      groups, fit_mask)
    hh = _with_class(hw, "attention", kv_dtype, kernel(th))
    return Fit("attention", kv_dtype, kernel(th), int(fit_mask.sum()), mf, ml,
               mape(op_time(op, hh, REFINED).time, y),
               "TRT-LLM rows with kv_len >= 256", "(heads, kv heads)", {"rows_total": len(y)})


# --- collectives --------------------------------------------------------------------------------------------------
def fit_collective(rows: list[dict], hw: HardwareProfile, kind: str) -> Fit:
    if kind == "all_reduce":
        r = [x for x in rows if x["framework"] == FRAMEWORK and x["version"] == VERSION and x["op_name"] == kind]
        label = f"TRT-LLM {VERSION} all_reduce"
    else:
        name = {"all_to_all": "alltoall", "all_gather": "all_gather"}[kind]
        r = [x for x in rows if x["kernel_source"] == "NCCL" and x["version"] == "2.29.2" and x["op_name"] == name
             and x["dtype"] == "half"]
        label = f"NCCL 2.29.2 {name} (half)"
    S, n, y = col(r, "message_bytes"), col(r, "num_gpus", int), col(r, "latency_us") * 1e-6
    two = kind == "all_reduce"

    def coll(th):
        if two:
            return Collective(th[0] * 1e-6, th[1] * 1e-6, th[2], th[3] * 1e-6, th[4])
        return Collective(th[0] * 1e-6, th[1] * 1e-6, th[2])

    def pred(th, mask):
        cols = dict(hw.kernels.collectives)
        cols[kind] = coll(th)
        h = hw.with_changes(kernels=replace(hw.kernels, collectives=MappingProxyType(cols)))
        out = np.empty(mask.sum())
        for i, (s, g) in enumerate(zip(S[mask], n[mask], strict=True)):
            out[i] = collective_seconds(kind, s, int(g), h, REFINED)[0]
        return out

    def res(th, mask):
        return (pred(th, mask) - y[mask]) / y[mask]

    x0, lo, hi = ([2.5, 0.1, 0.7, 30.0, 0.8], [0, 0, 0.05, 0, 0.05], [50, 10, 1.0, 500, 1.0]) if two else \
        ([8.0, 0.1, 0.6], [0, 0, 0.05], [100, 10, 1.0])
    mask = np.ones(len(y), bool)
    th, mf, ml = _fit(res, x0, lo, hi, n, mask)
    return Fit("collective", kind, coll(th), len(y), mf, ml, mape(pred(th, mask), y), label, "GPU count")


@dataclass(frozen=True)
class Calibration:
    fits: tuple[Fit, ...]
    eager_extra: float  # s per kernel without CUDA graphs
    eager_rows: int


def fit_eager(rows: list[dict]) -> tuple[float, int]:
    """Median (eager − graph) latency of the same custom all-reduce call: the per-kernel cost of running without
    CUDA graphs (host launch and synchronisation)."""
    pairs: dict[tuple, dict] = {}
    for x in rows:
        src = x["kernel_source"]
        if src.endswith(("_eager", "_graph")):
            key = (x["framework"], x["version"], src.rsplit("_", 1)[0], x["num_gpus"], x["message_bytes"])
            pairs.setdefault(key, {})[src.rsplit("_", 1)[1]] = float(x["latency_us"])
    small = [v["eager"] - v["graph"] for k, v in pairs.items() if "eager" in v and "graph" in v
             and float(k[4]) <= 65536]
    return float(np.median(small)) * 1e-6, len(small)


def calibrate(data: Path, hw: HardwareProfile, source: str = "fit-h100", progress=None) -> Calibration:
    """Fit every calibrated kernel variant of ``hw`` on the CSVs in ``data``."""
    say = progress or (lambda msg: None)
    gemm_rows = read_csv(data / "gemm.csv")
    moe = read_csv(data / "moe.csv")
    attn = read_csv(data / "decode_attention.csv")
    coll = read_csv(data / "collectives.csv")
    fits = []
    gemm_fits = {}
    for dt in ("bfloat16", "fp8", "fp8_block"):
        say(f"calibrate: gemm {dt}")
        f = fit_gemm(gemm_rows, hw, dt, source)
        gemm_fits[f.variant] = f
        fits.append(f)
    for dt in ("bfloat16", "fp8", "fp8_block", "w4a16_mxfp4"):
        say(f"calibrate: moe {dt}")
        name = DTYPE_NAMES[dt]
        mu = gemm_fits.get(name, gemm_fits["bf16"]).kernel.compute
        fits.append(fit_moe(moe, hw, dt, source, mu))
    for kv in ("bfloat16", "fp8"):
        say(f"calibrate: attention kv {kv}")
        fits.append(fit_attention(attn, hw, kv, source))
    for kind in ("all_reduce", "all_to_all", "all_gather"):
        say(f"calibrate: {kind}")
        fits.append(fit_collective(coll, hw, kind))
    eager, n_eager = fit_eager(coll)
    return Calibration(tuple(fits), eager, n_eager)
