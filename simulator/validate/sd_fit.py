"""The SD-corpus validation: every row priced (:mod:`.sd_speedup`), the engine host-time parameters that no spec sheet
gives fitted on the corpus with leave-one-author-out cross-validation, and the errors per engine and execution mode
(docs/SD_VALIDATION.md; docs/MODEL.md §7.2).

Rows. A row set apart in the corpus (``set_apart``: no AL at that point, a contradicting source, the same run twice,
...) is priced and reported but never fitted and not in the targets; every other priced row is *validated*: fitted and
counted. The unit of every leave-one-out is the row's ``author`` (one person, team or harness): two sources of one
author are never split between training and held out.

Fit. Per engine, the parameters :data:`FIT_PARAMS` of :func:`public_params` (the engine files' bands) minimise

    Σ_rows w_row · (log predicted(θ) − log measured)²,    w_row = 1 / n_rows(author)   (each author weighs the same)

within their ranges (``Band.low`` … ``Band.high``: public, or a physical ceiling above one-sided evidence; scipy
``least_squares``, trust-region reflective, started at the central values). The GPU passes are priced once; a
candidate θ only re-evaluates the engine terms (:func:`~simulator.specdec.engine_round.round_terms` with ``params``)
and the serving equations. ``sync`` and ``per_token`` stay at their central values: with a fixed sync count per mode
and an AL that varies little within a source, they are collinear with ``round_host`` and ``per_request``. Held-out
error: each author's rows (validated or set apart) predicted by the fit on every other author's validated rows. A
parameter is *pinned* when rows move it (non-zero sensitivity), its one-σ (Gauss-Newton, at the in-sample fit) is
under a quarter of its range and under its value, and it does not sit on a bound. Where the evidence bounds a
parameter from one side only, its range's other end is a physical ceiling (the Band's source says which). A
parameter the rows move but cannot place (one-σ wider than its whole range, e.g. ``round_host`` and ``tp_host`` on
multi-GPU rows alone, which see only their sum) keeps its public central value and the others are refitted, one at a
time, the widest relative to its range first.

Used values (:func:`fitted_bands`). Every parameter some row moves takes the all-author fit as its central value and,
as its band, the held-out spread: min–max over the leave-one-author-out folds joined with the fit ± one-σ, clipped to
its range; a parameter no row moves, or the rows cannot place, keeps its public band. The result is
:data:`simulator.specdec.engine_round.FITTED`, which the pricing path reads (``round_params``); a test re-runs the fit
and checks it reproduces that table.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from ..specdec import StepCache
from ..specdec.engine_round import POOLED, RoundParams, exposed, round_terms
from ..specdec.rounds import draft_vocab
from ..specdec.tree import is_chain, node_depths
from .sd_band import error_bands
from .sd_corpus import SET_APART, SDRow, by_author
from .sd_speedup import Priced, Skip, price_row, setup
from .sd_stack import FIT_PARAMS, RowStack, linear_terms, params_at, public_params, stacked_row

__all__ = ["FIT_PARAMS", "SIX_CASES", "WIDEN", "EngineFit", "Outcome", "RowModel", "Validation", "fit_engine",
           "fitted_bands", "fitted_params", "params_at", "validate_sd"]

# The six cases of the sd-validation study (experiments/sd-validation.yaml): case -> its corpus rows (one row, or the
# card's per-dataset rows whose mean the study's case states: the corpus keeps the rows, not their mean).
_GLM_SETS = ("humaneval", "terminalbench", "mtbench", "swebenchverified")
SIX_CASES = {"q30b-2xh100-b1": ("sf339-q30b-2xh100-b1-s3k1n4",), "q30b-2xh100-b4": ("sf339-q30b-2xh100-b4-s3k1n4",),
             "q30b-2xh100-b1-top3": ("sf339-q30b-2xh100-b1-s3k3n4",),
             "q30b-4xh100-b1-top3": ("as163-q30b-4xh100-b1-s3k3n4",),
             "glm47f-1xh200-b1-tree": tuple(f"tw-glm47f-1xh200-b1-{d}" for d in _GLM_SETS),
             "glm47f-1xh200-b32-tree": tuple(f"tw-glm47f-1xh200-b32-{d}" for d in _GLM_SETS)}
WIDEN = 10.0  # the diagnostic fit's upper bounds: the public high × WIDEN (lower bounds 0); never used to predict
PIN_SIGMA = 0.25  # a parameter is pinned when its one-σ is under this share of its public range


@dataclass(frozen=True)
class RowModel:
    """What a candidate θ needs to re-evaluate one priced row: its GPU round and plain step over the batch grid."""

    priced: Priced
    gpu: np.ndarray  # (nb,) round GPU time without round kernels and host time
    t_decode: np.ndarray  # (nb,) plain decode step, GPU only
    v_draft: int
    v_target: int
    tree: bool
    positions: int  # drafted positions sampled per round (a tree's N − 1)
    steps: int  # draft steps per round (a tree's depth)

    @classmethod
    def of(cls, p: Priced) -> RowModel:
        r, case = p.result, p.serving.step
        kern = np.zeros_like(r.t_round[0]) if r.t_kernels is None else r.t_kernels[0]
        host = np.zeros_like(r.t_round[0]) if r.t_host is None else r.t_host[0]
        par = p.setup.parents
        tree = par is not None and not is_chain(par)
        steps = int(node_depths(par).max()) if par is not None else p.setup.gamma
        return cls(p, r.t_round[0] - kern - host, np.asarray(r.t_decode, float), draft_vocab(case.drafter, case.model),
                   case.model.vocab_size, tree, (len(par) - 1) if par is not None else steps, steps)

    @functools.cached_property
    def engine(self) -> str:
        return self.priced.serving.step.deployment.engine

    @property
    def author(self) -> str:
        return self.priced.setup.row.author

    @property
    def hybrid(self) -> bool:
        """The target has linear-attention layers (the engine may force overlapped rounds: ``overlap_modes``)."""
        return self.priced.serving.step.model.attention.linear is not None

    def predict(self, params: RoundParams | None = None) -> float:
        """The compared speedup under ``params`` (None: the pricing path's, i.e. the engine's FITTED values)."""
        p, case = self.priced, self.priced.serving.step
        grid = p.serving.grid
        terms = round_terms(case.hardware, case.deployment, case.scenario.mechanisms, grid, [self.steps],
                            [p.serving.round_accept_length], self.gpu[None, :], self.t_decode, self.v_draft,
                            self.v_target, case.drafter.kind, tree=self.tree, positions=[self.positions], params=params,
                            levels=("central",), hybrid=self.hybrid)
        t_round = self.gpu + terms.kernels["central"][0] + terms.host["central"][0]
        return p.predicted(self.t_decode + terms.host_decode["central"], t_round)

    @functools.cached_property
    def _linear(self) -> tuple:
        """The engine terms as affine functions of :data:`FIT_PARAMS` (:func:`.sd_stack.linear_terms`)."""
        return linear_terms(self)

    @functools.cached_property
    def _stacked(self) -> dict:
        """This row's part of a :class:`~.sd_stack.RowStack`."""
        return stacked_row(self)

    def predict_at(self, values) -> float:
        """:meth:`predict` at ``params_at(engine, values)``, from the affine engine terms (:attr:`_linear`): the same
        number, without re-deriving the terms for every candidate θ of a fit."""
        k0, dk, h0, dh, d0, dd, sd, dec = self._linear
        v = np.asarray(values, dtype=float)
        k = k0 + v @ dk
        host = exposed(h0 + v @ dh, self.gpu + k, sd)
        return self.priced.predicted(self.t_decode + exposed(d0 + v @ dd, self.t_decode, dec), self.gpu + k + host)


def _bounds(engine: str):
    base = public_params(engine)
    bands = [getattr(base, n) for n in FIT_PARAMS]
    return base, np.array([b.low for b in bands]), np.array([b.high for b in bands]), np.array([b.central
                                                                                                  for b in bands])


def _unit(lo, hi, central) -> np.ndarray:
    """The fit's unit per parameter: twice the central's distance from the low end, at most the range (a physical
    ceiling can sit orders of magnitude above the central value; the range as the unit would leave the solver's
    steps, and the at-a-bound test, coarse)."""
    return np.where(hi > lo, np.where(central > lo, np.minimum(hi - lo, 2 * (central - lo)), hi - lo), 1.0)


@dataclass(frozen=True)
class EngineFit:
    engine: str
    values: np.ndarray  # seconds, in FIT_PARAMS order
    sigma: np.ndarray  # one-σ (seconds), NaN where not estimable
    sensitivity: np.ndarray  # |∂ residual / ∂ θ| summed over rows (per unit of x, fit_engine's scale)
    rows: int
    authors: int  # the folds its rows form (one per author)
    unplaced: tuple = ()  # per parameter: moved by the rows but not placed (one-σ beyond its range): kept central

    def pinned(self) -> list[str]:
        """Per parameter: 'pinned' or why not."""
        _, lo, hi, central = _bounds(self.engine)
        unit = _unit(lo, hi, central)
        out = []
        for i in range(len(FIT_PARAMS)):
            width = hi[i] - lo[i]
            if self.rows == 0:
                out.append("no rows")
            elif self.unplaced and self.unplaced[i]:
                out.append("not placed, σ > its range: public value")
            elif self.sensitivity[i] < 1e-6:
                out.append("no row moves it")
            elif min(self.values[i] - lo[i], hi[i] - self.values[i]) <= 1e-3 * unit[i]:
                out.append("at the " + ("low" if self.values[i] - lo[i] <= 1e-3 * unit[i] else "high") + " bound")
            elif not np.isfinite(self.sigma[i]) or self.sigma[i] >= PIN_SIGMA * width:
                out.append("σ ≥ a quarter of its range")
            elif self.sigma[i] >= self.values[i]:
                out.append("σ ≥ its value")
            else:
                out.append("pinned")
        return out


def fit_engine(models: list[RowModel], engine: str, widen: float = 1.0) -> EngineFit:
    """Least squares on log speedup over one engine's rows, θ within the ranges (module docstring);
    ``widen`` > 1 is a diagnostic only: the upper bounds × ``widen`` and the lower bounds 0 (what the data want)."""
    from scipy.optimize import least_squares

    base, lo, hi, central = _bounds(engine)
    if widen != 1.0:
        lo, hi = np.zeros_like(lo), hi * widen
    mine = [m for m in models if m.engine == engine]
    if not mine:
        nan = np.full(len(FIT_PARAMS), np.nan)
        return EngineFit(engine, central, nan, np.zeros(len(FIT_PARAMS)), 0, 0)
    counts = {}
    for m in mine:
        counts[m.author] = counts.get(m.author, 0) + 1
    w = np.sqrt([1.0 / counts[m.author] for m in mine])  # each author weighs the same
    meas = np.log([m.priced.measured for m in mine])
    scale = _unit(lo, hi, central)

    x0 = np.where(hi > lo, (central - lo) / scale, 0.0)

    ub = np.where(hi > lo, (hi - lo) / scale, 0.0)

    stack = RowStack.of(mine)  # every row at once per candidate θ

    def resid(x):
        return w * (np.log(stack.predict_at(lo + x * scale)) - meas)

    def solve(free):
        """Fit the ``free`` parameters, the others at their central values: x (all), jacobian (all columns: forward
        differences at the solution, stepping inward from a bound, so a parameter at a bound still shows what the
        rows feel), cost."""
        idx = np.flatnonzero(free)

        def sub(xf):
            x = x0.copy()
            x[idx] = xf
            return resid(x)

        res = least_squares(sub, x0[idx], bounds=(np.zeros(len(idx)), ub[idx]),
                            method="trf", diff_step=1e-3, xtol=1e-8, ftol=1e-10)
        x = x0.copy()
        x[idx] = res.x
        r0, jac = resid(x), np.zeros((len(mine), len(x0)))
        for i in idx:
            h = 1e-3 if x[i] + 1e-3 <= ub[i] else -1e-3
            step = x.copy()
            step[i] += h
            jac[:, i] = (resid(step) - r0) / h
        return x, jac, res.cost

    def spread(jac, cost):
        sens = np.abs(jac).sum(axis=0)
        live = sens > 1e-6
        sigma = np.full(len(FIT_PARAMS), np.nan)
        if live.any():
            s2 = 2 * cost / max(len(mine) - int(live.sum()), 1)
            try:
                cov = np.linalg.inv(jac[:, live].T @ jac[:, live]) * s2
                sigma[live] = np.sqrt(np.clip(np.diag(cov), 0, None)) * scale[live]
            except np.linalg.LinAlgError:
                pass
        return sens, sigma

    free = hi > lo
    lost = np.zeros_like(free)
    x, jac, cost = solve(free)
    sens, sigma = spread(jac, cost)
    # A parameter the rows move but cannot place (one-σ beyond its whole range: e.g. round_host and tp_host on
    # multi-GPU rows alone, which see only their sum) keeps its public central value and the others are refitted;
    # one at a time, the widest relative to its range first (ties: FIT_PARAMS order), so that of a collinear pair
    # the other still carries what the rows do pin (their sum).
    while True:
        rel = np.where(free & ~lost & (sens > 1e-6), np.nan_to_num(sigma, nan=np.inf) / np.where(hi > lo, hi - lo, 1),
                       0.0)
        if not (rel > 1).any() or (free & ~lost).sum() <= 1:
            break
        lost[int(np.argmax(rel))] = True
        x, jac, cost = solve(free & ~lost)
        sens, sigma = spread(jac, cost)
    sigma[lost] = np.nan
    return EngineFit(engine, lo + x * scale, sigma, sens, len(mine), len(counts), tuple(bool(b) for b in lost))


@dataclass(frozen=True)
class Outcome:
    """One corpus row: priced or why not, measured, predicted (engine defaults, in-sample fit, held out), band."""

    row: SDRow
    status: str  # priced (validated: fitted, in the targets) | apart (priced, never fitted) | unmapped | refused
    reason: str = ""
    setup: object = None
    measured: float = float("nan")
    central: float = float("nan")  # the engines' public central bands (before the fit)
    fitted: float = float("nan")  # the in-sample fit (all authors' validated rows)
    held_out: float = float("nan")  # fit on every other author's validated rows
    band: tuple[float, float] | None = None  # held out, the model's error included (sd_band)
    mode: str = ""  # "sd off / decode on" (the execution mode priced)
    step_level: float = float("nan")  # the step-level speedup at batch C (central), beside a serving-level compare
    band_params: tuple[float, float] | None = None  # held out, parameter / acceptance band only (no model error)

    def error(self, which: str) -> float:
        return getattr(self, which) / self.measured - 1


@dataclass(frozen=True)
class Validation:
    corpus: str
    outcomes: tuple[Outcome, ...]
    fits: dict = field(default_factory=dict)  # engine -> EngineFit (all authors)
    folds: dict = field(default_factory=dict)  # author -> {engine: EngineFit} (that author held out)
    wide: dict = field(default_factory=dict)  # diagnostic: engine -> EngineFit with the ranges widened (WIDEN)
    wide_held_out: dict = field(default_factory=dict)  # diagnostic: row id -> held-out prediction under ``wide``
    error: object = None  # sd_band.ErrorBands: the model-error band (held out per author, and all authors)
    models: dict = field(default_factory=dict)  # row id -> RowModel of every validated (priced) row

    @property
    def priced(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "priced"]

    @property
    def apart(self) -> list[Outcome]:
        """Rows set apart in the corpus and priced: reported, never fitted, not in the targets."""
        return [o for o in self.outcomes if o.status == "apart"]


def validate_sd(rows: tuple[SDRow, ...], corpus: str = "", cache: StepCache | None = None,
                progress=None) -> Validation:
    """Price every row, fit per engine on all authors' validated rows and per held-out author, and collect the
    outcomes (module docstring). ``progress``: a callback for a line at most every half second (rows priced, then
    the fits)."""
    from ..sweep.progress import Meter

    cache = cache or StepCache()
    outcomes, models, apart = [], {}, {}
    meter = Meter("validate sd", len(rows), progress, unit="rows")
    for r in rows:
        try:
            p = price_row(setup(r, rows), cache)
        except Skip as s:
            outcomes.append(Outcome(r, s.status, s.reason))
            meter.drop(1)
            continue
        (apart if r.apart else models)[r.id] = RowModel.of(p)
        meter.add(1, r.id)
    every = {**models, **apart}
    if progress is not None:
        progress(f"validate sd: fitting the engines' host times on {len(models)} rows, leave-one-author-out")
    # the fit trains on the validated rows (each states its AL at that point: the reader labels a row without one
    # 'no-al'); every priced row, set apart or not, is predicted held out by its author
    trainable = list(models.values())
    engines = sorted({m.engine for m in trainable})
    fits = {e: fit_engine(trainable, e) for e in engines}
    wide = {e: fit_engine(trainable, e, WIDEN) for e in engines}
    folds, held, wide_held = {}, {}, {}
    for a in (a for a, rs in by_author(rows).items() if any(x.id in every for x in rs)):
        train = [m for m in trainable if m.author != a]
        test = [m for m in every.values() if m.author == a]
        same = len(train) == len(trainable)  # the author has no validated row: its fold is the all-author fit
        folds[a] = {e: fits[e] if same and e in fits else fit_engine(train, e) for e in sorted({m.engine
                                                                                                 for m in test})}
        validated = sorted({m.engine for m in test if m.priced.setup.row.id in models})
        wfold = {e: fit_engine(train, e, WIDEN) for e in validated}
        for m in test:
            f, rid = folds[a][m.engine], m.priced.setup.row.id
            public = public_params(m.engine)  # a held-out author never sees the all-author FITTED values
            held[rid] = m.predict(params_at(m.engine, f.values) if f.rows else public)
            if m.engine in wfold:
                w = wfold[m.engine]
                wide_held[rid] = m.predict(params_at(m.engine, w.values) if w.rows else public)
    eb = error_bands(models, trainable, held, fitted_params)
    by_id = {o.row.id: o for o in outcomes}
    out = []
    for r in rows:
        if r.id in by_id:
            out.append(by_id[r.id])
            continue
        m = every[r.id]
        res = m.priced.result
        fit = fits.get(m.engine)
        fitted = m.predict(params_at(m.engine, fit.values) if fit is not None and fit.rows else public_params(m.engine))
        status, why = ("apart", "; ".join(f"{c}: {SET_APART[c]}" for c in r.set_apart)) if r.apart else ("priced", "")
        mode = f"sd {res.sd_overlap} / decode {res.decode_overlap}"
        p, ratio = held[r.id], m.priced.band_ratio()
        params = None if ratio is None else (p * ratio[0], p * ratio[1])
        if r.id in eb.rows:
            band = eb.rows[r.id]
        else:  # a row set apart (never validated): the all-author model-error band
            q = eb.constant.get(m.engine, eb.constant[POOLED])
            band = None if params is None else (params[0] * np.exp(q[0]), params[1] * np.exp(q[1]))
        central = m.predict(public_params(m.engine))
        out.append(Outcome(r, status, why, m.priced.setup, m.priced.measured, central, fitted,
                           p, band, mode, float(m.priced.serving.point.step_speedup), params))
    return Validation(corpus, tuple(out), fits, folds, wide, wide_held, eb, models)


def fitted_params(rows: list[RowModel], engine: str) -> RoundParams:
    """The engine's round parameters fitted on ``rows`` (its public ones where none of them is the engine's)."""
    f = fit_engine(rows, engine)
    return params_at(engine, f.values) if f.rows else public_params(engine)


def fitted_bands(v: Validation) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Per engine, the (low, central, high) seconds of every :data:`FIT_PARAMS` entry some row moves (module
    docstring, "Used values"): what :data:`simulator.specdec.engine_round.FITTED` must hold."""
    out = {}
    for e, f in sorted(v.fits.items()):
        _, lo, hi, _ = _bounds(e)
        for i, n in enumerate(FIT_PARAMS):
            if f.rows == 0 or f.sensitivity[i] < 1e-6:
                continue
            x = float(f.values[i])
            ends = [fs[e].values[i] for fs in v.folds.values() if e in fs and fs[e].rows]
            if np.isfinite(f.sigma[i]):
                ends += [x - f.sigma[i], x + f.sigma[i]]
            out.setdefault(e, {})[n] = (float(max(lo[i], min(ends + [x]))), x, float(min(hi[i], max(ends + [x]))))
    return out
