"""Writers for the tidy sweep table: CSV (one row per point) and JSON (rows + run metadata + summary)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from ..outputs import atomic_text, atomic_write
from .report import summarize
from .table import COLUMN_NAMES


def _cell(v):
    if isinstance(v, float):
        if not math.isfinite(v):
            return "" if math.isnan(v) else str(v)
        return f"{v:.7g}"
    return v


def write_csv(result, path) -> str:
    """Write ``result`` as CSV with the columns of :data:`~simulator.sweep.table.COLUMNS`; returns the path."""
    path = Path(path)
    cols = [result.columns[c].tolist() for c in COLUMN_NAMES]
    with atomic_write(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMN_NAMES)
        for row in zip(*cols, strict=True):
            w.writerow([_cell(v) for v in row])
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
