"""Predictions against published numbers and the bundled per-op measurements (the study analysis ``validation``,
experiments/validation.yaml): per-op errors (:func:`simulator.calibrate.op_errors.validate_ops`) and published checks,
each a metric with its published expectation (:class:`Expect`), each with its error. Nothing here is fitted. The
study adapter (``simulator.experiments.validation``) declares the checks and prices their cases; :func:`report`
turns the values into tables, a figure and the numbers the study's prose reads. Sources: docs/SOURCES.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..calibrate.measured import CALIB, ERROR_COLUMNS, TABLES
from ..calibrate.op_errors import validate_ops
from ..errors import ConfigError
from ..render import study_figures
from ..render.outcome import Figure, Part, table
from ..specs.catalog import load_model, measured_dir
from ..traces import evaluate_trace
from ..traces.synth import TraceSpec, measured_trace

METRICS = ("peak_batch", "speedup", "peak_speedup", "decode_verify_ratio", "ipf_error")
VALUE_TOLERANCE = 0.05  # a single published value counts as met within ±5%


@dataclass(frozen=True)
class Expect:
    """A published expectation: a ``range`` [lo, hi], a single ``value`` (met within ±:data:`VALUE_TOLERANCE`) or an
    upper bound ``at_most``."""

    range: tuple[float, ...] = ()
    value: float | None = None
    at_most: float | None = None

    @property
    def low(self):
        return self.range[0] if self.range else self.value

    @property
    def high(self):
        return self.range[1] if self.range else (self.value if self.value is not None else self.at_most)

    def within(self, v: float) -> tuple[bool, float]:
        """(inside the published expectation, signed relative error to the nearest bound; 0 inside)."""
        if self.low is not None and self.low == self.high:
            return abs(v / self.low - 1) <= VALUE_TOLERANCE, v / self.low - 1
        if self.low is not None and v < self.low:
            return False, v / self.low - 1
        if self.high is not None and v > self.high:
            return False, v / self.high - 1
        return True, 0.0

    @property
    def text(self) -> str:
        if self.low is None:
            return f"≤ {self.high:g}"
        if self.low == self.high:
            return f"{self.low:g} (±{VALUE_TOLERANCE:.0%})"
        return f"{self.low:g}–{self.high:g}"


def metric_value(case, metric: str, gammas) -> float:
    """A priced case's value of a published metric (``gammas``: the draft lengths it was priced at)."""
    res = case.result
    _, s = res.best()
    if metric == "peak_batch":
        return float(res.batch[int(np.argmax(s))])
    if metric == "peak_speedup":
        return float(s.max())
    if metric == "speedup":
        return float(s[0])
    return case.decode_verify(gammas[0], 0)


def trace_value(t: TraceSpec, n_tokens, eval_batch) -> tuple[float, str]:
    """(largest |relative error| of the per-expert IPF and pooled predictors on the seeded trace ``t``, label)."""
    rep = evaluate_trace(measured_trace(t)[0], n_tokens, eval_batch, window=1, samples=2000, seed=t.seed,
                         predictors=("pairs", "pooled"))
    errs = np.array([[abs(row.rel_error("pairs")), abs(row.rel_error("pooled"))] for row in rep.rows])
    label = (f"{t.label}: synth_trace(E={t.experts}, k={t.top_k}, persistence={t.persistence:g}, "
             f"context={t.context:g}, skew={t.skew:g}), n = {list(n_tokens)}, B = {list(eval_batch)}; "
             f"max |error| per-expert IPF {errs[:, 0].max():.1%}, pooled {errs[:, 1].max():.1%}")
    return float(errs.max()), label


def check_tables(hardware: str, data: str | None) -> str:
    """``--check``: the measured tables in ``data`` (None: the bundled ones) have the bundled tables' columns."""
    bundled = measured_dir(hardware)
    folder = Path(data) if data else bundled
    for t in TABLES:
        want, have = _header(bundled / f"{t}.csv"), _header(folder / f"{t}.csv")
        if have is None or not want <= have:
            what = "does not exist" if have is None else f"lacks columns {sorted(want - have)}"
            raise ConfigError(str(folder / f"{t}.csv"), "", what, "the measured data folder needs the bundled "
                              f"tables' columns (see {bundled.name}/README.md)")
    return f"validation: measured tables in {folder}"


def _header(path: Path) -> set[str] | None:
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as f:
        return set(f.readline().strip().split(","))


def report(checks, hardware: str, per_op: bool, data: str | None, values_of: Callable) -> Part:
    """Per-op errors on ``hardware``'s measured tables in ``data`` (when ``per_op``) and one row per case of each
    published check (``values_of(check)`` -> [(value or None, case label, why not priced)]; a check has ``id``,
    ``claim``, ``source``, ``expect`` and ``note``)."""
    tables, figs, calib, out_cal, ns = [], [], {}, {}, {}
    if per_op:
        v = validate_ops(hardware, data)
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
    for c in checks:
        for val, label, err in values_of(c):
            ok, e = c.expect.within(val) if val is not None else (None, None)
            pub_rows.append((c.id, c.claim, c.source, label, val, c.expect.text, ok, e, err or c.note))
    tables.append(table("published", "Against published numbers (docs/SOURCES.md)", "check; claim; source; case; "
                        "predicted|.3g; published; within; error|+.1%; note", pub_rows))
    by_check: dict[str, list] = {}
    for r in pub_rows:
        by_check.setdefault(r[0], []).append(r)
    peaks = [r for r in by_check.get("moesd-peak-batch", []) if r[4] is not None]
    mid = [r for cid, rs in by_check.items() if cid.startswith("strong-draft-batch-") and cid != "strong-draft-batch-1"
           for r in rs if r[6] is False]
    return Part(tables=tuple(tables), figures=tuple(figs), values=ns | dict(
        per_op=per_op, calib=[{"op": op, "v": x} for op, x in calib.items()], npub=len(pub_rows),
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
