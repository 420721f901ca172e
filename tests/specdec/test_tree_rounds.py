"""A 1-wide tree priced end to end equals the chain (speedup), and a wider tree costs a larger verify pass."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.deployment import Mechanisms
from simulator.overlap import full_tree
from simulator.pricing import Layout, default_deployment
from simulator.specdec import Acceptance, StepCache, speculative
from simulator.specdec.tree import chain_parents, speculative_tree
from simulator.specs.catalog import load_hardware, load_model

MODEL = load_model("qwen3-30b-a3b")
HW = load_hardware("h100-sxm")
DEP = default_deployment(MODEL, HW, Layout(gpus=1))
CACHE = StepCache()


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 6), st.floats(0.05, 0.95), st.sampled_from([1, 3, 16, 64]),
       st.sampled_from(["eagle", "ratio:0.1"]))
def test_one_wide_tree_equals_chain(gamma, alpha, batch, drafter):
    acc = Acceptance.from_alpha(alpha)
    chain = speculative(MODEL, HW, DEP, [batch], [gamma], acc, drafter, 512, Mechanisms(), None, CACHE)
    tree = speculative_tree(MODEL, HW, DEP, [batch], chain_parents(gamma), acc, drafter, 512, Mechanisms(), None,
                            CACHE)
    np.testing.assert_allclose(tree.speedup, chain.speedup[0], rtol=1e-12)


def test_wider_tree_verifies_more_and_drafts_per_level():
    acc = Acceptance.from_alpha(0.6)
    t = speculative_tree(MODEL, HW, DEP, [1, 32], full_tree([2, 2]), acc, "ratio:0.1", 512, Mechanisms(), None, CACHE)
    c = speculative_tree(MODEL, HW, DEP, [1, 32], chain_parents(6), acc, "ratio:0.1", 512, Mechanisms(), None, CACHE)
    assert t.nodes == 7 == c.nodes
    assert t.accept_length < c.accept_length or t.accept_length > c.accept_length  # differs: different shape
    assert np.all(t.t_draft < c.t_draft)  # 2 draft levels vs 6
