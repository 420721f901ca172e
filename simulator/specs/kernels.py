"""Kernel-efficiency curves and fixed costs of a hardware profile (the ``kernels:`` section).

A profile either states them (H100 SXM: fitted to ``measured/h100-sxm/`` by ``python -m simulator calibrate``) or
says ``derive_from: <profile>``: the what-if rule of docs/MODEL.md then takes the curve *shapes* and fixed costs of
that profile and rescales them by the target's own spec-sheet numbers (see :mod:`simulator.specs.whatif`).

Each op class has *variants* keyed by the format its kernel runs on (weight format for gemm/moe, KV dtype for
attention, ``any`` for format-independent classes). Curves are piecewise linear in log(x), clamped outside::

    memory: {x: parallel, points: [[1, 0.10], [8, 0.55], [64, 0.83]], source: fit-h100}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import numpy as np

from .schema import Reader

# Variables a curve may be a function of (docs/MODEL.md, "Kernel efficiency"):
#   bytes    - HBM bytes the op moves;
#   rows     - GEMM rows (tokens) or tokens per active expert;
#   parallel - independent work units: GEMM output tiles (n/128), attention (request, KV head) pairs.
CURVE_X = ("bytes", "rows", "parallel")

# The extra kernel parameters a class may state, with their dimension (simulator.specs.units): the one home of
# which parameters are seconds (TIME_PARAMS: read from YAML in any time unit, written back by the calibration in µs).
KERNEL_PARAMS: dict[str, str] = {
    "per_local_expert": "time",  # s per expert resident on the rank (moe)
    "per_token": "time",  # s per token (moe, sampling)
    "per_parallel": "time",  # s per (request, KV head) pair (attention)
    "activation_efficiency": "fraction",  # η_act of per-(token, expert) activation traffic (moe)
    "tile_rows": "count",  # rows per M tile: weights are re-read once per extra tile (moe)
    "combine_q": "count",  # exponent of the smooth max of compute and memory time
}
TIME_PARAMS = tuple(name for name, dim in KERNEL_PARAMS.items() if dim == "time")
# Parameters that describe a kernel's tiling rather than its speed: the pure roofline keeps them.
SHAPE_PARAMS = ("tile_rows",)


def _dims(*names: str) -> dict[str, str]:
    return {n: KERNEL_PARAMS[n] for n in names}


# Op classes, their variant keys, and the extra parameters (name -> dimension, from KERNEL_PARAMS) each may state.
OP_CLASSES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "gemm": (("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "int4_wo"), _dims("combine_q")),
    "moe": (("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "int4_wo"),
            _dims("per_local_expert", "per_token", "activation_efficiency", "tile_rows", "combine_q")),
    # TensorRT-LLM's min-latency fused MoE (moe_torch_flow_min_latency): a second kernel of the same format, fitted
    # on its own rows; an experts op is priced with the faster of the two at each point (docs/MODEL.md §3.4)
    "moe_min_latency": (("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "int4_wo"),
                        _dims("per_local_expert", "per_token", "activation_efficiency", "tile_rows", "combine_q")),
    "attention": (("bf16", "fp8"), _dims("per_parallel", "combine_q")),
    "elementwise": (("any",), {}),
    "router": (("any",), {}),
    "embedding": (("any",), {}),
    "sampling": (("any",), _dims("per_token")),
}
OPTIONAL_CLASSES = ("moe_min_latency",)  # op classes a profile may leave out
# the alternative kernels of an op class, each used for exactly the op's variant (no fallback) where stated
ALTERNATIVE_KERNELS = {"moe": ("moe_min_latency",)}
REQUIRED_VARIANTS = {"gemm": ("bf16",), "moe": ("bf16",), "attention": ("bf16",), "elementwise": ("any",),
                     "router": ("any",), "embedding": ("any",), "sampling": ("any",)}
# A variant with no parameters of its own uses the first of these that the profile has (docs/MODEL.md).
VARIANT_FALLBACK = {"nvfp4": ("fp8_block", "fp8", "bf16"), "int4_wo": ("mxfp4", "bf16"),
                    "mxfp4": ("bf16",), "fp8_block": ("fp8", "bf16"), "fp8": ("bf16",)}
COLLECTIVES = ("all_reduce", "all_to_all", "all_gather")  # every profile states these (NCCL / the engine's own)
# MoE dispatch/combine kernels a deployment may choose instead of the plain all-to-all (Deployment.all_to_all;
# docs/MODEL.md §3.9): DeepEP's normal (high-throughput) and low-latency modes. Optional in a profile.
A2A_MODES = {"nccl": "all_to_all", "deepep_normal": "deepep_normal", "deepep_low_latency": "deepep_low_latency"}
OPTIONAL_COLLECTIVES = ("deepep_normal", "deepep_low_latency")
# Serving engines a profile may state kernels for (docs/MODEL.md §3.7): ``kernels:`` is the default engine's;
# ``engines: {<engine>: {kernels: ...}}`` replaces its entries (the rest is the default's: the documented fallback).
# The engines are the catalog's (engines/*.yaml, simulator.specs.engine; each names its vendors there).
DEFAULT_ENGINE = "trtllm"
# GPU architectures a profile names (HardwareProfile.architecture) and an engine's kernel rules select by.
ARCHITECTURES = ("ampere", "hopper", "blackwell", "blackwell-ultra", "rubin", "cdna3", "cdna4")
STEP_FIXED = {
    "host_overhead": "per forward pass: scheduler, input preparation, output copy (s)",
    "launch_eager": "extra per-kernel cost without CUDA graphs (s)",
    "rejection_sampling": "per verify pass: acceptance test and bookkeeping (s)",
}
# Optional per-step costs: name -> (meaning, the required cost used when a profile does not state it).
STEP_OPTIONAL = {
    "draft_host_overhead": ("per draft pass: host work of one drafter step inside the engine's round (s)",
                            "host_overhead"),
}


# Round parameters of speculative decoding (docs/MODEL.md §4.6): name -> dimension. Each is a band; the engine file
# states them all (``round:``, simulator.specs.engine.RoundParams, whose fields are these names), and a profile may
# replace some for one engine (``kernels.round`` for the default engine, ``engines.<engine>.kernels.round``, each
# ``{low: Q, central: Q, high: Q}``): an engine block does not inherit the default engine's round parameters.
ROUND_KEYS: dict[str, str] = {
    "round_host": "time", "sync": "time", "per_request": "time", "per_token": "time", "draft_step_host": "time",
    "decode_host": "time", "sample_pass": "time", "sample_reads": "count", "tree_build": "time",
    "dp_sync": "time", "draft_step_offset": "time",
}
BAND_ENDS = ("low", "central", "high")


@dataclass(frozen=True)
class Curve:
    """Efficiency (0, 1] as a function of ``x``; piecewise linear in log(x) between ``xs``, clamped outside."""

    x: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    source: str = ""

    def __call__(self, value):
        v = np.log(np.maximum(np.asarray(value, dtype=float), 1e-30))
        return np.interp(v, *self._knots)

    @cached_property
    def _knots(self) -> tuple[np.ndarray, np.ndarray]:
        """(log xs, ys) as arrays, formed once per curve (a 64k-point sweep evaluates curves ~13k times)."""
        return np.log(np.asarray(self.xs)), np.asarray(self.ys)

    @classmethod
    def constant(cls, x: str, y: float, source: str = "") -> Curve:
        return cls(x, (1.0,), (float(y),), source)

    def scaled(self, x_factor: float = 1.0, y_factor: float = 1.0, y_cap: float = 1.0) -> Curve:
        return Curve(self.x, tuple(x * x_factor for x in self.xs),
                     tuple(min(y_cap, y * y_factor) for y in self.ys), self.source)

    def as_dict(self) -> dict:
        return {"x": self.x, "points": [[a, b] for a, b in zip(self.xs, self.ys, strict=True)],
                "source": self.source}


# μ of a class whose profile entry states no compute curve (docs/MODEL.md §3.4). Decode attention: FlashMLA, the
# compute-bound decode kernel (MLA: 2·(r_kv + d_rope + r_kv) FLOPs per query head per cached token, above the ridge
# point of every GPU here), reaches 660 TFLOPS on H800 SXM5, 0.667 of its 989.4 dense BF16 TFLOPS
# (https://github.com/deepseek-ai/FlashMLA README, "Performance Update (2025.04.22)"; the previous kernel 580,
# 0.586). The calibration's attention tables are GQA decode rows, memory-bound, so they cannot identify μ.
FLASHMLA_COMPUTE_EFFICIENCY = 660.0 / 989.4
DEFAULT_COMPUTE = {"attention": FLASHMLA_COMPUTE_EFFICIENCY}


@dataclass(frozen=True)
class KernelClass:
    """Kernel parameters of one op class and variant."""

    fixed: float = 0.0  # s, per kernel call (latency floor)
    memory: Curve | None = None  # η: achieved fraction of peak HBM bandwidth
    compute: Curve | None = None  # μ: achieved fraction of peak FLOP/s
    params: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Collective:
    """``min(small, large)`` algorithm costs for one collective on ``n`` GPUs (docs/MODEL.md, "Collectives").

    small: ``latency + latency_per_gpu · n + S · f_small(n) / (link · efficiency)`` (one-shot for all-reduce);
    large: ``large_latency + S · f_large(n) / (link · large_efficiency)`` when stated (ring / NCCL).
    Beyond one scale-up domain the cross-domain part pays ``fabric_latency + fabric_latency_per_doubling ·
    log2(domains)`` and runs at ``scale_out_bandwidth · fabric_efficiency`` (unstated: the profile's
    ``scale_out_latency``, no per-doubling term, and ``efficiency``)."""

    latency: float
    latency_per_gpu: float
    efficiency: float
    large_latency: float | None = None
    large_efficiency: float | None = None
    fabric_latency: float | None = None
    fabric_latency_per_doubling: float = 0.0
    fabric_efficiency: float | None = None
    # DeepEP low-latency in hook mode (two-batch overlap, docs/MODEL.md §3.5): the send and receive kernels' own SM
    # time on the compute stream, as bytes per rank over these rates (dispatch: send + recv; combine: send + recv);
    # None = not priced (no published split for the GPU)
    hook_dispatch_rate: float | None = None
    hook_combine_rate: float | None = None


@dataclass(frozen=True)
class Kernels:
    """All kernel-level parameters of a profile. ``derive_from`` is set until the what-if rule resolves it."""

    derive_from: str | None = None
    global_efficiency: float = 0.8
    classes: Mapping[str, Mapping[str, KernelClass]] = field(default_factory=lambda: MappingProxyType({}))
    collectives: Mapping[str, Collective] = field(default_factory=lambda: MappingProxyType({}))
    step: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    round: Mapping[str, tuple[float, float, float]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def resolved(self) -> bool:
        return self.derive_from is None

    def get(self, cls: str, variant: str = "any") -> KernelClass:
        """Parameters of op class ``cls`` for ``variant``, following VARIANT_FALLBACK."""
        table = self.classes[cls]
        for v in (variant, *VARIANT_FALLBACK.get(variant, ()), "any", "bf16"):
            if v in table:
                return table[v]
        return next(iter(table.values()))


def _curve(r: Reader, obj: Mapping, key: str, path: str) -> Curve | None:
    if key not in obj:
        return None
    p = r.join(path, key)
    c = r.mapping(obj[key], p, ("x", "points", "source", "note"), ("x", "points", "source"))
    x = r.string(c, "x", p, options=CURVE_X)
    r.source(c, p)
    pts = c["points"]
    if not isinstance(pts, list) or not pts:
        raise r.fail(r.join(p, "points"), f"must be a non-empty list of [x, efficiency] pairs, got {pts!r}",
                     "write points: [[x1, e1], [x2, e2], ...]")
    xs, ys = [], []
    for i, pt in enumerate(pts):
        pp = f"{p}.points[{i}]"
        ok = (isinstance(pt, list) and len(pt) == 2
              and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pt))
        if not ok:
            raise r.fail(pp, f"must be a pair [x, efficiency], got {pt!r}", "write [x, e] with numbers")
        xv, yv = float(pt[0]), float(pt[1])
        if not (math.isfinite(xv) and xv > 0):
            raise r.fail(pp, f"x = {pt[0]!r} must be a positive number", f"x is in units of {x}")
        if not (math.isfinite(yv) and 0 < yv <= 1):
            raise r.fail(pp, f"efficiency = {pt[1]!r} must be in (0, 1]", "write a fraction of peak, e.g. 0.85")
        if xs and xv <= xs[-1]:
            raise r.fail(pp, f"x = {xv!r} is not above the previous point's {xs[-1]!r}", "sort points by x")
        xs.append(xv)
        ys.append(yv)
    return Curve(x, tuple(xs), tuple(ys), c["source"])


def _kernel_class(r: Reader, obj: object, p: str, extras: dict[str, str]) -> KernelClass:
    c = r.mapping(obj, p, ("fixed", "memory", "compute", *extras, "note"), ("fixed",))
    params = {}
    for e, dim in extras.items():
        if e in c:
            hi = 1.0 if dim == "fraction" else None
            params[e] = r.quantity(c, e, p, dim, high=hi, open_low=dim in ("fraction", "count"))
    return KernelClass(fixed=r.quantity(c, "fixed", p, "time"), memory=_curve(r, c, "memory", p),
                       compute=_curve(r, c, "compute", p), params=MappingProxyType(params))


def _collective(r: Reader, obj: object, p: str) -> Collective:
    keys = ("latency", "latency_per_gpu", "efficiency", "large_latency", "large_efficiency", "fabric_latency",
            "fabric_latency_per_doubling", "fabric_efficiency", "hook_dispatch_rate", "hook_combine_rate", "note")
    c = r.mapping(obj, p, keys, ("latency", "efficiency"))
    large = "large_latency" in c or "large_efficiency" in c
    return Collective(
        r.quantity(c, "latency", p, "time"), r.quantity(c, "latency_per_gpu", p, "time", default=0.0),
        r.quantity(c, "efficiency", p, "fraction", high=1.0, open_low=True),
        r.quantity(c, "large_latency", p, "time") if large else None,
        r.quantity(c, "large_efficiency", p, "fraction", high=1.0, open_low=True) if large else None,
        r.quantity(c, "fabric_latency", p, "time", default=None),
        r.quantity(c, "fabric_latency_per_doubling", p, "time", default=0.0),
        r.quantity(c, "fabric_efficiency", p, "fraction", high=1.0, open_low=True, default=None),
        r.quantity(c, "hook_dispatch_rate", p, "bandwidth", open_low=True, default=None),
        r.quantity(c, "hook_combine_rate", p, "bandwidth", open_low=True, default=None))


def _round(r: Reader, obj: object, path: str) -> Mapping[str, tuple[float, float, float]]:
    """``round: {NAME: {low: Q, central: Q, high: Q}}`` (ROUND_KEYS; each Q a quantity with its source), checked
    low <= central <= high."""
    out = {}
    for name, band in r.mapping(obj, path, ROUND_KEYS).items():
        bp = r.join(path, name)
        b = r.mapping(band, bp, (*BAND_ENDS, "note"), BAND_ENDS)
        dim = ROUND_KEYS[name]
        ends = tuple(r.quantity(b, end, bp, dim) for end in BAND_ENDS)
        if not ends[0] <= ends[1] <= ends[2]:
            raise r.fail(bp, f"has low {ends[0]:g}, central {ends[1]:g}, high {ends[2]:g} (SI units)",
                         "order them low <= central <= high")
        out[name] = ends
    return MappingProxyType(out)


def read_engine_kernels(r: Reader, obj: object, base: Kernels, path: str) -> Kernels:
    """An engine's ``kernels:`` overrides (any subset of classes/variants, collectives and step costs, each entry
    complete) merged onto the default engine's resolved block ``base``."""
    _no_graphs(r, obj, path)
    k = r.mapping(obj, path, ("classes", "collectives", "step", "round", "note"))
    # an alternative kernel (OPTIONAL_CLASSES) is the stating engine's own: another engine does not inherit it
    classes = {name: dict(v) for name, v in base.classes.items() if name not in OPTIONAL_CLASSES}
    if "classes" in k:
        cpath = r.join(path, "classes")
        cobj = r.mapping(k["classes"], cpath, OP_CLASSES)
        for name, vobj in cobj.items():
            variants, extras = OP_CLASSES[name]
            vp = r.join(cpath, name)
            for v, kobj in r.mapping(vobj, vp, variants).items():
                classes.setdefault(name, {})[v] = _kernel_class(r, kobj, r.join(vp, v), extras)
    collectives = dict(base.collectives)
    if "collectives" in k:
        colpath = r.join(path, "collectives")
        for name, cobj in r.mapping(k["collectives"], colpath, COLLECTIVES + OPTIONAL_COLLECTIVES).items():
            collectives[name] = _collective(r, cobj, r.join(colpath, name))
    step = dict(base.step)
    if "step" in k:
        spath = r.join(path, "step")
        s = r.mapping(k["step"], spath, {**STEP_FIXED, **STEP_OPTIONAL})
        step.update({name: r.quantity(s, name, spath, "time") for name in s})
    rnd = _round(r, k["round"], r.join(path, "round")) if "round" in k else MappingProxyType({})
    return Kernels(None, base.global_efficiency,
                   MappingProxyType({n: MappingProxyType(v) for n, v in classes.items()}),
                   MappingProxyType(collectives), MappingProxyType(step), rnd)


def _no_graphs(r: Reader, obj: object, path: str) -> None:
    """CUDA-graph capture sizes are the engine's (its file's ``graphs:``), not the GPU's."""
    if isinstance(obj, Mapping) and "graphs" in obj:
        raise r.fail(r.join(path, "graphs"), "is an engine fact: the capture sizes an engine launches with",
                     "remove it here and state it in the engine's file (engines/<engine>.yaml, graphs:)")


def read_kernels(r: Reader, obj: object, path: str = "kernels") -> Kernels:
    _no_graphs(r, obj, path)
    k = r.mapping(obj, path, ("derive_from", "global_efficiency", "classes", "collectives", "step", "round",
                              "note"))
    if "derive_from" in k:
        extra = [key for key in k if key not in ("derive_from", "note")]
        if extra:
            raise r.fail(path, f"has derive_from together with {extra}",
                         "either derive everything from another profile or state it all, not both")
        return Kernels(derive_from=r.string(k, "derive_from", path))
    r.mapping(k, path, k.keys(), ("global_efficiency", "classes", "collectives", "step"))
    geff = r.quantity(k, "global_efficiency", path, "fraction", low=0.0, high=1.0, open_low=True)
    cpath = r.join(path, "classes")
    classes_obj = r.mapping(k["classes"], cpath, OP_CLASSES, tuple(c for c in OP_CLASSES if c not in OPTIONAL_CLASSES))
    classes = {}
    for name, (variants, extras) in OP_CLASSES.items():
        if name not in classes_obj:
            continue  # an optional class the profile does not state
        vp = r.join(cpath, name)
        vobj = r.mapping(classes_obj[name], vp, variants, REQUIRED_VARIANTS.get(name, ()))
        classes[name] = MappingProxyType({v: _kernel_class(r, vobj[v], r.join(vp, v), extras)
                                          for v in variants if v in vobj})
    colpath = r.join(path, "collectives")
    col_obj = r.mapping(k["collectives"], colpath, COLLECTIVES + OPTIONAL_COLLECTIVES, COLLECTIVES)
    collectives = {}
    for name in (*COLLECTIVES, *OPTIONAL_COLLECTIVES):
        if name in col_obj:
            collectives[name] = _collective(r, col_obj[name], r.join(colpath, name))
    spath = r.join(path, "step")
    s = r.mapping(k["step"], spath, {**STEP_FIXED, **STEP_OPTIONAL}, STEP_FIXED)
    step = {name: r.quantity(s, name, spath, "time") for name in (*STEP_FIXED, *STEP_OPTIONAL) if name in s}
    rnd = _round(r, k["round"], r.join(path, "round")) if "round" in k else MappingProxyType({})
    return Kernels(None, geff, MappingProxyType(classes), MappingProxyType(collectives), MappingProxyType(step),
                   rnd)
