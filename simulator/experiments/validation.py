"""``validation`` analysis (study adapter): the checks a study file declares and the pricing of their cases on the
study's grid settings; the comparison itself (per-op errors, published expectations, the report) is
:mod:`simulator.validate.published`. Nothing here is fitted. Sources: docs/SOURCES.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..render.outcome import Part
from ..specs.settings import choice, loadable
from ..traces.synth import TraceSpec
from ..validate.published import METRICS, Expect, check_tables, metric_value, report, trace_value
from .grid import deploy_target, price_target
from .schema import Target


@dataclass(frozen=True)
class Check:
    id: str
    claim: str
    source: str
    metric: str = choice(METRICS)
    expect: Expect = Expect()
    mode: str = choice(("prior", "refined"), "refined")
    batch: int | None = None
    draft_len: int | None = None  # None: best over the grid
    draft_len_from_acceptance: bool = False  # each case's acceptance draft length
    context: int | None = None
    cases: tuple[Target, ...] = ()
    traces: tuple[TraceSpec, ...] = ()
    n_tokens: tuple[int, ...] = (4,)
    eval_batch: tuple[int, ...] = (1,)
    note: str = ""


@dataclass(frozen=True)
class Settings:
    checks: tuple[Check, ...]
    hardware: str = loadable("hardware", "h100-sxm")
    per_op: bool = True


def check(r, study, s: Settings) -> None:
    for i, c in enumerate(s.checks):
        p = f"analyses.validation.checks[{i}]"
        e = c.expect
        if sum((bool(e.range), e.value is not None, e.at_most is not None)) != 1 or (e.range and len(e.range) != 2):
            raise r.fail(f"{p}.expect", "needs exactly one of range: [lo, hi], value, at_most",
                         "write e.g. {range: [12, 32]}")
        if (c.metric == "ipf_error") != bool(c.traces) or (c.metric != "ipf_error") != bool(c.cases):
            raise r.fail(p, f"metric {c.metric} needs " + ("traces" if c.metric == "ipf_error" else "cases"),
                         "add traces: [...] for ipf_error, cases: [{model: NAME}] otherwise")
        if c.metric in ("speedup", "decode_verify_ratio") and c.batch is None:
            raise r.fail(f"{p}.batch", "is missing", f"metric {c.metric} is read at one batch size")
        if c.batch is not None and c.batch not in study.grid.batch:
            raise r.fail(f"{p}.batch", f"is {c.batch}, not in grid.batch", "add it to the grid")
    if len({c.id for c in s.checks}) != len(s.checks):
        raise r.fail("analyses.validation.checks", "has repeated ids", "give each check its own id")


def _deploy_case(c: Check, t: Target, exp):
    """(Deployed or None, why, acceptance, draft lengths, context) of one case of a check."""
    g = exp.grid
    ctxt = g.context if c.context is None else c.context
    acc = t.acceptance or exp.speculation.acceptance
    gam = (acc.draft_len,) if c.draft_len_from_acceptance else (g.draft_len if c.draft_len is None else
                                                                 (c.draft_len,))
    batch = g.batch if c.batch is None or c.metric in ("peak_batch", "peak_speedup") else (c.batch,)
    dd, why = deploy_target(exp, t, batch=batch, gammas=gam, context=ctxt, fallbacks=())
    return dd, why, acc, gam, ctxt


def ready(exp, ctx, p: Settings) -> list[str]:
    """``--check``: every case deploys, and the measured tables have the bundled tables' columns."""
    lines = []
    for i, c in enumerate(p.checks):
        for j, t in enumerate(c.cases):
            dd, why, *_ = _deploy_case(c, t, exp)
            if dd is None:
                raise ConfigError(exp.where, f"analyses.validation.checks[{i}].cases[{j}]",
                                  f"{t.model} does not deploy ({why})"[:300], "change its hardware or format")
            lines.append(f"validation {c.id}: {dd.model.name} on {dd.hw.name}: {dd.dep.label}")
    if p.per_op:
        lines.append(check_tables(p.hardware, ctx.data))
    return lines


def _model_value(c: Check, t: Target, exp, ctx) -> tuple[float | None, str, str]:
    dd, why, acc, gam, ctxt = _deploy_case(c, t, exp)
    if dd is None:
        return None, t.model, why
    case = price_target(exp, ctx, dd, c.mode, gammas=gam, context=ctxt)
    label = (f"{dd.model.name} on {dd.hw.name} ({dd.dep.label}), {case.drafter.label}, {acc.label}, "
             f"γ {'best of ' + str(list(gam)) if len(gam) > 1 else gam[0]}, context {ctxt}")
    return metric_value(case, c.metric, gam), label, ""


def run(study, priced, ctx, p: Settings) -> Part:
    def values_of(c: Check) -> list:
        if c.metric == "ipf_error":
            return [(*trace_value(t, c.n_tokens, c.eval_batch), "") for t in c.traces]
        return [_model_value(c, t, study, ctx) for t in c.cases]

    return report(p.checks, p.hardware, p.per_op, ctx.data, values_of)
