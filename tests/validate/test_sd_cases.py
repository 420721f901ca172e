"""Public SD cases (validate.sd_cases; the study analysis sd_validation, experiments/sd-validation.yaml):
predictions never depend on the measured speedups, each case goes through the one pricing path, errors and loss
verdicts follow the numbers (a bad case is one line: tests/experiments/test_experiments_schema.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.cost.deployment import PRESETS, PRIOR_READINGS
from simulator.experiments import load_experiment
from simulator.experiments.runner import run_analysis
from simulator.pricing import price, request
from simulator.specdec import Acceptance
from simulator.specs.catalog import load_hardware, load_model
from simulator.sweep.runner import deploy
from simulator.sweep.shapley import players
from simulator.validate.sd_cases import predict, report


def run(settings):
    return run_analysis(load_experiment("sd-validation"), "sd_validation", settings=settings)


def _settings(**measured):
    s = load_experiment("sd-validation").analyses["sd_validation"]
    return replace(s, cases=tuple(replace(c, measured=measured.get(c.name, c.measured)) for c in s.cases))


def _predicted(part):
    return [(r[0], r[6], r[8], r[10], r[11]) for r in part.tables[0].rows]


def test_measured_values_are_not_inputs():
    s = _settings()
    a = report(s)
    b = report(_settings(**{c.name: 5.0 for c in s.cases}))
    assert _predicted(a) == _predicted(b)


def test_each_case_is_the_pricing_path():
    c = load_experiment("sd-validation").analyses["sd_validation"].cases[0]
    m, hw = load_model(c.model), load_hardware(c.hardware)
    req = request(dtype=c.dtype, tp=c.tp, ep=c.ep, gpus=c.tp, engine=c.engine, drafter=c.drafter, context=c.context,
                  acceptance=Acceptance.from_accept_length(c.accept_length, c.draft_len))
    sc, _, _ = deploy(m, hw, req, [c.batch], c.draft_len)
    dep = sc.deployment
    assert dep.tp == c.tp and dep.engine == c.engine
    p = predict(c)
    names = players(PRESETS["prior"], PRESETS["refined"])
    assert set(p) == {"refined", "deployment", *PRIOR_READINGS, *(f"without {n}" for n in names)}
    assert dep.label in p["deployment"]
    # a mechanism switched back to the prior's setting is a different model unless it changes nothing here
    assert any(p[f"without {n}"] != p["refined"] for n in names)
    case = price(sc, [c.batch], [c.draft_len])
    assert p["refined"] == pytest.approx(float(case.result.speedup[0, 0]), rel=1e-12)
    # the acceptance is the measured one: the predicted speedup is below the acceptance length
    assert 0 < p["refined"] < c.accept_length


def test_errors_and_verdicts_follow_the_numbers():
    s = _settings()
    part = run(s)
    for row, c in zip(part.tables[0].rows, s.cases, strict=True):
        assert row[7] == pytest.approx(row[6] / c.measured - 1) and row[9] == pytest.approx(row[8] / c.measured - 1)
        assert row[10] <= row[8] <= row[11]
    pred = {r[0]: r[6] for r in part.tables[0].rows}
    # every case measured just above (below) its own refined prediction: no over-prediction (all over)
    under = " ".join(run(_settings(**{n: 1.1 * v for n, v in pred.items()})).findings)
    assert "over-predicts 0 of" in under and "under-predicts most cases" in under
    over = " ".join(run(_settings(**{n: 0.9 * v for n, v in pred.items()})).findings)
    assert f"over-predicts {len(pred)} of {len(pred)}" in over
    moved = next(t for t in run(s).findings if t.startswith("What each mechanism"))
    assert all(f"{n} " in moved for n in players(PRESETS["prior"], PRESETS["refined"]))
    # a loss the refined model predicts is counted as predicted
    name = min(pred, key=pred.get)
    losing = dict.fromkeys(pred, 2.0) | {name: 0.5}
    text = " ".join(run(_settings(**losing)).findings)
    assert "SD loses in 1 of" in text
    assert (f"predicts {1 if pred[name] < 1 else 0} of these losses") in text
    said = "a loss" if pred[name] < 1 else "a gain"
    assert f"{name} (measured 0.50×, refined {pred[name]:.2f}×: {said})" in text
