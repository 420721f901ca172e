"""Deployments beyond one scale-up domain (docs/MODEL.md §3.9): how a GPU count spreads over domains, and the layout
rule a tensor-parallel group must keep across them; and the one-line error of a deployment field (:func:`bad`)."""

from __future__ import annotations

from ..errors import InfeasibleError
from ..specs.hardware import HardwareProfile

__all__ = ["bad", "domain_split", "validate_domains"]


def bad(field: str, value, problem: str, fix: str) -> InfeasibleError:
    """The one-line error of a deployment field: its value, the problem and the fix."""
    return InfeasibleError(f"deployment '{field}' = {value!r}: {problem}; {fix}")


def domain_split(n: int, d: int) -> tuple[int, int]:
    """(domains m, GPUs used per domain g) of ``n`` GPUs over scale-up domains of ``d``: the fewest domains,
    ``m = ceil(n / d)``, each using ``g = n / m`` of its GPUs (partly used racks, e.g. 128 GB200 GPUs = two NVL72
    racks of 64; n ≤ d is one domain). ``g`` is not whole when ``m`` does not divide ``n``."""
    if d <= 0 or n <= d:
        return 1, n
    m = -(-n // d)
    return m, n // m


def validate_domains(hw: HardwareProfile, dep) -> None:
    """Layouts beyond one scale-up domain (docs/MODEL.md §3.9) of ``dep`` (a :class:`~.deployment.Deployment`):
    m = ceil(gpus / domain) domains joined by the scale-out fabric, each using the same number of its GPUs (whole
    domains, or partly used ones such as 2 × 64 of an NVL72), and every tensor-parallel group either inside one
    domain's share or made of whole shares."""
    d = hw.domain_size
    if dep.gpus <= d:
        return
    if hw.scale_out_bandwidth <= 0:
        raise bad("gpus", dep.gpus, f"exceed the {hw.name} scale-up domain of {d} and the profile states no "
                   "scale-out fabric (interconnect.scale_out_bandwidth)", f"use at most {d} GPUs, or add the "
                   "fabric's bandwidth and latency per GPU with their source to the profile")
    m, g = domain_split(dep.gpus, d)
    if dep.gpus % m:
        raise bad("gpus", dep.gpus, f"needs {m} {hw.name} scale-up domains of {d} GPUs but does not split evenly "
                   f"over them", f"use a multiple of {m} GPUs (at most {m * d})")
    for name, ways in (("tp", dep.tp), ("moe_tp", dep.moe_tp)):
        if ways > g and ways % g:
            raise bad(name, ways, f"splits a group across {hw.name} scale-up domains ({m} × {g} GPUs) unevenly",
                       f"use {name} ≤ {g} or a multiple of {g}")
