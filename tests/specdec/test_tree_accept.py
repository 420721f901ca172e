"""Draft trees: expected accepted length (bonus included) and round pricing; a 1-wide tree is the chain."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.errors import ParameterError
from simulator.overlap import full_tree
from simulator.specdec import Acceptance, accept_length
from simulator.specdec.tree import chain_parents, level_sizes, tree_accept_length


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.floats(0.0, 1.0))
def test_chain_is_the_geometric_sum(gamma, alpha):
    al = tree_accept_length(chain_parents(gamma), Acceptance.from_alpha(alpha))
    assert al == pytest.approx(float(accept_length(alpha, gamma)), rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.floats(0.01, 0.99), st.data())
def test_adding_a_leaf_never_lowers_accept_length(branching, alpha, data):
    parents = list(full_tree(branching))
    host = data.draw(st.integers(0, len(parents) - 1))
    acc = Acceptance.from_alpha(alpha)
    grown = parents + [host]  # a new leaf under any node (maybe a new depth level)
    assert tree_accept_length(grown, acc) >= tree_accept_length(parents, acc) - 1e-15


def test_full_tree_closed_form():
    a = (0.8, 0.6, 0.4)
    acc = Acceptance.from_positions(a)
    b = (2, 3, 1)
    expect, reach = 1.0, 1.0
    for ad, bd in zip(a, b, strict=True):
        reach *= 1 - (1 - ad) ** bd
        expect += reach
    assert tree_accept_length(full_tree(b), acc) == pytest.approx(expect, rel=1e-12)


def test_bad_trees_are_one_line_errors(capsys):
    with pytest.raises(ParameterError):
        full_tree([0, 2])  # a depth level without children
    for text in ("2,x", "", "0,2"):  # the --tree flag of sweep/explain/schedule: exit 2, one line
        assert main(["sweep", "--model", "qwen3-30b-a3b", "--tree", text, "--batch", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert "--tree" in err and "\n" not in err and "Traceback" not in err
    with pytest.raises(ParameterError):
        tree_accept_length([-1, 0, 0, 1], Acceptance.from_positions([0.5]))  # 2 deep, 1 position


def test_levels():
    assert level_sizes(full_tree([2, 2])).tolist() == [1, 2, 4]
    assert np.all(level_sizes(chain_parents(3)) == 1)
