"""Draft trees: the exact tree fit against the chain and the 2^N table, closed forms, invariants, the synthetic tree
router, and bad input (docs/MODEL.md §2.15)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from overlap_strategies import FAST, real_profile

from simulator.cli import main
from simulator.errors import ParameterError
from simulator.overlap import (
    OverlapStats,
    Persistent,
    check_parents,
    fit_window,
    full_tree,
    predict,
    predict_tree,
    tree_p_zero,
)
from simulator.overlap.constraints import pair_table
from simulator.overlap.maxent import table_ipf
from simulator.overlap.maxent.tree_ipf import tree_distances, tree_ipf
from simulator.traces.synth_tree import route_tree, router_trace, tree_empirical_unique, tree_router
from simulator.traces.trace import layer_stats

STATS = OverlapStats.from_overlaps(16, 2, (0.45, 0.35, 0.3, 0.27), "skew:0.2")


def _path(n: int) -> tuple:
    return (-1,) + tuple(range(n - 1))


@pytest.mark.parametrize("n", [2, 5, 9])
def test_one_wide_tree_is_the_chain(n):
    tree = tree_p_zero(STATS, _path(n), method="ipf", tol=1e-12).p_zero
    chain = fit_window(STATS, n, "ipf", tol=1e-12).p_zero
    assert np.abs(tree - chain).max() < 1e-9


@pytest.mark.parametrize("shape", [(2, 2), (3, 1), (5,)])
def test_tree_ipf_is_the_table_ipf(shape):
    """The junction-tree IPF reaches the maximum-entropy law of the whole 2^N table under the same pair constraints."""
    parents = full_tree(shape)
    n = len(parents)
    pi = STATS.popularity
    targets = {d: pair_table(pi, STATS.pair_probs[:, d - 1]) for d in range(1, 5)}
    positions, tabs = [], []
    for v, near in enumerate(tree_distances(parents, 4)):
        for u, d in sorted(near.items()):
            if u > v:
                positions.append((v, u))
                tabs.append(targets[d])
    order = sorted(range(len(positions)), key=lambda i: (positions[i][1], positions[i][0]))
    ref = table_ipf(n, tuple(positions[i] for i in order), [tabs[i] for i in order], tol=1e-12, max_iter=50000)
    res = tree_ipf(parents, 4, pi, targets, tol=1e-12)
    assert res.converged and ref.converged
    assert np.abs(res.p_zero - ref.table[:, 0]).max() < 1e-9


def test_lag_one_is_shape_free_markov():
    """With lag-1 statistics only, the maximum-entropy law of any tree is the Markov chain on the tree:
    P(0…0) = (1 − π)·P(0 | 0)^(N−1), whatever the shape."""
    stats = OverlapStats.from_overlaps(16, 2, (0.45,), "skew:0.2")
    star, path = full_tree((6,)), _path(7)
    a = tree_p_zero(stats, star, method="ipf").p_zero
    b = fit_window(stats, 7, "markov").p_zero
    assert np.abs(a - b).max() < 1e-12
    assert np.abs(tree_p_zero(stats, path, method="ipf").p_zero - b).max() < 1e-12


def test_stationary_tree_on_a_path_is_the_junction_chain():
    assert np.abs(tree_p_zero(STATS, _path(9), method="stationary").p_zero
                  - fit_window(STATS, 9, "junction").p_zero).max() < 1e-8


def test_wide_tree_ipf_refuses_instead_of_dropping_lags():
    """No lag is dropped silently: ipf refuses a tree whose cliques would be too large (naming the lags and the
    latent method); the default (latent) uses every lag."""
    with pytest.raises(ParameterError, match=r"lags 2\.\.2.*latent"):
        tree_p_zero(STATS, full_tree((12,)), method="ipf")  # 13 nodes pairwise within distance 2
    assert tree_p_zero(STATS, full_tree((2, 2)), method="ipf").approximation == ""
    fit = tree_p_zero(STATS, full_tree((12,)))
    assert fit.method == "latent" and fit.lags_used == 4


@st.composite
def small_tree(draw, max_nodes: int = 7):
    n = draw(st.integers(2, max_nodes))
    return (-1,) + tuple(draw(st.integers(0, v - 1)) for v in range(1, n))


# CI's derandomized run found it: always-active experts (π = 1) made the stationary chain's product 0 · log 0 = nan
_ALWAYS_ON = OverlapStats.from_overlaps(experts=4, top_k=3, overlaps=(5 / 6, 5 / 6),
                                        popularity=np.array([1.0, 1.0, 0.5, 0.5]))


@FAST
@given(real_profile(max_experts=5, max_lag=3), small_tree(), st.sampled_from(["ipf", "stationary", "latent"]))
@example(_ALWAYS_ON, (-1, 0), "stationary")
def test_tree_invariants(stats, parents, method):
    """Adding a leaf never removes experts; the union lies between its longest path's and that of N independent
    tokens (the latent model: within its stated numerical error 0.3%); relabelling the nodes (siblings included)
    changes nothing."""
    u = float(predict_tree(stats, parents, method=method).unique_experts)
    n = len(parents)
    grown = float(predict_tree(stats, parents + (n - 1,), method=method).unique_experts)
    assert grown >= u - 1e-7
    depth = np.zeros(n, dtype=int)
    for v in range(1, n):
        depth[v] = depth[parents[v]] + 1
    longest = float(predict_tree(stats, _path(int(depth.max()) + 1), method=method).unique_experts)
    independent = float(predict_tree(stats, parents, method=method).independent)
    slack = 1e-7 if method != "latent" else 3e-3 * independent
    assert longest - 1e-7 <= u <= independent + slack
    perm = np.random.default_rng(n).permutation(n)  # new label of old node v is perm[v]
    relabelled = [0] * n
    for v, p in enumerate(parents):
        relabelled[perm[v]] = -1 if p < 0 else int(perm[p])
    assert abs(float(predict_tree(stats, relabelled, method=method).unique_experts) - u) < 1e-7


def test_persistent_mixture_and_fit():
    """The mixture is the share-weighted P(0…0) of its two latent states; without persistence (floor = Σπ²/k) it is
    the plain fit; fit_persistent finds a floor above Σπ²/k on a router with a persistent component."""
    from simulator.overlap import Persistent
    from simulator.traces import fit_persistent

    parents = full_tree((2, 2, 2))
    plain = tree_p_zero(STATS, parents).p_zero
    assert np.abs(tree_p_zero(STATS, parents, persistent=Persistent(STATS.skew)).p_zero - plain).max() < 1e-12
    with_ws = float(predict_tree(STATS, parents, persistent=Persistent(0.3)).unique_experts)
    assert with_ws < float(predict_tree(STATS, parents).unique_experts)
    router = tree_router(32, 4, persistence=0.5, context=0.4, seed=3)
    trace = router_trace(router, 300, 120, seed=4)
    pers = fit_persistent(trace)
    stats = layer_stats(trace, 0, max_lag=4)
    assert stats.skew < pers.floor < stats.overlaps[-1]
    assert 0 < pers.share < 1


def test_tree_router_matches_prediction_on_a_small_tree():
    """Synthetic tree router (AR(1) hidden state on the tree): the prediction from its chain statistics is within
    6% of the Monte-Carlo count on a small tree."""
    router = tree_router(32, 4, persistence=0.5, seed=5)
    stats = layer_stats(router_trace(router, 400, 128, seed=6), 0, max_lag=4)
    pooled = OverlapStats(np.full(32, 4 / 32), 4, stats.overlaps)
    parents = full_tree((3, 2))
    routing = route_tree(router, parents, 3000, seed=7)
    for b in (1, 4):
        mc, _ = tree_empirical_unique(routing, 32, b)
        pred = float(predict_tree(pooled, parents, b, method="ipf").unique_experts)
        assert abs(pred / mc - 1) < 0.06, (b, pred, mc)


def test_bad_parents():
    for bad, word in [((0, -1), "cycle"), ((-1, 5), "not a node"), ((-1, -1), "one root"), ((1, 2, 0), "one root"),
                      ((-1, 2, 1), "cycle")]:
        with pytest.raises(ParameterError, match=word):
            check_parents(bad)
    with pytest.raises(ParameterError, match="MAX_TREE_NODES"):
        full_tree((64, 64))
    with pytest.raises(ParameterError):
        full_tree((2, 0))


def _run(capsys, *argv):
    code = main(["overlap", "predict", "--experts", "64", "--top-k", "8", "--overlap", "0.45,0.35", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_tree_json(capsys, tmp_path):
    code, out, err = _run(capsys, "--tree", "2,2", "--ranks", "8", "--json")
    assert code == 0, err
    data = json.loads(out)
    for key in ("unique_experts", "unique_experts_std", "independent", "uniform", "busiest_rank_experts"):
        assert isinstance(data[key], float)
    assert data["nodes"] == 7 and data["lags_used"] == 2
    path = tmp_path / "tree.txt"
    path.write_text("-1 0 0 1 1 2 2\n")
    code, out2, err = _run(capsys, "--tree-parents", str(path), "--ranks", "8", "--json")
    assert code == 0, err
    assert json.loads(out2)["unique_experts"] == pytest.approx(data["unique_experts"], abs=1e-9)


@pytest.mark.parametrize("argv", [("--tree", "2,0"), ("--tree", "-1"), ("--tree", "64,64,2"),
                                  ("--tree-parents", "CYCLE"), ("--tree-parents", "BADINDEX"),
                                  ("--tree-parents", "missing.txt"), ("--persistent", "1.5", "--tree", "2")])
def test_cli_tree_bad_input(capsys, tmp_path, argv):
    files = {"CYCLE": "-1 2 1\n", "BADINDEX": "-1 0 7\n"}
    argv = tuple(str(tmp_path / a) if a in files else a for a in argv)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err, err


def test_step_prices_the_verify_pass_of_a_tree():
    """A verify pass over a draft tree takes its unique experts from the tree fit: a path of N nodes is the chain of N
    tokens (the ipf switch against the chain's ipf; the default latent model against the chain's latent); a star of
    N nodes (every pair within distance 2, where the overlap is higher than at the path's longer distances) touches
    fewer experts than the path; the decode pass (1 token) is unchanged; the step time follows the expert reads."""
    from simulator.cost.deployment import Deployment
    from simulator.cost.routing import OverlapInput
    from simulator.cost.step import step_time
    from simulator.specs.catalog import load_hardware, load_model

    model, hw = load_model("olmoe-1b-7b"), load_hardware("h100-sxm")
    dep = Deployment(tp=1)
    lags = (0.45, 0.35, 0.3)
    chain = step_time(model, hw, dep, [1, 4], 7, 1024, overlap=OverlapInput(lags))
    ipf = step_time(model, hw, dep, [1, 4], 7, 1024, overlap=OverlapInput(lags, tree=_path(7), tree_method="ipf"))
    assert np.allclose(ipf.unique_experts_total, chain.unique_experts_total, rtol=1e-9)
    path = step_time(model, hw, dep, [1, 4], 7, 1024, overlap=OverlapInput(lags, tree=_path(7)))
    st_ = OverlapStats.from_overlaps(model.ffn.experts, model.ffn.top_k, lags)
    latent = [float(predict(st_, 7, b, method="latent").unique_experts) for b in (1, 4)]
    assert np.allclose(path.unique_experts_total, latent, rtol=1e-9)
    star = step_time(model, hw, dep, [1, 4], 7, 1024, overlap=OverlapInput(lags, tree=full_tree((6,))))
    assert np.all(star.unique_experts_total < path.unique_experts_total - 0.1)
    assert np.all(star.time < path.time)
    one = step_time(model, hw, dep, [1, 4], 1, 1024, overlap=OverlapInput(lags, tree=full_tree((6,))))
    base = step_time(model, hw, dep, [1, 4], 1, 1024, overlap=OverlapInput(lags))
    assert np.allclose(one.time, base.time)


def test_cli_fit_reports_the_persistent_component(capsys, tmp_path):
    path = str(tmp_path / "t.npz")
    assert main(["overlap", "synth", "--experts", "32", "--top-k", "4", "--sequences", "64", "--tokens", "96",
                 "--context", "0.4", "--out", path]) == 0
    capsys.readouterr()
    assert main(["overlap", "fit", path, "--tokens", "2", "--samples", "50", "--json"]) == 0
    data = json.loads(capsys.readouterr()[0])
    (pers,) = data["persistent"]
    skew = data["summaries"][0]["skew"] if "summaries" in data else 4 / 32
    assert pers["layer"] == 0 and skew < pers["floor"] < 1 and 0 < pers["share"] < 1


def test_step_tree_parents_is_the_full_tree(capsys, tmp_path):
    """step --tree-parents reads the same parent lists as overlap predict: the file of the 2,2 tree prices exactly
    as --tree 2,2 (and a bad branching names the --tree flag)."""
    path = tmp_path / "tree.txt"
    path.write_text("-1 0 0 1 1 2 2\n")
    base = ["step", "--model", "olmoe-1b-7b", "--hardware", "h100-sxm", "--tp", "1", "--batch", "1,4", "--json"]
    assert main([*base, "--tree", "2,2"]) == 0
    full = json.loads(capsys.readouterr()[0])
    assert main([*base, "--tree-parents", str(path)]) == 0
    general = json.loads(capsys.readouterr()[0])
    assert general == full and full[0]["tokens"] == 7
    path.write_text("-1 0 0 1 1 2\n")
    assert main([*base, "--tree-parents", str(path)]) == 0
    assert json.loads(capsys.readouterr()[0])[0]["tokens"] == 6
    assert main([*base, "--tree", "2,0"]) == 2
    assert capsys.readouterr()[1].startswith("error: --tree: must be")


def test_fitted_share_at_the_bound_survives_another_popularity():
    """fit_persistent clips the share to 1/m2 under the trace's popularity; a prediction with uniform popularity (a
    slightly different Σπ²) takes a share within 1% above its bound at the bound, and still refuses a larger one."""
    pi = np.full(64, 8 / 64)
    w, _, m2 = Persistent(0.126004, 0.992808).components(pi, 8)
    assert w[0] == pytest.approx(1 / m2) and m2 > 1
    with pytest.raises(ParameterError, match="share"):
        Persistent(0.2, 0.7).components(pi, 8)  # bound 0.625
