"""*Cost*: the time of one op on one GPU (docs/MODEL.md, "Op cost").

    t_op = F_op + combine_q( flops / (peak · μ),  hbm_bytes / (BW_hbm · η) + act_bytes / (BW_hbm · η_act)
                                                  + l2_bytes / BW_l2 )

``combine_q(a, b) = (a^q + b^q)^(1/q)``, a smooth maximum (q → ∞ is the plain roofline max). η, μ, η_act and q come
from the profile's kernel-efficiency curves; with ``kernel_curves`` off η = η_act = the single global efficiency and
q = ∞. F_op comes from its fixed costs (mechanism ``fixed_costs``); ``l2_bytes`` are the weight re-reads (one per extra
tile of ``tile_rows`` rows, :func:`reread_bytes`) that the effective L2 absorbs (mechanism ``l2``). All functions
are vectorised over the batch grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..specs.dtypes import FALLBACK_COMPUTE
from ..specs.hardware import HardwareProfile
from ..specs.kernels import ALTERNATIVE_KERNELS, DEFAULT_COMPUTE, KernelClass
from .deployment import Mechanisms
from .domains import domain_split
from .ops import Op


@dataclass(frozen=True)
class OpCost:
    """Time of one op split into its parts (seconds; arrays over the batch grid)."""

    name: str
    cls: str
    time: np.ndarray
    fixed: np.ndarray
    compute: np.ndarray
    memory: np.ndarray
    hbm_bytes: np.ndarray
    l2_bytes: np.ndarray
    flops: np.ndarray


def effective_l2(hw: HardwareProfile) -> float:
    """L2 capacity available to data shared by all SMs (one expert's weights read by CTAs everywhere).

    On partitioned L2 (Hopper: 2 partitions) a line used from both halves is held in both, so the capacity for
    shared data is one partition: ``l2_size / l2_partitions``."""
    return hw.l2_size / max(hw.l2_partitions, 1)


def l2_hit_fraction(hw: HardwareProfile, working_set) -> np.ndarray:
    """Share of re-reads served by L2: 1 while the working set fits the effective L2, else the share that fits
    (an LRU cache streaming over a larger set keeps about capacity/working-set of it)."""
    cap = effective_l2(hw)
    ws = np.asarray(working_set, dtype=float)
    if cap <= 0:
        return np.zeros_like(ws)
    return np.minimum(1.0, cap / np.maximum(ws, 1e-300))


def smooth_max(a: np.ndarray, b: np.ndarray, q: float) -> np.ndarray:
    """(a^q + b^q)^(1/q); q = inf gives max(a, b). Scaled to avoid overflow."""
    if not np.isfinite(q):
        return np.maximum(a, b)
    m = np.maximum(a, b)
    if m.min(initial=np.inf) > 0:  # the common case: the same values as below, without the masks
        return m * ((a / m) ** q + (b / m) ** q) ** (1.0 / q)
    safe = np.where(m > 0, m, 1.0)
    return np.where(m > 0, m * ((a / safe) ** q + (b / safe) ** q) ** (1.0 / q), 0.0)


# Bytes each GPU moves per message byte for n GPUs: small (one-shot / direct) and large (ring) algorithms.
SMALL_FACTOR = {"all_reduce": lambda n: n - 1.0, "all_gather": lambda n: (n - 1.0) / n,
                "all_to_all": lambda n: (n - 1.0) / n}
LARGE_FACTOR = {"all_reduce": lambda n: 2.0 * (n - 1.0) / n, "all_gather": lambda n: (n - 1.0) / n,
                "all_to_all": lambda n: (n - 1.0) / n}


def _domain_seconds(kind: str, col, wire: np.ndarray, n: int, hw: HardwareProfile, mech: Mechanisms,
                    peers: int | None = None, ring_only: bool = False) -> tuple:
    """(time, fixed) of one collective's NVLink part: ``min(small, large)`` with byte factors for ``n`` GPUs and
    the latency of ``peers`` GPUs taking part (default ``n``); ``ring_only``: the large (ring) algorithm alone."""
    on = mech.fixed_costs_on
    curves = mech.kernel_curves == "on"
    g = hw.kernels.global_efficiency
    lat = (col.latency + col.latency_per_gpu * (peers or n)) if on else 0.0
    small = lat + wire * SMALL_FACTOR[kind](n) / (hw.link_bandwidth * (col.efficiency if curves else g))
    if ring_only:
        small = lat + wire * LARGE_FACTOR[kind](n) / (hw.link_bandwidth * (col.efficiency if curves else g))
    best, fixed = small, np.full_like(wire, lat)
    if col.large_latency is not None:
        llat = col.large_latency if on else 0.0
        large = llat + wire * LARGE_FACTOR[kind](n) / (hw.link_bandwidth * (col.large_efficiency if curves else g))
        if ring_only:
            return large, np.full_like(wire, llat)
        fixed = np.where(large < small, llat, lat)
        best = np.minimum(small, large)
    return best, fixed


def fabric_seconds(col, fabric_bytes, domains: int, hw: HardwareProfile, mech: Mechanisms) -> tuple:
    """(transfer, latency) of the cross-domain part: ``fabric_latency + fabric_latency_per_doubling ·
    log2(domains)`` and ``bytes / (scale_out_bandwidth · fabric_efficiency)``."""
    b = np.asarray(fabric_bytes, dtype=float)
    flat = col.fabric_latency if col.fabric_latency is not None else hw.scale_out_latency
    lat = (flat + col.fabric_latency_per_doubling * np.log2(domains)) if mech.fixed_costs_on else 0.0
    eff = (col.fabric_efficiency or col.efficiency) if mech.kernel_curves == "on" else \
        hw.kernels.global_efficiency
    return b / (hw.scale_out_bandwidth * eff), lat


def collective_seconds(kind: str, wire_bytes, n: int, hw: HardwareProfile, mech: Mechanisms) -> tuple:
    """(time, fixed) of one collective of ``wire_bytes`` per GPU over ``n`` GPUs (docs/MODEL.md §3.9).

    ``kind`` is all_reduce, all_gather or an all-to-all (all_to_all, deepep_normal, deepep_low_latency; the
    latter two use the all-to-all byte factors). Inside one scale-up domain (``n ≤ domain_size``) this is the
    single-domain formula. Across ``m = ceil(n / domain_size)`` domains each using ``g = n / m`` GPUs (whole domains,
    or partly used ones: :func:`~.domains.domain_split`; ``L``: the NVLink latency of all n peers):

    - all-to-all and all-gather: the ``(g−1)/n`` share of the message goes over NVLink (the single-domain transfer
      on ``g`` GPUs of ``S·g/n``) while the ``(n−g)/n`` share crosses the fabric; both run at once and the slower
      sets the pace: ``L + max(t_nvlink, fabric latency + t_fabric)``.
    - all-reduce: reduce-scatter and all-gather inside each domain (together one ring all-reduce of S on g GPUs),
      between them a ring all-reduce of the ``S/g`` shard across the m domains: ``t_ring(g) + fabric latency +
      2(m−1)/m · (S/g) / (scale_out_bandwidth · fabric_efficiency)``."""
    wire = np.asarray(wire_bytes, dtype=float)
    if n <= 1:
        return np.zeros_like(wire), np.zeros_like(wire)
    col = hw.kernels.collectives[kind]
    base = kind if kind in SMALL_FACTOR else "all_to_all"
    m, g = domain_split(n, hw.domain_size)  # a group beyond one domain spreads evenly over the fewest domains
    if m == 1:
        return _domain_seconds(base, col, wire, n, hw, mech)
    if base == "all_reduce":
        t_in, f_in = _domain_seconds(base, col, wire, g, hw, mech, ring_only=True)
        t_out, lat = fabric_seconds(col, 2.0 * (m - 1) / m * wire / g, m, hw, mech)
        return t_in + lat + t_out, f_in + lat
    t_in, f_in = _domain_seconds(base, col, wire * g / n, g, hw, mech, peers=n)
    t_out, lat = fabric_seconds(col, wire * (n - g) / n, m, hw, mech)
    cross = f_in + lat + t_out
    return np.maximum(t_in, cross), np.where(cross >= t_in, f_in + lat, f_in)


def collective_time(op: Op, hw: HardwareProfile, mech: Mechanisms) -> OpCost:
    t, fixed = collective_seconds(op.collective, op.wire_bytes, op.group, hw, mech)
    z = np.zeros_like(t)
    return OpCost(op.name, "collective", t, fixed, z, t - fixed, z, z, z)


def _arr(x, shape) -> np.ndarray:
    return _full(x, shape)


def reread_bytes(weight: np.ndarray, rows: np.ndarray, kc: KernelClass) -> np.ndarray:
    """Weight re-reads of a tiled kernel (docs/MODEL.md, "L2 re-reads"): a kernel class whose parameters state
    ``tile_rows`` (the grouped GEMM's M tile) reads its weights once more per extra tile of rows,
    ``weight · max(0, rows / tile_rows − 1)``; these re-reads are the L2 candidates."""
    tile = kc.params.get("tile_rows", 0.0)
    tile = tile if tile > 0 else np.inf
    return weight * np.maximum(0.0, rows / tile - 1.0)


def op_time(op: Op, hw: HardwareProfile, mech: Mechanisms, cuda_graphs: bool | np.ndarray = True,
            kernel: str | None = None) -> OpCost:
    """Cost one op on ``hw`` under the mechanism switches (weights L2-cold, as in a real forward pass);
    ``cuda_graphs``: one flag, or a bool per grid point (False: the kernel's launch is paid). Where the
    engine ``hw`` is bound to runs an alternative kernel of the op's class (:func:`engine_kernel`), the op runs on
    it; ``kernel``: a class of the profile to run instead (a measured row's own kernel)."""
    if op.cls == "collective":
        return collective_time(op, hw, mech)
    return kernel_time(op, engine_kernel(op, hw, kernel), hw, mech, cuda_graphs)


def engine_kernel(op: Op, hw: HardwareProfile, kernel: str | None = None) -> KernelClass:
    """The kernel parameters ``op`` runs on: ``kernel`` (a class of the profile, e.g. the one a measured row timed)
    when given; else the engine's rule (``kernels.moe_backend`` of the release ``hw`` is bound to, at the
    deployment's backend setting: the profile's alternative kernel of the op's format where the rule names that
    format on this architecture and the profile states it; docs/MODEL.md §3.4), never the faster of two fits."""
    if kernel is not None:
        return hw.kernels.get(kernel, op.variant)
    spec = hw.engine_spec
    for alt in ALTERNATIVE_KERNELS.get(op.cls, ()):
        kc = hw.kernels.classes.get(alt, {}).get(op.variant)
        if kc is not None and spec is not None and spec.kernels.alternative(op.variant, hw.architecture):
            return kc
    return hw.kernels.get(op.cls, op.variant)


# The fields of an op its kernel cost reads, stacked by op_times (one row per op).
_STACKED = ("weight_bytes", "other_bytes", "act_bytes", "working_set", "flops", "rows", "parallel", "experts",
            "local_experts", "tokens")


class _Stack:
    """Ops of one kernel class (class, variant, compute) as one op whose array fields have a row per op."""

    def __init__(self, ops: list[Op], shape: tuple):
        first = ops[0]
        self.name, self.cls, self.compute, self.variant = first.name, first.cls, first.compute, first.variant
        for f in _STACKED:
            vals = [getattr(op, f) for op in ops]
            v0 = vals[0]
            if f != "weight_bytes" and isinstance(v0, (int, float)) and all(v is v0 or (isinstance(v, (int, float))
                                                                              and v == v0) for v in vals):
                setattr(self, f, v0)  # one scalar for all (most ops have no act_bytes, experts, ...): broadcast
                continue
            a = np.empty((len(ops), *shape))
            for r, v in enumerate(vals):
                a[r] = v
            setattr(self, f, a)
        self.calls = np.array([float(op.calls) for op in ops])[(slice(None),) + (None,) * len(shape)]


@dataclass(frozen=True)
class OpPlan:
    """How :func:`op_times` prices a list of ops, fixed before any GPU is known (the grouping reads only the ops):
    ``single`` the indices priced op by op (collectives, classes with an alternative kernel, a kernel's only op),
    ``stacks`` one (class, variant, indices, stacked op) per kernel (class, variant, compute type) with ≥ 2 ops."""

    ops: tuple
    single: tuple
    stacks: tuple


def plan_ops(ops, shape: tuple) -> OpPlan:
    """The :class:`OpPlan` of ``ops`` on a grid of ``shape`` (ops of one kernel stacked, a row per op)."""
    ops = tuple(ops)
    single: list = []
    groups: dict = {}
    for i, op in enumerate(ops):
        if op.cls == "collective" or op.cls in ALTERNATIVE_KERNELS:
            single.append(i)
        else:
            groups.setdefault((op.cls, op.variant, op.compute), []).append(i)
    stacks = []
    for (cls, variant, _), idx in groups.items():
        if len(idx) == 1:
            single.append(idx[0])
        else:
            stacks.append((cls, variant, tuple(idx), _Stack([ops[i] for i in idx], shape)))
    return OpPlan(ops, tuple(single), tuple(stacks))


def op_times(ops, hw: HardwareProfile, mech: Mechanisms, cuda_graphs: bool | np.ndarray,
             shape: tuple, plan: OpPlan | None = None) -> list[OpCost]:
    """:func:`op_time` of every op (the same values), with the ops that share a kernel (class, variant, compute
    type) priced in one call on their stacked arrays (a row per op; ``shape``: the grid's): a step's norms, its
    GEMMs of one format, ... (the per-call cost of numpy on small arrays is what a sweep spends its time on).
    Collectives and classes with an alternative kernel are priced op by op. ``plan``: :func:`plan_ops` of ``ops``
    made earlier (a caller pricing the same ops on several GPUs makes it once)."""
    plan = plan or plan_ops(ops, shape)
    ops = plan.ops
    out: list = [None] * len(ops)
    for i in plan.single:
        out[i] = op_time(ops[i], hw, mech, cuda_graphs)
    for cls, variant, idx, stack in plan.stacks:
        c = kernel_time(stack, hw.kernels.get(cls, variant), hw, mech, cuda_graphs)
        for r, i in enumerate(idx):
            out[i] = OpCost(ops[i].name, cls, c.time[r], c.fixed[r], c.compute[r], c.memory[r], c.hbm_bytes[r],
                            c.l2_bytes[r], c.flops[r])
    return out


def kernel_time(op: Op, kc: KernelClass, hw: HardwareProfile, mech: Mechanisms,
                cuda_graphs: bool | np.ndarray = True) -> OpCost:
    """The cost of ``op`` on kernel ``kc`` (docs/MODEL.md §3.4)."""
    k = hw.kernels
    # Scalars stay 0-d through the arithmetic (numpy broadcasts them, with the same values); the outputs are
    # broadcast to the grid's shape at the end.
    # (Per-call overhead matters: a 64k-point sweep prices ~21k ops, so no generator and a C-level broadcast.)
    asf = np.asarray
    weight, other, act, flops, rows, parallel, experts = (
        asf(op.weight_bytes, dtype=float), asf(op.other_bytes, dtype=float), asf(op.act_bytes, dtype=float),
        asf(op.flops, dtype=float), asf(op.rows, dtype=float), asf(op.parallel, dtype=float),
        asf(op.experts, dtype=float))
    shape = np.broadcast(weight, other, act, flops, rows, parallel, experts).shape
    if not kc.params.get("tile_rows", 0.0) > 0:  # untiled kernel: no weight re-reads, so no L2 traffic (the
        l2 = 0.0  # general formulas below give exactly these values: reread = 0, l2 = 0, hbm = weight + other + 0)
        hbm = weight + other
    elif mech.l2 == "on":
        reread = reread_bytes(weight, rows, kc)
        hit = l2_hit_fraction(hw, op.working_set)
        l2 = reread * hit
        hbm = weight + other + reread * (1.0 - hit)
    else:
        reread = reread_bytes(weight, rows, kc)
        l2 = np.zeros(shape)
        hbm = weight + other + reread

    curves = mech.kernel_curves == "on"
    x = {"bytes": hbm + act, "rows": rows, "parallel": parallel}
    if curves:
        eta = kc.memory(x[kc.memory.x]) if kc.memory else k.global_efficiency
        eta_act = kc.params.get("activation_efficiency", eta)
        q = kc.params.get("combine_q", np.inf)
    else:
        eta = eta_act = k.global_efficiency
        q = np.inf
    mu = kc.compute(x[kc.compute.x]) if kc.compute else DEFAULT_COMPUTE.get(op.cls, 1.0)

    peak = hw.peak(op.compute) or hw.peak(FALLBACK_COMPUTE)  # weight-only dequantisation where no such cores
    t_comp = flops / (peak * mu)
    t_mem = hbm / (hw.hbm_bandwidth * eta) + act / (hw.hbm_bandwidth * eta_act)
    if hw.l2_bandwidth > 0:
        t_mem = t_mem + l2 / hw.l2_bandwidth
    fixed = fixed_seconds(op, kc, mech, shape)
    if isinstance(cuda_graphs, np.ndarray):  # per point: graph-captured (True) or eager (False)
        fixed = fixed + np.where(cuda_graphs, 0.0, op.calls * step_fixed(hw, mech, "launch_eager"))
    elif not cuda_graphs:
        fixed = fixed + op.calls * step_fixed(hw, mech, "launch_eager")
    return OpCost(op.name, op.cls, _full(fixed + smooth_max(t_comp, t_mem, q), shape), _full(fixed, shape),
                  _full(t_comp, shape), _full(t_mem, shape), _full(hbm + act, shape), _full(l2, shape),
                  _full(flops, shape))


def _full(x, shape) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.shape == shape:
        return x
    out = np.empty(shape)  # a filled copy: the same values as np.broadcast_to, at a fraction of its call overhead
    out[...] = x
    return out


def step_fixed(hw: HardwareProfile, mech: Mechanisms, name: str) -> float:
    """One of the profile's per-pass or per-round fixed costs (``kernels.step``: host_overhead, launch_eager,
    rejection_sampling), or 0 when fixed costs are off."""
    return float(hw.kernels.step.get(name, 0.0)) if mech.fixed_costs_on else 0.0


def fixed_seconds(op: Op, kc: KernelClass, mech: Mechanisms, shape) -> np.ndarray:
    """F_op: the op's latency floor and per-unit overheads (docs/MODEL.md, "Fixed costs")."""
    if not mech.fixed_costs_on:
        return np.zeros(shape)
    p = kc.params
    if op.cls == "moe":
        experts = _arr(op.experts, shape)
        per_kernel = kc.fixed * (experts if mech.fixed_costs == "per_expert" else 1.0)
        return per_kernel + p.get("per_local_expert", 0.0) * op.local_experts + \
            p.get("per_token", 0.0) * _arr(op.tokens, shape)
    if op.cls == "attention":
        return kc.fixed + p.get("per_parallel", 0.0) * _arr(op.parallel, shape)
    if op.cls == "sampling":
        return kc.fixed + p.get("per_token", 0.0) * _arr(op.tokens, shape)
    return _full(kc.fixed, shape)  # (a filled copy: np.full is several times slower per call)
