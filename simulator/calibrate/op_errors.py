"""Predicted against measured per-op latency (docs/MODEL.md §3.7, "Per-op validation"): every usable row of a
measured folder's tables (:mod:`.measured`: the readers and row sets) priced with the engine's own
:func:`~simulator.cost.engine.op_time` under the refined mechanisms, as the calibration does, and summarised per op
class, format and row set. Latencies in :class:`Sample` are µs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from ..cost.engine import op_time
from ..cost.opviews import collective_view, gemm_op
from ..specs.dtypes import FORMATS, compute_dtype
from ..specs.hardware import HardwareProfile
from .measured import (
    ALL_FORMATS,
    ALL_TRT,
    ATTN_FIT_MIN_KV,
    CALIB,
    COLL_CSV_NAME,
    DTYPE_NAMES,
    ENGINE_SET,
    ENGINES,
    FRAMEWORK,
    GEMM_DTYPES,
    KV_DTYPES,
    MXFP4_W4A8,
    REFINED,
    SETS,
    Reference,
    _by_kernel,
    attention_row_op,
    attention_rows,
    col,
    gemm_rows,
    is_calibration_collective,
    moe_compute,
    moe_fit_mask,
    moe_row_op,
    moe_row_time,
    moe_rows,
    mxfp4_table,
    read_tables,
)


# --- predicted vs measured -----------------------------------------------------------------------------------------
class ErrorRow(NamedTuple):
    """One line of the per-op error table (fractions; ``n`` rows)."""

    op: str
    variant: str
    set: str
    n: int
    mape: float
    median_ape: float
    within_20: float
    bias: float


@dataclass(frozen=True)
class Sample:
    """Predicted and measured latencies (µs) of one (op class, format, row set)."""

    op: str
    variant: str
    set: str
    predicted: np.ndarray
    measured: np.ndarray

    @property
    def rel(self) -> np.ndarray:
        return (self.predicted - self.measured) / self.measured

    def errors(self) -> ErrorRow:
        a = np.abs(self.rel)
        return ErrorRow(self.op, self.variant, self.set, int(self.measured.size), float(a.mean()),
                        float(np.median(a)), float((a <= 0.2).mean()), float(self.rel.mean()))


def _moe(rows, hw) -> list[Sample]:
    out = []
    bal = [x for x in rows if x["distribution"] == "balanced"]
    fp4 = compute_dtype(FORMATS["mxfp4"], dict(hw.peak_flops)) == "fp4"
    for dt_csv, dt in DTYPE_NAMES.items():
        compute = None if dt_csv == MXFP4_W4A8 else moe_compute(dt)
        for engine in ENGINES:
            r = [x for x in bal if x["framework"] == engine and x["moe_dtype"] == dt_csv]
            if not r or (dt == "mxfp4" and dt_csv != mxfp4_table(bal, fp4, Reference(engine, r[0]["version"]))):
                continue  # one mxfp4 variant per GPU and engine: the one its calibration fits (MXFP4_W4A8)
            pred = np.concatenate([moe_row_time(g, dt, compute, hw) for g in _by_kernel(r)]) * 1e6
            out.append(Sample("moe", dt, ENGINE_SET[engine], pred,
                              np.concatenate([col(g, "latency_us") for g in _by_kernel(r)])))
            if engine == FRAMEWORK:
                cal = moe_rows(rows, dt_csv)
                keep = moe_fit_mask(moe_row_op(cal, dt, compute))
                out.append(Sample("moe", dt, CALIB, (moe_row_time(cal, dt, compute, hw) * 1e6)[keep],
                                  col(cal, "latency_us")[keep]))
    return out


def _gemm(rows, hw) -> list[Sample]:
    out = []
    for dt_csv in GEMM_DTYPES:
        dt = DTYPE_NAMES[dt_csv]
        for engine in ENGINES:
            r = [x for x in rows if x["framework"] == engine and x["gemm_dtype"] == dt_csv]
            if r:
                pred = op_time(gemm_op(col(r, "m"), col(r, "n"), col(r, "k"), dt), hw, REFINED).time * 1e6
                out.append(Sample("gemm", dt, ENGINE_SET[engine], pred, col(r, "latency_us")))
        cal = gemm_rows(rows, dt_csv)
        if cal:
            pred = op_time(gemm_op(col(cal, "m"), col(cal, "n"), col(cal, "k"), dt), hw, REFINED).time * 1e6
            out.append(Sample("gemm", dt, CALIB, pred, col(cal, "latency_us")))
    return out


def _attention(rows, hw) -> list[Sample]:
    out = []
    for kv_csv in KV_DTYPES:
        kv = DTYPE_NAMES[kv_csv]
        for engine in ENGINES:
            r = [x for x in rows if x["framework"] == engine and x["kv_cache_dtype"] == kv_csv]
            if r:
                pred = op_time(attention_row_op(r, kv), hw, REFINED).time * 1e6
                out.append(Sample("attention", kv, ENGINE_SET[engine], pred, col(r, "latency_us")))
        cal = [x for x in attention_rows(rows, kv_csv) if float(x["kv_len"]) >= ATTN_FIT_MIN_KV]
        if cal:
            pred = op_time(attention_row_op(cal, kv), hw, REFINED).time * 1e6
            out.append(Sample("attention", kv, CALIB, pred, col(cal, "latency_us")))
    return out


def _collectives(rows, hw) -> tuple[list[Sample], int]:
    kinds = {v: k for k, v in COLL_CSV_NAME.items()}
    groups: dict[tuple, list] = {}
    excluded = 0
    for x in rows:
        name, src = x["op_name"], x["kernel_source"]
        if name not in kinds or src.endswith("_eager"):
            excluded += 1
            continue
        kind = kinds[name]
        if src in ("TRTLLM", "NCCL"):
            sets = [ALL_TRT] + ([CALIB] if is_calibration_collective(x, kind) else [])
        else:
            sets = [ENGINE_SET[x["framework"]]]
        for s in sets:
            groups.setdefault((kind, s), []).append(x)
    out = []
    for (kind, s), r in sorted(groups.items()):
        pred = np.empty(len(r))
        n, S = col(r, "num_gpus", int), col(r, "message_bytes")
        for g in np.unique(n):
            sel = n == g
            pred[sel] = collective_view(kind, S[sel], int(g), hw, REFINED) * 1e6
        out.append(Sample("collective", kind, s, pred, col(r, "latency_us")))
    return out, excluded


def merge(samples, op: str, set_name: str) -> Sample | None:
    """All formats of one op class in one row set, pooled."""
    sel = [s for s in samples if s.op == op and s.set == set_name]
    if not sel:
        return None
    return Sample(op, ALL_FORMATS, set_name, np.concatenate([s.predicted for s in sel]),
                  np.concatenate([s.measured for s in sel]))


@dataclass(frozen=True)
class OpValidation:
    """Predicted vs measured latency of every usable row of one measured folder.

    ``samples``: one :class:`Sample` per (op class, format, row set), sorted by op, format and row set (``SETS``
    order). ``excluded``: rows not predicted, by reason."""

    hardware: str
    data: str
    samples: tuple[Sample, ...]
    excluded: Mapping[str, int] = field(default_factory=dict)

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.op for s in self.samples))

    def pooled(self, op: str, set_name: str = CALIB) -> Sample | None:
        """All formats of ``op`` in one row set (None when the set has no rows of it)."""
        return merge(self.samples, op, set_name)

    def mape(self, op: str, set_name: str = CALIB) -> float:
        s = self.pooled(op, set_name)
        return float("nan") if s is None else s.errors().mape

    def table(self) -> tuple[ErrorRow, ...]:
        """The MAPE table: one row per (op, format, row set) and one per (op, all formats, row set); per op the
        formats first, then the pooled rows, each in ``SETS`` order (columns: ``ERROR_COLUMNS``)."""
        rows = [s.errors() for s in self.samples]
        for op in self.ops:
            for st in SETS:
                m = merge(self.samples, op, st)
                if m is not None:
                    rows.append(m.errors())
        order = {s: i for i, s in enumerate(SETS)}
        rows.sort(key=lambda r: (r.op, r.variant == ALL_FORMATS, r.variant, order[r.set]))
        return tuple(rows)


def validate_ops(hw: HardwareProfile | str = "h100-sxm", data: Path | None = None,
                 tables: Mapping[str, list[dict]] | None = None) -> OpValidation:
    """Price every usable row of the measured tables in ``data`` (default: the bundled H100 SXM folder) on the
    profile ``hw`` (a profile or a bundled name/path) and pair each prediction with its measurement. ``tables``:
    the folder's tables already read (and checked: simulator.validate.ops)."""
    from ..specs.catalog import load_hardware, measured_dir

    if isinstance(hw, str):
        hw = load_hardware(hw)
    folder = Path(data) if data is not None else measured_dir("h100-sxm")
    t = tables if tables is not None else read_tables(folder)
    coll, coll_x = _collectives(t["collectives"], hw)
    samples = _moe(t["moe"], hw) + _gemm(t["gemm"], hw) + _attention(t["decode_attention"], hw) + coll
    order = {s: i for i, s in enumerate(SETS)}
    samples.sort(key=lambda s: (s.op, s.variant, order[s.set]))
    moe_x = sum(1 for x in t["moe"] if x["distribution"] != "balanced")
    excluded = MappingProxyType({"MoE power-law rows": moe_x, "eager all-reduce and reduce-scatter rows": coll_x})
    return OpValidation(hw.name, str(folder), tuple(samples), excluded)
