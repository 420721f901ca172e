import numpy as np
import pytest

from simulator.errors import InfeasibleError, ParameterError, SimulatorError
from simulator.overlap import parse_popularity
from simulator.overlap.popularity import independent_overlap, water_fill


@pytest.mark.parametrize("e,k,x", [(128, 8, 0.118), (64, 6, 0.2), (16, 2, 0.9), (8, 2, 0.25)])
def test_skew_solves_the_independent_overlap(e, k, x):
    pi = parse_popularity(f"skew:{x}", e, k)
    assert pi.shape == (e,)
    assert pi.sum() == pytest.approx(k, abs=1e-9)
    assert pi.min() >= 0 and pi.max() <= 1
    assert independent_overlap(pi, k) == pytest.approx(x, rel=1e-9)
    assert np.all(np.diff(pi) <= 1e-15)  # Zipf: expert 0 most popular


def test_skew_caps_at_one_when_needed():
    pi = parse_popularity("skew:0.9", 16, 4)
    assert pi.max() == pytest.approx(1.0)
    assert pi.sum() == pytest.approx(4)


@pytest.mark.parametrize("spec", ["skew:0.05", "skew:1.2", "skew:11.8"])
def test_skew_outside_its_range_is_rejected(spec):
    with pytest.raises(InfeasibleError, match=r"k/E <= X <= 1") as err:
        parse_popularity(spec, 128, 8)
    assert "\n" not in str(err.value)
    if spec == "skew:11.8":
        assert "0.118" in str(err.value)


def test_uniform_and_zipf():
    assert np.allclose(parse_popularity("uniform", 10, 2), 0.2)
    z0 = parse_popularity("zipf:0", 10, 2)
    assert np.allclose(z0, 0.2)
    z = parse_popularity("zipf:1.2", 10, 2)
    assert z.sum() == pytest.approx(2) and np.all(np.diff(z) < 0)


def test_water_fill_caps_and_keeps_order():
    pi = water_fill([10, 1, 1, 1, 1], 2)
    assert pi[0] == 1.0 and np.allclose(pi[1:], 0.25)
    with pytest.raises(InfeasibleError, match="positive weight"):
        water_fill([1, 0, 0, 0], 2)


def test_file_of_weights(tmp_path):
    f = tmp_path / "w.txt"
    f.write_text("4, 3\n2 1\n")
    pi = parse_popularity(str(f), 4, 1)
    assert np.allclose(pi, [0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ParameterError, match="has 4 weights"):
        parse_popularity(str(f), 5, 1)
    g = tmp_path / "capped.txt"
    g.write_text("10 1 1 1 1")
    with pytest.warns(UserWarning, match="capped"):
        assert parse_popularity(str(g), 5, 2)[0] == 1.0


@pytest.mark.parametrize("spec", ["pareto:1", "zipf:abc", "zipf:-1", "no/such/file.txt"])
def test_bad_specs_are_one_line_errors(spec):
    with pytest.raises(SimulatorError) as err:
        parse_popularity(spec, 8, 2)
    assert "\n" not in str(err.value)
