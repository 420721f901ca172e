"""``run_sweep``: speculative-decoding speedup over models × GPUs × modes × batch × draft length, as a tidy table.

One row per (model, hardware, deployment, mode, batch, draft length). Step times are computed once per
(model, GPU, deployment, mode, tokens) over the whole batch grid (the engine is vectorised over batch), and each
draft length adds one verify pass T(B, γ+1); the drafter's step is computed once per mode. Columns are numpy arrays
(``SweepResult.columns``); ``records`` and ``to_array()`` are views of them. pandas is not needed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..cost.deployment import PRESETS, Deployment, preset
from ..cost.routing import OverlapInput, model_overlap
from ..errors import InfeasibleError, ParameterError, SimulatorError
from ..specdec import DEFAULT_ACCEPTANCE, Acceptance, Drafter, SpecResult, StepCache, parse_drafter, speculative
from ..specs.catalog import bundled_files, load_hardware, load_model
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .deploy import Layout, default_deployment, fitting_batches

DEFAULT_HARDWARE = ("h100-sxm",)
DEFAULT_BATCH = tuple(2**i for i in range(9))  # 1 … 256
DEFAULT_DRAFT_LEN = tuple(range(1, 9))  # 1 … 8
DEFAULT_CONTEXT = 1024
DEFAULT_MODES = ("prior", "refined")
REFERENCE = ("qwen3-235b-a22b", "fp8_block", 8, 8)  # the study's headline deployment: FP8, attention TP8, MoE EP8

# Tidy-table columns: (name, numpy dtype; strings are sized to their longest value). Times in microseconds.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "U48"), ("hardware", "U32"), ("dtype", "U12"), ("kv_dtype", "U6"), ("tp", "i4"), ("dp", "i4"),
    ("ep", "i4"), ("moe_tp", "i4"), ("context", "i8"), ("drafter", "U48"), ("mode", "U12"), ("batch", "i8"),
    ("draft_len", "i4"), ("acceptance", "f8"), ("accept_length", "f8"), ("t_decode_us", "f8"),
    ("t_verify_us", "f8"), ("t_draft_step_us", "f8"), ("t_draft_us", "f8"), ("t_reject_us", "f8"),
    ("t_round_us", "f8"), ("verify_decode_ratio", "f8"), ("unique_experts_decode", "f8"),
    ("unique_experts_verify", "f8"), ("unique_experts_decode_rank", "f8"), ("unique_experts_verify_rank", "f8"),
    ("bound_decode", "U8"), ("bound_verify", "U8"), ("speedup", "f8"), ("tokens_per_s_request", "f8"),
    ("tokens_per_s_total", "f8"),
)
COLUMN_NAMES = tuple(c for c, _ in COLUMNS)


@dataclass(frozen=True)
class Case:
    """One (model, GPU, deployment, mode) over the batch × draft-length grid."""

    model: ModelSpec
    hardware: HardwareProfile
    deployment: Deployment
    mode: str
    result: SpecResult

    @property
    def key(self) -> tuple:
        d = self.deployment
        return (self.model.name, self.hardware.name, d.dtype, d.tp, d.dp, d.ep)

    @property
    def is_reference(self) -> bool:
        d = self.deployment
        return (self.model.name, d.dtype, d.tp, d.ep) == REFERENCE and d.dp == 1 and self.hardware.name == "h100-sxm"


@dataclass(frozen=True)
class SweepResult:
    """Tidy result of :func:`run_sweep`."""

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

    def summary(self) -> list[dict]:
        from .report import summarize

        return summarize(self)

    def write_csv(self, path) -> str:
        from .io import write_csv

        return write_csv(self, path)

    def write_json(self, path) -> str:
        from .io import write_json

        return write_json(self, path)

    def plot(self, outdir, gamma_ref: int = 3) -> list[str]:
        from .figures import plot_all

        return plot_all(self, outdir, gamma_ref=gamma_ref)


def resolve_models(models) -> list[ModelSpec] | None:
    if models is None:
        return None
    out = []
    for m in [models] if isinstance(models, (str, ModelSpec)) else models:
        out.append(m if isinstance(m, ModelSpec) else load_model(str(m)))
    return out


def resolve_hardware(hardware) -> list[HardwareProfile]:
    if hardware is None:
        hardware = DEFAULT_HARDWARE
    items = [hardware] if isinstance(hardware, (str, HardwareProfile)) else list(hardware)
    return [h if isinstance(h, HardwareProfile) else load_hardware(str(h)) for h in items]


def default_targets() -> list[ModelSpec]:
    """Every bundled MoE model whose role is target (the default study filters them by fit per GPU)."""
    specs = [load_model(n) for n in bundled_files("models")]
    return [m for m in specs if m.role == "target" and m.ffn.is_moe]


def resolve_acceptance(acceptance) -> Acceptance:
    if acceptance is None:
        return DEFAULT_ACCEPTANCE
    if isinstance(acceptance, Acceptance):
        return acceptance
    if isinstance(acceptance, (int, float)):
        return Acceptance.from_alpha(float(acceptance))
    return Acceptance.from_positions(acceptance)


def _overlap_for(model: ModelSpec, lags, popularity) -> OverlapInput | None:
    if lags is None and popularity is None:
        return None
    base = model_overlap(model)
    return OverlapInput(tuple(float(x) for x in lags) if lags is not None else base.lags,
                        popularity if popularity is not None else base.popularity)


def _grid(values, name: str, low: int) -> np.ndarray:
    arr = np.asarray(sorted(set(int(v) for v in values)), dtype=int) if len(values) else np.zeros(0, int)
    if arr.size == 0 or arr[0] < low:
        raise ParameterError(f"--{name} must be a non-empty list of integers >= {low}; got {list(values)}")
    return arr


def run_sweep(models=None, hardware=None, *, dtype: str | None = None, kv_dtype: str = "bf16",
              tp: int | None = None, ep: int | None = None, gpus: int | None = None,
              batch: Sequence[int] = DEFAULT_BATCH, draft_len: Sequence[int] = DEFAULT_DRAFT_LEN,
              acceptance: Acceptance | float | Sequence[float] | None = None, drafter: str | Drafter = "eagle",
              context: int = DEFAULT_CONTEXT, modes: Sequence[str] = DEFAULT_MODES, overlap=None,
              popularity: str | None = None, progress: Callable[[str], None] | None = None) -> SweepResult:
    """The sweep behind ``python -m simulator sweep`` (all arguments optional; defaults = the default study).

    ``models=None`` runs every bundled MoE target that fits each GPU (those that do not are listed in
    ``result.skipped``); ``overlap`` is a list of lag overlaps o(1..D) replacing the models' own statistics."""
    t0 = time.perf_counter()
    b = _grid(batch, "batch", 1)
    g = _grid(draft_len, "draft-len", 0)
    if context < 0:
        raise ParameterError(f"--context must be >= 0 tokens; got {context}")
    modes = list(dict.fromkeys(modes))
    for m in modes:
        preset(m)
    acc = resolve_acceptance(acceptance)
    drafter = parse_drafter(drafter)
    hws = resolve_hardware(hardware)
    targets = resolve_models(models)
    explicit = targets is not None
    targets = targets if explicit else default_targets()
    layout = Layout(dtype=dtype, kv_dtype=kv_dtype, tp=tp, ep=ep, gpus=gpus)
    cache = StepCache()
    cases: list[Case] = []
    blocks: list[dict] = []
    skipped: list[tuple[str, str, str]] = []
    notes: list[str] = []
    total = len(targets) * len(hws)
    for i, (hw, model) in enumerate((h, m) for h in hws for m in targets):
        if progress is not None:
            progress(f"sweep: [{i + 1}/{total}] {model.name} on {hw.name}")
        try:
            dep = default_deployment(model, hw, layout)
            ok, why = fitting_batches(model, hw, dep, b, int(g.max()) + 1, context)
        except SimulatorError as exc:
            skipped.append((model.name, hw.name, str(exc)))
            continue
        if not ok:
            skipped.append((model.name, hw.name, why))
            continue
        if len(ok) < len(b):
            notes.append(f"{model.name} on {hw.name}: batches above {ok[-1]:g} dropped ({why})")
        if drafter.kind == "model" and load_model(drafter.model).vocab_size != model.vocab_size:
            notes.append(f"{model.name}: draft model {drafter.model} has a different vocabulary "
                         f"({load_model(drafter.model).vocab_size} vs {model.vocab_size} tokens); speculative "
                         f"decoding needs a shared tokenizer, costed anyway")
        ov = _overlap_for(model, overlap, popularity)
        for mode in modes:
            res = speculative(model, hw, dep, np.asarray(ok), g, acc, drafter, context, PRESETS[mode], ov, cache)
            case = Case(model, hw, dep, mode, res)
            cases.append(case)
            blocks.append(_block(case, drafter, context))
    if not cases:
        first = skipped[0][2] if skipped else "nothing to run"
        raise InfeasibleError(f"no model/hardware combination could run: {first}")
    columns = {c: np.concatenate([blk[c] for blk in blocks]).astype(str if dt.startswith("U") else dt)
               for c, dt in COLUMNS}
    return SweepResult(columns, cases, drafter, acc, int(context), skipped, notes, time.perf_counter() - t0)


def _block(case: Case, drafter: Drafter, context: int) -> dict[str, np.ndarray]:
    """Columns of one case, rows ordered batch-major then draft length."""
    r, d = case.result, case.deployment
    ng, nb = len(r.gammas), len(r.batch)
    n = ng * nb

    def per_gb(a):  # (ng, nb) -> rows ordered (batch, γ)
        return np.asarray(a).T.reshape(n)

    def per_b(a):
        return np.repeat(np.asarray(a), ng)

    def per_g(a):
        return np.tile(np.asarray(a), nb)

    def const(v, dt=object):
        return np.full(n, v, dtype=dt)

    us = 1e6
    return {
        "model": const(case.model.name), "hardware": const(case.hardware.name), "dtype": const(d.dtype),
        "kv_dtype": const(d.kv_dtype), "tp": const(d.tp, int), "dp": const(d.dp, int), "ep": const(d.ep, int),
        "moe_tp": const(d.moe_tp, int), "context": const(context, int), "drafter": const(drafter.label),
        "mode": const(case.mode), "batch": per_b(r.batch).astype(int), "draft_len": per_g(r.gammas),
        "acceptance": per_g(r.alpha), "accept_length": per_g(r.accept_length),
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
    }
