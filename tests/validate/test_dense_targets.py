"""Dense targets (Llama-3.1, Qwen3-32B) through the step model and the verify pass."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cost.deployment import Deployment
from simulator.cost.step import step_time
from simulator.specdec.acceptance import Acceptance
from simulator.specdec.rounds import speculative
from simulator.specs import load_hardware, load_model


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-32b"])
def test_gamma_zero_is_plain_decoding(name):
    m, hw = load_model(name), load_hardware("h100-sxm")
    dep = Deployment(tp=2) if name == "qwen3-32b" else Deployment()
    r = speculative(m, hw, dep, [1, 8, 32], [0, 3], Acceptance.from_alpha(0.7), "eagle", context=1024)
    plain = step_time(m, hw, dep, [1, 8, 32], 1, context=1024).time
    np.testing.assert_allclose(r.t_decode, plain)
    np.testing.assert_allclose(r.speedup[0], 1.0)
    assert r.unique_decode.sum() == 0  # no MoE layers


def test_four_token_verify_at_batch_1_costs_about_one_decode_step():
    """Weight-bound at B = 1: reading the 8B weights dominates, so 4 tokens cost within 15% of 1."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    t = step_time(m, hw, Deployment(), [1, 1], [1, 4], context=1024).time
    assert t[1] >= t[0]
    assert t[1] / t[0] < 1.15
