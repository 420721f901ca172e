"""Writers for the tidy sweep table: CSV (one row per point) and JSON (rows + run metadata + summary)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ..outputs import atomic_write
from .report import summarize
from .table import COLUMN_NAMES


def _cell(v):
    if isinstance(v, float):
        if not math.isfinite(v):
            return "" if math.isnan(v) else str(v)
        return f"{v:.7g}"
    return v


CHUNK = 8192  # rows formatted at a time: memory stays flat however large the sweep


def _quoted(v: str) -> str:
    """A string cell as ``csv.writer`` (excel dialect, QUOTE_MINIMAL) writes it."""
    if any(ch in v for ch in ',"\r\n'):
        return '"' + v.replace('"', '""') + '"'
    return v


def write_csv(result, path) -> str:
    """Write ``result`` as CSV with the columns of :data:`~simulator.sweep.table.COLUMNS`; returns the path.
    The table is read block by block (:meth:`~simulator.sweep.table.SweepResult.blocks`) and each block formatted
    and written in chunks of :data:`CHUNK` rows (memory stays flat however large the sweep): one ``%``-format of a
    row template per chunk (``%.7g`` floats, ``%d`` integers, quoted strings — the bytes ``csv.writer`` would
    write), not a Python call per cell. A float column with few distinct values in a chunk (at most a quarter of its
    rows) has each distinct value formatted once, to the same ``.7g`` text."""
    path = Path(path)
    with atomic_write(path, "w", newline="") as f:
        f.write(",".join(_quoted(c) for c in COLUMN_NAMES) + "\r\n")
        for block in result.blocks():
            _write_block(f, [block[c] for c in COLUMN_NAMES])
    return str(path)


def _write_block(f, cols) -> None:
    n = len(cols[0])
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        cells = np.empty((hi - lo, len(cols)), dtype=object)
        fmts = []
        for j, a in enumerate(cols):
            part = a[lo:hi]
            if part.dtype.kind == "f" and np.isfinite(part).all():
                bits, inv = np.unique(np.ascontiguousarray(part, dtype=float).view(np.int64), return_inverse=True)
                if 4 * len(bits) <= len(part):  # few distinct values: format each once (by bit pattern, so
                    fmts.append("%s")  # 0.0 and -0.0 stay apart), the same "%.7g" text as the row template's
                    text = np.array([f"{u:.7g}" for u in bits.view(float).tolist()], dtype=object)
                    cells[:, j] = text[inv.reshape(-1)]
                else:
                    fmts.append("%.7g")
                    cells[:, j] = part.tolist()
            elif part.dtype.kind == "f":
                fmts.append("%s")
                cells[:, j] = [_cell(v) for v in part.tolist()]
            elif part.dtype.kind in "iu":
                fmts.append("%d")
                cells[:, j] = part.tolist()
            else:
                fmts.append("%s")
                uniq, inv = np.unique(part.astype(str), return_inverse=True)
                cells[:, j] = np.array([_quoted(u) for u in uniq.tolist()], dtype=object)[inv.reshape(-1)]
        f.write(((",".join(fmts) + "\r\n") * (hi - lo)) % tuple(cells.ravel().tolist()))


def metadata(result) -> dict:
    acc = result.acceptance
    return {
        "drafter": result.drafter.label,
        "acceptance": {"label": acc.label, "alpha": acc.alpha,
                       "per_position": list(acc.per_position) if acc.per_position else None},
        "acceptances": [{"label": label, "models": list(models)} for label, _, models in result.acceptances],
        "context": result.context,
        "skipped": [{"model": m, "hardware": h, "reason": r} for m, h, r in result.skipped],
        "notes": list(result.notes),
        "columns": list(COLUMN_NAMES),
    }


def _clean(v):
    return None if isinstance(v, float) and not math.isfinite(v) else v


def write_json(result, path) -> str:
    """Write ``{"meta": ..., "summary": [...], "rows": [...]}``, the rows streamed block by block (the same text as
    ``json.dumps(doc, indent=1)``); returns the path."""
    path = Path(path)
    head = json.dumps({"meta": metadata(result), "summary": summarize(result), "rows": []}, indent=1)
    assert head.endswith('"rows": []\n}')
    with atomic_write(path, "w") as f:
        f.write(head[: -len("[]\n}")] + "[")
        first = True
        for block in result.blocks():
            cols = [block[c].tolist() for c in COLUMN_NAMES]
            for row in zip(*cols, strict=True):
                text = json.dumps({k: _clean(v) for k, v in zip(COLUMN_NAMES, row, strict=True)}, indent=1)
                f.write(("\n" if first else ",\n") + "  " + text.replace("\n", "\n  "))
                first = False
        f.write("\n ]\n}\n" if not first else "]\n}\n")
    return str(path)
