"""Shapley attribution (sweep/shapley.py, explain): efficiency on priced cases, the axioms on constructed games,
players read from the Mechanisms declaration, and the prior's readings."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cost.deployment import PRESETS, PRIOR_READINGS, Mechanisms
from simulator.sweep import explain
from simulator.sweep.shapley import attribute, coalition_mechanisms, coalitions, players, shapley_values

MODELS = ("olmoe-1b-7b", "qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-20b")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(MODELS), batch=st.sampled_from([1, 3, 16, 64]), gamma=st.integers(1, 6))
def test_contributions_sum_to_total(model, batch, gamma):
    a = explain(model, "h100-sxm", batch=batch, draft_len=gamma)
    ratio, speed = a.shapley
    for sh, q in ((ratio, "decode_verify_ratio"), (speed, "speedup")):
        assert sh.quantity == q
        assert sum(sh.contributions.values()) == pytest.approx(sh.total, abs=1e-9)
        # the total is the walk's prior -> refined change, and the base is the prior
        assert sh.total == pytest.approx(getattr(a.refined, q) - getattr(a.prior, q), abs=1e-12)
        assert sh.base == pytest.approx(getattr(a.prior, q), abs=1e-12)


def test_axioms_on_a_constructed_game():
    # a = 2, b = 2 interchangeable (symmetry), c changes nothing (dummy), a·b interaction of 1
    names = ("a", "b", "c")

    def v(s):
        return 2.0 * ("a" in s) + 2.0 * ("b" in s) + 1.0 * ("a" in s and "b" in s)

    phi = shapley_values(names, v)
    assert phi["c"] == 0.0
    assert phi["a"] == pytest.approx(phi["b"]) == pytest.approx(2.5)
    sh = attribute("x", names, {s: v(s) for s in coalitions(names)})
    assert sh.first == {"a": 2.0, "b": 2.0, "c": 0.0} and sh.last == {"a": 3.0, "b": 3.0, "c": 0.0}
    assert sum(sh.contributions.values()) == pytest.approx(sh.total) == pytest.approx(5.0)


def test_a_mechanism_that_changes_nothing_gets_zero():
    # L2 serves only weight re-reads beyond one MoE tile of rows: at batch 1 it changes nothing in any coalition
    a = explain("qwen3-235b-a22b", "h100-sxm", batch=1, draft_len=3)
    ratio, speed = a.shapley
    for sh in (ratio, speed):
        assert sh.first["l2"] == 0.0 and sh.last["l2"] == 0.0
        assert sh.contributions["l2"] == pytest.approx(0.0, abs=1e-15)
        assert sh.contributions["routing"] > 0 and sh.contributions["fixed_costs"] > 0


def test_players_come_from_the_declaration():
    names = players(PRESETS["prior"], PRESETS["refined"])
    declared = [f.name for f in fields(Mechanisms)]
    assert list(names) == [n for n in declared if getattr(PRESETS["prior"], n) != getattr(PRESETS["refined"], n)]
    assert set(names) >= {"routing", "kernel_curves", "fixed_costs", "l2"}
    assert len(coalitions(names)) == 2 ** len(names)
    full = coalition_mechanisms(PRESETS["prior"], PRESETS["refined"], names)
    assert full == PRESETS["refined"] and coalition_mechanisms(PRESETS["prior"], PRESETS["refined"], ()) == \
        PRESETS["prior"]


def test_prior_readings():
    assert PRIOR_READINGS[0] == "prior" and all(r in PRESETS for r in PRIOR_READINGS)
    a = explain("qwen3-235b-a22b", "h100-sxm", batch=1, draft_len=3)
    q = {r: ratio for r, ratio, _ in a.prior_range}
    assert q["prior"] == pytest.approx(a.prior.decode_verify_ratio)
    # per-expert floors make verify (more unique experts) pay more fixed cost than kernel floors do
    assert q["prior-no-fixed"] < q["prior-kernel-floors"] and q["prior"] < q["prior-kernel-floors"]


def test_explain_json_attribution():
    out = subprocess.run([sys.executable, "-m", "simulator", "explain", "--model", "olmoe-1b-7b", "--batch", "4",
                          "--json"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    att = d["attribution"]
    assert att["method"] == "shapley" and att["quantity"] == "decode_verify_ratio"
    assert set(att["contributions"]) >= {"routing", "kernel_curves", "fixed_costs", "l2"}
    assert sum(att["contributions"].values()) == pytest.approx(att["total"], abs=1e-9)
    assert [x["quantity"] for x in d["attributions"]] == ["decode_verify_ratio", "speedup"]
    assert [r["reading"] for r in d["prior_range"]] == list(PRIOR_READINGS)
    assert set(d["walk_order"]["speedup"]["routing"]) == {"first", "last", "shapley"}
