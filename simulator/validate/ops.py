"""`validate ops DIR`: the per-op tables of one GPU checked, then priced
(:func:`simulator.calibrate.op_errors.validate_ops`).

Checks before pricing, each one ConfigError line naming the file, line, column and value: DIR is a folder holding
the four tables; every table has its columns and at least one row; numeric columns are finite numbers and
``latency_us`` is a positive time. The GPU is read from the tables' ``gpu`` column (aiconfigurator system names,
resolved through the catalog): a ``hardware`` argument that contradicts it is refused. After pricing, a table whose
measured latencies are 100x or more off the predictions for most rows is refused as a unit error (the column is
microseconds).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..calibrate.measured import TABLES
from ..calibrate.op_errors import OpValidation, validate_ops
from ..errors import ConfigError
from .mapping import find_gpu
from .rows import read_csv_rows, unit_mismatch

_COMMON = ("gpu", "framework", "version", "kernel_source")
COLUMNS = {
    "moe": (*_COMMON, "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size", "distribution", "latency_us"),
    "gemm": (*_COMMON, "gemm_dtype", "m", "n", "k", "latency_us"),
    "decode_attention": (*_COMMON, "batch_size", "num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype",
                         "kv_len", "window_size", "latency_us"),
    "collectives": ("gpu", "framework", "version", "op_name", "kernel_source", "dtype", "num_gpus", "message_bytes",
                    "latency_us"),
}
NUMERIC = {"moe": COLUMNS["moe"][5:12], "gemm": ("m", "n", "k"),
           "decode_attention": ("batch_size", "num_heads", "num_key_value_heads", "head_dim", "kv_len", "window_size"),
           "collectives": ("num_gpus", "message_bytes")}
LAYOUT = "the measured/<gpu>/ layout (see measured/h100-sxm/README.md)"


def _folder(path) -> Path:
    p = Path(path)
    need = ", ".join(f"{t}.csv" for t in TABLES)
    if not p.exists():
        raise ConfigError(str(p), "DIR", "does not exist", f"give a folder holding {need}")
    if not p.is_dir():
        raise ConfigError(str(p), "DIR", "is a file, not a folder", f"give the folder holding {need}")
    return p


def _check_table(path: Path, table: str, rows: list[dict], bad: dict[int, str]) -> None:
    if bad:
        i = min(bad)
        raise ConfigError(str(path), "", bad[i], "give every row the header's fields")
    for i, r in enumerate(rows):
        for col in (*NUMERIC[table], "latency_us"):
            text = r.get(col, "")
            try:
                v = float(text)
            except ValueError:
                v = math.nan
            if not math.isfinite(v) or (col == "latency_us" and v <= 0) or v < 0:
                need = "a positive time in µs" if col == "latency_us" else "a number >= 0"
                raise ConfigError(str(path), col, f"is {text!r} on data row {i + 1}, not {need}",
                                  "fix or remove the row")


def read_op_tables(path) -> tuple[Path, dict[str, list[dict]], set[str]]:
    """(folder, {table: rows}, the gpu column's values) of a measured folder, every check above applied."""
    folder = _folder(path)
    tables, gpus = {}, set()
    for t in TABLES:
        f = folder / f"{t}.csv"
        rows, bad = read_csv_rows(f, COLUMNS[t], LAYOUT, allow_empty=True)  # a GPU may lack one kind of op
        _check_table(f, t, rows, bad)
        tables[t] = rows
        gpus |= {r["gpu"].strip() for r in rows}
    if not any(tables.values()):
        raise ConfigError(str(folder), "DIR", "holds no measured rows (every table is empty)", "add the measured rows")
    return folder, tables, gpus


def data_gpu(folder: Path, gpus: set[str], hardware: str | None) -> str:
    """The catalog GPU the tables were measured on: their ``gpu`` column, or ``hardware`` when given and consistent."""
    found = {g: find_gpu(g) for g in sorted(gpus)}
    known = set(found.values()) - {None}
    if len(known) > 1:
        raise ConfigError(str(folder), "gpu", f"names {len(known)} GPUs ({', '.join(sorted(known))})",
                          "keep one GPU's tables per folder")
    if hardware is not None:
        if hardware.endswith((".yaml", ".yml")):  # the user's own profile: theirs to match to the data
            return hardware
        want = find_gpu(hardware)
        if want is None:
            from ..specs.catalog import load_hardware

            load_hardware(hardware)  # raises the catalog's one line (unknown, with the closest name)
        if known and want not in known:
            raise ConfigError(str(folder), "gpu", f"is {sorted(gpus)[0]!r} ({next(iter(known))}) but --hardware is "
                              f"{hardware!r}", f"pass --hardware {next(iter(known))} or leave it out")
        return want
    if not known:
        raise ConfigError(str(folder), "gpu", f"is {sorted(gpus)[0]!r}, which is not in the catalog",
                          "pass --hardware NAME (python -m simulator list hardware)")
    return next(iter(known))


def validate_ops_folder(path, hardware: str | None = None) -> OpValidation:
    """Check a measured folder, read its GPU, price every usable row
    (``simulator.calibrate.op_errors.validate_ops``)."""
    folder, tables, gpus = read_op_tables(path)
    v = validate_ops(data_gpu(folder, gpus, hardware), folder, tables=tables)
    for s in v.samples:
        off = [u for u in map(unit_mismatch, s.measured, s.predicted, ["microseconds"] * s.measured.size) if u]
        if 2 * len(off) > s.measured.size:
            unit = max(set(off), key=off.count)
            raise ConfigError(str(folder), "latency_us", f"{len(off)} of {s.measured.size} {s.op} rows "
                              f"({s.variant}, {s.set}) are 100x or more off the prediction (median measured "
                              f"{np.median(s.measured):.3g} vs predicted {np.median(s.predicted):.3g}): the values "
                              f"look like {unit}", "give latencies in microseconds")
    return v
