"""Single-op views that mirror the measured CSV columns (``python -m simulator op ...``), so predictions can be
compared with ``measured/h100-sxm/`` row by row. Each builder returns one :class:`~simulator.cost.ops.Op` whose array
fields run over the rows; :func:`op_views` prices it two ways (LLMCompass style): the pure roofline and the
simulated cost (calibrated kernels, L2-cold as in a real forward pass); the measured view is the CSV row itself.
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType

import numpy as np

from ..params import Interval, Param, check_params, declare, parameter_error
from ..specs.dtypes import ACTIVATION_BYTES, FORMATS, KV_BYTES
from ..specs.hardware import HardwareProfile
from ..specs.kernels import SHAPE_PARAMS, KernelClass
from .deployment import WAYS, Mechanisms
from .engine import OpCost, collective_seconds, op_time
from .ops import Op, experts_op, gemm

A = ACTIVATION_BYTES


# Declarations of the single-op views' parameters (checked by the builders below; the CLI maps them to flags).
# Every one may be a list: the builders are vectorised over rows (e.g. one row per measured CSV line).
_COUNTS = Param(Interval(int, 1, None), many=True)
OP_PARAMS = {
    "tokens": _COUNTS, "hidden": _COUNTS, "inter": _COUNTS, "experts": _COUNTS, "top_k": _COUNTS,
    "tp": Param(*WAYS.constraints, unit=WAYS.unit, many=True),
    "ep": Param(*WAYS.constraints, unit=WAYS.unit, many=True),
    "m": _COUNTS, "n": _COUNTS, "k": _COUNTS, "batch": _COUNTS, "heads": _COUNTS, "kv_heads": _COUNTS,
    "head_dim": _COUNTS, "kv_len": Param(Interval(int, 0, None), many=True),
    "message_bytes": Param(Interval(float, 0, None), unit="bytes", many=True),
}


def _check_moe(owner: str, experts, top_k, ep) -> None:
    """top_k is at most the expert count and ep divides it, row by row (bounds that depend on another parameter)."""
    e, k, p = np.broadcast_arrays(*(np.asarray(v) for v in (experts, top_k, ep)))
    bad = k > e
    if np.any(bad):
        raise parameter_error(owner, "top_k", f"at most the number of experts ({int(e[bad].flat[0])})",
                              int(k[bad].flat[0]))
    bad = e % p != 0
    if np.any(bad):
        raise parameter_error(owner, "ep", f"a divisor of the number of experts ({int(e[bad].flat[0])}), so that "
                              f"every rank holds the same number", int(p[bad].flat[0]))


def _check_heads(owner: str, heads, kv_heads) -> None:
    """Grouped-query attention: the KV heads divide the query heads, row by row."""
    h, kv = np.broadcast_arrays(np.asarray(heads), np.asarray(kv_heads))
    bad = h % kv != 0
    if np.any(bad):
        raise parameter_error(owner, "kv_heads", f"a divisor of the query heads ({int(h[bad].flat[0])})",
                              int(kv[bad].flat[0]))


# The balanced pattern is enumerated token by token: bounded so that an odd --tokens cannot exhaust memory (the
# measured tables go to 512 tokens).
MAX_BALANCED_TOKENS = 2**20


@declare(tokens=Param(Interval(int, 1, MAX_BALANCED_TOKENS), unit="tokens (the balanced pattern is enumerated)"),
         experts=OP_PARAMS["experts"], top_k=OP_PARAMS["top_k"], ep=OP_PARAMS["ep"])
def balanced_routing(tokens: int, experts: int, top_k: int, ep: int) -> tuple[int, int]:
    """(unique local experts, local (token, expert) pairs) on EP rank 0 under the micro-benchmark's ``balanced``
    pattern (aiconfigurator ``balanced_logits``): with stride = ⌈E/k⌉, token i uses experts
    (i + j·stride) mod E when T ≥ stride, and ⌊i·stride/T + j·stride⌋ mod E when T < stride."""
    _check_moe("balanced_routing", experts, top_k, ep)
    stride = math.ceil(experts / top_k)
    i = np.arange(tokens, dtype=float)[:, None]
    j = np.arange(top_k, dtype=float)[None, :]
    sel = (i + j * stride) % experts if tokens >= stride else np.fmod(i * stride / tokens + j * stride, experts)
    sel = np.trunc(sel).astype(np.int64)
    local = sel[sel < experts // ep]
    return int(np.unique(local).size), int(local.size)


@declare(**{k: OP_PARAMS[k] for k in ("hidden", "inter", "experts", "top_k", "tokens", "tp", "ep")})
def moe_op(hidden, inter, experts, top_k, tokens, dtype: str, tp=1, ep=1, unique=None, pairs=None,
           compute: str | None = None) -> Op:
    """One fused MoE layer on one rank (routing, grouped GEMMs, activation, combine; no communication).

    ``unique``/``pairs``: local experts touched and local (token, expert) pairs; by default the expectation under
    uniform independent routing."""
    _check_moe("moe_op", experts, top_k, ep)
    hidden, inter, experts, top_k, tokens, tp, ep = (np.asarray(v, dtype=float) for v in
                                                     (hidden, inter, experts, top_k, tokens, tp, ep))
    fmt = FORMATS[dtype]
    local = experts / ep
    if unique is None:
        unique = local * (1.0 - (1.0 - top_k / experts) ** tokens)
    if pairs is None:
        pairs = tokens * top_k / ep
    return experts_op(hidden, inter / tp, 3.0, dtype, compute or fmt.compute, unique, pairs, local, tokens,
                      name="moe")


@declare(m=OP_PARAMS["m"], n=OP_PARAMS["n"], k=OP_PARAMS["k"])
def gemm_op(m, n, k, dtype: str, compute: str | None = None) -> Op:
    """out[m, n] = x[m, k] · W[n, k]^T."""
    return gemm("gemm", m, n, k, dtype, compute or FORMATS[dtype].compute)


@declare(**{k: OP_PARAMS[k] for k in ("batch", "heads", "kv_heads", "head_dim", "kv_len")}, tokens=_COUNTS)
def attention_op(batch, heads, kv_heads, head_dim, kv_len, kv_dtype: str = "bf16", tokens=1) -> Op:
    """Decode (or verify, ``tokens`` > 1) attention for ``batch`` requests; heads are per GPU."""
    _check_heads("attention_op", heads, kv_heads)
    b, h, kvh, hd, L, s = (np.asarray(v, dtype=float) for v in (batch, heads, kv_heads, head_dim, kv_len, tokens))
    kv = b * L * 2.0 * kvh * hd * KV_BYTES[kv_dtype]
    return Op("attention", "attention", "bf16", kv_dtype, other_bytes=kv + b * s * h * hd * 2.0 * A,
              flops=4.0 * b * s * h * hd * L, rows=b * s, parallel=b * kvh, tokens=b * s)


def op_views(op: Op, hw: HardwareProfile, mech: Mechanisms | None = None) -> dict[str, OpCost]:
    """Views of one op: ``roofline`` (no fixed costs, efficiency 1, L2 off) and ``simulated`` (calibrated)."""
    mech = mech or Mechanisms()
    ideal = hw.with_changes(kernels=ideal_kernels(hw))
    roof = Mechanisms(routing=mech.routing, kernel_curves="off", fixed_costs="off", l2="off")
    return {"roofline": op_time(op, ideal, roof), "simulated": op_time(op, hw, mech)}


def ideal_kernels(hw: HardwareProfile):
    """Kernels with efficiency 1 everywhere and no fixed costs: the pure roofline (the kernels' tiling, e.g. the
    weight re-reads per tile of rows, is work, not speed, and stays)."""
    k = hw.kernels
    classes = {n: MappingProxyType({v: KernelClass(params=MappingProxyType(
        {p: x for p, x in c.params.items() if p in SHAPE_PARAMS})) for v, c in vs.items()})
        for n, vs in k.classes.items()}
    return replace(k, global_efficiency=1.0, classes=MappingProxyType(classes))


def collective_view(kind: str, message_bytes, gpus: int, hw: HardwareProfile,
                    mech: Mechanisms | None = None) -> np.ndarray:
    """Seconds of one collective of ``message_bytes`` over ``gpus`` GPUs (at most the scale-up domain)."""
    check_params("collective_view", {"message_bytes": message_bytes, "gpus": gpus},
                 {"message_bytes": OP_PARAMS["message_bytes"],
                  "gpus": Param(Interval(int, 1, hw.domain_size), unit=f"GPUs in the {hw.name} scale-up domain")})
    return collective_seconds(kind, message_bytes, gpus, hw, mech or Mechanisms())[0]
