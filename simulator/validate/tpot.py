"""`validate tpot`: price every row of an end-to-end measurement CSV in aiconfigurator's ``silicon_sample.csv``
column layout and compare with its measured TPOT (docs/MODEL.md §7).

A row is one deployment (model, system, engine, quantisation, layout) at one concurrency, input length ``isl`` and
output length ``osl``. Agg rows (one engine serves prefill and decode) use the unprefixed layout columns, disagg rows
the ``decode_*`` columns (only the decode side has a TPOT). ``batch_size`` is per attention-DP rank (batch_size ·
attention_dp_size = the measured concurrency in the agg rows). The predicted TPOT is

    decode:  T_step(B, s=1, context = isl + osl/2)                    B = batch_size · attention_dp_size
    agg:     + (batch_size / osl) · P

the step time of the whole decode batch at the mean context of a generation, plus, for agg, the prefills of the
decode steps: at steady state ``B / osl`` requests start per decode step, each data-parallel rank prefilling
``batch_size / osl`` of them. One ``isl``-token prefill per rank costs ``P = T_step(dp, isl)`` on SGLang (a prefill
batch is a forward of its own) and, on TensorRT-LLM and vLLM (the prompt rides in a decode step, the weights read
once), the step's extra cost: ``T_step(B + isl·dp, 1, 0) − T_step(B, 1, 0)`` plus the prompt's own attention
(:func:`_mixed_prefill_ms`). Nothing here is fitted to the rows.

**Batch-inferred rows.** A disagg row without ``decode_batch_size`` states only the measured concurrency
(``silicon_concurrency=N`` in ``silicon_data_source``). It is priced under stated assumptions: the concurrency is
spread over ``decode_num_workers`` decode workers (1 when the row leaves it empty) and their DP ranks, and no
speculative decoding. Such rows get status ``batch-inferred`` and are reported apart; the headline figures use
batch-stated rows only.

**Speculative rows.** A row stating a draft-token count (``speculative_num_draft_tokens`` /
``decode_speculative_num_draft_tokens`` > 0; measured/silicon/README.md says which rows of the bundled file carry it
and why) measured draft-and-verify rounds, not decode steps: it gets status ``speculative``, is not priced and is
left out of every headline row set (counted apart, with the reason).

**Launch settings** (:mod:`.launch`). ``backend_version`` names the engine release whose execution prices the row
(the newest documented release at or below it; none stated: the newest); the optional ``moe_backend`` column the MoE
backend its launch set (the engine runs the kernel that setting picks; empty: the release's default). A value the
release does not list is refused with the values it lists.

**Below the memory floor.** A row whose measured TPOT is below its decode step's HBM bytes per GPU read at peak
bandwidth (no efficiency, no fixed cost, the prefill share left out; under attention DP the unsplit step's bytes)
cannot have run at its stated batch and layout (e.g. vLLM gpt-oss-120b rows at concurrency 512 on H100, 4.7 ms
against a 7.4 ms floor of KV and weight reads): it is refused with both numbers; so is a batch-inferred row whose
inferred batch the same floor rules out (its concurrency ran on more decode workers than assumed, or with
speculative decoding).

**Units.** ``silicon_tpot_ms`` is milliseconds (no number in any row: the file is refused). A row 100x or more off
its prediction is a unit error (the model's own errors stay within a few x): when most priced rows are, the file is
refused with the unit the values look like; otherwise such rows are refused one by one with it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..cost.deployment import Deployment, Mechanisms, validate
from ..cost.step import check_memory, step_time
from ..errors import ConfigError, SimulatorError
from ..pricing import bound
from ..specs.catalog import ENGINES, load_hardware, load_model
from .launch import check_not_speculative, launch_settings
from .layouts import squared_dp, squared_tp, wide_ep
from .mapping import DTYPES, HELD_OUT_GPUS, NameMap, find_gpu, find_model, kv_dtype, row_dtype
from .rows import Refused, concurrency, duplicate_ids, float_col, int_col, need_values, read_csv_rows, unit_mismatch
from .summary import PRICED, STATUSES, summarise

LAYOUT = ("batch_size", "tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")
REQUIRED_COLUMNS = ("id", "backend", "model_path", "system", "precision", "mode", "isl", "osl", "gemm_quant_mode",
                    "moe_quant_mode", *LAYOUT, *(f"decode_{c}" for c in LAYOUT), "silicon_tpot_ms")
MODES = ("agg", "disagg")
LAYOUT_NAME = "aiconfigurator's silicon_sample.csv layout"
NO_TBO = Mechanisms(two_batch_overlap="off")


@dataclass(frozen=True)
class RowResult:
    """One priced (or not) row. ``error`` = predicted / measured − 1 (a fraction)."""

    id: str
    status: str  # ok | batch-inferred | speculative | refused | unmapped
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
    """The CSV's rows as dicts (one ConfigError line for a missing file, missing columns or no data rows)."""
    return read_csv_rows(path, REQUIRED_COLUMNS, LAYOUT_NAME)[0]


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


def _batch(row: dict, pre: str, dp: int) -> tuple[int, str]:
    """(requests per attention-DP rank, "column" | "concurrency"): the ``batch_size`` column, or, where a disagg row
    leaves it empty, the measured concurrency over the decode workers (the column, else 1) and their DP ranks."""
    if (row.get(f"{pre}batch_size") or "").strip():
        return int_col(row, f"{pre}batch_size"), "column"
    c = concurrency(row)
    if c is None:
        raise Refused("refused", f"column {pre}batch_size is empty and silicon_data_source states no "
                                 "silicon_concurrency")
    workers = int_col(row, f"{pre}num_workers", 1) or 1
    return max(1, -(-c // (workers * max(dp, 1)))), "concurrency"


def _names(row: dict, names: NameMap | None) -> tuple[tuple[str, str] | None, str | None]:
    return find_model(row.get("model_path") or "", names), find_gpu(row.get("system") or "", names)


def _resolve(row: dict, include_held_out: bool, names: NameMap | None) -> tuple[_Plan, object, object]:
    system, hf = (row.get("system") or "").strip(), (row.get("model_path") or "").strip()
    (hit, gpu) = _names(row, names)
    if gpu in HELD_OUT_GPUS and not include_held_out:
        raise Refused("unmapped", f"system {system} is held out: its rows judge the what-if rules "
                                  "(pass include_held_out / --include-held-out to price them)")
    if hit is None:
        raise Refused("unmapped", f"model {hf!r} is not in the catalog (no model's name, alias or hf_id; "
                                  "give a catalog name, or map it with --mapping FILE)")
    if gpu is None:
        raise Refused("unmapped", f"system {system!r} is not in the catalog (no GPU's name or alias; "
                                  "give a catalog name, or map it with --mapping FILE)")
    name, checkpoint = hit
    model, hw = _catalog("model", name), _catalog("hardware", gpu)
    if isinstance(model, SimulatorError):
        raise Refused("unmapped", f"model {name!r}: {model}")
    if isinstance(hw, SimulatorError):
        raise Refused("unmapped", f"system {system!r}: {hw}")
    mode = (row.get("mode") or "").strip().lower()
    if mode not in MODES:
        raise Refused("refused", f"mode {mode!r} is not one of {list(MODES)}")
    pre = "" if mode == "agg" else "decode_"
    engine = (row.get("backend") or "").strip().lower()
    if engine not in ENGINES:
        raise Refused("refused", f"backend {engine!r} is not one of {list(ENGINES)}")
    check_not_speculative(row)
    version, backend = launch_settings(row, engine)
    quant = (row.get("moe_quant_mode") or row.get("gemm_quant_mode") or "").strip().lower()
    dtype = row_dtype(checkpoint, quant)
    if dtype is None:
        raise Refused("refused", f"quantisation mode {quant!r} has no catalog format (known: {sorted(DTYPES)})")
    tp, pp = int_col(row, f"{pre}tp_size"), int_col(row, f"{pre}pp_size", 1)
    dp = int_col(row, f"{pre}attention_dp_size", 1)
    batch, stated = _batch(row, pre, dp)
    if pp > 1:
        raise Refused("refused", f"pipeline parallelism ({pre}pp_size {pp}) is not modelled")
    if min(tp, dp, batch) < 1:
        raise Refused("refused", f"{pre}tp_size {tp}, {pre}attention_dp_size {dp}, {pre}batch_size {batch}: "
                                 "each must be >= 1")
    redundant = 0
    if model.ffn.is_moe:
        ep = int_col(row, f"{pre}moe_ep_size", 1)
        moe_tp = int_col(row, f"{pre}moe_tp_size", max(1, tp * dp // max(ep, 1)))
        if squared_tp(row, pre, tp, ep, moe_tp):
            tp, moe_tp = ep, 1
        elif squared_dp(tp, dp, ep, moe_tp):
            dp, moe_tp, batch = ep, 1, batch * ep
        if dp == 1 and model.attention.q_heads % tp and tp <= hw.domain_size:
            tp, dp, ep, moe_tp, redundant, batch = wide_ep(model, tp, batch)
    else:
        ep, moe_tp = 1, None
    dep, hw_e = _deploy(name, gpu, model, hw, (dtype, kv_dtype(row.get("precision") or ""), tp, dp, ep, moe_tp,
                                                engine, redundant, version, backend))
    plan = _Plan(name, gpu, dep, batch, stated, int_col(row, "isl"), max(1, int_col(row, "osl")), mode,
                 float_col(row, "silicon_tpot_ms"))
    return plan, model, hw_e


def _deploy(name: str, gpu: str, model, hw, layout: tuple) -> tuple[Deployment, object]:
    """The checked deployment of one layout (dtype, kv dtype, tp, dp, ep, moe_tp, engine, redundant experts, engine
    release, MoE backend) and the engine's profile, built once per distinct layout (rows share a few hundred)."""
    key = ("deploy", name, gpu, layout)
    if key not in _CACHE:
        dtype, kv, tp, dp, ep, moe_tp, engine, redundant, version, backend = layout
        try:
            dep = Deployment(dtype=dtype, kv_dtype=kv, tp=tp, dp=dp, ep=ep, moe_tp=moe_tp, engine=engine,
                             redundant_experts=redundant, engine_version=version, moe_backend=backend)
            validate(model, hw, dep)
            _CACHE[key] = (dep, bound(hw, dep))
        except SimulatorError as exc:
            _CACHE[key] = Refused("refused", str(exc))
    hit = _CACHE[key]
    if isinstance(hit, Refused):
        raise Refused(hit.status, hit.reason)
    return hit


def _price(plans: dict[int, tuple[_Plan, object, object]]) -> dict[int, tuple[float, float, float] | SimulatorError]:
    """{row: (decode ms, agg prefill share ms, HBM floor ms) or the error} for every plan. One ``step_time`` call per
    deployment prices all its rows' decode steps (each at its own batch and context), one more all its agg rows'
    prefills. The floor is the decode step's HBM bytes per GPU at peak bandwidth (no efficiency, no fixed cost)."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, (p, _, _) in plans.items():
        groups[(p.model, p.gpu, p.dep)].append(i)
    out: dict[int, tuple[float, float, float] | SimulatorError] = {}
    for (_, _, dep), idx in groups.items():
        _, model, hw = plans[idx[0]]
        ps = [plans[i][0] for i in idx]
        batches = np.array([p.batch for p in ps], dtype=float)
        try:
            ctx = [p.isl + p.osl // 2 for p in ps]
            step = step_time(model, hw, dep, batches * dep.dp, 1, context=ctx, check_fit=False)
            floor_bytes = step.hbm_bytes
            if dep.dp > 1:  # two-batch overlap reads each weight once per micro-batch: the floor is the unsplit step's
                floor_bytes = np.minimum(floor_bytes, step_time(model, hw, dep, batches * dep.dp, 1, context=ctx,
                                                                mech=NO_TBO, check_fit=False).hbm_bytes)
            decode, floor = step.time * 1e3, floor_bytes / hw.hbm_bandwidth * 1e3
            agg = [j for j, p in enumerate(ps) if p.mode == "agg" and p.isl > 0]
            share = np.zeros(len(ps))
            if agg and hw.engine_spec.serving.prefill == "mixed":  # each prefill rides in a decode step (per rank)
                share[agg] = batches[agg] / np.array([ps[j].osl for j in agg], dtype=float) * \
                    _mixed_prefill_ms(model, hw, dep, batches[agg], [ps[j].isl for j in agg])
            elif agg:  # each prefill: one isl-token pass per DP rank (dp requests of isl tokens), no cache
                t_pf = step_time(model, hw, dep, [dep.dp] * len(agg), [ps[j].isl for j in agg], context=0,
                                 check_fit=False).time * 1e3
                share[agg] = batches[agg] / np.array([ps[j].osl for j in agg], dtype=float) * t_pf
        except SimulatorError as exc:
            out.update({i: exc for i in idx})
            continue
        out.update({i: (float(decode[j]), float(share[j]), float(floor[j])) for j, i in enumerate(idx)})
    return out


def _mixed_prefill_ms(model, hw, dep, batch, isl) -> np.ndarray:
    """The extra time of a decode step that carries one isl-token prefill per DP rank: its projections, experts and
    norms as ``batch + isl`` tokens instead of ``batch`` (the weights read once for both; both priced without cache so
    the decode attention cancels), plus the prompt's own attention (that of an isl-token prefill pass)."""
    isl = np.asarray(isl, dtype=float)
    b = np.asarray(batch, dtype=float) * dep.dp
    both = step_time(model, hw, dep, np.concatenate([b + isl * dep.dp, b]), 1, context=0, check_fit=False).time
    prompt = step_time(model, hw, dep, [dep.dp] * len(isl), isl, context=0, check_fit=False)
    n = len(isl)
    return (both[:n] - both[n:] + prompt.breakdown["attention"]) * 1e3


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


def validate_tpot(path_or_rows, include_held_out: bool = False, source: str = "",
                  names: NameMap | None = None) -> TpotValidation:
    """Price every row (a CSV path, or rows as dicts) and compare with the measured TPOT. ``names``: the user's
    extra model/system names (:func:`.mapping.read_mapping`)."""
    malformed: dict[int, str] = {}
    if isinstance(path_or_rows, (str, Path)):
        source = source or str(path_or_rows)
        rows, malformed = read_csv_rows(path_or_rows, REQUIRED_COLUMNS, LAYOUT_NAME)
    else:
        rows = list(path_or_rows)
    malformed = {**duplicate_ids(rows), **malformed}
    need_values(rows, "silicon_tpot_ms", source, "give the measured TPOT in milliseconds, e.g. 12.5")
    results: list[RowResult | None] = [None] * len(rows)
    plans: dict[int, tuple[_Plan, object, object]] = {}
    for i, row in enumerate(rows):
        try:
            if i in malformed:
                raise Refused("refused", malformed[i])
            plan, model, hw = _resolve(row, include_held_out, names)
        except Refused as r:
            results[i] = RowResult(_rid(rows, i), r.status, r.reason, None, _measured(row), **_meta_of(row, names))
            continue
        try:
            check_memory(model, hw, plan.dep, float(plan.batch * plan.dep.dp), 1.0, plan.isl + plan.osl // 2)
        except SimulatorError as exc:
            results[i] = RowResult(_rid(rows, i), "refused", str(exc), None, plan.measured, **_meta(plan, model, hw))
            continue
        plans[i] = (plan, model, hw)
    priced = _price(plans)
    units = {i: unit_mismatch(plans[i][0].measured, v[0] + v[1]) for i, v in priced.items() if isinstance(v, tuple)}
    wrong = {i: u for i, u in units.items() if u}
    if wrong and 2 * len(wrong) > len(units):
        unit = max(set(wrong.values()), key=list(wrong.values()).count)
        raise ConfigError(source, "silicon_tpot_ms", f"{len(wrong)} of {len(units)} priced rows are 100x or more "
                          f"off the predicted TPOT: the values look like {unit}",
                          "give TPOT in milliseconds (convert the column)")
    for i, v in priced.items():
        p, model, hw = plans[i]
        if isinstance(v, SimulatorError):
            results[i] = RowResult(_rid(rows, i), "refused", str(v), None, p.measured, **_meta(p, model, hw))
        elif i in wrong:
            results[i] = RowResult(_rid(rows, i), "refused", f"silicon_tpot_ms {p.measured:g} is 100x or more off the "
                                   f"predicted {v[0] + v[1]:.3g} ms: it looks like {wrong[i]}", None, p.measured,
                                   **_meta(p, model, hw))
        elif p.measured < v[2]:
            what = ("the stated deployment" if p.batch_from == "column" else "the deployment at the batch inferred "
                    "from silicon_concurrency")
            results[i] = RowResult(_rid(rows, i), "refused", f"silicon_tpot_ms {p.measured:.3g} is below the HBM floor "
                                   f"{v[2]:.3g} ms of {what} (its decode step's bytes per GPU at peak bandwidth): the "
                                   "row did not run at that batch and layout", None, p.measured, **_meta(p, model, hw))
        else:
            status = "ok" if p.batch_from == "column" else "batch-inferred"
            results[i] = RowResult(_rid(rows, i), status, "", v[0] + v[1], p.measured, **_meta(p, model, hw),
                                   decode_ms=v[0], prefill_ms=v[1])
    return TpotValidation(tuple(results), source)


def _rid(rows, i) -> str:
    return (rows[i].get("id") or "").strip() or f"row{i + 1}"


def _measured(row) -> float | None:
    try:
        v = float(row.get("silicon_tpot_ms") or "nan")
    except ValueError:
        return None
    return v if np.isfinite(v) and v > 0 else None


def _meta(p: _Plan, model, hw) -> dict:
    return {"model": p.model, "gpu": p.gpu, "engine": p.dep.engine, "mode": p.mode, "grounding": _grounding(hw),
            "moe": model.ffn.is_moe, "gpus": p.dep.gpus, "scale_out": p.dep.gpus > hw.domain_size,
            "batch_from": p.batch_from}


def _meta_of(row, names: NameMap | None) -> dict:
    """What is known of a row that was not priced (for grouping refusals)."""
    hit, gpu = _names(row, names)
    model = _catalog("model", hit[0]) if hit else None
    hw = _catalog("hardware", gpu) if gpu else None
    base = {"mode": (row.get("mode") or "").strip(), "engine": (row.get("backend") or "").strip().lower()}
    if gpu in HELD_OUT_GPUS or not hit or not gpu or isinstance(hw, SimulatorError) \
            or isinstance(model, SimulatorError):
        return base
    pre = "decode_" if base["mode"] == "disagg" else ""
    try:
        gpus = int_col(row, f"{pre}tp_size", 0) * (int_col(row, f"{pre}attention_dp_size", 1) or 1)
    except Refused:
        gpus = 0
    stated = (row.get(f"{pre}batch_size") or "").strip() or base["mode"] != "disagg"
    return {**base, "model": hit[0], "gpu": gpu, "grounding": _grounding(hw), "moe": model.ffn.is_moe,
            "gpus": gpus, "scale_out": gpus > hw.domain_size, "batch_from": "column" if stated else "concurrency"}


__all__ = ["PRICED", "REQUIRED_COLUMNS", "RowResult", "STATUSES", "TpotValidation", "read_rows", "validate_tpot"]
