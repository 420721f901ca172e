"""`validate tpot`: price every row of an end-to-end measurement CSV in aiconfigurator's ``silicon_sample.csv``
column layout and compare with its measured TPOT (docs/MODEL.md §7).

A row is one deployment (model, system, engine, quantisation, layout) at one concurrency, input length ``isl`` and
output length ``osl``. Agg rows (one engine serves prefill and decode) use the unprefixed layout columns, disagg rows
the ``decode_*`` columns (only the decode side has a TPOT). ``batch_size`` is per attention-DP rank (batch_size ·
attention_dp_size = the measured concurrency in the agg rows); a disagg row without ``decode_batch_size`` takes its
concurrency from ``silicon_data_source`` (``silicon_concurrency=N``) over ``decode_num_workers`` (default 1).
The predicted TPOT is

    decode:  T_step(B, s=1, context = isl + osl/2)                    B = batch_size · attention_dp_size
    agg:     + (batch_size / osl) · T_step(attention_dp_size, s=isl, context=0)

the step time of the whole decode batch at the mean context of a generation, plus, for agg, the prefills that
in-flight batching mixes into the decode steps: at steady state ``B / osl`` requests start per decode step, each
data-parallel rank prefilling ``batch_size / osl`` of them (one ``isl``-token prefill per rank costs
``T_step(dp, isl)``). Rows are grouped by deployment and context so that one ``step_time`` call prices a group's
batches. Nothing here is fitted to the rows.
"""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..cost.deployment import Deployment, validate
from ..cost.step import check_memory, step_time
from ..errors import ConfigError, SimulatorError
from ..specs.catalog import load_hardware, load_model
from ..specs.kernels import ENGINES
from .mapping import DTYPES, HELD_OUT_SYSTEMS, MODELS, SYSTEMS, kv_dtype, row_dtype

LAYOUT = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
REQUIRED_COLUMNS = ("id", "backend", "model_path", "system", "precision", "mode", "isl", "osl", "gemm_quant_mode",
                    "moe_quant_mode", *LAYOUT, *(f"decode_{c}" for c in LAYOUT), "silicon_tpot_ms")
MODES = ("agg", "disagg")
STATUSES = ("ok", "refused", "unmapped")


@dataclass(frozen=True)
class RowResult:
    """One priced (or not) row. ``error`` = predicted / measured − 1."""

    id: str
    status: str  # ok | refused | unmapped
    reason: str
    predicted_tpot_ms: float | None
    measured_tpot_ms: float | None
    model: str = ""  # catalog names ("" when unmapped)
    gpu: str = ""
    engine: str = ""
    mode: str = ""
    grounding: str = ""  # calibrated | derived (the hardware profile's)
    moe: bool | None = None
    gpus: int = 0
    scale_out: bool | None = None  # more GPUs than one scale-up domain (multi-node over the scale-out fabric)
    batch_from: str = ""  # "column" (batch_size stated) or "concurrency" (inferred from silicon_concurrency)
    decode_ms: float | None = None
    prefill_ms: float | None = None  # agg: the prefill share added to each decode step

    @property
    def error(self) -> float | None:
        if self.predicted_tpot_ms is None or not self.measured_tpot_ms:
            return None
        return self.predicted_tpot_ms / self.measured_tpot_ms - 1.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["error"] = self.error
        return d


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """The CSV's rows as dicts; a missing file or missing columns raise one ConfigError line."""
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if missing:
                raise ConfigError(str(p), "columns", f"are missing: {', '.join(missing)}",
                                  "use aiconfigurator's silicon_sample.csv layout (header: "
                                  f"{','.join(REQUIRED_COLUMNS)}; other columns are ignored)")
            return [dict(r) for r in reader]
    except OSError as exc:
        raise ConfigError(str(p), "FILE", f"cannot be read ({exc.strerror or exc})",
                          "give the path of a CSV in silicon_sample.csv layout") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(str(p), "FILE", f"is not a readable CSV ({exc})",
                          "give a UTF-8 CSV in silicon_sample.csv layout") from None


class _Refused(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _int(row: dict, col: str, default: int | None = None) -> int:
    text = (row.get(col) or "").strip()
    if not text:
        if default is None:
            raise _Refused("refused", f"column {col} is empty")
        return default
    try:
        v = float(text)
    except ValueError:
        raise _Refused("refused", f"column {col} is {text!r}, not an integer") from None
    if v != int(v) or v < 0:
        raise _Refused("refused", f"column {col} is {text!r}, not a whole number >= 0")
    return int(v)


def _batch(row: dict, pre: str, dp: int) -> int:
    """Requests per attention-DP rank: the ``batch_size`` column, or, where a disagg row leaves it empty, the
    measured concurrency (``silicon_concurrency=N`` in ``silicon_data_source``) spread over the decode workers and
    their DP ranks (rounded up)."""
    if (row.get(f"{pre}batch_size") or "").strip():
        return _int(row, f"{pre}batch_size")
    m = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
    if not m:
        raise _Refused("refused", f"column {pre}batch_size is empty and silicon_data_source states no "
                                  "silicon_concurrency")
    workers = _int(row, f"{pre}num_workers", 1) or 1
    return max(1, -(-int(m.group(1)) // (workers * max(dp, 1))))


def _float(row: dict, col: str) -> float:
    text = (row.get(col) or "").strip()
    try:
        v = float(text)
    except ValueError:
        raise _Refused("refused", f"column {col} is {text!r}, not a number") from None
    if not np.isfinite(v) or v <= 0:
        raise _Refused("refused", f"column {col} is {text!r}; a positive time is needed")
    return v


_CACHE: dict = {}


def _catalog(kind: str, name: str):
    key = (kind, name)
    if key not in _CACHE:
        try:
            _CACHE[key] = (load_model if kind == "model" else load_hardware)(name)
        except SimulatorError as exc:
            _CACHE[key] = exc
    return _CACHE[key]


@dataclass(frozen=True)
class _Plan:
    """A row resolved to a catalog deployment, ready to price."""

    model: str
    gpu: str
    dep: Deployment
    batch: int  # per attention-DP rank
    batch_from: str
    isl: int
    osl: int
    mode: str
    measured: float


def _grounding(hw) -> str:
    g = getattr(hw, "grounding", "")
    if g:
        return str(g).split(":")[0]
    return "derived" if hw.what_if else "calibrated"


def _resolve(row: dict, include_held_out: bool) -> tuple[_Plan, object, object]:
    system = (row.get("system") or "").strip()
    hf = (row.get("model_path") or "").strip()
    if system in HELD_OUT_SYSTEMS and not include_held_out:
        raise _Refused("unmapped", f"system {system} is held out: its rows judge the what-if rules "
                                   "(pass include_held_out / --include-held-out to price them)")
    name = MODELS.get(hf.lower())
    if name is None:
        raise _Refused("unmapped", f"model {hf!r} is not in the mapping table (simulator/validate/mapping.py MODELS)")
    gpu = SYSTEMS.get(system.lower())
    if gpu is None:
        raise _Refused("unmapped", f"system {system!r} is not in the mapping table (simulator/validate/mapping.py "
                                   "SYSTEMS)")
    model, hw = _catalog("model", name), _catalog("hardware", gpu)
    if isinstance(model, SimulatorError):
        raise _Refused("unmapped", f"model {name!r}: {model}")
    if isinstance(hw, SimulatorError):
        raise _Refused("unmapped", f"system {system!r} maps to hardware profile {gpu!r}, which is not bundled")
    mode = (row.get("mode") or "").strip()
    if mode not in MODES:
        raise _Refused("refused", f"mode {mode!r} is not one of {list(MODES)}")
    pre = "" if mode == "agg" else "decode_"
    engine = (row.get("backend") or "").strip().lower()
    if engine not in ENGINES:
        raise _Refused("refused", f"backend {engine!r} is not one of {list(ENGINES)}")
    quant = (row.get("moe_quant_mode") or row.get("gemm_quant_mode") or "").strip().lower()
    dtype = row_dtype(hf, quant)
    if dtype is None:
        raise _Refused("refused", f"quantisation mode {quant!r} has no catalog format (known: {sorted(DTYPES)})")
    tp, pp = _int(row, f"{pre}tp_size"), _int(row, f"{pre}pp_size", 1)
    dp = _int(row, f"{pre}attention_dp_size", 1)
    batch = _batch(row, pre, dp)
    if pp > 1:
        raise _Refused("refused", f"pipeline parallelism ({pre}pp_size {pp}) is not modelled")
    if min(tp, dp, batch) < 1:
        raise _Refused("refused", f"{pre}tp_size {tp}, {pre}attention_dp_size {dp}, {pre}batch_size {batch}: "
                                  "each must be >= 1")
    redundant = 0
    if model.ffn.is_moe:
        ep = _int(row, f"{pre}moe_ep_size", 1)
        moe_tp = _int(row, f"{pre}moe_tp_size", max(1, tp * dp // max(ep, 1)))
        if dp == 1 and model.attention.q_heads % tp and tp <= hw.domain_size:
            tp, dp, ep, moe_tp, redundant, batch = _wide_ep(model, tp, batch)
    else:
        ep, moe_tp = 1, None
    try:
        dep = Deployment(dtype=dtype, kv_dtype=kv_dtype(row.get("precision") or ""), tp=tp, dp=dp, ep=ep,
                         moe_tp=moe_tp, engine=engine, redundant_experts=redundant)
        validate(model, hw, dep)
        hw_e = hw.for_engine(engine)
    except SimulatorError as exc:
        raise _Refused("refused", str(exc)) from None
    stated = "column" if (row.get(f"{pre}batch_size") or "").strip() else "concurrency"
    plan = _Plan(name, gpu, dep, batch, stated, _int(row, "isl"), max(1, _int(row, "osl")), mode,
                 _float(row, "silicon_tpot_ms"))
    return plan, model, hw_e


def _wide_ep(model, gpus: int, batch: int) -> tuple[int, int, int, int, int, int]:
    """The layout of a MoE row whose ``tp_size`` cannot be attention TP (it does not divide the heads) and whose
    attention DP is 1: ``tp_size`` counts the GPUs of a wide-EP deployment with attention data parallelism (the
    TRT-LLM wide-EP and SGLang DP-attention recipes for DeepSeek-R1 on GB200 NVL72 at 12–72 GPUs; their stated
    ``moe_tp_size`` cannot divide the expert width either). Read as tp 1, dp = ep = ``tp_size``, moe_tp 1; the
    engines' expert-parallel load balancers fill the EP ranks equally with redundant expert slots (TRT-LLM
    ``num_slots``, SGLang ``ep_num_redundant_experts`` must make slots a multiple of ep), at least
    ``(-experts) mod ep`` of them; the row's batch (all requests, attention DP 1) is spread over the dp ranks.
    Only within one scale-up domain (where those recipes run): beyond it the columns are ambiguous (H200 rows with
    tp_size 64 = moe_tp 8 × moe_ep 8 have ids saying tp8_ep8) and the row stays refused.
    Returns (tp, dp, ep, moe_tp, redundant_experts, batch per rank)."""
    redundant = -model.ffn.experts % gpus
    return 1, gpus, gpus, 1, redundant, max(1, -(-batch // gpus))


def _price_group(model, hw, dep: Deployment, mode: str, isl: int, osl: int, batches: np.ndarray):
    """Decode and agg-prefill milliseconds for the per-rank ``batches`` of one deployment and context."""
    context = isl + osl // 2
    decode = step_time(model, hw, dep, batches * dep.dp, 1, context=context, check_fit=False).time * 1e3
    prefill = np.zeros_like(decode)
    if mode == "agg" and isl > 0:
        t_pf = step_time(model, hw, dep, [dep.dp], isl, context=0, check_fit=False).time[0] * 1e3
        prefill = batches / osl * t_pf
    return decode, prefill


@dataclass(frozen=True)
class TpotValidation:
    rows: tuple[RowResult, ...]
    source: str

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

    def summary(self) -> dict:
        return summarise(self.rows)

    def as_dict(self) -> dict:
        return {"source": self.source, "rows": [r.as_dict() for r in self.rows], "summary": self.summary()}


def _stats(rows: list[RowResult]) -> dict:
    ok = [r for r in rows if r.status == "ok"]
    e = np.array([r.error for r in ok], dtype=float)
    return {"rows": len(rows), "ok": len(ok), "coverage": len(ok) / len(rows) if rows else float("nan"),
            "median_abs_error": float(np.median(np.abs(e))) if ok else None,
            "mape": float(np.mean(np.abs(e))) if ok else None,
            "bias": float(np.mean(e)) if ok else None,
            "within_20pct": float(np.mean(np.abs(e) <= 0.20)) if ok else None}


def summarise(rows) -> dict:
    """Status counts, coverage of the MoE rows of catalog GPUs, error by (model, GPU, engine, mode) and by grounding
    (calibrated / derived GPUs), and the reasons rows were refused or unmapped (most common first)."""
    rows = list(rows)
    priceable = [r for r in rows if r.gpu]  # model and GPU in the catalog
    groups: dict[tuple, list] = defaultdict(list)
    for r in priceable:
        groups[(r.model, r.gpu, r.engine, r.mode)].append(r)
    reasons: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.status != "ok":
            reasons[f"{r.status}: {_reason_class(r.reason)}"] += 1
    by_grounding = {g: _stats([r for r in priceable if r.grounding == g and r.moe])
                    for g in sorted({r.grounding for r in priceable})}
    return {
        "counts": {s: sum(r.status == s for r in rows) for s in STATUSES},
        "moe_rows_of_catalog_gpus": _stats([r for r in priceable if r.moe]),
        "dense_rows_of_catalog_gpus": _stats([r for r in priceable if r.moe is False]),
        "moe_by_grounding": by_grounding,
        "moe_within_one_scale_up_domain": _stats([r for r in priceable if r.moe and r.scale_out is False]),
        "moe_beyond_one_scale_up_domain": _stats([r for r in priceable if r.moe and r.scale_out]),
        # disagg rows without decode_batch_size state neither their decode workers nor speculative decoding:
        # their batch is an assumption (all concurrency on one worker)
        "moe_batch_stated": _stats([r for r in priceable if r.moe and r.batch_from == "column"]),
        "moe_batch_from_concurrency": _stats([r for r in priceable if r.moe and r.batch_from == "concurrency"]),
        "groups": [{"model": k[0], "gpu": k[1], "engine": k[2], "mode": k[3], "grounding": v[0].grounding,
                    "moe": v[0].moe, **_stats(v)} for k, v in sorted(groups.items())],
        "not_priced": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _reason_class(reason: str) -> str:
    """A reason without its row-specific numbers, for counting (e.g. every memory refusal is one class)."""
    if "needs" in reason and "GB per GPU" in reason:
        return "weights + KV do not fit in HBM (check_memory at the row's batch and context)"
    if "each must be >= 1" in reason:
        return "a layout column is 0 (tp_size, attention_dp_size or batch_size)"
    return re.sub(r"\s+", " ", reason.split(";")[0])[:140]


def validate_tpot(path_or_rows, include_held_out: bool = False, source: str = "") -> TpotValidation:
    """Price every row (a CSV path, or rows as dicts) and compare with the measured TPOT."""
    if isinstance(path_or_rows, (str, Path)):
        source = source or str(path_or_rows)
        rows = read_rows(path_or_rows)
    else:
        rows = list(path_or_rows)
    results: list[RowResult | None] = [None] * len(rows)
    groups: dict[tuple, list[int]] = defaultdict(list)
    plans: dict[int, tuple[_Plan, object, object]] = {}
    for i, row in enumerate(rows):
        rid = (row.get("id") or "").strip() or f"row{i + 1}"
        try:
            plan, model, hw = _resolve(row, include_held_out)
        except _Refused as r:
            meta = _meta_of(row)
            results[i] = RowResult(rid, r.status, r.reason, None, _measured(row), **meta)
            continue
        try:
            check_memory(model, hw, plan.dep, float(plan.batch * plan.dep.dp), 1.0, plan.isl + plan.osl // 2)
        except SimulatorError as exc:
            results[i] = RowResult(rid, "refused", str(exc), None, plan.measured, **_meta(plan, model, hw))
            continue
        plans[i] = (plan, model, hw)
        groups[(plan.model, plan.gpu, plan.dep, plan.mode, plan.isl, plan.osl)].append(i)
    for (_, _, dep, mode, isl, osl), idx in groups.items():
        plan0, model, hw = plans[idx[0]]
        batches = np.array([plans[i][0].batch for i in idx], dtype=float)
        try:
            decode, prefill = _price_group(model, hw, dep, mode, isl, osl, batches)
        except SimulatorError as exc:
            for i in idx:
                p = plans[i][0]
                results[i] = RowResult(_rid(rows, i), "refused", str(exc), None, p.measured, **_meta(p, model, hw))
            continue
        for j, i in enumerate(idx):
            p = plans[i][0]
            results[i] = RowResult(_rid(rows, i), "ok", "", float(decode[j] + prefill[j]), p.measured,
                                   **_meta(p, model, hw), decode_ms=float(decode[j]), prefill_ms=float(prefill[j]))
    return TpotValidation(tuple(results), source)


def _rid(rows, i) -> str:
    return (rows[i].get("id") or "").strip() or f"row{i + 1}"


def _measured(row) -> float | None:
    try:
        v = float(row.get("silicon_tpot_ms") or "nan")
    except ValueError:
        return None
    return v if np.isfinite(v) else None


def _meta(p: _Plan, model, hw) -> dict:
    return {"model": p.model, "gpu": p.gpu, "engine": p.dep.engine, "mode": p.mode, "grounding": _grounding(hw),
            "moe": model.ffn.is_moe, "gpus": p.dep.gpus, "scale_out": p.dep.gpus > hw.domain_size,
            "batch_from": p.batch_from}


def _meta_of(row) -> dict:
    """What is known of a row that was not priced (for grouping refusals)."""
    name = MODELS.get((row.get("model_path") or "").strip().lower(), "")
    gpu = SYSTEMS.get((row.get("system") or "").strip().lower(), "")
    model = _catalog("model", name) if name else None
    hw = _catalog("hardware", gpu) if gpu else None
    if (row.get("system") or "").strip() in HELD_OUT_SYSTEMS or isinstance(hw, SimulatorError) or hw is None \
            or isinstance(model, SimulatorError) or model is None:
        return {"mode": (row.get("mode") or "").strip(), "engine": (row.get("backend") or "").strip()}
    pre = "decode_" if (row.get("mode") or "").strip() == "disagg" else ""
    try:
        gpus = _int(row, f"{pre}tp_size", 0) * (_int(row, f"{pre}attention_dp_size", 1) or 1)
    except _Refused:
        gpus = 0
    return {"model": name, "gpu": gpu, "engine": (row.get("backend") or "").strip(), "mode":
            (row.get("mode") or "").strip(), "grounding": _grounding(hw), "moe": model.ffn.is_moe, "gpus": gpus,
            "scale_out": gpus > hw.domain_size}
