"""Public A/Bs of engine execution mechanisms, priced arm by arm (``measured/engines/ab.csv``; docs/MODEL.md §7.2,
"Engine A/Bs").

A row is one published measurement of a single mechanism switched off and on in one deployment: SGLang's overlap
scheduler for plain decoding (``decode_overlap``) or its overlapped SD round, spec v2 (``sd_overlap``). Both arms are
priced on the one pricing path (:func:`simulator.pricing.price` at the row's engine release, layout, GPU, batch and
context; the SD arm with the row's drafter and AL) and compared as the ratio

    r = time(off) / time(on)      (a plain step's T_step, or an SD round's T_round; the AL cancels)

with the measured one. The rows are never fitted: they check the host terms whose bands (the engine file's
``round:``) come from the same public A/Bs and the engines' code. A row that cannot be priced says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, SimulatorError
from ..pricing import Layout, Request, price
from ..specdec import Acceptance, StepCache
from ..specs.catalog import ENGINES, bundled_files, load_hardware, load_model, measured_dir
from ..sweep.runner import deploy, in_mode
from ..sweep.serving import plain_step
from .rows import duplicate_ids, read_csv_rows
from .sd_corpus import cell_number
from .sd_speedup import release_options

__all__ = ["AB_COLUMNS", "ABResult", "ABRow", "TOLERANCE", "price_ab", "read_ab", "validate_ab"]

AB_COLUMNS = ("id", "engine", "engine_version", "mechanism", "model", "gpu", "gpu_count", "tp", "dp", "ep", "drafter",
              "draft_steps", "accept_length", "batch", "context", "measured", "off_value", "on_value", "unit", "url",
              "where", "assumed")
MECHANISMS = ("decode_overlap", "sd_overlap")
TOLERANCE = 0.10  # the target: every A/B within 10%
LAYOUT = "measured/engines/README.md's layout"
_INTS = ("gpu_count", "tp", "dp", "ep", "draft_steps", "batch", "context")
_FLOATS = ("accept_length", "measured", "off_value", "on_value")


@dataclass(frozen=True)
class ABRow:
    id: str
    engine: str
    engine_version: str
    mechanism: str
    model: str
    gpu: str
    gpu_count: int
    tp: int | None
    dp: int | None
    ep: int | None
    drafter: str
    draft_steps: int | None
    accept_length: float | None
    batch: int
    context: int
    measured: float
    off_value: float | None
    on_value: float | None
    unit: str
    url: str
    where: str
    assumed: str


@dataclass(frozen=True)
class ABResult:
    row: ABRow
    predicted: float | None  # time(off) / time(on), None when not priced
    t_off: float | None = None  # seconds
    t_on: float | None = None
    reason: str = ""  # why not priced

    @property
    def error(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.row.measured - 1.0

    @property
    def within(self) -> bool:
        return self.error is not None and abs(self.error) <= TOLERANCE


def read_ab(path: str | Path | None = None) -> tuple[ABRow, ...]:
    """Read and check an A/B file (default: the bundled ``measured/engines/ab.csv``; the file-level checks are
    :func:`.rows.read_csv_rows`'s); any problem is one :class:`ConfigError` line naming the row, the field, the value
    and the fix."""
    p = Path(path) if path is not None else measured_dir("engines") / "ab.csv"
    rows, bad = read_csv_rows(p, AB_COLUMNS, LAYOUT)
    unknown = [c for c in rows[0] if c not in AB_COLUMNS]
    if unknown or list(rows[0]) != list(AB_COLUMNS):
        what = f"unknown column(s) {', '.join(map(repr, unknown))}" if unknown else "are not in the documented order"
        raise ConfigError(str(p), "columns", what, f"use exactly {','.join(AB_COLUMNS)}")
    if bad:
        i, why = min(bad.items())
        raise ConfigError(f"{p} data row {i + 1}", "columns", why, "quote cells that contain commas")
    for i in duplicate_ids(rows):
        raise ConfigError(f"{p} row {rows[i]['id']!r}", "id", f"value {rows[i]['id']!r} repeats an earlier row's",
                          "give every row a unique id")
    return tuple(_row(f"{p} row {r['id'] or i + 1!r}", r) for i, r in enumerate(rows))


def _row(loc: str, raw: dict) -> ABRow:
    checks = (("engine", ENGINES, "an engine of engines/*.yaml"), ("mechanism", MECHANISMS, "a mechanism"),
              ("model", bundled_files("models"), "a bundled model"), ("gpu", bundled_files("hardware"),
                                                                         "a bundled hardware profile"))
    for col, allowed, what in checks:
        if raw[col] not in allowed:
            raise ConfigError(loc, col, f"value {raw[col]!r} is not {what}", f"use one of {', '.join(allowed)}")
    vals: dict = dict(raw)
    for col in _INTS + _FLOATS:
        vals[col] = cell_number(loc, col, raw[col], integer=col in _INTS)
    for col in ("gpu_count", "batch", "context", "measured"):
        if vals[col] is None:
            raise ConfigError(loc, col, "is empty (value '')", f"every row states {col}")
    if raw["mechanism"] == "sd_overlap" and (not raw["drafter"] or vals["draft_steps"] is None
                                             or vals["accept_length"] is None):
        raise ConfigError(loc, "drafter", "an sd_overlap row needs drafter, draft_steps and accept_length",
                          "state the SD configuration the A/B ran")
    row = ABRow(**vals)
    if row.off_value is not None and row.on_value is not None:
        ratio = row.on_value / row.off_value if row.unit.startswith("tok") else row.off_value / row.on_value
        if abs(ratio / row.measured - 1.0) > 0.01:
            raise ConfigError(loc, "measured", f"value {row.measured:g} disagrees with the arms' ratio {ratio:.4g}",
                              "measured = time(off) / time(on) (on_value / off_value for tok/s)")
    return row


def price_ab(row: ABRow, cache: StepCache | None = None) -> ABResult:
    """Both arms of ``row`` priced (module docstring)."""
    cache = cache or StepCache()
    sd = row.mechanism == "sd_overlap"
    gamma = row.draft_steps if sd else 1
    layout = Layout(tp=row.tp, ep=row.ep, dp=row.dp, gpus=row.gpu_count,
                    options=release_options(row.engine, row.engine_version))
    acc = Acceptance.from_accept_length(row.accept_length, gamma) if sd else None
    req = Request(layout=layout, drafter=row.drafter or "eagle", acceptance=acc, context=row.context)
    try:
        sc, ok, why = deploy(load_model(row.model), load_hardware(row.gpu), req, [row.batch], gamma)
        if not ok:
            return ABResult(row, None, reason=why)
        sc = in_mode(sc, "refined", req)
        times = []
        for arm in ("off", "on"):
            r = price(sc.edit(**{row.mechanism: arm}), [row.batch], [gamma], cache=cache).result
            times.append(float(np.asarray(r.t_round)[0, 0]) if sd else float(plain_step(r)[0]))
    except SimulatorError as exc:
        return ABResult(row, None, reason=str(exc))
    return ABResult(row, times[0] / times[1], times[0], times[1])


def validate_ab(rows: tuple[ABRow, ...] | None = None, cache: StepCache | None = None) -> tuple[ABResult, ...]:
    """Every A/B row priced (default: the bundled file)."""
    cache = cache or StepCache()
    return tuple(price_ab(r, cache) for r in (read_ab() if rows is None else rows))
