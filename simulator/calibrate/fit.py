"""Calibration of the H100 SXM kernel parameters on ``measured/h100-sxm/`` (``python -m simulator calibrate``).

Every fit prices the measured rows with the engine's own :func:`~simulator.cost.engine.op_time` (through the op
builders of :mod:`simulator.cost.opviews`) and minimises the relative error with ``scipy.optimize.least_squares``,
so the written parameters are exactly what the engine uses. The rows each fit uses (reference engine TRT-LLM
1.3.0rc20) are selected by :mod:`.measured`, which the per-op validation shares. Forms and the resulting errors are
documented in docs/MODEL.md ("Calibration") and in the generated report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from ..cost.engine import collective_seconds, kernel_time, op_time
from ..cost.opviews import gemm_op
from ..errors import ConfigError, ParameterError
from ..specs.dtypes import FORMATS, compute_dtype
from ..specs.hardware import HardwareProfile
from ..specs.kernels import DEFAULT_ENGINE, Collective, Curve, KernelClass
from .diagnose import fit_least_squares
from .guard import REFUSE_AT_BOUNDS, at_bounds, floor_out_of_line, host_timed, kernel_rows, select_moe_rows
from .measured import (
    ATTN_FIT_MIN_KV,
    COLLECTIVES,
    DTYPE_NAMES,
    GEMM_DTYPES,
    KV_DTYPES,
    MOE_DTYPES,
    MOE_FIT_MIN_BYTES,
    MOE_TILE_ROWS,
    MXFP4_W4A8,
    MXFP4_W4A16,
    REF,
    REFINED,
    Reference,
    attention_row_op,
    attention_rows,
    col,
    collective_label,
    engine_display,
    gemm_rows,
    is_calibration_collective,
    mape,
    moe_compute,
    moe_fit_mask,
    moe_row_op,
    moe_rows,
    mxfp4_table,
    read_tables,
)

# Collectives fitted with two regimes (fit_collective): NCCL's low-latency and bandwidth protocols (all-to-all,
# all-gather) and the custom all-reduce's one-shot and two-shot algorithms (docs/MODEL.md §3.7). A refit of the
# all-gather moves the SD host-time fit (specdec.engine_round.FITTED, MODEL_ERROR): re-run FIT_COMMAND with it.
TWO_REGIMES = ("all_reduce", "all_to_all", "all_gather")
PAR_GRID = tuple(2.0 ** j for j in range(-2, 15))  # points of tabulated "parallel" curves


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


def _with_class(hw: HardwareProfile, cls: str, variant: str, kc: KernelClass) -> HardwareProfile:
    k = hw.kernels
    table = dict(k.classes.get(cls, {}))
    table[variant] = kc
    classes = dict(k.classes)
    classes[cls] = MappingProxyType(table)
    return hw.with_changes(kernels=replace(k, classes=MappingProxyType(classes)))


def _par_curve(eta_max: float, a: float, scale: float, source: str) -> Curve:
    ys = [float(np.clip(eta_max * (1.0 - a * np.exp(-x / scale)), 1e-3, 1.0)) for x in PAR_GRID]
    return Curve("parallel", PAR_GRID, tuple(ys), source)


# --- GEMM ---------------------------------------------------------------------------------------------------------
def fit_gemm(rows: list[dict], hw: HardwareProfile, dtype_csv: str, source: str, ref: Reference = REF) -> Fit:
    r = gemm_rows(rows, dtype_csv, ref)
    dtype = DTYPE_NAMES[dtype_csv]
    m, n, k, y = col(r, "m"), col(r, "n"), col(r, "k"), col(r, "latency_us") * 1e-6
    op = gemm_op(m, n, k, dtype)
    groups = np.array([f"n={a:.0f} k={b:.0f}" for a, b in zip(n, k, strict=True)])

    def kernel(th):
        t0, eta, n0, mu, q = th
        return KernelClass(t0 * 1e-6, _par_curve(eta, 1.0, n0, source), Curve.constant("rows", mu, source),
                           MappingProxyType({"combine_q": q}))

    def res(th, mask):
        h = _with_class(hw, "gemm", dtype, kernel(th))
        return (op_time(op, h, REFINED).time[mask] - y[mask]) / y[mask]

    mask = np.ones(len(y), bool)
    lo, hi = [0.0, 0.3, 0.5, 0.1, 1.0], [1000.0, 1.0, 200.0, 1.0, 20.0]
    th, mf, ml, rs = fit_least_squares(res, [4.0, 0.85, 10.0, 0.7, 3.0], lo, hi, groups, mask, m, "m (rows)")
    h = _with_class(hw, "gemm", dtype, kernel(th))
    return Fit("gemm", dtype, kernel(th), len(y), mf, ml, mape(op_time(op, h, REFINED).time, y),
               f"all {engine_display(ref.framework)} rows",
               "(n, k)",
               {"eta_max": th[1], "tiles_scale": th[2], "mu": th[3], "q": th[4],
                # physical ends: q at 1 (compute and memory in series) or its top (the plain roofline max), no ramp
                "at_bounds": tuple(b for b in at_bounds(th, lo, hi, ("fixed", "eta_max", "tiles_scale", "mu",
                                                                      "combine_q"))
                                   if not b.startswith(("combine_q=", "tiles_scale=lower"))), "residuals": rs})


def gemm_host_timed(rows: list[dict], hw: HardwareProfile, dtype_csv: str, ref: Reference = REF) -> str:
    """Why this engine's GEMM rows of one format time host work ('' when they do not; calibrate_guard)."""
    r = gemm_rows(rows, dtype_csv, ref)
    return host_timed(gemm_op(col(r, "m"), col(r, "n"), col(r, "k"), DTYPE_NAMES[dtype_csv]),
                      col(r, "latency_us") * 1e-6, hw)


# --- MoE ----------------------------------------------------------------------------------------------------------
def fit_moe(rows: list[dict], hw: HardwareProfile, dtype_csv: str, source: str, compute_mu: Curve,
            ref: Reference = REF, cls: str = "moe") -> Fit:
    """The MoE kernel of one format (``cls`` "moe"), or TensorRT-LLM's min-latency kernel ("moe_min_latency")."""
    dtype = DTYPE_NAMES[dtype_csv]
    compute = None if dtype_csv == MXFP4_W4A8 else moe_compute(dtype)
    r, left = select_moe_rows(moe_rows(rows, dtype_csv, ref, min_latency=cls == "moe_min_latency"), ref.framework,
                              lambda q: moe_row_op(q, dtype, compute).weight_bytes, hw, cls == "moe")
    op = moe_row_op(r, dtype, compute)
    y = col(r, "latency_us") * 1e-6
    groups = np.array([f'{q["model"]} tp{q["moe_tp_size"]} ep{q["moe_ep_size"]}' for q in r])  # deterministic keys
    fit_mask = moe_fit_mask(op)
    # tile_rows is hand-set in the profile (the balanced rows cannot identify it); the fit uses it and keeps it
    tile_rows = hw.kernels.classes.get(cls, {}).get(dtype, KernelClass()).params.get("tile_rows", MOE_TILE_ROWS)

    def kernel(th):
        f0, fe, eta, eta_act = th
        return KernelClass(f0 * 1e-6, Curve.constant("bytes", eta, source), compute_mu,
                           MappingProxyType({"per_local_expert": fe * 1e-6, "activation_efficiency": eta_act,
                                             "tile_rows": tile_rows}))

    def res(th, mask):
        return (kernel_time(op, kernel(th), hw, REFINED).time[mask] - y[mask]) / y[mask]  # this kernel alone

    # a kernel's floor is paid by every call, L2-warm or not: it cannot exceed the fastest measured call of the
    # kernel (rows below MOE_FIT_MIN_BYTES included), a physical ceiling on the fit's box
    ceiling = min(200.0, float(np.min(y)) * 1e6)
    lo, hi = [0.0, 0.0, 0.3, 0.01], [ceiling, 5.0, 1.0, 1.0]
    th, mf, ml, rs = fit_least_squares(res, [min(25.0, 0.5 * ceiling), 0.1, 0.9, 0.3], lo, hi, groups, fit_mask,
                                       col(r, "num_tokens"), "tokens", [q["kernel_source"] for q in r])
    # a per-local-expert term at 0 and an activation efficiency at 1 are physical ends, not artefacts of the box (a
    # floor pressed against the fastest measured call counts: the form then wants more than a floor there)
    bound = tuple(b for b in at_bounds(th, lo, hi, ("fixed", "per_local_expert", "eta", "activation_efficiency"))
                  if not b.startswith(("per_local_expert=lower", "activation_efficiency=upper")))
    what = (("min-latency kernel, " if cls != "moe" else "") + f"{engine_display(ref.framework)} balanced rows "
            f"streaming >= {MOE_FIT_MIN_BYTES / 1e6:.0f} MB of weights"
            + (f", {dtype_csv} table" if dtype == "mxfp4" else ""))
    return Fit(cls, dtype, kernel(th), int(fit_mask.sum()), mf, ml,
               mape(kernel_time(op, kernel(th), hw, REFINED).time, y), what, "(model, tp, ep)",
               {"rows_total": len(y), "at_bounds": bound, "left_out": left, "residuals": rs})


# --- attention ----------------------------------------------------------------------------------------------------
def fit_attention(rows: list[dict], hw: HardwareProfile, kv_csv: str, source: str, ref: Reference = REF) -> Fit:
    r, left = kernel_rows(attention_rows(rows, kv_csv, ref), ref.framework, "attention")
    kv_dtype = DTYPE_NAMES[kv_csv]
    op = attention_row_op(r, kv_dtype)
    y = col(r, "latency_us") * 1e-6
    groups = np.array([f"{a:.0f}/{b:.0f} heads" for a, b in zip(col(r, "num_heads"), col(r, "num_key_value_heads"),
                                                                 strict=True)])
    fit_mask = col(r, "kv_len") >= ATTN_FIT_MIN_KV

    def kernel(th):
        t0, c_par, eta, a, scale = th
        return KernelClass(t0 * 1e-6, _par_curve(eta, a, scale, source), None,
                           MappingProxyType({"per_parallel": c_par * 1e-9}))

    def res(th, mask):
        hh = _with_class(hw, "attention", kv_dtype, kernel(th))
        return (op_time(op, hh, REFINED).time[mask] - y[mask]) / y[mask]

    lo, hi = [0.0, 0.0, 0.3, 0.0, 0.1], [50.0, 200.0, 1.0, 0.999, 1000.0]
    th, mf, ml, rs = fit_least_squares(res, [9.0, 5.0, 0.9, 0.5, 4.0], lo, hi, groups, fit_mask,
                                       col(r, "batch_size") * col(r, "kv_len"), "batch × kv_len",
                                       [q["kernel_source"] for q in r])
    hh = _with_class(hw, "attention", kv_dtype, kernel(th))
    bound = tuple(b for b in at_bounds(th, lo, hi, ("fixed", "per_parallel", "eta_max", "ramp", "parallel_scale"))
                  if not b.startswith(("per_parallel=lower", "ramp=lower")))  # physical ends: no term, no ramp
    return Fit("attention", kv_dtype, kernel(th), int(fit_mask.sum()), mf, ml,
               mape(op_time(op, hh, REFINED).time, y),
               f"{engine_display(ref.framework)} rows with kv_len >= {ATTN_FIT_MIN_KV}", "(heads, kv heads)",
               {"rows_total": len(y), "at_bounds": bound, "left_out": (left,) if left else (), "residuals": rs})


# --- collectives --------------------------------------------------------------------------------------------------
def fit_collective(rows: list[dict], hw: HardwareProfile, kind: str, ref: Reference = REF) -> Fit:
    """Two regimes, ``min(small, large)`` (:data:`TWO_REGIMES`): the custom all-reduce's one-shot and two-shot
    kernels; NCCL all-to-all's low-latency (LL/LL128) and bandwidth (Simple) protocols, whose one-line fit was ~10%
    slow below 8 KiB and ~20% fast at 256 KiB-8 MiB on every GPU. Its bulk (large) efficiency is also its fabric
    efficiency (the bytes crossing the scale-out fabric are bulk transfers). Others: one line."""
    two = kind in TWO_REGIMES
    r = [x for x in rows if is_calibration_collective(x, kind, ref)]
    label = collective_label(kind, ref)
    S, n, y = col(r, "message_bytes"), col(r, "num_gpus", int), col(r, "latency_us") * 1e-6

    def coll(th):
        if not two:
            return Collective(th[0] * 1e-6, th[1] * 1e-6, th[2])
        return Collective(th[0] * 1e-6, th[1] * 1e-6, th[2], th[3] * 1e-6, th[4],
                          fabric_efficiency=None if kind == "all_reduce" else th[4])

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
    th, mf, ml, rs = fit_least_squares(res, x0, lo, hi, np.array([f"{g} GPUs" for g in n]), mask, S, "message bytes",
                                       [x["kernel_source"] for x in r])
    names = ("latency", "latency_per_gpu", "efficiency", "large_latency", "large_efficiency")[:len(th)]
    bound = tuple(b for b in at_bounds(th, lo, hi, names) if not b.startswith("latency_per_gpu=lower"))
    return Fit("collective", kind, coll(th), len(y), mf, ml, mape(pred(th, mask), y), label, "GPU count",
               {"residuals": rs, "at_bounds": bound})


@dataclass(frozen=True)
class Calibration:
    gpu: str  # the measured GPU, as a profile name (the data's ``gpu`` column, e.g. h100_sxm -> h100-sxm)
    fits: tuple[Fit, ...]
    eager_extra: float  # s per kernel without CUDA graphs
    eager_rows: int
    engine: str = DEFAULT_ENGINE
    data: str = "measured/h100-sxm"  # what was read, for the written source text
    reference: Reference = REF
    missing: tuple[str, ...] = ()  # "<op> <format>" the data has no rows of (left to the fallback rules)
    refused: tuple[str, ...] = ()  # "<op> <format>: reason" left out by the guards (calibrate_guard; fallback rules)


def refusal(f: Fit, hw: HardwareProfile, engine: str) -> str:
    """Why a fit may not be written ('' when it may): parameters at their bounds, or a floor out of line."""
    bound = f.notes.get("at_bounds", ())
    if len(bound) >= REFUSE_AT_BOUNDS:
        return "at the bounds of its fit: " + ", ".join(bound)
    if isinstance(f.kernel, KernelClass):
        return floor_out_of_line(hw, engine, f.cls, f.variant, f.kernel.fixed)
    return ""


def fit_eager(rows: list[dict], framework: str | None = None) -> tuple[float, int]:
    """Median (eager − graph) latency of the same custom all-reduce call: the per-kernel cost of running without
    CUDA graphs (host launch and synchronisation). Pairs of ``framework`` when it has any, else every engine's."""
    pairs: dict[tuple, dict] = {}
    for x in rows:
        src = x["kernel_source"]
        if src.endswith(("_eager", "_graph")):
            key = (x["framework"], x["version"], src.rsplit("_", 1)[0], x["num_gpus"], x["message_bytes"])
            pairs.setdefault(key, {})[src.rsplit("_", 1)[1]] = float(x["latency_us"])
    if framework is not None and any(k[0].lower() == framework.lower() for k in pairs):
        pairs = {k: v for k, v in pairs.items() if k[0].lower() == framework.lower()}
    small = [v["eager"] - v["graph"] for k, v in pairs.items() if "eager" in v and "graph" in v
             and float(k[4]) <= 65536]
    if not small:
        return float("nan"), 0
    return float(np.median(small)) * 1e-6, len(small)


def _gpu_of(rows_by_table: dict) -> list[str]:
    from .aic_tables import GPU_NAMES

    return sorted({GPU_NAMES.get(row["gpu"], row["gpu"].replace("_", "-"))
                   for rows in rows_by_table.values() for row in rows})


def calibrate(hw: HardwareProfile, data: Path | None = None, source: str = "fit-h100", progress=None,
              force: bool = False, tables: dict | None = None, engine: str = DEFAULT_ENGINE,
              ref: Reference = REF, label: str | None = None) -> Calibration:
    """Fit every kernel variant of ``hw`` that the data has rows of, for one engine: on ``tables`` (rows in the
    measured-CSV layout, e.g. :func:`simulator.calibrate.aic_tables.read_package`) or on the CSVs in ``data`` (default:
    the bundled ``measured/h100-sxm/``, :func:`~simulator.specs.catalog.measured_dir`). ``ref`` names the rows
    (engine label, version, NCCL version). NCCL collectives are engine-independent: only the default engine fits
    them."""
    from ..specs.catalog import measured_dir

    say = progress or (lambda msg: None)
    if tables is None:
        data = Path(data) if data is not None else measured_dir("h100-sxm")
        tables = read_tables(data)
        label = label or f"{data.parent.name}/{data.name}"
    where = label or str(data)
    gpus = _gpu_of(tables)
    if len(gpus) != 1:
        raise ConfigError(where, "gpu", f"holds rows of {len(gpus)} GPUs ({', '.join(gpus)})",
                          "the 'data' parameter must name a folder of one GPU's measurements")
    if gpus[0] != hw.name and not force:
        expected = f"the {gpus[0]} profile (the GPU measured in {where}) unless forced"
        raise ParameterError(f"the 'hw' parameter of calibrate must be {expected}. Got {hw.name!r} instead.",
                             owner="calibrate", param="hw", expected=expected, value=hw.name)
    moe, attn, coll = tables["moe"], tables["decode_attention"], tables["collectives"]
    if not gemm_rows(tables["gemm"], "bfloat16", ref):
        raise ConfigError(where, "gemm", f"has no bf16 GEMM rows of {engine_display(ref.framework)} {ref.version} "
                          f"on {gpus[0]}", "pick an engine/version with data for this GPU (python -m simulator "
                          "calibrate --list)")
    fits, missing, refused = [], [], []

    def keep(f: Fit) -> bool:
        why = refusal(f, hw, engine)
        if why:
            refused.append(f"{f.cls} {f.variant}: {why} (MAPE {f.mape_fit:.1%})")
        else:
            fits.append(f)
        return not why

    gemm_fits = {}
    for dt in GEMM_DTYPES:
        if not gemm_rows(tables["gemm"], dt, ref):
            missing.append(f"gemm {DTYPE_NAMES[dt]}")
            continue
        why = gemm_host_timed(tables["gemm"], hw, dt, ref)
        if why:
            refused.append(f"gemm {DTYPE_NAMES[dt]}: {why}")
            continue
        say(f"calibrate: gemm {dt}")
        f = fit_gemm(tables["gemm"], hw, dt, source, ref)
        if keep(f):
            gemm_fits[f.variant] = f
    fp4 = compute_dtype(FORMATS["mxfp4"], dict(hw.peak_flops)) == "fp4"
    for dt in MOE_DTYPES:
        name = DTYPE_NAMES[dt]
        if dt == MXFP4_W4A16:
            dt = mxfp4_table(moe, fp4, ref)
        r = moe_rows(moe, dt, ref)
        if not r or not moe_fit_mask(moe_row_op(r, name, None if dt == MXFP4_W4A8 else moe_compute(name))).any():
            missing.append(f"moe {name}")
            continue
        say(f"calibrate: moe {dt}")
        # the GEMM's μ of this format (else this engine's bf16 GEMM's); a refused GEMM fit leaves the profile's
        # (default engine's) value of that format
        refused_gemm = any(r.startswith(f"gemm {name}:") for r in refused)
        mu = hw.kernels.get("gemm", name).compute if refused_gemm else \
            gemm_fits.get(name, gemm_fits["bf16"]).kernel.compute
        keep(fit_moe(moe, hw, dt, source, mu, ref))
        if moe_rows(moe, dt, ref, min_latency=True):
            say(f"calibrate: moe min-latency {dt}")
            keep(fit_moe(moe, hw, dt, source, mu, ref, cls="moe_min_latency"))
    for kv in KV_DTYPES:
        if not [x for x in attention_rows(attn, kv, ref) if float(x["kv_len"]) >= ATTN_FIT_MIN_KV]:
            missing.append(f"attention {DTYPE_NAMES[kv]}")
            continue
        say(f"calibrate: attention kv {kv}")
        keep(fit_attention(attn, hw, kv, source, ref))
    for kind in COLLECTIVES:
        if kind != "all_reduce" and engine != DEFAULT_ENGINE:
            continue
        if not any(is_calibration_collective(x, kind, ref) for x in coll):
            missing.append(f"collective {kind}")
            continue
        say(f"calibrate: {kind}")
        fits.append(fit_collective(coll, hw, kind, ref))
    eager, n_eager = fit_eager(coll, None if engine == DEFAULT_ENGINE else ref.framework)
    return Calibration(gpus[0], tuple(fits), eager, n_eager, engine, where, ref, tuple(missing), tuple(refused))


def calibrate_engine(gpu: str, engine: str = DEFAULT_ENGINE, version: str | None = None, root=None,
                     progress=None, hw: HardwareProfile | None = None) -> Calibration:
    """Calibrate ``gpu`` (catalog name) for ``engine`` on aiconfigurator-core's tables (:mod:`.aic_tables`): the
    engine's newest version unless ``version``; the newest NCCL version label for the all-to-all / all-gather."""
    from ..params import Options, Param
    from ..specs.catalog import ENGINES, load_hardware
    from .aic_tables import FRAMEWORK_LABEL, read_package, version_key

    Param(Options(ENGINES)).check(engine, "engine", "calibrate_engine")
    pkg = read_package(gpu, {engine: version} if version else None, root, engines=(engine,))
    if engine not in pkg.versions:
        raise ConfigError(pkg.source, f"{gpu}/{engine}", f"has no tables of engine {engine!r} for {pkg.gpu}",
                          f"calibrate another engine of {pkg.gpu} or leave it to the default engine")
    nccl = sorted({x["version"] for x in pkg.tables["collectives"] if x["kernel_source"] == "NCCL"
                   and x["dtype"] == "half" and x["version"]}, key=version_key)
    ref = Reference(FRAMEWORK_LABEL[engine], pkg.versions[engine], nccl[-1] if nccl else "")
    hw = hw or load_hardware(pkg.gpu)
    return calibrate(hw, source=f"fit-{engine}", progress=progress, tables=pkg.tables, engine=engine, ref=ref,
                     label=f"{pkg.source} {gpu} tables")
