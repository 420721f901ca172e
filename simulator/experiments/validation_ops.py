"""Per-op validation: the calibrated H100 profile's predictions against every usable row of ``measured-h100/``.

Row sets, per op class and format: the **calibration rows** (exactly the rows and filters ``calibrate`` fits),
**all TRT-LLM rows** (the reference engine, filters removed), and **SGLang** / **vLLM** rows (other engines' kernels:
out-of-calibration checks). Predictions use the op builders of :mod:`simulator.cost.opviews` (which mirror the CSV
columns) and the refined mechanisms, as the calibration does. Not predicted, and counted as excluded: MoE
``power_law`` rows (the benchmark's random power-law draw is not replicated), reduce-scatter (not modelled) and
eager (non-CUDA-graph) all-reduce rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cost.engine import op_time
from ..cost.measured import (
    DTYPE_NAMES,
    FRAMEWORK,
    MOE_FIT_MIN_BYTES,
    REFINED,
    VERSION,
    col,
    moe_row_op,
    moe_rows,
    read_csv,
)
from ..cost.opviews import attention_op, collective_view, gemm_op

CALIB, ALL_TRT, SGLANG, VLLM = "calibration rows", "all TRT-LLM rows", "SGLang (out of calibration)", \
    "vLLM (out of calibration)"
SETS = (CALIB, ALL_TRT, SGLANG, VLLM)
ENGINE_SET = {"TRTLLM": ALL_TRT, "SGLang": SGLANG, "VLLM": VLLM, "vLLM": VLLM}
COLL_KIND = {"all_reduce": "all_reduce", "alltoall": "all_to_all", "all_gather": "all_gather"}


@dataclass(frozen=True)
class Sample:
    op: str
    variant: str
    set: str
    predicted: np.ndarray  # µs
    measured: np.ndarray  # µs

    @property
    def rel(self) -> np.ndarray:
        return (self.predicted - self.measured) / self.measured


def _moe(rows, hw) -> tuple[list[Sample], int]:
    out = []
    excluded = sum(1 for x in rows if x["distribution"] != "balanced")
    bal = [x for x in rows if x["distribution"] == "balanced"]
    for dt_csv, dt in DTYPE_NAMES.items():
        compute = "bf16" if dt == "mxfp4" else None
        for engine in ("TRTLLM", "SGLang", "VLLM"):
            r = [x for x in bal if x["framework"] == engine and x["moe_dtype"] == dt_csv]
            if not r:
                continue
            op = moe_row_op(r, dt, compute)
            pred = op_time(op, hw, REFINED).time * 1e6
            meas = col(r, "latency_us")
            out.append(Sample("moe", dt, ENGINE_SET[engine], pred, meas))
            if engine == FRAMEWORK:
                cal = moe_rows(rows, dt_csv)  # the calibration's own filter (TRT-LLM reference version, no spikes)
                cop = moe_row_op(cal, dt, compute)
                keep = np.asarray(cop.weight_bytes) >= MOE_FIT_MIN_BYTES
                out.append(Sample("moe", dt, CALIB, (op_time(cop, hw, REFINED).time * 1e6)[keep],
                                  col(cal, "latency_us")[keep]))
    return out, excluded


def _gemm(rows, hw) -> list[Sample]:
    out = []
    for dt_csv in ("bfloat16", "fp8", "fp8_block"):
        dt = DTYPE_NAMES[dt_csv]
        for engine in ("TRTLLM", "SGLang", "VLLM"):
            r = [x for x in rows if x["framework"] == engine and x["gemm_dtype"] == dt_csv]
            if not r:
                continue
            pred = op_time(gemm_op(col(r, "m"), col(r, "n"), col(r, "k"), dt), hw, REFINED).time * 1e6
            s = Sample("gemm", dt, ENGINE_SET[engine], pred, col(r, "latency_us"))
            out.append(s)
            if engine == FRAMEWORK:
                out.append(Sample("gemm", dt, CALIB, s.predicted, s.measured))
    return out


def _attention(rows, hw) -> list[Sample]:
    out = []
    for kv_csv in ("bfloat16", "fp8"):
        kv = DTYPE_NAMES[kv_csv]
        for engine in ("TRTLLM", "SGLang", "VLLM"):
            r = [x for x in rows if x["framework"] == engine and x["kv_cache_dtype"] == kv_csv]
            if not r:
                continue
            b, h, kvh, hd, L = (col(r, c) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim",
                                                   "kv_len"))
            win = col(r, "window_size")
            L = np.where(win > 0, np.minimum(L, win), L)
            pred = op_time(attention_op(b, h, kvh, hd, L, kv), hw, REFINED).time * 1e6
            meas = col(r, "latency_us")
            out.append(Sample("attention", kv, ENGINE_SET[engine], pred, meas))
            if engine == FRAMEWORK:
                keep = (col(r, "kv_len") >= 256) & (win == 0) & np.array([x["version"] == VERSION for x in r])
                out.append(Sample("attention", kv, CALIB, pred[keep], meas[keep]))
    return out


def _collectives(rows, hw) -> tuple[list[Sample], int]:
    groups: dict[tuple, list] = {}
    excluded = 0
    for x in rows:
        name, src = x["op_name"], x["kernel_source"]
        if name not in COLL_KIND or src.endswith("_eager"):
            excluded += 1
            continue
        kind = COLL_KIND[name]
        if src == "TRTLLM":
            sets = [ALL_TRT] + ([CALIB] if x["version"] == VERSION else [])
        elif src == "NCCL":
            calib = kind != "all_reduce" and x["version"] == "2.29.2" and x["dtype"] == "half"
            sets = [ALL_TRT] + ([CALIB] if calib else [])
        else:
            sets = [ENGINE_SET[x["framework"]]]
        for s in sets:
            groups.setdefault((kind, s), []).append(x)
    out = []
    for (kind, s), r in sorted(groups.items()):
        pred = np.empty(len(r))
        n = col(r, "num_gpus", int)
        S = col(r, "message_bytes")
        for g in np.unique(n):
            sel = n == g
            pred[sel] = collective_view(kind, S[sel], int(g), hw, REFINED) * 1e6
        out.append(Sample("collective", kind, s, pred, col(r, "latency_us")))
    return out, excluded


def per_op(data: Path, hw) -> tuple[list[Sample], dict[str, int]]:
    """Every prediction/measurement pair, grouped by (op, variant, row set); plus excluded row counts."""
    moe, moe_x = _moe(read_csv(data / "moe.csv"), hw)
    coll, coll_x = _collectives(read_csv(data / "collectives.csv"), hw)
    samples = moe + _gemm(read_csv(data / "gemm.csv"), hw) + _attention(read_csv(data / "decode_attention.csv"), hw)
    samples += coll
    order = {s: i for i, s in enumerate(SETS)}
    samples.sort(key=lambda s: (s.op, s.variant, order[s.set]))
    return samples, {"MoE power-law rows": moe_x, "eager all-reduce and reduce-scatter rows": coll_x}


def merge(samples: list[Sample], op: str, set_name: str) -> Sample | None:
    sel = [s for s in samples if s.op == op and s.set == set_name]
    if not sel:
        return None
    return Sample(op, "all formats", set_name, np.concatenate([s.predicted for s in sel]),
                  np.concatenate([s.measured for s in sel]))


def error_row(s: Sample) -> tuple:
    a = np.abs(s.rel)
    return (s.op, s.variant, s.set, int(s.measured.size), float(a.mean()), float(np.median(a)),
            float((a <= 0.2).mean()), float(s.rel.mean()))


def plot_scatter(samples: list[Sample], path) -> str:
    from . import plots

    ops = list(dict.fromkeys(s.op for s in samples))
    fig, axes = plots.figure(len(ops), ncols=2, panel=(5.2, 4.4), title="Predicted vs measured per-op latency, "
                             "H100 SXM (diagonal: exact; dotted: ±20%)")
    style = {CALIB: ("#1b9e77", "o", 1.0), ALL_TRT: ("#999999", ".", 1.0), SGLANG: ("#d95f02", "x", 0.6),
             VLLM: ("#7570b3", "+", 0.6)}
    for ax, op in zip(axes, ops, strict=True):
        lo, hi = np.inf, 0.0
        for set_name in (ALL_TRT, SGLANG, VLLM, CALIB):
            sel = [s for s in samples if s.op == op and s.set == set_name]
            if not sel:
                continue
            m = np.concatenate([s.measured for s in sel])
            p = np.concatenate([s.predicted for s in sel])
            c, mk, a = style[set_name]
            ax.scatter(m, p, s=4, c=c, marker=mk, alpha=a, linewidths=0.5, label=f"{set_name} ({m.size})")
            lo, hi = min(lo, m.min(), p.min()), max(hi, m.max(), p.max())
        xs = np.array([lo, hi])
        ax.plot(xs, xs, color="black", linewidth=0.8)
        ax.plot(xs, xs * 1.2, color="black", linewidth=0.6, linestyle=":")
        ax.plot(xs, xs / 1.2, color="black", linewidth=0.6, linestyle=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op, fontsize=9)
        ax.set_xlabel("measured (µs)", fontsize=8)
        ax.set_ylabel("predicted (µs)", fontsize=8)
        ax.grid(True, alpha=0.3, which="major")
        ax.legend(fontsize=6, loc="upper left", markerscale=2)
    return plots.save(fig, path)
