"""Reading a measurement CSV for `validate` (one home for the file-level checks): UTF-8 with or without a byte-order
mark (what spreadsheets write), required columns, at least one data row; rows whose field count differs from the
header, and repeated row ids, are refused per row with the reason. Column readers raise :class:`Refused`."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from ..errors import ConfigError


class Refused(Exception):
    """A row that is not priced: ``status`` (refused / unmapped) and the reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def read_csv_rows(path: str | Path, required: tuple[str, ...], layout: str,
                  allow_empty: bool = False) -> tuple[list[dict], dict[int, str]]:
    """(rows as dicts, {row index: why the row is malformed}) of a CSV; a missing/unreadable/empty file, missing
    columns or (unless ``allow_empty``) no data row is one ConfigError line. ``layout`` names the expected layout in
    the fix."""
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            body = [(reader.line_num, r) for r in reader if any(x.strip() for x in r)]
    except IsADirectoryError:
        raise ConfigError(str(p), "FILE", "is a folder", f"give the path of a CSV in {layout}") from None
    except OSError as exc:
        raise ConfigError(str(p), "FILE", f"cannot be read ({exc.strerror or exc})",
                          f"give the path of a CSV in {layout}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(str(p), "FILE", f"is not a readable CSV ({str(exc)[:80]})",
                          f"give a UTF-8 CSV in {layout}") from None
    if not header:
        raise ConfigError(str(p), "FILE", "is empty", f"give a CSV in {layout} with a header and data rows")
    header = [h.strip() for h in header]
    missing = [c for c in required if c not in header]
    if missing:
        shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        raise ConfigError(str(p), "columns", f"are missing: {shown}",
                          f"use {layout} (header: {','.join(required)}; other columns are ignored)")
    if not body and not allow_empty:
        raise ConfigError(str(p), "FILE", "has a header but no data rows", "add the measured rows")
    rows, bad = [], {}
    for i, (line, r) in enumerate(body):
        if len(r) != len(header):
            bad[i] = f"line {line} has {len(r)} fields but the header has {len(header)}"
        rows.append(dict(zip(header, (x.strip() for x in r), strict=False)))
    return rows, bad


def duplicate_ids(rows: list[dict], column: str = "id") -> dict[int, str]:
    """{row index: reason} for every row whose ``column`` repeats an earlier row's (the first one is kept)."""
    first: dict[str, int] = {}
    out = {}
    for i, r in enumerate(rows):
        rid = (r.get(column) or "").strip()
        if not rid:
            continue
        if rid in first:
            out[i] = f"duplicate id {rid!r} (first on data row {first[rid] + 1}); only the first is priced"
        else:
            first[rid] = i
    return out


def int_col(row: dict, col: str, default: int | None = None) -> int:
    text = (row.get(col) or "").strip()
    if not text:
        if default is None:
            raise Refused("refused", f"column {col} is empty")
        return default
    try:
        v = float(text)
    except ValueError:
        raise Refused("refused", f"column {col} is {text!r}, not an integer") from None
    if not math.isfinite(v) or v != int(v) or v < 0:
        raise Refused("refused", f"column {col} is {text!r}, not a whole number >= 0")
    return int(v)


def float_col(row: dict, col: str) -> float:
    text = (row.get(col) or "").strip()
    try:
        v = float(text)
    except ValueError:
        raise Refused("refused", f"column {col} is {text!r}, not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise Refused("refused", f"column {col} is {text!r}; a positive time is needed")
    return v


def concurrency(row: dict) -> int | None:
    """The measured concurrency stated in ``silicon_data_source`` (``silicon_concurrency=N``), or None."""
    m = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
    return int(m.group(1)) if m else None


# A measured time off the prediction by about 10^(3k) is a unit error (the model's own errors stay within ~5x).
UNIT_MISMATCH = 100.0
UNITS = ("seconds", "milliseconds", "microseconds", "nanoseconds")  # each 1000x the one before in count


def unit_mismatch(measured: float, predicted: float, stated: str = "milliseconds") -> str | None:
    """The unit ``measured`` looks like when it is 100x or more off ``predicted`` (both read in ``stated``, one of
    UNITS), e.g. 'seconds' for a TPOT of 0.02 against 20 ms predicted; None when within 100x."""
    if not (measured > 0 and predicted > 0):
        return None
    ratio = measured / predicted
    if 1 / UNIT_MISMATCH < ratio < UNIT_MISMATCH:
        return None
    k = UNITS.index(stated) + round(math.log10(ratio) / 3)
    return UNITS[k] if 0 <= k < len(UNITS) and UNITS[k] != stated else f"not {stated} (about {ratio:.0e}x off)"


def need_values(rows: list[dict], col: str, source: str, fix: str) -> None:
    """A file whose measured column ``col`` holds no positive number in any row has nothing to compare with: one
    ConfigError naming the file and the column (a row without one is refused alone, with its reason)."""
    def positive(text: str) -> bool:
        try:
            return math.isfinite(float(text)) and float(text) > 0
        except ValueError:
            return False

    cells = [(r.get(col) or "").strip() for r in rows]
    if rows and not any(positive(c) for c in cells):
        shown = next((c for c in cells if c), "")
        raise ConfigError(source or "rows", col, f"holds no positive number in any of its {len(rows)} rows"
                          + (f" (e.g. {shown!r})" if shown else " (every cell is empty)"), fix)
