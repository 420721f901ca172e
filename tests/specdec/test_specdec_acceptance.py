"""Acceptance: AL(α, γ) formula, α ↔ AL conversion, per-position acceptance, input errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import ParameterError
from simulator.specdec import (
    Acceptance,
    accept_length,
    accept_length_positions,
    alpha_from_accept_length,
)

alphas = st.floats(0.0, 1.0, allow_nan=False)
gammas = st.integers(0, 16)


@settings(max_examples=200, deadline=None)
@given(alpha=st.floats(0.0, 0.999), gamma=gammas)
def test_accept_length_matches_closed_form(alpha, gamma):
    closed = (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)
    assert accept_length(alpha, gamma) == pytest.approx(closed, rel=1e-12, abs=1e-12)


@given(gamma=gammas)
def test_accept_length_limits(gamma):
    assert accept_length(1.0, gamma) == gamma + 1
    assert accept_length(0.0, gamma) == 1.0
    assert accept_length(0.6, 0) == 1.0


@settings(max_examples=200, deadline=None)
@given(alpha=alphas, gamma=st.integers(1, 16))
def test_accept_length_bounds_and_monotone(alpha, gamma):
    al = float(accept_length(alpha, gamma))
    assert 1.0 <= al <= gamma + 1
    assert float(accept_length(alpha, gamma + 1)) >= al
    assert float(accept_length(min(1.0, alpha + 0.01), gamma)) >= al


@settings(max_examples=300, deadline=None)
@given(alpha=alphas, gamma=st.integers(1, 12))
def test_alpha_accept_length_round_trip(alpha, gamma):
    al = float(accept_length(alpha, gamma))
    back = alpha_from_accept_length(al, gamma)
    # α is recovered wherever AL depends on it measurably; AL is always recovered
    assert float(accept_length(back, gamma)) == pytest.approx(al, rel=1e-12, abs=1e-12)
    assert back == pytest.approx(alpha, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(frac=st.floats(0.0, 1.0), gamma=st.integers(1, 12))
def test_accept_length_to_alpha_round_trip(frac, gamma):
    al = 1.0 + frac * gamma
    a = alpha_from_accept_length(al, gamma)
    assert 0.0 <= a <= 1.0
    assert float(accept_length(a, gamma)) == pytest.approx(al, rel=1e-12)


def test_alpha_from_accept_length_vectorised():
    al = np.array([1.0, 2.0, 3.0, 4.0])
    a = alpha_from_accept_length(al, 3)
    assert a.shape == (4,) and a[0] == 0.0 and a[-1] == 1.0
    assert np.allclose(accept_length(a, 3), al, rtol=1e-12)


@pytest.mark.parametrize("al,gamma", [(0.9, 3), (4.5, 3), (2.5, 1), (float("nan"), 3)])
def test_impossible_accept_length_is_a_one_line_error(al, gamma):
    with pytest.raises(ParameterError) as exc:
        alpha_from_accept_length(al, gamma)
    msg = str(exc.value)
    assert "\n" not in msg and f"[1, {gamma + 1}]" in msg


def test_accept_length_needs_a_draft_length():
    with pytest.raises(ParameterError):
        alpha_from_accept_length(1.0, 0)


@settings(max_examples=100, deadline=None)
@given(alpha=alphas, n=st.integers(1, 10))
def test_constant_per_position_equals_per_token(alpha, n):
    g = np.arange(n + 1)
    assert np.allclose(accept_length_positions([alpha] * n, g), accept_length(alpha, g), rtol=1e-12)


@settings(max_examples=100, deadline=None)
@given(probs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8))
def test_per_position_accept_length(probs):
    g = np.arange(len(probs) + 1)
    al = accept_length_positions(probs, g)
    assert al[0] == 1.0
    assert np.all(np.diff(al) >= 0)
    # expected value by direct enumeration of where the first rejection happens
    p = np.asarray(probs)
    expected = 1.0 + sum(np.prod(p[: i + 1]) for i in range(len(p)))
    assert al[-1] == pytest.approx(expected, rel=1e-12)


def test_per_position_too_short():
    with pytest.raises(ParameterError, match="positions"):
        Acceptance.from_positions([0.8, 0.7]).accept_length([1, 2, 3])


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_alpha(bad):
    with pytest.raises(ParameterError):
        Acceptance.from_alpha(bad)


def test_acceptance_objects():
    a = Acceptance.from_accept_length(2.5, 3)
    assert float(a.accept_length(3)[0]) == pytest.approx(2.5, rel=1e-12)
    assert "2.5" in a.label
    p = Acceptance.from_positions([0.9, 0.8, 0.7])
    eff = p.effective_alpha([1, 3])
    assert eff[0] == pytest.approx(0.9)
    assert float(accept_length(eff[1], 3)) == pytest.approx(float(p.accept_length(3)[0]), rel=1e-12)
    with pytest.raises(ParameterError):
        Acceptance()
    with pytest.raises(ParameterError):
        Acceptance(alpha=0.5, per_position=(0.5,))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6), st.integers(0, 12))
def test_engine_rates_extension_keeps_the_logged_prefix(draws, extra):
    u = np.cumprod(sorted(draws, reverse=True))  # non-increasing rates
    base = Acceptance.from_engine_rates(u)
    ext = Acceptance.from_engine_rates(u, extend_to=u.size + extra)
    assert len(ext.per_position) == u.size + extra
    g = np.arange(u.size + 1)
    np.testing.assert_allclose(ext.accept_length(g), base.accept_length(g), rtol=1e-12)
    assert np.all(np.diff(ext.accept_length(np.arange(u.size + extra + 1))) >= -1e-12)
