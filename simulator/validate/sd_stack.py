"""The SD fit's hot path (:mod:`.sd_fit`): a priced row's engine terms as affine functions of the fitted parameters,
and the rows of one engine stacked, so that a candidate θ is evaluated for every row in one numpy expression. The
numbers are those of :meth:`.sd_fit.RowModel.predict` (the engine terms from
:func:`~simulator.specdec.engine_round.round_terms` itself, the serving level from
:mod:`simulator.specdec.serving`), equal to rounding (tests/validate/test_sd_fitted.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace

import numpy as np

from ..specdec.engine_round import Band, RoundParams, exposed, round_terms
from ..specs.catalog import load_engine

__all__ = ["FIT_PARAMS", "GRID_MAX", "RowStack", "linear_terms", "params_at", "public_params", "stacked_row"]

FIT_PARAMS = ("round_host", "per_request", "draft_step_host", "decode_host", "draft_step_offset")
GRID_MAX = 8  # batches of a serving case's grid (C and the floor / ceiling of both arms' decode batches: at most 5)


def public_params(engine: str) -> RoundParams:
    """The engine's public round bands (its file's ``round:``, newest release) before any fit."""
    return load_engine(engine).default.round


def params_at(engine: str, values) -> RoundParams:
    """The engine's parameters with :data:`FIT_PARAMS` set to ``values`` (seconds; band = the point)."""
    base = public_params(engine)
    return base.with_(**{n: Band(float(v), float(v), float(v), "fit on the SD corpus")
                         for n, v in zip(FIT_PARAMS, values, strict=True)})


def linear_terms(self) -> tuple:
    """A row's (``self``: a :class:`.sd_fit.RowModel`) engine terms as functions of :data:`FIT_PARAMS`: the round's
    host work H and the plain step's host work before hiding are affine in them (``round_terms``: sums of the
    parameters times counts), and so are the round kernels (the offsets). (T_kern, H at θ = 0 and per unit θ_j, the
    decode host work likewise, the execution modes), read from ``round_terms`` itself at θ = 0 and θ = e_j."""
    p, case = self.priced, self.priced.serving.step
    mech = case.scenario.mechanisms

    def terms(values, m):
        return round_terms(case.hardware, case.deployment, m, p.serving.grid, [self.steps],
                           [p.serving.round_accept_length], self.gpu[None, :], self.t_decode, self.v_draft,
                           self.v_target, case.drafter.kind, tree=self.tree, positions=[self.positions],
                           params=params_at(self.engine, values), levels=("central",), hybrid=self.hybrid)

    raw = replace(mech, decode_overlap="off")  # the decode host work before hiding (its count is the mode's)
    n = len(FIT_PARAMS)
    basis = [np.zeros(n)] + [np.eye(n)[j] for j in range(n)]
    full = [terms(v, mech) for v in basis]
    dec = [terms(v, raw).host_decode["central"] for v in basis]
    h0, d0 = full[0].work["central"][0], dec[0]
    k0 = full[0].kernels["central"][0]
    return (k0, np.stack([t.kernels["central"][0] - k0 for t in full[1:]]), h0,
            np.stack([t.work["central"][0] - h0 for t in full[1:]]), d0, np.stack([d - d0 for d in dec[1:]]),
            full[0].sd_overlap, full[0].decode_overlap)

def stacked_row(self) -> dict:
    """A row's part of a :class:`RowStack` (grid arrays padded to :data:`GRID_MAX`; occupancies as tuples)."""
    from ..specdec.serving import Occupancy, iteration_time

    k, dk, h0, dh, d0, dd, sd, dec = self._linear
    s = self.priced.serving
    if len(s.grid) > GRID_MAX:
        raise ValueError(f"a serving grid of {len(s.grid)} batches exceeds GRID_MAX = {GRID_MAX}")

    def pad(a, fill=0.0):
        a = np.asarray(a, dtype=float)
        out = np.full(a.shape[:-1] + (GRID_MAX,), fill)
        out[..., : a.shape[-1]] = a
        return out

    def weights(b):  # np.interp is linear in the values: its weight on each grid point
        return pad([np.interp(max(float(b), 1.0), s.grid, e) for e in np.eye(len(s.grid))])

    return {"k": pad(k), "dk": pad(dk), "h0": pad(h0), "dh": pad(dh), "d0": pad(d0), "dd": pad(dd),
            "gpu": pad(self.gpu, 1.0),
            "t_decode": pad(self.t_decode, 1.0), "sd_on": sd == "on", "dec_on": dec == "on",
            "at": s.at_concurrency, "w0": weights(s.base.decode_batch), "w1": weights(s.sd.decode_batch),
            "c0": float(iteration_time(0.0, s.base, s.t_chunk, s.prefill)),
            "c1": float(iteration_time(0.0, s.sd, s.t_chunk_sd, s.prefill)),
            "al_round": s.round_accept_length, "al": s.accept_length, "compare": self.priced.setup.compare,
            **{arm: tuple(float(getattr(getattr(s, arm), f.name)) for f in dataclasses.fields(Occupancy))
               for arm in ("base", "sd")}}


@dataclass(frozen=True)
class RowStack:
    """Rows of one engine stacked for a fit: :meth:`RowModel.predict_at` of every row at once (one numpy evaluation
    per candidate θ instead of one per row; the same numbers). Grids are padded to the longest (padding: weight 0).
    The serving level is linear up to its last step: the two arms' step times are interpolations (weights ``w0``,
    ``w1``) of the grid's, each iteration adds a constant (``iteration_time`` at 0: the prefill share), and the
    speedups are :class:`~simulator.specdec.serving.ServingPoint`'s over the stacked occupancies."""

    k: np.ndarray  # (R, G) round kernels at θ = 0
    dk: np.ndarray  # (R, n, G) per unit θ_j (the offsets)
    h0: np.ndarray  # (R, G) round host work at θ = 0
    dh: np.ndarray  # (R, n, G) per unit θ_j
    d0: np.ndarray  # (R, G) plain step host work at θ = 0
    dd: np.ndarray  # (R, n, G)
    gpu: np.ndarray  # (R, G)
    t_decode: np.ndarray  # (R, G)
    sd_on: np.ndarray  # (R,) bool: the round hides host work
    dec_on: np.ndarray  # (R,) bool: the plain step hides host work
    at: np.ndarray  # (R,) index of batch C
    w0: np.ndarray  # (R, G) interpolation weights of the plain arm's decode batch
    w1: np.ndarray  # (R, G) of the SD arm's
    c0: np.ndarray  # (R,) what an iteration adds beside the plain step
    c1: np.ndarray  # (R,) beside the round
    al_round: np.ndarray  # (R,) a round's AL (the step level)
    al: np.ndarray  # (R,) a request's tokens per round (the serving level)
    compare: np.ndarray  # (R,) step | throughput | tpot
    base: object  # Occupancy, fields stacked (R,)
    sd: object

    @classmethod
    def of(cls, models: list) -> RowStack:
        from ..specdec.serving import Occupancy

        cols = [m._stacked for m in models]
        out = {f: np.array([c[f] for c in cols]) for f in cols[0] if f not in ("base", "sd")}
        occ = {arm: Occupancy(*np.array([c[arm] for c in cols]).T) for arm in ("base", "sd")}
        return cls(**out, **occ)

    def predict_at(self, values) -> np.ndarray:
        """Every row's compared speedup at ``params_at(engine, values)`` (R,)."""
        from ..specdec.serving import ServingPoint

        v = np.asarray(values, dtype=float)
        gk = self.gpu + self.k + np.einsum("j,rjg->rg", v, self.dk)
        h = self.h0 + np.einsum("j,rjg->rg", v, self.dh)
        hd = self.d0 + np.einsum("j,rjg->rg", v, self.dd)
        t_round = gk + np.where(self.sd_on[:, None], exposed(h, gk, "on"), exposed(h, gk, "off"))
        t_step = self.t_decode + np.where(self.dec_on[:, None], exposed(hd, self.t_decode, "on"),
                                          exposed(hd, self.t_decode, "off"))
        rows = np.arange(len(self.at))
        step = self.al_round * t_step[rows, self.at] / t_round[rows, self.at]
        t0 = (self.w0 * t_step).sum(axis=1) + self.c0
        t1 = (self.w1 * t_round).sum(axis=1) + self.c1
        sp = ServingPoint(self.base, self.sd, self.al, t0, t1, step)
        return np.where(self.compare == "step", step,
                        np.where(self.compare == "throughput", sp.speedup_throughput, sp.speedup_tpot))
