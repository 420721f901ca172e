"""Speculative-decoding rounds as engines execute them: execution mode, round kernels and host time
(docs/MODEL.md §4.6).

Beside the passes (draft, verify) a round costs GPU kernels the step model does not price and host work that the
engine's execution mode may or may not hide:

    G(B, γ)      = γ · T_draft(B, 1) + T_fuse + T_ext + T(B, γ+1) + T_reject + T_gdn + T_kern      (GPU time)
    T_ext        = T_draft(B, γ+1) − T_draft(B, 1)     (draft_extend: one draft pass over the γ + 1 verified positions)
    T_kern       = γ · [τ_s · V_d / 262144 + r_s · (B/dp) · (V_d + V_t) · 4 B / (BW · η)]
                   + tree · τ_tree + n_kv · F_elementwise                                       (round_kernels)
                   + γ · o_step            (an offset per draft step, no mechanism, never hidden: host_time)
    H(B, γ)      = h_round + [dp > 1] · (gpus − 1) · h_dp + n_sync · t_sync + (B/dp) · (h_req + AL(γ) · h_tok)
                   + (γ − 1)⁺ · h_step                                                              (host_time)
    T_round      = G + E(H, G),   E(H, G) = H (overlap off) or max(0, H − G) (overlap on)
    T_step       = T(B, 1) + E(H_dec, T(B, 1)),
    H_dec        = h_dec + [dp > 1] · (gpus − 1) · h_dp + n_sync,dec · t_sync + (B/dp) · (h_req + h_tok)
    Speedup      = AL(γ) · T_step / T_round                      (γ = 0: T_round = T_step, speedup exactly 1)

The mode (``Mechanisms.sd_overlap`` / ``decode_overlap``; None = the engine's default, ``execution`` of the release
the profile is bound to, engines/*.yaml) sets E and the sync count. Parameters no spec sheet gives are
:class:`Band` s (low, central, high) in the engine file's ``round:`` section, each with its source or ``assumed`` and
the reason (one-sided evidence says so; its other end is a physical ceiling); ``speedup_low``/``speedup_high`` price
the round at both ends (and at the acceptance band's ends when one is given), widened by the model's held-out error
on the public SD corpus (:data:`MODEL_ERROR`, :func:`model_error`; γ = 0 stays exactly 1). :data:`FITTED` holds the
public SD corpus fit (central = all-author fit, band = held-out spread) for the parameters rows move;
:func:`round_params` applies it, then a profile's ``kernels.round`` block for the engine (``{NAME: {low: Q, central:
Q, high: Q}}``, :data:`simulator.specs.kernels.ROUND_KEYS`); or :meth:`RoundParams.with_`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from ..cost.deployment import PRESETS, Deployment, Mechanisms
from ..specs.engine import Band, EngineRelease, RoundParams
from ..specs.hardware import HardwareProfile

__all__ = ["FITTED", "FIT_COMMAND", "LEVELS", "MODEL_ERROR", "Band", "RoundParams", "RoundTerms", "exposed",
           "model_error", "overlap_modes", "round_params", "round_terms"]

LEVELS = ("low", "central", "high")
VOCAB_REF = 262144  # the vocabulary of the sampling measurement the per-pass sampling cost is quoted at
US, MS = 1e-6, 1e-3


def overlap_modes(mech: Mechanisms, release: EngineRelease, drafter_kind: str = "eagle", hybrid: bool = False,
                  tree: bool = False) -> tuple[str, str]:
    """(sd_overlap, decode_overlap) resolved: the mechanism's setting, else the default of the engine ``release``
    (``execution`` of its file; a drafter kind its ``sd_overlap_off`` lists runs SD rounds without overlap, e.g.
    vLLM's n-gram; chain rounds of a linear-attention ``hybrid`` target run overlapped where the engine forces it,
    ``sd_overlap_hybrid``; tree rounds run without overlap where the engine overlaps chains only,
    ``sd_overlap_tree``)."""
    ex = release.execution
    default = "on" if (ex.sd_overlap_hybrid and hybrid and not tree) else ex.sd_overlap
    default = "off" if (tree and not ex.sd_overlap_tree) else default
    sd = mech.sd_overlap or ("off" if drafter_kind in ex.sd_overlap_off else default)
    return sd, mech.decode_overlap or ex.decode_overlap


# The values the pricing path uses where the public SD corpus moves a parameter (docs/MODEL.md §4.6, §7.2): central =
# the all-author fit within the ranges above (leave-one-author-out, simulator/validate/sd_fit.py), low-high = its
# held-out spread (min-max over the folds joined with the fit ± one-σ, clipped to the range). Written here from the
# output of FIT_COMMAND (its report's "Fitted round parameters" table); tests/validate/test_sd_fitted.py re-runs the
# fit and fails when this table no longer matches it. A parameter no row moves keeps its public band.
FIT_COMMAND = "python -m simulator validate sd --report docs/SD_VALIDATION.md"
_FIT = ("fit on the SD corpus by author (sglang: 23 validated rows, 4 authors; held-out mean |error| 8.9% over the "
        "30 validated rows); band = held-out spread; regenerate: " + FIT_COMMAND)
FITTED: dict[str, dict[str, Band]] = {
    "sglang": {
        "round_host": Band(1.170353 * MS, 1.9 * MS, 1.9 * MS, _FIT + "; at its public high bound (one-σ 0.73 ms): "
                           "the spec v1 rows want at least the A/Bs' 1.96 ms"),
        "draft_step_offset": Band(0.458325 * MS, 0.583877 * MS, 0.70943 * MS, _FIT + "; pinned (one-σ 0.13 ms): "
                                  "the SGLang rows' 1-8 draft steps per round (chains and trees up to 64 nodes)"),
    },
    "trtllm": {
        "draft_step_offset": Band(0.0, 0.0, 0.0562993 * MS, _FIT + "; at its low bound (one-σ 0.056 ms): the "
                                  "TensorRT-LLM rows want no offset"),
    },
}

# The model's demonstrated error on the public SD corpus (docs/MODEL.md §4.6, §7.2; simulator/validate/sd_band.py):
# per engine, (q_lo, q_hi) = the split-conformal 80% quantiles of the held-out log residual beyond the parameter /
# acceptance band, log(measured / band end) (0 inside), over every priced corpus row of the engine, each predicted
# by the fit on the other authors; an engine with fewer than sd_band.MIN_AUTHORS authors uses the quantiles of all
# engines' rows pooled (POOLED). speedup_low / speedup_high = the parameter / acceptance band × exp(q_lo / q_hi)
# (γ ≥ 1; γ = 0 stays exactly 1). Leave-one-author-out, this band covers the measured value in the share of rows
# docs/SD_VALIDATION.md reports (each author's band from the other authors' residuals only). Written from the output
# of FIT_COMMAND; tests/validate/test_sd_fitted.py re-runs it and fails when this table no longer matches.
POOLED = "pooled"
MODEL_ERROR: dict[str, tuple[float, float]] = {
    "sglang": (-0.115367, 0.0700647),  # 23 rows, 4 authors: speedup × 0.89 … × 1.07 beyond the parameter band
    POOLED: (-0.0854727, 0.0700647),  # 30 rows, 5 authors (trtllm: 1 author; vllm: no validated row)
}


def model_error(engine: str, mech: Mechanisms) -> tuple[float, float]:
    """(q_lo, q_hi) log-speedup widening of the band for ``engine`` (:data:`MODEL_ERROR`, :data:`POOLED` for an
    engine without its own), where the mechanisms are the model the corpus validated: the ``refined`` preset up to
    the execution modes (any other mechanism set is another model, whose error was not measured: (0, 0)), unless
    ``mech.model_error`` is off."""
    if mech.model_error != "on" or not _validated(mech):
        return 0.0, 0.0
    return MODEL_ERROR.get(engine, MODEL_ERROR[POOLED])


@functools.lru_cache(maxsize=256)
def _validated(mech: Mechanisms) -> bool:
    """Whether ``mech`` is the refined preset up to the execution modes (memoised: asked once per priced round)."""
    return replace(mech, sd_overlap=None, decode_overlap=None, model_error="on") == PRESETS["refined"]


def round_params(hw: HardwareProfile) -> RoundParams:
    """The round parameters of the engine ``hw`` is bound to, as the pricing path uses them: its file's public
    bands (``round:``) with the corpus fit's :data:`FITTED` bands, then the bands the profile states for that engine
    (its ``kernels.round``) replacing those (read on every call: a changed table is priced at once)."""
    release = hw.engine_spec
    base = release.round.with_(**FITTED.get(release.engine, {}))
    stated = hw.kernels.round
    if not stated:
        return base
    return base.with_(**{n: Band(*ends, f"profile {hw.name}: kernels.round.{n}") for n, ends in stated.items()})


def exposed(host, gpu, overlap: str) -> np.ndarray:
    """E(H, G): host work in series (off) or hidden up to the GPU time it overlaps (on)."""
    h = np.asarray(host, dtype=float)
    return np.maximum(0.0, h - np.asarray(gpu, dtype=float)) if overlap == "on" else h


@dataclass(frozen=True)
class RoundTerms:
    """The engine terms of one grid at the three levels; arrays (ng, nb), decode ones (nb,)."""

    sd_overlap: str
    decode_overlap: str
    kernels: dict  # level -> T_kern (ng, nb)
    host: dict  # level -> exposed round host time (ng, nb)
    host_decode: dict  # level -> exposed decode host time (nb,)
    work: dict  # level -> host work H (ng, nb), before hiding
    model_error: tuple[float, float] = (0.0, 0.0)  # (q_lo, q_hi): model_error(engine, mech)


def round_terms(hw: HardwareProfile, dep: Deployment, mech: Mechanisms, batch, gammas, accept_length, gpu_round,
                t_decode, v_draft: int, v_target: int, drafter_kind: str = "eagle", tree: bool = False,
                positions=None, params: RoundParams | None = None, levels=LEVELS, hybrid: bool = False) -> RoundTerms:
    """The round kernels and exposed host time (module docstring) at every level. ``gammas`` (ng,) are the draft
    steps per round, ``positions`` the drafted positions sampled per round (default: ``gammas``; a tree's nodes
    N − 1); ``gpu_round`` is the round's GPU time without T_kern, (ng, nb); ``accept_length`` (ng,) the central AL;
    rows with γ = 0 get 0. ``params``: other parameters than the engine file's bands (e.g. a fit's);
    ``levels``: the levels priced (a fit needs the central one only); ``hybrid``: the target has linear-attention
    layers (:func:`overlap_modes`)."""
    release = hw.engine_spec
    b = np.atleast_1d(np.asarray(batch, dtype=float))[None, :]
    g = np.atleast_1d(np.asarray(gammas, dtype=float))[:, None]
    npos = g if positions is None else np.atleast_1d(np.asarray(positions, dtype=float))[:, None]
    al = np.atleast_1d(np.asarray(accept_length, dtype=float))[:, None]
    spec = g > 0
    rows = b / dep.dp  # requests per attention-DP rank: each rank's scheduler handles its own
    dp_hops = dep.gpus - 1 if dep.dp > 1 else 0  # attention DP: every iteration gathers all ranks' batches
    sd, dec = overlap_modes(mech, release, drafter_kind, hybrid, tree)
    mode = release.execution
    zero = np.zeros(np.broadcast_shapes(g.shape, b.shape))
    params = params or round_params(hw)
    kern, host, host_dec, work = {}, {}, {}, {}
    gpu_round = np.asarray(gpu_round, dtype=float)
    for level in levels:
        p = params.values(level)
        k = zero
        if mech.round_kernels == "on":
            eta = hw.kernels.global_efficiency
            per_pos = (p["sample_pass"] * v_draft / VOCAB_REF
                       + p["sample_reads"] * rows * (v_draft + v_target) * 4.0 / (hw.hbm_bandwidth * eta))
            floor = hw.kernels.get("elementwise").fixed if mech.fixed_costs_on else 0.0
            per_round = (p["tree_build"] if (tree or mode.chain_builds_tree) else 0.0) + mode.kv_kernels * floor
            k = np.where(spec, npos * per_pos + per_round, 0.0)
        if mech.host_time == "on":  # an offset (no mechanism) per draft step: never hidden by overlap
            k = k + np.where(spec, g * p["draft_step_offset"], 0.0)
        kern[level] = k
        if mech.host_time == "on":
            syncs = mode.syncs_sd_overlap if sd == "on" else mode.syncs_sd
            h = (p["round_host"] + dp_hops * p["dp_sync"] + syncs * p["sync"]
                 + rows * (p["per_request"] + al * p["per_token"]) + np.maximum(g - 1.0, 0.0) * p["draft_step_host"])
            h = np.where(spec, h, 0.0)
            hd = (p["decode_host"] + dp_hops * p["dp_sync"] + mode.syncs_decode * p["sync"]
                  + rows[0] * (p["per_request"] + p["per_token"]))
            work[level] = h
            host[level] = np.where(spec, exposed(h, gpu_round + k, sd), 0.0)
            host_dec[level] = exposed(hd, t_decode, dec)
        else:
            work[level] = host[level] = zero
            host_dec[level] = np.zeros(b.shape[1])
    return RoundTerms(sd, dec, kern, host, host_dec, work, model_error(release.engine, mech))
