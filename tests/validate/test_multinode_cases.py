"""Public multi-node cases (validate.multinode; the study analysis multinode_validation,
experiments/multinode-validation.yaml): predictions never depend on the published
throughputs, each case is the one pricing path at its deployment, errors and findings follow the numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.cost.deployment import Deployment
from simulator.experiments import load_experiment
from simulator.experiments.runner import run_analysis
from simulator.pricing import Scenario, price_pass
from simulator.specs.catalog import load_hardware, load_model
from simulator.validate.multinode import predict, report


def _settings(**measured):
    s = load_experiment("multinode-validation").analyses["multinode_validation"]
    return replace(s, cases=tuple(replace(c, measured=measured.get(c.name, c.measured)) for c in s.cases))


def test_published_values_are_not_inputs():
    s = _settings()
    a, b = report(s), report(_settings(**{c.name: 1.0 for c in s.cases}))
    assert [r[9] for r in a.tables[0].rows] == [r[9] for r in b.tables[0].rows]
    for row, c in zip(a.tables[0].rows, s.cases, strict=True):
        assert row[10] == pytest.approx(row[9] / c.measured - 1)


def test_each_case_is_the_step_model_at_its_deployment():
    c = _settings().cases[0]
    m, hw = load_model(c.model), load_hardware(c.hardware)
    dep = Deployment(dtype=c.dtype, kv_dtype=c.kv_dtype, tp=1, dp=c.gpus, ep=c.gpus, engine=c.engine,
                     redundant_experts=c.redundant_experts)
    t = price_pass(Scenario(m, hw, dep, context=c.context), [c.batch * c.gpus], 1, check_fit=False).time[0]
    p = predict(c)
    assert p["default"] == pytest.approx(c.batch / t, rel=1e-12)
    assert p["all_to_all"] == "deepep_low_latency" and p["tbo"]  # SGLang's wide-EP defaults across nodes
    assert p["nccl"] != p["default"] and p["no_tbo"] != p["default"]


def test_findings_name_every_case():
    s = _settings()
    part = run_analysis(load_experiment("multinode-validation"), "multinode_validation", settings=s)
    text = " ".join(part.findings)
    assert all(c.name in text for c in s.cases)
    n = len(s.cases)
    slow = run_analysis(load_experiment("multinode-validation"), "multinode_validation",
                        settings=_settings(**{c.name: 1e9 for c in s.cases}))
    fast = run_analysis(load_experiment("multinode-validation"), "multinode_validation",
                        settings=replace(_settings(**{c.name: 1.0 for c in s.cases}),
                                         cases=tuple(replace(c, measured=1.0, batch_from="stated") for c in s.cases)))
    assert f"predicts 0 of {n} cases faster" in " ".join(slow.findings)
    assert f"predicts {n} of {n} cases faster" in " ".join(fast.findings)
    assert "Every case states its batch." in fast.findings and "Every case states" not in " ".join(slow.findings)



def test_a_case_deployed_without_two_batch_overlap_is_priced_without_it():
    """The GB200 posts run without TBO (part I: 'allows two-batch overlap to be disabled'; part II: a fine-grained
    combine overlap instead): the case states it, and its default run is the no-TBO run. SGLang's own rule (auto)
    agrees inside one NVL72 domain and turns it on across nodes (the LMSYS H100 case)."""
    cases = {c.name: c for c in _settings().cases}
    c = cases["sglang-48xgb200-decode-part1"]
    assert c.two_batch_overlap == "off" and cases["lmsys-72xh100-decode"].two_batch_overlap == "auto"
    p = predict(c)
    assert not p["tbo"] and p["default"] == pytest.approx(p["no_tbo"], rel=1e-12)
    auto = predict(replace(c, two_batch_overlap="auto"))
    assert not auto["tbo"] and auto["default"] == pytest.approx(p["default"], rel=1e-12)
    on = predict(replace(c, two_batch_overlap="on"))
    assert on["tbo"] and on["default"] != p["default"]
    assert predict(cases["lmsys-72xh100-decode"])["tbo"]
