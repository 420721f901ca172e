"""Writers for the tidy sweep table: CSV (one row per point) and JSON (rows + run metadata + summary)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..outputs import atomic_text, atomic_write
from .report import summarize
from .table import COLUMN_NAMES


def _cell(v):
    if isinstance(v, float):
        if not math.isfinite(v):
            return "" if math.isnan(v) else str(v)
        return f"{v:.7g}"
    return v


CHUNK = 8192  # rows formatted at a time: memory stays flat however large the sweep


class _FloatCells:
    """``_cell`` of the values of one float column, chunk by chunk. A column with repeated values (per batch, per
    draft length, per case) formats each distinct value once; a column of mostly distinct values chunk by chunk."""

    def __init__(self, a: np.ndarray):
        self.a = a
        uniq, inv = np.unique(a, return_inverse=True)
        self.dedup = uniq.size <= a.size // 2
        if self.dedup:
            self.strs = np.array([_cell(v) for v in uniq.tolist()], dtype=object)
            self.inv = inv.reshape(-1)

    def __getitem__(self, rows: slice) -> list:
        if self.dedup:
            return self.strs[self.inv[rows]].tolist()
        return [_cell(v) for v in self.a[rows].tolist()]


def write_csv(result, path) -> str:
    """Write ``result`` as CSV with the columns of :data:`~simulator.sweep.table.COLUMNS`; returns the path.
    Rows are formatted and written in chunks of :data:`CHUNK` (memory stays flat however large the sweep)."""
    path = Path(path)
    cols = [result.columns[c] for c in COLUMN_NAMES]
    cells = [_FloatCells(a) if a.dtype.kind == "f" else a for a in cols]
    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMN_NAMES)
        for lo in range(0, len(result), CHUNK):
            rows = slice(lo, lo + CHUNK)
            w.writerows(zip(*(c[rows] if isinstance(c, _FloatCells) else c[rows].tolist() for c in cells),
                            strict=True))
    return str(path)


def metadata(result) -> dict:
    acc = result.acceptance
    return {
        "drafter": result.drafter.label,
        "acceptance": {"label": acc.label, "alpha": acc.alpha,
                       "per_position": list(acc.per_position) if acc.per_position else None},
        "context": result.context,
        "skipped": [{"model": m, "hardware": h, "reason": r} for m, h, r in result.skipped],
        "notes": list(result.notes),
        "columns": list(COLUMN_NAMES),
    }


def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def write_json(result, path) -> str:
    """Write ``{"meta": ..., "summary": [...], "rows": [...]}``; returns the path."""
    path = Path(path)
    rows = [{k: _clean(v) for k, v in r.items()} for r in result.records]
    doc = {"meta": metadata(result), "summary": summarize(result), "rows": rows}
    atomic_text(path, json.dumps(doc, indent=1) + "\n")
    return str(path)
