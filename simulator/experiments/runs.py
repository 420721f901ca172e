"""Shared plumbing of the experiments: resolve a target to (model, GPU, deployment), price a speculative-decoding
grid with the library (``specdec.speculative``), and build routing-overlap profiles from lag shapes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.deployment import PRESETS, Deployment, Mechanisms
from ..cost.routing import OverlapInput
from ..errors import InfeasibleError, SimulatorError
from ..specdec import Acceptance, Drafter, SpecResult, StepCache, best_gamma, parse_drafter, speculative
from ..specs.catalog import load_hardware, load_model
from ..specs.derived import param_counts
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from ..sweep.deploy import Layout, default_deployment, fitting_batches
from .schema import Experiment, Target


@dataclass(frozen=True)
class Resolved:
    """A target made concrete: specs, deployment, drafter and acceptance."""

    target: Target
    model: ModelSpec
    hw: HardwareProfile
    dep: Deployment
    drafter: Drafter
    acceptance: Acceptance
    acceptance_label: str

    @property
    def label(self) -> str:
        return deployment_label(self.dep)


def deployment_label(d: Deployment) -> str:
    dp = f" dp{d.dp}" if d.dp > 1 else ""
    return f"{d.dtype} tp{d.tp}{dp} ep{d.ep}"


def resolve(t: Target, exp: Experiment, *, hardware: str | HardwareProfile | None = None,
            dtype: str | None = None) -> Resolved:
    """The target's deployment (the sweep's default rule with the target's overrides); raises SimulatorError when
    the layout is invalid. ``hardware``/``dtype`` replace the target's."""
    model = load_model(t.model)
    hw = hardware if isinstance(hardware, HardwareProfile) else load_hardware(hardware or t.hardware)
    lay = Layout(dtype=dtype or t.dtype, kv_dtype=t.kv_dtype, tp=t.tp, ep=t.ep, gpus=t.gpus)
    dep = default_deployment(model, hw, lay)
    spec = t.acceptance or exp.speculation.acceptance
    drafter = parse_drafter(t.drafter or exp.speculation.drafter)
    return Resolved(t, model, hw, dep, drafter, spec.build(), spec.label)


def price(r: Resolved, batch, gammas, context: int, mode: str | Mechanisms, overlap: OverlapInput | None = None,
          cache: StepCache | None = None) -> SpecResult:
    """Speculative decoding over (γ, B) for one resolved target; batches whose KV cache does not fit raise."""
    mech = PRESETS[mode] if isinstance(mode, str) else mode
    ok, why = fitting_batches(r.model, r.hw, r.dep, batch, int(max(gammas)) + 1, context)
    if len(ok) < len(batch):
        raise InfeasibleError(why or f"{r.model.name} does not fit on {r.hw.name}")
    return speculative(r.model, r.hw, r.dep, np.asarray(batch, float), np.asarray(gammas), r.acceptance, r.drafter,
                       context, mech, overlap, cache)


def try_resolve(t: Target, exp: Experiment, **kw) -> tuple[Resolved | None, str]:
    try:
        return resolve(t, exp, **kw), ""
    except SimulatorError as exc:
        return None, str(exc)


def fits(r: Resolved, batch, gammas, context: int) -> tuple[list[float], str]:
    return fitting_batches(r.model, r.hw, r.dep, batch, int(max(gammas)) + 1, context)


def best(res: SpecResult) -> tuple[np.ndarray, np.ndarray]:
    """(best γ, best speedup) per batch."""
    return best_gamma(res.gammas, res.speedup)


def at_gamma(res: SpecResult, gamma: int) -> int:
    idx = np.flatnonzero(res.gammas == gamma)
    if not idx.size:
        raise InfeasibleError(f"draft length {gamma} is not in the grid {res.gammas.tolist()}")
    return int(idx[0])


def total_params_b(model: ModelSpec) -> float:
    return param_counts(model).total / 1e9


# -- overlap profiles --------------------------------------------------------------------------------------------
def lift(lags, baseline: float) -> np.ndarray:
    """Lag correlation λ(d) = (o(d) − s) / (1 − s) of overlaps over the independent baseline s (the ``lift``
    pooling rule's phi coefficient: the same for every expert)."""
    return (np.asarray(lags, float) - baseline) / (1.0 - baseline)


def scaled_profile(lag1: float, baseline: float, shape_lags, shape_baseline: float,
                   profile: str) -> tuple[float, ...]:
    """Lag overlaps with o(1) = ``lag1`` over the independent ``baseline``.

    ``cohere``: o(1..D) with λ(d) = λ(1)·λ_S(d)/λ_S(1), the shape's lag correlations rescaled (D = the shape's
    lags); ``markov``: o(1) only. Lag-1-only statistics make the maximum-entropy law a first-order Markov chain
    per expert (λ(d) = λ(1)^d), so the profile is realisable by construction."""
    if profile == "markov":
        return (float(lag1),)
    lam1 = (lag1 - baseline) / (1.0 - baseline)
    s = lift(shape_lags, shape_baseline)
    lam = lam1 * s / s[0]
    return tuple(float(x) for x in baseline + lam * (1.0 - baseline))


def transferred_profile(model: ModelSpec, shape_lags, shape_baseline: float) -> OverlapInput:
    """The shape's lag correlations λ(d) applied to ``model`` with uniform popularity (baseline k/E)."""
    u = model.ffn.top_k / model.ffn.experts
    lam = lift(shape_lags, shape_baseline)
    return OverlapInput(tuple(float(x) for x in u + lam * (1.0 - u)), "uniform")
