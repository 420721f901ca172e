"""Public multi-node deployments (the study analysis ``multinode_validation``, experiments/multinode-validation.yaml;
:func:`report` gives its table and the numbers its prose reads; issue 18 item 6): decode throughput of public
multi-node and wide-EP deployments against what the step model predicts for them. Each case states its deployment
(engine, GPUs, parallelism, redundant experts, formats), the per-rank decode batch and the context, and whether the
batch is stated by the source or assumed (and why); the published throughput is an outcome, compared only (nothing is
fitted to it). Per case: the refined model with the engine's defaults (all-to-all ``auto``, two-batch overlap
``auto``), and the same without the mechanisms of issue 18 that such deployments hinge on (NCCL dispatch, no
two-batch overlap) so that what each contributes is visible. A case whose source says the deployment ran without
two-batch overlap states ``two_batch_overlap: off`` (its default run then has none; the "without TBO" run equals it).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..cost.deployment import ONOFF, Deployment, Mechanisms, resolve_all_to_all, two_batch_overlap_on
from ..params import Interval, Param, param_field
from ..pricing import Scenario, bound, price_pass
from ..render.outcome import Part, table
from ..specs.catalog import ENGINES, load_hardware, load_model
from ..specs.dtypes import FORMATS, KV_DTYPES
from ..specs.settings import choice, loadable, positive
from ..specs.wide_ep import A2A_AUTO

BATCH_FROM = ("stated", "assumed")


@dataclass(frozen=True)
class Case:
    name: str
    model: str = loadable("model")
    hardware: str = loadable("hardware")
    engine: str = choice(ENGINES)
    dtype: str = choice(FORMATS)
    gpus: int = positive()  # decode GPUs; attention DP over all of them, experts over all of them
    batch: int = positive()  # decode requests per attention rank (GPU)
    context: int = positive()  # cached tokens per request during decode (input + half the output)
    measured: float = param_field(Param(Interval(float, 0.0, None, closed="neither")))  # tok/s/GPU, compared only
    batch_from: str = choice(BATCH_FROM)
    kv_dtype: str = choice(KV_DTYPES, "bf16")
    redundant_experts: int = param_field(Param(Interval(int, 0, 65536)), 0)
    two_batch_overlap: str = choice((A2A_AUTO, *ONOFF), A2A_AUTO)  # as the source deployed it (auto: the default)
    source: str = ""
    note: str = ""


@dataclass(frozen=True)
class Settings:
    cases: tuple[Case, ...]


def _deployment(c: Case, model, hw) -> Deployment:
    return Deployment(dtype=c.dtype, kv_dtype=c.kv_dtype, tp=1, dp=c.gpus, ep=c.gpus, engine=c.engine,
                      redundant_experts=c.redundant_experts)


def predict(c: Case) -> dict:
    """Decode step and tokens/s per GPU of one case under the defaults, and with NCCL dispatch / without
    two-batch overlap."""
    model, hw = load_model(c.model), load_hardware(c.hardware)
    dep = _deployment(c, model, hw)
    eng = bound(hw, dep)
    resolved = resolve_all_to_all(eng, dep)
    mech = Mechanisms(two_batch_overlap=c.two_batch_overlap)
    out = {"deployment": resolved.label, "all_to_all": resolved.all_to_all,
           "tbo": two_batch_overlap_on(mech, eng, resolved)}
    runs = {"default": (dep, mech), "nccl": (replace(dep, all_to_all="nccl"), mech),
            "no_tbo": (dep, Mechanisms(two_batch_overlap="off"))}
    for key, (d, mech) in runs.items():
        sc = Scenario(model, hw, d, mech, context=c.context)
        r = price_pass(sc, [c.batch * c.gpus], 1, check_fit=False)
        t = float(r.time[0])
        out[key] = c.batch / t
        if key == "default":
            out["step_ms"] = t * 1e3
            out["collective_share"] = float(r.breakdown["collective"][0]) / t
    return out


def report(s: Settings) -> Part:
    pred = {c.name: predict(c) for c in s.cases}
    rows = []
    for c in s.cases:
        p = pred[c.name]
        rows.append((c.name, f"{c.model} on {c.gpus}x {c.hardware}, {p['deployment']}", p["all_to_all"], p["tbo"],
                     c.batch, c.batch_from, c.context, p["step_ms"], c.measured, p["default"],
                     p["default"] / c.measured - 1, p["nccl"] / c.measured - 1, p["no_tbo"] / c.measured - 1,
                     p["collective_share"], c.source))
    t = table("multinode_validation", "Decode throughput per GPU of public wide-EP deployments: predicted vs "
              "published", "case; deployment; all-to-all; two-batch overlap; batch/GPU|d; batch; context|d; step "
              "ms|.1f; published tok/s/GPU|,.0f; predicted tok/s/GPU|,.0f; error|+.0%; error with NCCL dispatch|+.0%; "
              "error without TBO|+.0%; collective share of the step|.0%; source", rows)
    return Part(tables=(t,), values=values(s.cases, pred))


def values(cases, pred) -> dict:
    """The named numbers of the multi-node prose (experiments/multinode-validation.yaml)."""
    def err(c, k="default"):
        return pred[c.name][k] / c.measured - 1

    groups = (("cases with a stated batch", [c for c in cases if c.batch_from == "stated"]), ("all cases", cases))
    return dict(n=len(cases), nover=sum(err(c) > 0 for c in cases), ninside=sum(abs(err(c)) <= 0.10 for c in cases),
                groups=[{"label": k, "n": len(g), "mae": float(np.mean([abs(err(c)) for c in g]))}
                        for k, g in groups if g],
                cases=[{"name": c.name, "err": err(c), "nccl": abs(err(c, "nccl")) - abs(err(c)),
                        "tbo": abs(err(c, "no_tbo")) - abs(err(c))} for c in cases],
                assumed=[c.name for c in cases if c.batch_from == "assumed"])
