"""Routing fits are shared: one tree fit per (statistics, tree, method), one latent parameter fit per statistics,
and long chain passes of the cost engine extend two cached fits instead of fitting every length."""

from __future__ import annotations

import numpy as np

import simulator.overlap.latent_union as union_module
from simulator.cost import routing
from simulator.cost.routing import LONG_PASS, OverlapInput
from simulator.overlap import OverlapStats, clear_tree_cache, fit_window, full_tree, tree_p_zero


def test_tree_fits_are_cached_and_read_only():
    clear_tree_cache()
    stats = OverlapStats.from_overlaps(16, 2, (0.5, 0.4, 0.35), "skew:0.2")
    first = tree_p_zero(stats, full_tree((2, 2)))
    assert tree_p_zero(stats, full_tree((2, 2))) is first
    assert not first.p_zero.flags.writeable
    for shape in ((3,), (2, 2, 2), (4, 1)):
        tree_p_zero(stats, full_tree(shape))
    info = union_module._latent_params.cache_info()
    assert info.misses == 1 and info.hits == 3  # one parameter fit for four trees of the same statistics


def test_long_passes_extend_two_cached_fits():
    """P(0^n) for n > LONG_PASS + 1 from the fits at LONG_PASS and LONG_PASS + 1 equals a direct fit."""
    stats = OverlapInput((0.6, 0.5, 0.45), "skew:0.25")
    routing._p_zero.cache_clear()
    n = LONG_PASS + 60
    got = routing._p_zero(16, 2, stats, n, "overlap")
    direct = fit_window(OverlapStats.from_overlaps(16, 2, stats.lags, stats.popularity), n, "ipf").p_zero
    assert np.max(np.abs(got - direct)) < 1e-12
    assert np.max(np.abs(got - direct) / np.maximum(direct, 1e-300)) < 1e-9
    info = routing._p_zero.cache_info()
    routing._p_zero(16, 2, stats, n + 500, "overlap")
    assert routing._p_zero.cache_info().misses == info.misses + 1  # the new length reused both fits


def test_statistics_that_group_alike_share_one_cold_chain_fit(monkeypatch):
    """Uniform popularity 4/64 and 8/128 with the same overlaps: one distinct expert each, the same targets, so
    the second window fit reuses the first's chain IPF; a fit that differs (other overlaps) does not."""
    from simulator.overlap import fit as fit_module

    fit_module.clear_cache()
    calls = []
    real = fit_module.chain_ipf

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(fit_module, "chain_ipf", counted)
    overlaps = (0.4, 0.3, 0.25)
    small = fit_window(OverlapStats.from_overlaps(64, 4, overlaps), 6, "ipf")
    large = fit_window(OverlapStats.from_overlaps(128, 8, overlaps), 6, "ipf")
    assert calls == [6]
    assert large.p_zero.shape == (128,) and np.array_equal(large.p_zero[:64], small.p_zero)
    assert large.iterations == small.iterations and large.max_error == small.max_error
    fit_window(OverlapStats.from_overlaps(128, 8, (0.4, 0.3, 0.2)), 6, "ipf")
    assert calls == [6, 6]
    fit_module.clear_cache()
    again = fit_window(OverlapStats.from_overlaps(128, 8, overlaps), 6, "ipf")
    assert calls == [6, 6, 6] and np.array_equal(again.p_zero, large.p_zero)
