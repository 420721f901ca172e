"""The tidy result table of a sweep: one row per (model, GPU, deployment, variant, mode, batch, draft length).

:class:`Case` is one priced (model, GPU, deployment, variant, mode) over the batch × draft-length grid;
:class:`SweepResult` holds the cases and their columns (numpy arrays; ``records`` and ``to_array()`` are views).
No I/O here: writers (:mod:`.io`), summaries (:mod:`.report`) and figures (:mod:`simulator.render.figures`)
import this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..pricing import Case
from ..specdec import Acceptance, Drafter

# Tidy-table columns: (name, numpy dtype; strings are sized to their longest value). Times in microseconds.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "U48"), ("hardware", "U32"), ("dtype", "U12"), ("kv_dtype", "U6"), ("tp", "i4"), ("dp", "i4"),
    ("ep", "i4"), ("moe_tp", "i4"), ("context", "i8"), ("drafter", "U48"), ("variant", "U64"), ("mode", "U12"),
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
COLUMN_NAMES = tuple(c for c, _ in COLUMNS)


@dataclass(frozen=True)
class SweepResult:
    """Tidy result of :func:`~simulator.sweep.runner.run_sweep`."""

    columns: dict[str, np.ndarray]
    cases: list[Case]
    drafter: Drafter
    acceptance: Acceptance
    context: int
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (model, hardware, reason)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def __len__(self) -> int:
        return len(self.columns["model"])

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


def tidy_columns(cases: list[Case]) -> dict[str, np.ndarray]:
    """The columns of :data:`COLUMNS` for ``cases``, rows ordered case, then batch, then draft length."""
    blocks = [_block(c) for c in cases]
    return {c: np.concatenate([b[c] for b in blocks]).astype(str if dt.startswith("U") else dt)
            for c, dt in COLUMNS}


def _block(case: Case) -> dict[str, np.ndarray]:
    r, d = case.result, case.deployment
    ng, nb = len(r.gammas), len(r.batch)
    n = ng * nb

    def per_gb(a):  # (ng, nb) -> rows ordered (batch, γ)
        return np.asarray(a).T.reshape(n)

    def per_b(a):
        return np.repeat(np.asarray(a), ng)

    def per_g(a):
        return np.tile(np.asarray(a), nb)

    def const(v, dt=None):  # strings as fixed-width unicode (no per-row Python objects)
        return np.full(n, v, dtype=dt)

    us = 1e6
    zeros = np.zeros((ng, nb))
    return {
        "model": const(case.model.name), "hardware": const(case.hardware.name), "dtype": const(d.dtype),
        "kv_dtype": const(d.kv_dtype), "tp": const(d.tp, int), "dp": const(d.dp, int), "ep": const(d.ep, int),
        "moe_tp": const(d.moe_tp, int), "context": const(case.context, int), "drafter": const(case.drafter.label),
        "variant": const(case.variant), "mode": const(case.mode), "batch": per_b(r.batch).astype(int),
        "draft_len": per_g(r.gammas), "acceptance": per_g(r.alpha), "accept_length": per_g(r.accept_length),
        "t_decode_us": per_b(r.t_decode) * us, "t_verify_us": per_gb(r.t_verify) * us,
        "t_draft_step_us": per_b(r.t_draft_step) * us, "t_draft_us": per_gb(r.t_draft) * us,
        "t_reject_us": per_g(r.t_reject) * us, "t_round_us": per_gb(r.t_round) * us,
        "verify_decode_ratio": per_gb(r.verify_decode_ratio),
        "unique_experts_decode": per_b(r.unique_decode), "unique_experts_verify": per_gb(r.unique_verify),
        "unique_experts_decode_rank": per_b(r.unique_decode_rank),
        "unique_experts_verify_rank": per_gb(r.unique_verify_rank),
        "bound_decode": per_b(r.bound_decode), "bound_verify": per_gb(r.bound_verify),
        "speedup": per_gb(r.speedup), "tokens_per_s_request": per_gb(r.tokens_per_s_request),
        "tokens_per_s_total": per_gb(r.tokens_per_s_total),
        "sd_overlap": const(r.sd_overlap), "decode_overlap": const(r.decode_overlap),
        "t_extend_us": per_gb(_or(r.t_extend, zeros)) * us, "t_kernels_us": per_gb(_or(r.t_kernels, zeros)) * us,
        "t_host_us": per_gb(_or(r.t_host, zeros)) * us,
        "t_host_decode_us": per_b(_or(r.t_host_decode, 0.0 * r.batch)) * us,
        "t_round_low_us": per_gb(_or(r.t_round_low, r.t_round)) * us,
        "t_round_high_us": per_gb(_or(r.t_round_high, r.t_round)) * us,
        "speedup_low": per_gb(_or(r.speedup_low, r.speedup)), "speedup_high": per_gb(_or(r.speedup_high, r.speedup)),
    }


def _or(a, default):
    """A SpecResult field, or ``default`` where the result does not carry it (None)."""
    return default if a is None else a
