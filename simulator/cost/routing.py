"""Expert traffic of one MoE layer from the overlap model (the cost engine's only link to :mod:`simulator.overlap`).

``routing`` selects the unique-expert model: ``uniform`` (MoESD: every expert equally likely, tokens independent),
``independent`` (the profile's popularity, tokens independent) or ``overlap`` (maximum-entropy fit of the popularity
and lag overlaps). Under expert parallelism the busiest rank sets the pace: the expected maximum over ranks of the
unique experts each rank hosts, and the (token, expert) pairs on that rank in proportion to its share of unique
experts. Placements (``balanced``, ``contiguous``) and the closed forms of P(0) are the overlap layer's
(:mod:`simulator.overlap.unique`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import overlap as ov
from ..specs.model import ModelSpec
from ..specs.routing_profile import LAGS
from .ops import ExpertLoad


@dataclass(frozen=True)
class OverlapInput:
    """Routing statistics for the cost engine: lag overlaps o(1..D) and a popularity spec."""

    lags: tuple[float, ...] = ()
    popularity: str = "uniform"

    def __post_init__(self):
        if len(self.lags):  # no lags: independent routing
            LAGS.check(self.lags, "lags", "OverlapInput")


def model_overlap(model: ModelSpec, override: OverlapInput | None = None) -> OverlapInput:
    """The statistics used for ``model``: the user's override, else the model's shipped profile, else none
    (independent routing with uniform popularity: the IPF model then equals the uniform closed form)."""
    if override is not None:
        return override
    if model.overlap is not None:
        return OverlapInput(tuple(model.overlap.lags), model.overlap.popularity)
    return OverlapInput()


@functools.lru_cache(maxsize=512)
def _p_zero(experts: int, top_k: int, stats: OverlapInput, n_tokens: int, routing: str) -> np.ndarray:
    """Per-expert probability that one request's ``n_tokens`` consecutive tokens all miss the expert."""
    if routing == "uniform":
        return np.full(experts, ov.uniform_p_zero(experts, top_k, n_tokens))
    st = ov.OverlapStats.from_overlaps(experts=experts, top_k=top_k, overlaps=stats.lags,
                                       popularity=stats.popularity)
    if routing == "independent" or not stats.lags or n_tokens == 1:
        return ov.independent_p_zero(st.popularity, n_tokens)
    fit = ov.fit_window(st, n_tokens=n_tokens, method="auto")
    return np.asarray(fit.p_zero, dtype=float)


def expert_load(model: ModelSpec, ep: int, batch: np.ndarray, n_tokens, routing: str,
                stats: OverlapInput, placement: str = ov.DEFAULT_PLACEMENT) -> ExpertLoad:
    """Unique experts and (token, expert) pairs on the busiest of ``ep`` ranks; ``batch`` and ``n_tokens`` are
    aligned arrays (one fit per distinct token count)."""
    f = model.ffn
    batch = np.asarray(batch, dtype=float)
    n_tokens = np.broadcast_to(np.asarray(n_tokens, dtype=int), batch.shape)
    total, busiest = np.empty(batch.shape), np.empty(batch.shape)
    for n in np.unique(n_tokens):
        sel = n_tokens == n
        p0 = _p_zero(f.experts, f.top_k, stats, int(n), routing)
        total[sel] = ov.unique_experts(p0, batch[sel])
        busiest[sel] = total[sel] if ep == 1 else ov.busiest_rank_experts(p0, batch[sel], ranks=ep,
                                                                           placement=placement)
    pairs_total = batch * n_tokens * f.top_k
    share = np.where(total > 0, busiest / np.maximum(total, 1e-12), 0.0)
    return ExpertLoad(unique=busiest, pairs=pairs_total * share, unique_total=total)
