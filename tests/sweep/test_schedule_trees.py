"""Draft trees on sweep and explain: a tree case beside the chains; a 1-wide tree reproduces the chain's row."""

import numpy as np
import pytest

from simulator.cli import main
from simulator.overlap import full_tree
from simulator.specdec.tree import chain_parents
from simulator.sweep import explain, run_sweep

KW = dict(gpus=1, batch=[1, 8], draft_len=[2, 3], modes=["refined"], context=256)


@pytest.fixture(scope="module")
def result():
    return run_sweep(["qwen3-30b-a3b"], ["h100-sxm"], trees=[full_tree([2, 2]), chain_parents(3)], **KW)


def test_tree_cases_named_and_chain_tree_equals_chain(result):
    names = [c.variant for c in result.cases]
    assert names == ["", "tree 2,2 (7 nodes)", "chain 3"]
    chain, tree, one_wide = result.cases
    assert tree.result.gammas.tolist() == [6]
    np.testing.assert_allclose(one_wide.result.speedup[0], chain.result.speedup[chain.at_gamma(3)], rtol=1e-12)
    assert len(result) == 2 * 2 + 2 + 2  # rows: chains (batch x draft length) + one per tree and batch


def test_explain_prices_the_tree():
    a = explain("qwen3-30b-a3b", "h100-sxm", None, batch=8, tree=full_tree([2, 2]), context=256, acceptance=0.75)
    assert a.tree == "tree 2,2 (7 nodes)" and a.draft_len == 6
    assert a.refined.accept_length == pytest.approx(1 + 0.9375 + 0.9375 ** 2, rel=1e-12)  # α = 0.75: 1-(1/4)^2


@pytest.mark.parametrize("flag", [["--tree", "2,-1"], ["--tree-parents", "/nonexistent/tree.txt"]])
def test_sweep_bad_tree_one_line(tmp_path, capsys, flag):
    out = tmp_path / "o"
    code = main(["sweep", "--model", "qwen3-30b-a3b", "--gpus", "1", "--batch", "1", "--no-plots", "--out",
                 str(out), *flag])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tree" in err.lower()
    assert not out.exists()
