"""Summaries of a `validate tpot` run: status counts, error statistics per row set and per (model, GPU, engine,
mode), and the reasons rows were not priced. Errors are fractions (0.12 = 12%); the CLI and the report print them
as percents. Headline figures use the rows whose decode batch is stated (status ``ok``); rows whose batch is
inferred from the measured concurrency (``batch-inferred``) are reported apart; rows measured with speculative decoding
(``speculative``) are in no row set, only counted (and listed with their reason among the rows not priced)."""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

STATUSES = ("ok", "batch-inferred", "speculative", "refused", "unmapped")
APART = "speculative"  # rows measured with speculative decoding: another configuration, left out of every row set
PRICED = ("ok", "batch-inferred")
GOAL = 0.12  # issue 18's goal for the median |error| of the batch-stated MoE rows: rows beyond it are counted


def stats(rows: list, status: str = "ok") -> dict:
    """Coverage and error of ``rows``: ``ok`` counts the rows of ``status`` (priced under that reading)."""
    ok = [r for r in rows if r.status == status]
    e = np.array([r.error for r in ok], dtype=float)
    return {"rows": len(rows), "ok": len(ok), "coverage": len(ok) / len(rows) if rows else None,
            "median_abs_error": float(np.median(np.abs(e))) if ok else None,
            "mape": float(np.mean(np.abs(e))) if ok else None,
            "bias": float(np.mean(e)) if ok else None,
            "median_signed_error": float(np.median(e)) if ok else None,
            "within_20pct": float(np.mean(np.abs(e) <= 0.20)) if ok else None,
            "beyond_goal": int(np.sum(np.abs(e) > GOAL))}


def summarise(rows) -> dict:
    """Status counts; the headline (MoE rows of catalog GPUs whose batch is stated); the same by grounding, engine,
    GPU and scale; the batch-inferred rows apart; error by (model, GPU, engine, mode); the reasons rows were not
    priced."""
    rows = list(rows)
    priceable = [r for r in rows if r.gpu and r.status != APART]  # model and GPU in the catalog
    stated = [r for r in priceable if r.batch_from != "concurrency"]
    inferred = [r for r in priceable if r.batch_from == "concurrency"]
    groups: dict[tuple, list] = defaultdict(list)
    for r in stated:
        groups[(r.model, r.gpu, r.engine, r.mode)].append(r)
    reasons: dict[str, int] = defaultdict(int)
    for r in rows:
        if r.status not in PRICED:
            reasons[f"{r.status}: {reason_class(r.reason)}"] += 1
    moe = [r for r in stated if r.moe]
    return {
        "counts": {s: sum(r.status == s for r in rows) for s in STATUSES},
        "moe_rows_of_catalog_gpus": stats(moe),
        "dense_rows_of_catalog_gpus": stats([r for r in stated if r.moe is False]),
        "moe_by_grounding": {g: stats([r for r in moe if r.grounding == g])
                             for g in sorted({r.grounding for r in moe})},
        "moe_by_engine": {e: stats([r for r in moe if r.engine == e]) for e in sorted({r.engine for r in moe})},
        "moe_by_gpu": {g: stats([r for r in moe if r.gpu == g]) for g in sorted({r.gpu for r in moe})},
        "moe_by_engine_gpu": {f"{e} on {g}": stats([r for r in moe if (r.engine, r.gpu) == (e, g)])
                              for e, g in sorted({(r.engine, r.gpu) for r in moe})},
        "moe_within_one_scale_up_domain": stats([r for r in moe if r.scale_out is False]),
        "moe_beyond_one_scale_up_domain": stats([r for r in moe if r.scale_out]),
        # disagg rows without decode_batch_size: the batch is the concurrency over the stated (else 1) decode
        # workers, an assumption; reported apart, never in the headline
        "moe_batch_inferred": stats([r for r in inferred if r.moe], "batch-inferred"),
        "speculative_apart": sum(r.status == APART for r in rows),
        "groups": [{"model": k[0], "gpu": k[1], "engine": k[2], "mode": k[3], "grounding": v[0].grounding,
                    "moe": v[0].moe, **stats(v)} for k, v in sorted(groups.items())],
        "not_priced": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def reason_class(reason: str) -> str:
    """A reason without its row-specific numbers, for counting (e.g. every memory refusal is one class)."""
    if "needs" in reason and "GB per GPU" in reason:
        return "weights + KV do not fit in HBM (check_memory at the row's batch and context)"
    if "each must be >= 1" in reason:
        return "a layout column is 0 (tp_size, attention_dp_size or batch_size)"
    if "is below the HBM floor" in reason:
        stated = "stated deployment" in reason
        return ("measured TPOT below the HBM floor of the " + ("stated deployment" if stated else
                "deployment at the batch inferred from silicon_concurrency") + " (decode bytes per GPU at peak "
                "bandwidth): it did not run at that batch and layout")
    if reason.startswith("duplicate id"):
        return "duplicate id (only the first row of an id is priced)"
    if reason.startswith("line ") and "fields but the header has" in reason:
        return "the row's field count differs from the header's"
    return re.sub(r"\s+", " ", reason.split(";")[0])[:140]
