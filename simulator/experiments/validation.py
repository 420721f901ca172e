"""``validation`` analysis: predictions against the bundled H100 per-op measurements
(:func:`simulator.calibrate.measured.validate_ops`) and against published numbers (checks declared in the study file,
each a metric with its published expectation), each with its error. Nothing here is fitted. Sources: docs/SOURCES.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..calibrate.measured import CALIB, ERROR_COLUMNS, TABLES, validate_ops
from ..errors import ConfigError
from ..render import study_figures
from ..render.outcome import Figure, Part, table
from ..specs.catalog import load_model, measured_dir
from ..specs.settings import choice, loadable
from ..traces import evaluate_trace
from ..traces.synth import TraceSpec, measured_trace
from .grid import deploy_target, price_target
from .schema import Target

METRICS = ("peak_batch", "speedup", "peak_speedup", "decode_verify_ratio", "ipf_error")
VALUE_TOLERANCE = 0.05  # a single published value counts as met within ±5%


@dataclass(frozen=True)
class Expect:
    range: tuple[float, ...] = ()
    value: float | None = None
    at_most: float | None = None


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

    @property
    def low(self):
        e = self.expect
        return e.range[0] if e.range else e.value

    @property
    def high(self):
        e = self.expect
        return e.range[1] if e.range else (e.value if e.value is not None else e.at_most)


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


def _within(v: float, c: Check) -> tuple[bool, float]:
    """(inside the published expectation, signed relative error to the nearest bound; 0 inside)."""
    if c.low is not None and c.low == c.high:
        return abs(v / c.low - 1) <= VALUE_TOLERANCE, v / c.low - 1
    if c.low is not None and v < c.low:
        return False, v / c.low - 1
    if c.high is not None and v > c.high:
        return False, v / c.high - 1
    return True, 0.0


def _expect_text(c: Check) -> str:
    if c.low is None:
        return f"≤ {c.high:g}"
    if c.low == c.high:
        return f"{c.low:g} (±{VALUE_TOLERANCE:.0%})"
    return f"{c.low:g}–{c.high:g}"


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
        bundled = measured_dir(p.hardware)
        data = Path(ctx.data) if ctx.data else bundled
        for t in TABLES:
            want, have = _header(bundled / f"{t}.csv"), _header(data / f"{t}.csv")
            if have is None or not want <= have:
                what = "does not exist" if have is None else f"lacks columns {sorted(want - have)}"
                raise ConfigError(str(data / f"{t}.csv"), "", what, "the measured data folder needs the bundled "
                                  f"tables' columns (see {bundled.name}/README.md)")
        lines.append(f"validation: measured tables in {data}")
    return lines


def _header(path: Path) -> set[str] | None:
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as f:
        return set(f.readline().strip().split(","))


def _model_value(c: Check, t: Target, exp, ctx) -> tuple[float | None, str, str]:
    dd, why, acc, gam, ctxt = _deploy_case(c, t, exp)
    if dd is None:
        return None, t.model, why
    case = price_target(exp, ctx, dd, c.mode, gammas=gam, context=ctxt)
    res = case.result
    label = (f"{dd.model.name} on {dd.hw.name} ({dd.dep.label}), {case.drafter.label}, {acc.label}, "
             f"γ {'best of ' + str(list(gam)) if len(gam) > 1 else gam[0]}, context {ctxt}")
    _, s = res.best()
    if c.metric == "peak_batch":
        return float(res.batch[int(np.argmax(s))]), label, ""
    if c.metric == "peak_speedup":
        return float(s.max()), label, ""
    if c.metric == "speedup":
        return float(s[0]), label, ""
    return case.decode_verify(gam[0], 0), label, ""


def _trace_value(c: Check, t: TraceSpec) -> tuple[float, str]:
    rep = evaluate_trace(measured_trace(t)[0], c.n_tokens, c.eval_batch, window=1, samples=2000, seed=t.seed,
                         predictors=("pairs", "pooled"))
    errs = np.array([[abs(row.rel_error("pairs")), abs(row.rel_error("pooled"))] for row in rep.rows])
    label = (f"{t.label}: synth_trace(E={t.experts}, k={t.top_k}, persistence={t.persistence:g}, "
             f"context={t.context:g}, skew={t.skew:g}), n = {list(c.n_tokens)}, B = {list(c.eval_batch)}; "
             f"max |error| per-expert IPF {errs[:, 0].max():.1%}, pooled {errs[:, 1].max():.1%}")
    return float(errs.max()), label


def run(study, priced, ctx, p: Settings) -> Part:
    tables, figs, calib, out_cal, ns = [], [], {}, {}, {}
    if p.per_op:
        v = validate_ops(p.hardware, ctx.data)
        rows = v.table()
        tables.append(table("per_op", f"Per-op error against the measured tables ({v.hardware})", "; ".join(
            f"{c}|{f}" for c, f in zip(ERROR_COLUMNS, ("", "", "", "d", ".1%", ".1%", ".0%", "+.1%"), strict=True)),
            rows))
        figs.append(Figure("scatter", f"Predicted vs measured per-op latency on {v.hardware}, by row set",
                           lambda path: study_figures.per_op_scatter(v.samples, path)))
        calib = {r[0]: r[4] for r in rows if r[1] == "all formats" and r[2] == CALIB}
        out_cal = {(r[0], r[2]): r[4] for r in rows if r[1] == "all formats" and r[2] != CALIB}
        ns = {"data": _shown(v.data), "excluded": [{"n": n, "k": k} for k, n in v.excluded.items()]}
    pub_rows = []
    for c in p.checks:
        vals = ([_model_value(c, t, study, ctx) for t in c.cases] if c.metric != "ipf_error"
                else [(*_trace_value(c, t), "") for t in c.traces])
        for val, label, err in vals:
            ok, e = _within(val, c) if val is not None else (None, None)
            pub_rows.append((c.id, c.claim, c.source, label, val, _expect_text(c), ok, e, err or c.note))
    tables.append(table("published", "Against published numbers (docs/SOURCES.md)", "check; claim; source; case; "
                        "predicted|.3g; published; within; error|+.1%; note", pub_rows))
    by_check: dict[str, list] = {}
    for r in pub_rows:
        by_check.setdefault(r[0], []).append(r)
    peaks = [r for r in by_check.get("moesd-peak-batch", []) if r[4] is not None]
    mid = [r for cid, rs in by_check.items() if cid.startswith("strong-draft-batch-") and cid != "strong-draft-batch-1"
           for r in rs if r[6] is False]
    return Part(tables=tuple(tables), figures=tuple(figs), values=ns | dict(
        per_op=p.per_op, calib=[{"op": op, "v": x} for op, x in calib.items()], npub=len(pub_rows),
        out_cal=[{"op": op, "st": st.split(" (")[0], "set": st, "v": x} for (op, st), x in out_cal.items()],
        n_in=sum(1 for r in pub_rows if r[6]), nmid=len(mid), mid=bool(mid),
        checks=[{"cid": cid, "n": len(rs), "k": len(rs) - len(out), "expect": rs[0][5],
                 "out": [{"label": _short(r[3]), "v": r[4]} for r in out]}
                for cid, rs in by_check.items() if (out := [r for r in rs if r[6] is False]) is not None],
        peaks=[{"label": _short(r[3]), "e": load_model(_short(r[3])).ffn.experts, "v": r[4]} for r in peaks]))


def _shown(data: str) -> str:
    """The measured-data folder as the report shows it: relative to the repository when it is the bundled one."""
    d = Path(data).resolve()
    root = measured_dir("h100-sxm").resolve().parents[1]
    return d.relative_to(root).as_posix() if d.is_relative_to(root) else d.as_posix()


def _short(label: str) -> str:
    """The model (or trace) name at the start of a case label."""
    return label.split(" on ")[0] if " on " in label else label.split(":")[0]
