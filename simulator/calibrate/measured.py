"""The measured per-op tables (``measured/<gpu>/*.csv``): reading and the row sets.

One home for what the calibration (:mod:`.calibrate`) and the per-op validation (:mod:`.op_errors`) both need: the
reference engine, the CSV readers, and the **row selections**: which rows the calibration fits.
:func:`.op_errors.validate_ops` prices every usable row with the engine's own :func:`~simulator.cost.engine.op_time`
(through the op builders of :mod:`.opviews`, which mirror the CSV columns) under the refined mechanisms.

Row sets, per op class and format: the **calibration rows** (exactly the rows and filters ``calibrate`` fits),
**all TRT-LLM rows** (the reference engine, filters removed), and **SGLang** / **vLLM** rows (other engines'
kernels: out-of-calibration checks). Not predicted, and counted as excluded: MoE ``power_law`` rows (the
benchmark's random power-law draw is not replicated), reduce-scatter (not modelled) and eager (non-CUDA-graph)
all-reduce rows. Latencies in the tables are µs.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..cost.deployment import Mechanisms
from ..cost.engine import op_time
from ..cost.opviews import attention_op, balanced_routing, moe_op
from ..errors import ConfigError
from ..specs.catalog import list_engines
from ..specs.hardware import HardwareProfile

REFINED = Mechanisms()
FRAMEWORK, VERSION = "TRTLLM", "1.3.0rc20"  # the reference engine the calibration fits
NCCL_VERSION = "2.29.2"  # NCCL rows the all-to-all and all-gather fits use (dtype "half")


class Reference(NamedTuple):
    """The rows one calibration fits: an engine's ``framework`` label and ``version`` (MoE, GEMM, attention and its
    CUDA-graph all-reduce) and the NCCL version label of the all-to-all / all-gather rows."""

    framework: str = FRAMEWORK
    version: str = VERSION
    nccl: str = NCCL_VERSION


REF = Reference()  # the bundled H100 SXM profile's default-engine (TRT-LLM) calibration
TABLES = ("moe", "gemm", "decode_attention", "collectives")  # <table>.csv in a measured folder
DTYPE_NAMES = {"bfloat16": "bf16", "fp8": "fp8", "fp8_block": "fp8_block", "w4a16_mxfp4": "mxfp4",
               "w4a8_mxfp4_mxfp8": "mxfp4", "nvfp4": "nvfp4"}
GEMM_DTYPES = ("bfloat16", "fp8", "fp8_block", "nvfp4")
MOE_DTYPES = ("bfloat16", "fp8", "fp8_block", "w4a16_mxfp4", "nvfp4")
KV_DTYPES = ("bfloat16", "fp8")
COLLECTIVES = ("all_reduce", "all_to_all", "all_gather")
COLL_CSV_NAME = {"all_reduce": "all_reduce", "all_to_all": "alltoall", "all_gather": "all_gather"}
MOE_FIT_MIN_BYTES = 100e6  # MoE rows streaming less may be L2-warm in the benchmark (docs/MODEL.md)
MOE_TILE_ROWS = 128.0  # grouped-GEMM M tile when a profile states none (hardware/h100-sxm.yaml sets it by hand)
ATTN_FIT_MIN_KV = 256  # attention rows with fewer cached tokens are launch-dominated; fitted only as "all rows"

CALIB, ALL_TRT, SGLANG, VLLM = ("calibration rows", "all TRT-LLM rows", "SGLang (out of calibration)",
                                "vLLM (out of calibration)")
SETS = (CALIB, ALL_TRT, SGLANG, VLLM)
# The tables' framework labels (each engine file's calibration.framework) and the row set each engine's rows go to.
ENGINES = tuple(e.default.calibration["framework"] for e in list_engines() if e.default.calibration["framework"])
ENGINE_SET = {**{e.default.calibration["framework"]: (ALL_TRT if e.default.calibration["framework"] == FRAMEWORK
                                                       else f"{e.display_name} (out of calibration)")
                 for e in list_engines() if e.default.calibration["framework"]}, "vLLM": VLLM}
ALL_FORMATS = "all formats"
ERROR_COLUMNS = ("op", "format", "row set", "n", "MAPE", "median APE", "within ±20%", "bias (mean signed)")


# --- reading ------------------------------------------------------------------------------------------------------
def read_csv(path: Path) -> list[dict]:
    """All rows of one measured table as dicts of strings."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:  # with or without a byte-order mark
            return list(csv.DictReader(fh))
    except FileNotFoundError:
        raise ConfigError(str(path), "", "does not exist",
                          "the 'data' parameter must name a folder holding " + ", ".join(f"{t}.csv" for t in TABLES)
                          + " (the bundled one is simulator.specs.catalog.measured_dir('h100-sxm'))") from None


def read_tables(data: Path | None = None) -> dict[str, list[dict]]:
    """``{table: rows}`` for every table of ``data`` (default: the bundled H100 SXM folder)."""
    if data is None:
        from ..specs.catalog import measured_dir

        data = measured_dir("h100-sxm")
    return {t: read_csv(Path(data) / f"{t}.csv") for t in TABLES}


def col(rows: list[dict], name: str, kind=float) -> np.ndarray:
    return np.array([kind(r[name]) for r in rows])


def mape(pred, meas) -> float:
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return float(np.mean(np.abs(pred - meas) / meas))


def _reference(x: dict, ref: Reference = REF) -> bool:
    return x["framework"].lower() == ref.framework.lower() and x["version"] == ref.version


# --- the calibration's row selections ------------------------------------------------------------------------------
def gemm_rows(rows: list[dict], dtype_csv: str, ref: Reference = REF) -> list[dict]:
    """GEMM rows the calibration fits: every reference-engine row of one format."""
    return [x for x in rows if _reference(x, ref) and x["gemm_dtype"] == dtype_csv]


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


def moe_rows(rows: list[dict], dtype_csv: str, ref: Reference = REF, min_latency: bool = False) -> list[dict]:
    """MoE rows the calibration prices: reference-engine ``balanced`` rows of one format, isolated spikes removed,
    of the throughput kernels, or (``min_latency``) of TensorRT-LLM's ``min_latency`` kernels alone, fitted apart as
    the ``moe_min_latency`` class (they re-route the benchmark's logits with their own grouped top-k, measured/README:
    priced with the balanced count of experts, an upper bound of their weight traffic) (the fit then keeps those
    streaming at least ``MOE_FIT_MIN_BYTES``: :func:`moe_fit_mask`)."""
    r = [x for x in rows if _reference(x, ref) and x["moe_dtype"] == dtype_csv and x["distribution"] == "balanced"
         and ("min_latency" in x["kernel_source"]) == min_latency]
    return drop_spikes(r, ("model", "moe_tp_size", "moe_ep_size"), "num_tokens")


# mxfp4 MoE tables come in two variants: W4A16 (bf16 activations; weights dequantised) and W4A8 (activations
# quantised to mxfp8, mxfp4 x mxfp8 MMAs on fp4-capable tensor cores). On GPUs with fp4 tensor cores the engines'
# default gpt-oss path is W4A8 (TRT-LLM QuantAlgo W4A8_MXFP4_MXFP8 on SM100, W4A16 only by override; SGLang's
# flashinfer MXFP4 MoE quantises activations to mxfp8 unless --flashinfer-mxfp4-moe-precision bf16), and the
# catalog prices mxfp4 there on the format's own tensor-core path (specs.dtypes.compute_dtype), so the fit reads the
# W4A8 rows where the engine's tables have them; elsewhere (Hopper, vLLM's mxfp4_bf16 kernels) the W4A16 rows.
MXFP4_W4A8, MXFP4_W4A16 = "w4a8_mxfp4_mxfp8", "w4a16_mxfp4"


def mxfp4_table(rows: list[dict], fp4_tensor_cores: bool, ref: Reference = REF) -> str:
    """The mxfp4 MoE variant the calibration fits (see MXFP4_W4A8)."""
    if fp4_tensor_cores and any(_reference(x, ref) and x["moe_dtype"] == MXFP4_W4A8 for x in rows):
        return MXFP4_W4A8
    return MXFP4_W4A16


def moe_compute(dtype: str) -> str | None:
    """Tensor-core format of a MoE row: W4A16 (mxfp4 weights) runs on bf16 tensor cores on Hopper."""
    return "bf16" if dtype == "mxfp4" else None


@functools.lru_cache(maxsize=4096)
def _balanced(tokens: int, experts: int, top_k: int, ep: int) -> tuple[int, int]:
    """:func:`balanced_routing` of one row shape, once per shape (the tables repeat a few hundred shapes)."""
    return balanced_routing(tokens, experts, top_k, ep)


def moe_row_op(r: list[dict], dtype: str, compute: str | None = None):
    """The op of MoE rows, with the benchmark's ``balanced`` routing on EP rank 0."""
    T = col(r, "num_tokens", int)
    E, K = col(r, "num_experts", int), col(r, "topk", int)
    tp, ep = col(r, "moe_tp_size", int), col(r, "moe_ep_size", int)
    routed = np.array([_balanced(int(t), int(e), int(k), int(p)) for t, e, k, p in zip(T, E, K, ep, strict=True)])
    return moe_op(col(r, "hidden_size", int), col(r, "inter_size", int), E, K, T, dtype, tp, ep, routed[:, 0],
                  routed[:, 1], compute=compute)


def row_kernel(row: dict) -> str:
    """The profile's kernel class a MoE row timed: TensorRT-LLM's ``min_latency`` kernels are fitted apart as
    ``moe_min_latency``; every other row times the throughput kernel (``moe``)."""
    return "moe_min_latency" if "min_latency" in row["kernel_source"] else "moe"


def _by_kernel(rows: list[dict]) -> list[list[dict]]:
    """``rows`` grouped by :func:`row_kernel` (throughput rows first), each group in table order."""
    groups: dict[str, list[dict]] = {}
    for x in rows:
        groups.setdefault(row_kernel(x), []).append(x)
    return [groups[k] for k in sorted(groups, key=lambda k: k != "moe")]


def moe_row_time(r: list[dict], dtype: str, compute: str | None, hw: HardwareProfile) -> np.ndarray:
    """Seconds of MoE rows of one kernel (:func:`row_kernel`) priced on that kernel of ``hw``: a per-op check
    compares a kernel with its own measurements, whatever the engine's rule would run (docs/MODEL.md §3.4)."""
    kernel = row_kernel(r[0]) if r else "moe"
    if kernel not in hw.kernels.classes:
        kernel = "moe"  # a profile without the alternative kernel: its throughput kernel stands in
    return op_time(moe_row_op(r, dtype, compute), hw, REFINED, kernel=kernel).time


def moe_fit_mask(op) -> np.ndarray:
    return np.asarray(op.weight_bytes) >= MOE_FIT_MIN_BYTES


def attention_rows(rows: list[dict], kv_csv: str, ref: Reference = REF) -> list[dict]:
    """Attention rows the calibration prices: reference-engine full-attention rows of one KV format (the fit keeps
    ``kv_len >= ATTN_FIT_MIN_KV``)."""
    return [x for x in rows if _reference(x, ref) and x["kv_cache_dtype"] == kv_csv and int(x["window_size"]) == 0]


def attention_row_op(r: list[dict], kv_dtype: str):
    """The op of attention rows; a sliding window caps the tokens read."""
    b, h, kvh, hd, L = (col(r, c) for c in ("batch_size", "num_heads", "num_key_value_heads", "head_dim", "kv_len"))
    win = col(r, "window_size")
    return attention_op(b, h, kvh, hd, np.where(win > 0, np.minimum(L, win), L), kv_dtype)


def is_calibration_collective(x: dict, kind: str, ref: Reference = REF) -> bool:
    """A collectives row the ``kind`` fit uses: the reference engine's CUDA-graph all-reduce (its custom kernel;
    eager rows excluded), NCCL's all-to-all/all-gather."""
    if x["op_name"] != COLL_CSV_NAME[kind]:
        return False
    if kind == "all_reduce":
        return _reference(x, ref) and x["kernel_source"] != "NCCL" and not x["kernel_source"].endswith("_eager")
    return x["kernel_source"] == "NCCL" and x["version"] == ref.nccl and x["dtype"] == "half"


def engine_display(framework: str) -> str:
    """The engine's display name (its file's display_name) for a tables' framework label (any case)."""
    for e in list_engines():
        if e.default.calibration["framework"].lower() == framework.lower():
            return e.display_name
    return framework


def collective_label(kind: str, ref: Reference = REF) -> str:
    return (f"{engine_display(ref.framework)} {ref.version} all_reduce" if kind == "all_reduce"
            else f"NCCL {ref.nccl} {COLL_CSV_NAME[kind]} (half)")
