"""The tidy result table of a sweep: one row per (model, GPU, deployment, variant, mode, batch, draft length).

:class:`Case` is one priced (model, GPU, deployment, variant, mode) over the batch × draft-length grid;
:class:`SweepResult` holds the cases and their columns (numpy arrays; ``records`` and ``to_array()`` are views).
No I/O here: writers (:mod:`.io`), summaries (:mod:`.report`) and figures (:mod:`simulator.render.figures`)
import this module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..pricing import Case
from ..pricing.knobs import KNOBS
from ..specdec import Acceptance, Drafter, default_acceptance

# Tidy-table columns: (name, numpy dtype; strings are sized to their longest value). Times in microseconds.
# What was priced is stated on every row: one column per knob of the knob table (simulator.pricing.knobs.KNOBS: the
# value priced, e.g. the GPUs, the engine and the release whose execution modes apply, the layout, the placement, the
# draft tree as its parent list ("" for a chain), each mechanism of the mode with the forced ones), so a row reads
# back to the request that prices it (pricing.knobs.row_request). Knob columns not placed below follow "tree".
_PLACED: tuple[tuple[str, str], ...] = (
    ("model", "U48"), ("hardware", "U32"), ("gpus", "i4"), ("engine", "U12"), ("engine_version", "U12"),
    ("dtype", "U12"), ("kv_dtype", "U6"), ("tp", "i4"), ("dp", "i4"), ("ep", "i4"), ("moe_tp", "i4"),
    ("placement", "U12"), ("context", "i8"), ("drafter", "U48"), ("tree", "U64"), ("variant", "U64"), ("mode", "U12"),
    ("batch", "i8"), ("draft_len", "i4"), ("acceptance", "f8"), ("accept_length", "f8"), ("t_decode_us", "f8"),
    ("t_verify_us", "f8"), ("t_draft_step_us", "f8"), ("t_draft_us", "f8"), ("t_reject_us", "f8"),
    ("t_round_us", "f8"), ("verify_decode_ratio", "f8"), ("unique_experts_decode", "f8"),
    ("unique_experts_verify", "f8"), ("unique_experts_decode_rank", "f8"), ("unique_experts_verify_rank", "f8"),
    ("bound_decode", "U8"), ("bound_verify", "U8"), ("speedup", "f8"), ("tokens_per_s_request", "f8"),
    ("tokens_per_s_total", "f8"),
    # engine terms of the round (docs/MODEL.md §4.6) and the band over their public ranges (and acceptance's),
    # speedup_low / speedup_high widened by the model's held-out error on the public SD corpus where draft_len >= 1
    # (refined mode: specdec.engine_round.MODEL_ERROR; docs/SD_VALIDATION.md "The model-error band")
    ("sd_overlap", "U3"), ("decode_overlap", "U3"), ("t_extend_us", "f8"), ("t_kernels_us", "f8"),
    ("t_host_us", "f8"), ("t_host_decode_us", "f8"), ("t_round_low_us", "f8"), ("t_round_high_us", "f8"),
    ("speedup_low", "f8"), ("speedup_high", "f8"),
)


def _columns() -> tuple[tuple[str, str], ...]:
    placed = {c for c, _ in _PLACED}
    extra = tuple((k.column, "i8" if k.kind == "int" else "U1") for k in KNOBS if k.column not in placed)
    i = [c for c, _ in _PLACED].index("tree") + 1
    return _PLACED[:i] + extra + _PLACED[i:]


COLUMNS = _columns()
COLUMN_NAMES = tuple(c for c, _ in COLUMNS)


BLOCK_ROWS = 65536  # rows per block of :meth:`SweepResult.blocks` (the writers' memory stays flat)


@dataclass(frozen=True)
class SweepResult:
    """Tidy result of :func:`~simulator.sweep.runner.run_sweep`. The table is built from the cases when asked for
    (:attr:`columns`, all rows at once) or block by block (:meth:`blocks`: what the writers stream, so a sweep of
    every model over thousands of batches never holds its whole table)."""

    cases: list[Case]
    drafter: Drafter
    acceptance: Acceptance
    context: int
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (model, hardware, reason)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    not_priced: int = 0  # points of the grid not priced (models or batches that do not fit; the progress line's)

    def __len__(self) -> int:
        return sum(case_rows(c) for c in self.cases)

    @functools.cached_property
    def columns(self) -> dict[str, np.ndarray]:
        """Every column of :data:`COLUMNS`, all rows (numpy arrays; built once, then kept)."""
        return tidy_columns(self.cases)

    def blocks(self, rows: int | None = None):
        """The table as successive column dicts of about ``rows`` (default :data:`BLOCK_ROWS`) rows each, cases
        whole, in row order (the built :attr:`columns` as one block when they exist already)."""
        rows = rows or BLOCK_ROWS
        if "columns" in self.__dict__:
            yield self.columns
            return
        group, n = [], 0
        for c in self.cases:
            group.append(c)
            n += case_rows(c)
            if n >= rows:
                yield tidy_columns(group)
                group, n = [], 0
        if group:
            yield tidy_columns(group)

    @functools.cached_property
    def acceptances(self) -> tuple[tuple[str, Acceptance, tuple[str, ...]], ...]:
        """(label, acceptance, models) of each acceptance the cases priced, in case order: a stated one by its label,
        a target's own default (its public logs) alone, and the targets without public logs of their own together
        under the family default they share ("no public log for a, b: family default ..."; docs/MODEL.md §4.1)."""
        groups: dict[tuple[bool, str], tuple[Acceptance, list[str]]] = {}
        for c in self.cases:
            sc = c.scenario
            key = (False, sc.accept.label)
            if sc.acceptance is None:
                d = default_acceptance(sc.drafter.kind, sc.model.ffn.is_moe, sc.model.name)
                key = (False, d.source) if d.own else (True, d.family)
            models = groups.setdefault(key, (sc.accept, []))[1]
            if sc.model.name not in models:
                models.append(sc.model.name)
        return tuple((f"no public log for {', '.join(m)}: family {label}" if shared else label, a, tuple(m))
                     for (shared, label), (a, m) in groups.items())

    @property
    def records(self) -> list[dict]:
        """One dict per row, plain Python values."""
        cols = [self.columns[c].tolist() for c in COLUMN_NAMES]
        return [dict(zip(COLUMN_NAMES, row, strict=True)) for row in zip(*cols, strict=True)]

    def to_array(self) -> np.ndarray:
        """A numpy structured array with the columns of :data:`COLUMNS`."""
        arr = np.empty(len(self), dtype=[(c, self.columns[c].dtype) for c in COLUMN_NAMES])
        for c in COLUMN_NAMES:
            arr[c] = self.columns[c]
        return arr


def case_rows(c: Case) -> int:
    """Rows of one case in the table: its draft lengths × batches."""
    return len(c.result.gammas) * len(c.result.batch)


def tidy_columns(cases: list[Case]) -> dict[str, np.ndarray]:
    """The columns of :data:`COLUMNS` for ``cases``, rows ordered case, then batch, then draft length. Each column
    is gathered at once: the cases' values concatenated, then read through one index per layout (a value per case,
    per batch, per draft length or per (draft length, batch) point; :data:`_FIELDS`)."""
    ng = np.array([len(c.result.gammas) for c in cases])
    nb = np.array([len(c.result.batch) for c in cases])
    n = ng * nb
    patterns: dict = {}  # (ng, nb) -> the within-case indices of each layout (most cases share one grid)

    def pattern(g: int, b: int) -> tuple:
        hit = patterns.get((g, b))
        if hit is None:
            gi, bi = np.arange(g), np.arange(b)
            hit = patterns[(g, b)] = (np.repeat(bi, g), np.tile(gi, b), (gi[None, :] * b + bi[:, None]).ravel())
        return hit

    pats = [pattern(int(g), int(b)) for g, b in zip(ng, nb, strict=True)]
    index = {"case": np.repeat(np.arange(len(cases)), n)}
    for j, (kind, size) in enumerate((("b", nb), ("g", ng), ("gb", n))):
        offsets = np.concatenate([[0], np.cumsum(size)[:-1]])
        index[kind] = np.repeat(offsets, n) + np.concatenate([p[j] for p in pats])
    out = {}
    for name, dt in COLUMNS:
        kind, get, scale = _FIELDS[name]
        values = [get(c) for c in cases]
        col = np.array(values)[index["case"]] if kind == "case" else \
            np.concatenate([np.asarray(v).ravel() for v in values])[index[kind]]
        if scale is not None:
            col = col * scale
        out[name] = col.astype(str if dt.startswith("U") else dt)
    return out


_US = 1e6  # seconds -> microseconds


def _zeros(r):
    return np.zeros((len(r.gammas), len(r.batch)))


# How each column is read from a case: (layout, getter, scale or None). Layouts: "case" (one value per case), "b"
# (per batch), "g" (per draft length), "gb" (an (ng, nb) array: per draft length and batch).
_FIELDS = {
    "model": ("case", lambda c: c.model.name, None), "hardware": ("case", lambda c: c.hardware.name, None),
    "moe_tp": ("case", lambda c: c.deployment.moe_tp, None),
    "variant": ("case", lambda c: c.variant, None), "mode": ("case", lambda c: c.mode, None),
    "batch": ("b", lambda c: np.asarray(c.result.batch).astype(int), None),
    "draft_len": ("g", lambda c: c.result.gammas, None), "acceptance": ("g", lambda c: c.result.alpha, None),
    "accept_length": ("g", lambda c: c.result.accept_length, None),
    "t_decode_us": ("b", lambda c: c.result.t_decode, _US), "t_verify_us": ("gb", lambda c: c.result.t_verify, _US),
    "t_draft_step_us": ("b", lambda c: c.result.t_draft_step, _US),
    "t_draft_us": ("gb", lambda c: c.result.t_draft, _US), "t_reject_us": ("g", lambda c: c.result.t_reject, _US),
    "t_round_us": ("gb", lambda c: c.result.t_round, _US),
    "verify_decode_ratio": ("gb", lambda c: c.result.verify_decode_ratio, None),
    "unique_experts_decode": ("b", lambda c: c.result.unique_decode, None),
    "unique_experts_verify": ("gb", lambda c: c.result.unique_verify, None),
    "unique_experts_decode_rank": ("b", lambda c: c.result.unique_decode_rank, None),
    "unique_experts_verify_rank": ("gb", lambda c: c.result.unique_verify_rank, None),
    "bound_decode": ("b", lambda c: c.result.bound_decode, None),
    "bound_verify": ("gb", lambda c: c.result.bound_verify, None),
    "speedup": ("gb", lambda c: c.result.speedup, None),
    "tokens_per_s_request": ("gb", lambda c: c.result.tokens_per_s_request, None),
    "tokens_per_s_total": ("gb", lambda c: c.result.tokens_per_s_total, None),
    "t_extend_us": ("gb", lambda c: _or(c.result.t_extend, _zeros(c.result)), _US),
    "t_kernels_us": ("gb", lambda c: _or(c.result.t_kernels, _zeros(c.result)), _US),
    "t_host_us": ("gb", lambda c: _or(c.result.t_host, _zeros(c.result)), _US),
    "t_host_decode_us": ("b", lambda c: _or(c.result.t_host_decode, 0.0 * c.result.batch), _US),
    "t_round_low_us": ("gb", lambda c: _or(c.result.t_round_low, c.result.t_round), _US),
    "t_round_high_us": ("gb", lambda c: _or(c.result.t_round_high, c.result.t_round), _US),
    "speedup_low": ("gb", lambda c: _or(c.result.speedup_low, c.result.speedup), None),
    "speedup_high": ("gb", lambda c: _or(c.result.speedup_high, c.result.speedup), None),
}


def _knob_getter(k):
    if k.kind == "int":
        return lambda c: k.priced(c)
    return lambda c: k.text(k.priced(c))


_FIELDS.update({k.column: ("case", _knob_getter(k), None) for k in KNOBS})


def _or(a, default):
    """A SpecResult field, or ``default`` where the result does not carry it (None)."""
    return default if a is None else a
