"""Kernel-efficiency curves and fixed costs of a hardware profile (the ``kernels:`` section).

A profile either states them (H100 SXM: fitted to ``measured-h100/`` by ``python -m simulator calibrate``) or
says ``derive_from: <profile>``: the what-if rule of docs/MODEL.md then takes the curve *shapes* and fixed costs of
that profile and rescales them by the target's own spec-sheet numbers (see :mod:`simulator.cost.whatif`).

Curves are piecewise linear in log(x), clamped outside their points::

    memory: {x: bytes, points: [[1.0e5, 0.25], [1.0e8, 0.93]], source: fit-h100}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from .schema import Reader

# Variables a curve may be a function of (documented in docs/MODEL.md, "Kernel efficiency").
CURVE_X = ("bytes", "rows", "tokens_per_expert", "flops")

# Op classes that carry kernel parameters, and the extra per-class time/fraction parameters each may state.
OP_CLASSES: dict[str, dict[str, str]] = {
    "gemm": {"quant_fixed": "time"},
    "moe": {"per_local_expert": "time", "per_active_expert": "time", "per_pair": "time"},
    "attention": {"per_request": "time"},
    "elementwise": {},
    "router": {},
    "embedding": {},
    "sampling": {"per_token": "time"},
}
COLLECTIVES = ("all_reduce", "all_to_all", "all_gather")
STEP_FIXED = {
    "host_overhead": "per forward pass: scheduler, input preparation, output copy (s)",
    "launch": "per kernel launch inside a CUDA graph (s)",
    "launch_eager": "per kernel launch without CUDA graphs (s)",
    "rejection_sampling": "per verify pass: acceptance test and bookkeeping (s)",
}


@dataclass(frozen=True)
class Curve:
    """Efficiency (0, 1] as a function of ``x``; piecewise linear in log(x) between ``xs``, clamped outside."""

    x: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    source: str = ""

    def __call__(self, value):
        v = np.log(np.maximum(np.asarray(value, dtype=float), 1e-30))
        return np.interp(v, np.log(np.asarray(self.xs)), np.asarray(self.ys))

    @classmethod
    def constant(cls, x: str, y: float, source: str = "") -> Curve:
        return cls(x, (1.0,), (float(y),), source)

    def scaled(self, x_factor: float = 1.0, y_factor: float = 1.0, y_cap: float = 1.0) -> Curve:
        return Curve(self.x, tuple(x * x_factor for x in self.xs),
                     tuple(min(y_cap, y * y_factor) for y in self.ys), self.source)

    def as_dict(self) -> dict:
        return {"x": self.x, "points": [[a, b] for a, b in zip(self.xs, self.ys, strict=True)], "source": self.source}


@dataclass(frozen=True)
class KernelClass:
    """Kernel parameters of one op class."""

    fixed: float = 0.0  # s, per kernel call (latency floor)
    memory: Curve | None = None  # η: achieved fraction of peak HBM bandwidth
    compute: Curve | None = None  # μ: achieved fraction of peak FLOP/s
    params: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Collective:
    """Collective cost: ``latency + bytes_on_wire / (link_bandwidth · efficiency)`` per call."""

    latency: float  # s
    efficiency: float  # fraction of the per-direction link bandwidth achieved


@dataclass(frozen=True)
class Kernels:
    """All kernel-level parameters of a profile. ``derive_from`` is set until the what-if rule resolves it."""

    derive_from: str | None = None
    global_efficiency: float = 0.8
    classes: Mapping[str, KernelClass] = field(default_factory=lambda: MappingProxyType({}))
    collectives: Mapping[str, Collective] = field(default_factory=lambda: MappingProxyType({}))
    step: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def resolved(self) -> bool:
        return self.derive_from is None


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


def read_kernels(r: Reader, obj: object, path: str = "kernels") -> Kernels:
    k = r.mapping(obj, path, ("derive_from", "global_efficiency", "classes", "collectives", "step", "note"))
    if "derive_from" in k:
        extra = [key for key in k if key not in ("derive_from", "note")]
        if extra:
            raise r.fail(path, f"has derive_from together with {extra}",
                         "either derive everything from another profile or state it all, not both")
        return Kernels(derive_from=r.string(k, "derive_from", path))
    r.mapping(k, path, k.keys(), ("global_efficiency", "classes", "collectives", "step"))
    geff = r.quantity(k, "global_efficiency", path, "fraction", low=0.0, high=1.0, open_low=True)
    cpath = r.join(path, "classes")
    classes_obj = r.mapping(k["classes"], cpath, OP_CLASSES, OP_CLASSES)
    classes = {}
    for name, extras in OP_CLASSES.items():
        p = r.join(cpath, name)
        c = r.mapping(classes_obj[name], p, ("fixed", "memory", "compute", *extras), ("fixed",))
        params = {e: r.quantity(c, e, p, dim) for e, dim in extras.items() if e in c}
        classes[name] = KernelClass(
            fixed=r.quantity(c, "fixed", p, "time"),
            memory=_curve(r, c, "memory", p),
            compute=_curve(r, c, "compute", p),
            params=MappingProxyType(params),
        )
    colpath = r.join(path, "collectives")
    col_obj = r.mapping(k["collectives"], colpath, COLLECTIVES, COLLECTIVES)
    collectives = {}
    for name in COLLECTIVES:
        p = r.join(colpath, name)
        c = r.mapping(col_obj[name], p, ("latency", "efficiency"), ("latency", "efficiency"))
        collectives[name] = Collective(r.quantity(c, "latency", p, "time"),
                                       r.quantity(c, "efficiency", p, "fraction", high=1.0, open_low=True))
    spath = r.join(path, "step")
    s = r.mapping(k["step"], spath, STEP_FIXED, STEP_FIXED)
    step = {name: r.quantity(s, name, spath, "time") for name in STEP_FIXED}
    return Kernels(None, geff, MappingProxyType(classes), MappingProxyType(collectives), MappingProxyType(step))
