"""The strict reader of the project's own measurement CSVs (the SD corpus, the acceptance logs): one home for the
file-level checks. The header must be exactly the documented columns in their order; every non-blank line must have
one cell per column. Any problem is one :class:`~simulator.errors.ConfigError` line naming the file (and line), the
field and the fix. ``validate``'s reader of users' measurement files (:mod:`simulator.validate.rows`) is the lenient
one: extra columns are ignored and a malformed row is refused alone."""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import ConfigError

__all__ = ["read_strict_csv"]


def read_strict_csv(path: Path, columns: tuple[str, ...], layout: str) -> list[tuple[int, dict[str, str]]]:
    """(line number, {column: stripped cell}) of every non-blank data line of ``path``, whose header must be exactly
    ``columns``; ``layout`` names the documented layout (e.g. ``measured/sd/README.md``) in the fixes. UTF-8 with or
    without a byte-order mark (what spreadsheets export) is read."""
    where = str(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            lines = [(reader.line_num, r) for r in reader]
    except IsADirectoryError:
        raise ConfigError(where, "FILE", "is a folder", f"give the path of a CSV (layout: {layout})") from None
    except OSError as exc:
        raise ConfigError(where, "FILE", f"cannot be read ({exc.strerror or exc})",
                          f"give the path of a CSV (layout: {layout})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(where, "FILE", f"is not a readable UTF-8 CSV ({exc})",
                          f"save it as UTF-8 CSV (layout: {layout})") from None
    if header is None:
        raise ConfigError(where, "columns", "the file is empty", f"start with the header line {','.join(columns)}")
    header = [h.strip() for h in header]
    unknown = [h for h in header if h not in columns]
    if unknown:
        raise ConfigError(where, "columns", f"unknown column(s) {', '.join(map(repr, unknown))}",
                          f"use exactly the columns {','.join(columns)}")
    missing = [c for c in columns if c not in header]
    if missing:
        raise ConfigError(where, "columns", f"missing column(s) {', '.join(missing)}",
                          f"use exactly the columns {','.join(columns)} (leave a cell empty when not stated)")
    if header != list(columns):
        raise ConfigError(where, "columns", "are not in the documented order", f"order them as {','.join(columns)}")
    out = []
    for line, cells in lines:
        if not any(c.strip() for c in cells):
            continue  # a blank line
        if len(cells) != len(columns):
            raise ConfigError(f"{where} line {line}", "columns", f"has {len(cells)} cells, the header {len(columns)}",
                              "quote cells that contain commas and give one cell per column")
        out.append((line, {c: v.strip() for c, v in zip(columns, cells, strict=True)}))
    return out
