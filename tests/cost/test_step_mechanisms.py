"""The step model reads only the Mechanisms fields of cost.step.STEP_MECHANISMS: every other field (round terms,
padding, execution modes) leaves T(B, s) exactly unchanged, so the StepCache may key on those fields alone."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from simulator.cost.deployment import Mechanisms
from simulator.cost.step import STEP_MECHANISMS, step_time
from simulator.params import Options, params_of
from simulator.pricing import resolve

OTHERS = [f.name for f in fields(Mechanisms) if f.name not in STEP_MECHANISMS]


def _settings(name):
    opts = next(c for c in params_of(Mechanisms)[name].constraints if isinstance(c, Options))
    return [v for v in opts.values if v is not None]


@pytest.mark.parametrize("model,flags", [("qwen3-30b-a3b", {"gpus": 2, "engine": "sglang"}),
                                         ("deepseek-v3", {"hardware": "h100-sxm", "gpus": 16, "dp": 16, "ep": 16})])
def test_round_level_mechanisms_leave_the_step_time_unchanged(model, flags):
    hw = flags.pop("hardware", "h100-sxm")
    sc = resolve(model, hw, **flags)
    base = step_time(sc.model, sc.hw, sc.deployment, [1, 8, 64], [1, 4, 4], sc.context, sc.mechanisms)
    assert OTHERS  # round terms exist
    for name in OTHERS:
        for value in _settings(name):
            r = step_time(sc.model, sc.hw, sc.deployment, [1, 8, 64], [1, 4, 4], sc.context,
                          sc.mechanisms.with_(**{name: value}))
            assert np.array_equal(r.time, base.time), (name, value)


def test_a_step_mechanism_does_change_the_step_time():
    sc = resolve("qwen3-30b-a3b", "h100-sxm", gpus=2)
    t = {v: step_time(sc.model, sc.hw, sc.deployment, [1], [4], sc.context, sc.mechanisms.with_(fixed_costs=v)).time
         for v in ("on", "off")}
    assert t["on"][0] > t["off"][0]
