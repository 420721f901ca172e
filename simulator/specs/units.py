"""Units: every quantity in a YAML file carries a unit; in memory everything is SI (B, B/s, FLOP/s, s, Hz).

Decimal prefixes follow vendor usage (1 GB = 1e9 B, 1 TB/s = 1e12 B/s); binary ones are explicit (GiB, MiB).
"""

from __future__ import annotations

# dimension -> {unit spelling: factor to SI}
UNITS: dict[str, dict[str, float]] = {
    "bytes": {
        "B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
        "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40,
    },
    "bandwidth": {"B/s": 1.0, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12},
    "flops": {"FLOPS": 1.0, "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15},
    "time": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9},
    "frequency": {"Hz": 1.0, "MHz": 1e6, "GHz": 1e9},
    "count": {"count": 1.0, "SMs": 1.0, "CUs": 1.0, "GPUs": 1.0, "partitions": 1.0},
    "fraction": {"fraction": 1.0, "%": 0.01},
    "power": {"W": 1.0},
    "parameters": {"params": 1.0, "M": 1e6, "B": 1e9, "T": 1e12},
    "tokens": {"tokens": 1.0},
}

def to_si(value: float, unit: str, dimension: str) -> float | None:
    """Convert ``value`` in ``unit`` to SI for ``dimension``; None when the unit does not belong to it."""
    table = UNITS[dimension]
    factor = table.get(unit)
    if factor is None:
        return None
    return float(value) * factor


def units_for(dimension: str) -> list[str]:
    return list(UNITS[dimension])


def dimension_of(unit: str) -> list[str]:
    """All dimensions in which ``unit`` is a valid spelling (used to explain a wrong-unit error)."""
    return [d for d, table in UNITS.items() if unit in table]
