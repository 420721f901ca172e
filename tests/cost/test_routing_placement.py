"""Busiest expert-parallel rank under placements, EPLB replicas and group-limited routing (docs/MODEL.md §3.2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import ParameterError
from simulator.overlap import busiest_rank_experts, parse_popularity, unique_experts
from simulator.overlap.placement import eplb_replicas, random_max_table, rank_max, replica_p_zero

FAST = settings(max_examples=30, deadline=None, derandomize=True)


@st.composite
def sorted_usage(draw):
    """(per-request miss probabilities sorted most used first, ranks, batch)."""
    ranks = draw(st.integers(2, 5))
    e = ranks * draw(st.integers(1, 5))
    p0 = np.sort(np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=e, max_size=e))))
    return p0, ranks, draw(st.integers(1, 6))


@FAST
@given(sorted_usage())
def test_random_placement_lies_between_balanced_and_contiguous(case):
    """With popularity sorted by index, at the usage the placement was balanced on (one request: batch 1), greedy
    packing is no worse than a random placement and contiguous blocks no better; random also lies between the mean
    rank and min(U, E/R)."""
    p0, ranks, _ = case
    got = {k: float(busiest_rank_experts(p0, 1, ranks=ranks, placement=k)) for k in ("balanced", "random",
                                                                                        "contiguous")}
    assert got["balanced"] - 1e-9 <= got["random"] <= got["contiguous"] + 1e-9
    u = float(unique_experts(p0, 1))
    assert u / ranks - 1e-9 <= got["random"] <= min(u, p0.size // ranks) + 1e-9


@FAST
@given(st.sampled_from([(32, 4), (128, 8)]), st.sampled_from([2, 4, 8]), st.floats(0.0, 2.0), st.integers(1, 8),
       st.integers(1, 32))
def test_zipf_popularity_orders_the_placements_at_every_batch(ek, ranks, s, n, b):
    """Zipf popularity, any window and batch: balanced ≤ random ≤ contiguous up to 0.5% (a placement balanced on
    one request's usage need not be the best one once experts saturate at large batch; the largest inversion seen
    in 1,500 random cases was 0.05%)."""
    e, k = ek
    p0 = (1 - parse_popularity(f"zipf:{s}", e, k)) ** n
    got = {p: float(busiest_rank_experts(p0, b, ranks=ranks, placement=p)) for p in ("balanced", "random",
                                                                                       "contiguous")}
    assert got["balanced"] <= got["random"] * 1.005 and got["random"] <= got["contiguous"] * 1.005


def test_greedy_packing_pairs_hot_with_cold_experts():
    """Round-robin by usage would put the two hottest of (1, .5, .5, 0) on different ranks with a .5 each (1.5);
    greedy packing puts the sure expert with the unused one (1.25), the best of the three placements."""
    p0 = np.array([0.0, 0.5, 0.5, 1.0])
    assert float(busiest_rank_experts(p0, 1, ranks=2, placement="balanced")) == pytest.approx(1.25)
    assert float(busiest_rank_experts(p0, 1, ranks=2, placement="random")) == pytest.approx((1.5 + 1.5 + 1.25) / 3)


def test_random_placement_matches_monte_carlo_over_placements():
    rng = np.random.default_rng(1)
    p0 = rng.uniform(0.1, 0.99, 24)
    batch = np.array([1, 3])
    q = 1 - p0[None, :] ** batch[:, None]
    draws = []
    for _ in range(3000):  # exact busiest rank of one uniformly random equal-size placement, averaged
        place = np.empty(24, dtype=int)
        place[rng.permutation(24)] = np.arange(24) % 4
        draws.append(rank_max(q, place))
    draws = np.array(draws)
    exact = busiest_rank_experts(p0, batch, ranks=4, placement="random")
    se = draws.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(exact - draws.mean(axis=0)) < 4 * se + 1e-12)


def test_random_max_table_small_cases():
    """M(u) for 4 slots on 2 ranks: u=0 → 0, u=1 → 1, u=2 → 1 + P(both on one rank) = 1 + 2/6, u=4 → 2."""
    m = random_max_table(4, 2)
    assert m == pytest.approx([0, 1, 1 + 2 / 6, 2, 2])
    assert random_max_table(6, 1) == pytest.approx(np.arange(7))


@FAST
@given(sorted_usage(), st.sampled_from(("balanced", "contiguous", "random")))
def test_one_always_active_group_is_plain_routing(case, placement):
    """Group-limited routing with n_group = 1 (the one group always picked) equals plain routing."""
    p0, ranks, b = case
    plain = busiest_rank_experts(p0, b, ranks=ranks, placement=placement)
    grouped = busiest_rank_experts(p0, b, ranks=ranks, placement=placement,
                                   groups=(np.zeros(p0.size, dtype=int), np.zeros(1)))
    assert float(grouped) == pytest.approx(float(plain), abs=1e-9)


def test_group_limited_busiest_rank_matches_monte_carlo():
    """The latent group-activity model, simulated directly: groups active with a_g, experts of an active group used
    with q_e / a_g; fixed (contiguous) and random placements."""
    rng = np.random.default_rng(2)
    e, ranks, groups = 16, 4, 4
    gid = np.arange(e) // 4
    p0 = rng.uniform(0.5, 0.95, e)
    g_zero = np.array([0.3, 0.5, 0.6, 0.8])
    q = 1 - p0
    a = np.maximum(1 - g_zero, np.array([q[gid == g].max() for g in range(groups)]))
    n = 200_000
    active = rng.random((n, groups)) < a
    used = (rng.random((n, e)) < q / a[gid]) & active[:, gid]
    contiguous = used.reshape(n, ranks, e // ranks).sum(axis=2).max(axis=1).mean()
    got = busiest_rank_experts(p0, 1, ranks=ranks, placement="contiguous", groups=(gid, g_zero))
    assert float(got) == pytest.approx(contiguous, abs=0.01)
    slots = np.argsort(rng.random((n, e)), axis=1) // (e // ranks)  # a random placement per draw
    counts = np.zeros((n, ranks))
    np.add.at(counts, (np.repeat(np.arange(n), e), slots.ravel()), used.ravel())
    got = busiest_rank_experts(p0, 1, ranks=ranks, placement="random", groups=(gid, g_zero))
    assert float(got) == pytest.approx(counts.max(axis=1).mean(), abs=0.01)


def test_group_limited_routing_concentrates_contiguous_groups():
    """One token of DeepSeek-V3's uniform routing (8 groups, 4 picked, contiguous groups on 8 ranks): each picked
    group sits on one rank, so the busiest rank holds more experts than under plain routing."""
    e, k = 256, 8
    p0 = np.full(e, 1 - k / e)
    gid = np.arange(e) // 32
    plain = float(busiest_rank_experts(p0, 1, ranks=8, placement="contiguous"))
    grouped = float(busiest_rank_experts(p0, 1, ranks=8, placement="contiguous", groups=(gid, np.full(8, 0.5))))
    assert grouped > plain + 0.5


def test_eplb_replicas_rule():
    load = np.array([5.0, 3.0, 1.0, 1.0])
    assert list(eplb_replicas(load, 0, 4)) == [1, 1, 1, 1]
    assert list(eplb_replicas(load, 1, 4)) == [2, 1, 1, 1]
    assert list(eplb_replicas(load, 2, 4)) == [2, 2, 1, 1]  # 5/2 < 3: the second replica goes to expert 1
    assert list(eplb_replicas(load, 3, 4)) == [3, 2, 1, 1]
    assert list(eplb_replicas(load, 4, 2)) == [2, 2, 2, 2]  # at most one copy per rank
    with pytest.raises(ParameterError, match="'redundant'"):
        eplb_replicas(load, 5, 2)


@FAST
@given(sorted_usage(), st.integers(0, 6))
def test_replicas_split_an_experts_requests(case, n):
    """A request uses one copy: the copies' usage adds up to the expert's; no replicas → the same busiest rank."""
    p0, ranks, b = case
    c = eplb_replicas(1 - p0, n, ranks)
    phys, logical = replica_p_zero(p0, c)
    assert phys.size == p0.size + n
    assert np.allclose(np.bincount(logical, weights=1 - phys, minlength=p0.size), 1 - p0)
    none = eplb_replicas(1 - p0, 0, ranks)
    assert float(busiest_rank_experts(p0, b, ranks=ranks, placement="balanced", replicas=none)) == \
        pytest.approx(float(busiest_rank_experts(p0, b, ranks=ranks, placement="balanced")))


def test_replicas_can_raise_the_busiest_rank_of_weight_reads():
    """Why 'replicas never increase the busiest rank' is not an invariant of weight reads: two experts used by every
    request on 2 ranks touch 1 per rank; with a copy of each on both ranks, each copy is used by half the requests,
    so one rank often touches both copies: exactly 1.5, and with the copies treated as independent Bernoulli(1/2)
    (the model's approximation across experts) P(max ≥ 1) + P(max ≥ 2) = (1 − (1/4)²) + (1 − (3/4)²) = 1.375."""
    p0 = np.zeros(2)
    assert float(busiest_rank_experts(p0, 1, ranks=2, placement="balanced")) == pytest.approx(1.0)
    two = busiest_rank_experts(p0, 1, ranks=2, placement="balanced", replicas=np.array([2, 2]))
    assert float(two) == pytest.approx(2 - (1 / 4) ** 2 - (3 / 4) ** 2)


def test_a_random_placement_needs_equal_ranks():
    with pytest.raises(ParameterError, match="'ranks' parameter of busiest_rank_experts must divide the 12"):
        busiest_rank_experts(np.full(12, 0.5), 1, ranks=5, placement="random")
    copies = eplb_replicas(np.ones(12), 2, 4)
    with pytest.raises(ParameterError, match="must divide the 14"):  # 12 experts + 2 replicas on 4 ranks
        busiest_rank_experts(np.full(12, 0.5), 1, ranks=4, placement="random", replicas=copies)
