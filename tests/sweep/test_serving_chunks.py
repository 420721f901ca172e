"""A prefill chunk mixed into a decode iteration (docs/MODEL.md §4.7, sweep.serving.chunk_costs): its rows share the
pass's weight reads, so it costs T(n + c) − T(n) plus its own attention, not a pass of its own."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.pricing import price_pass, resolve
from simulator.specdec import StepCache
from simulator.specdec.serving import occupancy
from simulator.sweep.serving import chunk_costs, price_serving


def test_a_mixed_chunk_does_not_read_the_experts_again():
    """Qwen3-30B-A3B, a 2048-token chunk: beside 64 decode rows (which already touch most of the 128 experts) it
    costs less than as a pass of its own less one token (the former rule), and beside more rows no more than beside
    fewer (the rows' weights are read anyway); separate prefill is T(1, c)."""
    sc = resolve("qwen3-30b-a3b", "h100-sxm")
    occ = occupancy(64, 2048, 256, 1.0)
    cache = StepCache()
    (few, many) = chunk_costs(sc, occ, [8.0, 256.0], "mixed", cache)
    pre = sc.edit(routing="independent", context=0)
    chunk = float(price_pass(pre, [1], 2048, cache=cache, check_fit=False).time[0])
    old = chunk - float(price_pass(pre, [1], 1, cache=cache, check_fit=False).time[0])
    assert 0 < float(many) <= float(few) < old
    (sep, _) = chunk_costs(sc, occ, [8.0, 256.0], "separate", cache)
    assert float(sep) == pytest.approx(chunk, rel=0.05)  # (its context: the chunk's mean)


def test_no_prompt_no_chunk_cost():
    sc = resolve("qwen3-30b-a3b", "h100-sxm")
    costs = chunk_costs(sc, occupancy(8, 0, 64, 1.0), [np.array([8.0]), np.array([24.0])], "mixed", StepCache())
    assert all((c == 0).all() for c in costs)


def test_serving_prices_each_arm_with_its_own_pass():
    """The SD arm's chunk rides in the verify pass of B · (γ + 1) tokens, the plain arm's in the decode step of B."""
    sc = resolve("qwen3-30b-a3b", "h100-sxm")
    s = price_serving(sc, 32, 2048, 256, 3)
    assert s.t_chunk > 0 and s.t_chunk_sd > 0 and s.t_chunk_sd != s.t_chunk
