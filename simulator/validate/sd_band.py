"""The model-error band: what the model's demonstrated error on the public SD corpus implies for a prediction's
range (docs/MODEL.md §4.6, §7.2; docs/SD_VALIDATION.md).

A prediction's parameter / acceptance band [p · l, p · h] (:meth:`~.sd_speedup.Priced.band_ratio`: the pricing
path's speedup band at the row's batch as a ratio to its central value) misses what the model gets wrong. Each
priced row's *score* is how far the measured value m lies beyond that band, in log:

    e = log(m / (p · l))  if m < p · l;   log(m / (p · h))  if m > p · h;   0 inside,

with p the row's held-out prediction (the fit on the other authors' rows). The band widened by the model's error is
[p · l · exp(q_lo), p · h · exp(q_hi)], (q_lo, q_hi) the split-conformal quantiles of the scores at
:data:`COVERAGE`: with n scores sorted, q_lo = the ⌊(n + 1) · a⌋-th and q_hi the ⌈(n + 1) · (1 − a)⌉-th,
a = (1 − COVERAGE) / 2 (ranks clipped to 1..n; q_lo ≤ 0 ≤ q_hi).

Per engine: an engine's own scores where they come from at least :data:`MIN_AUTHORS` authors, else the scores of
every engine pooled (:data:`~simulator.specdec.engine_round.POOLED`).

Held out (the coverage the report shows): a row of author a gets (q_lo, q_hi) from the rows of the OTHER authors
only, each of those (author b) predicted by the fit on the authors other than a and b, so nothing of a enters its
band (split-conformal by author: one person, team or harness, whatever its sources). All authors
(:data:`~simulator.specdec.engine_round.MODEL_ERROR`, what the sweep uses): every row's score with its
leave-one-author-out prediction.
"""

from __future__ import annotations

import math

import numpy as np

from ..specdec.engine_round import POOLED

__all__ = ["COVERAGE", "MIN_AUTHORS", "ErrorBands", "conformal", "error_bands", "score"]

COVERAGE = 0.80  # the band's stated coverage (issue 17's target: the measured value inside the band in >= 80%)
MIN_AUTHORS = 4  # an engine's own quantiles need scores from at least this many authors, else all engines pooled


def score(measured: float, low: float, high: float) -> float:
    """log distance of ``measured`` beyond [low, high] (0 inside)."""
    if measured < low:
        return math.log(measured / low)
    if measured > high:
        return math.log(measured / high)
    return 0.0


def conformal(scores, coverage: float = COVERAGE) -> tuple[float, float]:
    """(q_lo, q_hi): the split-conformal quantiles of ``scores`` at ``coverage`` (module docstring)."""
    s = np.sort(np.asarray(scores, dtype=float))
    n = s.size
    if n == 0:
        return 0.0, 0.0
    a = (1.0 - coverage) / 2.0
    k_lo = min(max(math.floor((n + 1) * a + 1e-9), 1), n)  # 1e-9: (1 − 0.8) / 2 is 0.0999… in floating point
    k_hi = min(max(math.ceil((n + 1) * (1.0 - a) - 1e-9), 1), n)
    return min(float(s[k_lo - 1]), 0.0), max(float(s[k_hi - 1]), 0.0)


class ErrorBands:
    """The quantiles of every fold and of all authors, and each row's held-out band (:func:`error_bands`)."""

    def __init__(self, constant: dict, held: dict, rows: dict, pooled_engines: tuple, scores: dict):
        self.constant = constant  # engine | POOLED -> (q_lo, q_hi), all authors (engine_round.MODEL_ERROR)
        self.held = held  # row id -> (q_lo, q_hi, group): from the other authors' rows only
        self.rows = rows  # row id -> (low, high): the held-out band, the model's error included
        self.pooled_engines = pooled_engines  # engines with fewer than MIN_AUTHORS authors (they use POOLED)
        self.scores = scores  # row id -> its all-author score (leave-one-author-out prediction)


def _group(models: list, engine: str) -> tuple[str, list]:
    """The calibration rows for ``engine`` among ``models``: its own, or all engines' pooled."""
    mine = [m for m in models if m.engine == engine]
    if len({m.author for m in mine}) >= MIN_AUTHORS:
        return engine, mine
    return POOLED, models


def error_bands(models: dict, trainable: list, held: dict, fit) -> ErrorBands:
    """The model-error band of every priced row (``models``: id -> :class:`~.sd_fit.RowModel`, the rows validated;
    ``trainable``: the rows the fit uses; ``held``: id -> leave-one-author-out prediction; ``fit(rows, engine)``:
    the engine's round parameters fitted on ``rows``, :func:`~.sd_fit.fitted_params`), module docstring."""
    fits: dict = {}

    def predict(m, excluded: frozenset) -> float:
        key = (m.engine, frozenset(a for a in excluded if any(x.engine == m.engine and x.author == a
                                                             for x in trainable)))
        if key not in fits:
            fits[key] = fit([x for x in trainable if x.author not in key[1]], m.engine)
        return m.predict(fits[key])

    def row_score(m, p: float) -> float:
        lo, hi = m.priced.band_ratio() or (1.0, 1.0)
        return score(m.priced.measured, p * lo, p * hi)

    rows = list(models.values())
    src = {m.priced.setup.row.id: m.author for m in rows}  # the fold of each row
    scores = {i: row_score(m, held[i]) for i, m in models.items()}
    engines = sorted({m.engine for m in rows})
    constant, pooled = {POOLED: conformal(list(scores.values()))}, []
    for e in engines:
        g, mine = _group(rows, e)
        if g == POOLED:
            pooled.append(e)
        else:
            constant[e] = conformal([scores[m.priced.setup.row.id] for m in mine])
    held_q, bands, done = {}, {}, {}
    for i, m in models.items():
        s = src[i]
        g, cal = _group([x for x in rows if src[x.priced.setup.row.id] != s], m.engine)
        if (s, g) not in done:
            done[s, g] = conformal([row_score(x, predict(x, frozenset((s, src[x.priced.setup.row.id]))))
                                    for x in cal])
        q = done[s, g]
        held_q[i] = (*q, g)
        lo, hi = m.priced.band_ratio() or (1.0, 1.0)
        bands[i] = (held[i] * lo * math.exp(q[0]), held[i] * hi * math.exp(q[1]))
    return ErrorBands(constant, held_q, bands, tuple(pooled), scores)


def matches(constant: dict, stored: dict, atol: float = 1e-5) -> bool:
    """Whether the stored :data:`~simulator.specdec.engine_round.MODEL_ERROR` holds this fit's all-author
    quantiles (same groups, every end within ``atol``)."""
    return set(constant) == set(stored) and all(abs(a - b) <= atol for g in constant
                                                for a, b in zip(constant[g], stored[g], strict=True))


def summary(v) -> dict | None:
    """The model-error band of a :class:`~.sd_fit.Validation` for the report: the stored constant against the fit,
    each author's held-out quantiles, the borrowed-AL spread, and coverage with and without the model's error
    (None for a validation without one)."""
    from ..specdec.engine_round import MODEL_ERROR
    from .sd_speedup import al_batch_spreads

    eb, pr = v.error, v.priced
    if eb is None:
        return None
    folds = {}
    for o in pr:
        q = eb.held[o.row.id]
        folds.setdefault((o.row.author, q[2]), [q[0], q[1], 0])[2] += 1

    def covered(band_of):
        return sum(band_of(o) is not None and band_of(o)[0] <= o.measured <= band_of(o)[1] for o in pr)

    return {"coverage": COVERAGE, "min_authors": MIN_AUTHORS, "constant": eb.constant, "stored": MODEL_ERROR,
            "matches": matches(eb.constant, MODEL_ERROR), "pooled_engines": list(eb.pooled_engines),
            "folds": [{"author": s, "group": g, "q_lo": a, "q_hi": b, "rows": n}
                      for (s, g), (a, b, n) in folds.items()],
            "al_spreads": al_batch_spreads([o.row for o in v.outcomes]), "rows": len(pr),
            "covered": covered(lambda o: o.band), "covered_params_only": covered(lambda o: o.band_params)}


def markdown(b: dict, command: str) -> list[str]:
    """The report's section on the model-error band."""
    pct = f"{100 * b['coverage']:.0f}%"
    sp = b["al_spreads"] or [(0.0, ())]
    L = ["## The model-error band (what the band means)", "",
         f"`speedup_low`–`speedup_high` = the parameter / acceptance band (every ranged term at both ends: a fitted "
         f"parameter's held-out spread, else its public range; the acceptance band's ends) widened by the model's "
         f"demonstrated error on this corpus: × exp(q_lo) … × exp(q_hi), (q_lo, q_hi) the split-conformal {pct} "
         f"quantiles of how far each priced row's measured value lies beyond its held-out band, in log "
         f"(`simulator/validate/sd_band.py`). Per engine where its rows come from ≥ {b['min_authors']} authors, "
         f"else all engines pooled ({', '.join(b['pooled_engines']) or 'none'} pooled; an engine with no validated "
         f"row: pooled). Held out: each author's band uses the other authors' rows only, each predicted by the fit "
         f"without that author and the held-out one. A row whose AL was measured at another batch carries the "
         f"acceptance band AL × exp(∓{sp[0][0]:.3f}) (×{np.exp(-sp[0][0]):.2f}–×{np.exp(sp[0][0]):.2f}): the "
         f"largest change of AL with batch that the corpus shows for one configuration (`sd_speedup."
         f"al_batch_spread`; the stated assumption that an unmeasured batch moves no more): "
         + "; ".join(f"{', '.join(ids)}: {100 * (np.exp(x) - 1):.1f}%" for x, ids in sp) + ".", "",
         f"Held-out coverage: the parameter / acceptance band alone {b['covered_params_only']}/{b['rows']} "
         f"({100 * b['covered_params_only'] / max(b['rows'], 1):.1f}%); widened by the model's error "
         f"{b['covered']}/{b['rows']} ({100 * b['covered'] / max(b['rows'], 1):.1f}%). "
         f"`MODEL_ERROR` (`specdec/engine_round.py`, what the sweep uses) matches this fit: "
         f"**{'yes' if b['matches'] else 'NO: copy the fit into it'}** (regenerate: `{command}`).", "",
         "| group | q_lo | q_hi | speedup × (low … high) | stored in `MODEL_ERROR` |", "|---|---:|---:|---|---|"]
    for g, (lo, hi) in sorted(b["constant"].items()):
        st = b["stored"].get(g)
        L.append(f"| {g} | {lo:+.4f} | {hi:+.4f} | {np.exp(lo):.3f} … {np.exp(hi):.3f} | "
                 + ("-" if st is None else f"{st[0]:+.4f} / {st[1]:+.4f}") + " |")
    L += ["", "Held out, per author (the quantiles its rows' bands use: from the other authors only):", "",
          "| author | group | rows | q_lo | q_hi |", "|---|---|---:|---:|---:|"]
    for f in b["folds"]:
        L.append(f"| {f['author']} | {f['group']} | {f['rows']} | {f['q_lo']:+.4f} | {f['q_hi']:+.4f} |")
    return L
