"""A routing profile (``routing/v1``) with statistics by depth, measured from a routing trace with a layer dimension.

For each trace layer ℓ (taken to be the model's MoE layers in order): lag overlaps o_ℓ(d) = Σ_e p_e(d) / k from the
per-expert pair marginals, and the popularity as ``skew:X_ℓ`` with X_ℓ = Σ_e π_e² / k (the independent-routing
overlap; the Zipf-shaped popularity of that skew stands in for the measured vector). ``split: thirds`` averages
o_ℓ(d) and X_ℓ over the early, middle and final thirds (layer ℓ of L in third ⌊3ℓ/L⌋); ``per_layer`` keeps every
layer. The pooled ``lags``/``popularity`` are the means over all layers.
"""

from __future__ import annotations

import numpy as np

from ..params import Interval, Options, check_params, parameter_error
from ..specs.routing_profile import SCHEMA, SPLITS
from ..specs.yamlio import dump_yaml
from .trace import Trace, layer_stats

__all__ = ["layer_profile_from_trace", "write_routing_profile"]

DIGITS = 4


def _layer_numbers(trace: Trace, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
    """(lags (L, D), skew (L,)) per trace layer."""
    lags, skew = [], []
    for layer in range(trace.experts.shape[2]):
        st = layer_stats(trace, layer, max_lag=max_lag)
        lags.append(np.asarray(st.pair_probs).sum(axis=0) / trace.top_k)
        pi = np.asarray(st.popularity)
        skew.append(float(pi @ pi) / trace.top_k)
    return np.asarray(lags), np.asarray(skew)


def check_split(split: str, layers: int) -> None:
    """``thirds`` needs a trace of at least three layers (one per third): else one error naming ``split``."""
    if split == "thirds" and layers < 3:
        raise parameter_error("layer_profile_from_trace", "split", f"per_layer for a trace of {layers} layer(s) "
                              "(thirds needs at least 3 layers)", split)


def layer_profile_from_trace(trace: Trace, *, name: str, source: str, split: str = "thirds", max_lag: int = 4,
                             description: str = "") -> dict:
    """The ``routing/v1`` mapping of a per-depth routing profile measured on ``trace`` (``source``: the citation
    text of the trace). ``split``: ``thirds`` or ``per_layer`` (SPLITS)."""
    check_params("layer_profile_from_trace", {"split": split, "max_lag": max_lag},
                 {"split": [Options(SPLITS)], "max_lag": [Interval(int, 1, None)]})
    layers = trace.experts.shape[2]
    check_split(split, layers)
    lags, skew = _layer_numbers(trace, max_lag)
    seg = np.arange(layers) * 3 // layers if split == "thirds" else np.arange(layers)

    def entry(sel) -> dict:
        return {"lags": [round(float(x), DIGITS) for x in lags[sel].mean(axis=0)],
                "popularity": f"skew:{max(float(skew[sel].mean()), trace.top_k / trace.num_experts):.{DIGITS}g}"}

    pooled = entry(np.ones(layers, dtype=bool))
    return {
        "schema": SCHEMA, "name": name, "display_name": name,
        "description": description or f"lag overlaps o(1..{max_lag}) and popularity skew by depth ({split}) "
                                      f"from a routing trace of {layers} layers",
        "sources": {"T1": source}, "experts": int(trace.num_experts), "top_k": int(trace.top_k), "source": "T1",
        "lags": pooled["lags"], "popularity": pooled["popularity"],
        "by_layer": {"split": split, "layers": [entry(seg == j) for j in range(int(seg.max()) + 1)]},
    }


def write_routing_profile(profile: dict, path: str) -> None:
    """Write a ``routing/v1`` mapping as YAML (readable by ``simulator.specs.catalog.load_routing_profile``),
    atomically (:mod:`simulator.outputs`; an unwritable path is one error naming ``write_profile``)."""
    from ..outputs import atomic_write

    with atomic_write(path, "w", param="write_profile") as fh:
        dump_yaml(profile, fh, sort_keys=False, default_flow_style=None, width=120)
