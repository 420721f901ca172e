"""explain: the walk starts at the prior numbers, ends at the refined numbers, one mechanism per step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulator.cost.deployment import PRESETS, WALK
from simulator.errors import ParameterError
from simulator.sweep import explain, format_attribution, plot_waterfall, run_sweep, walk_mechanisms


def test_walk_order():
    steps = walk_mechanisms()
    assert steps[0][1] == PRESETS["prior"] and steps[-1][1] == PRESETS["refined"]
    for (_, a), (_, b), (field, value) in zip(steps[: len(WALK)], steps[1 : len(WALK) + 1], WALK, strict=True):
        changed = [k for k in a.__dataclass_fields__ if getattr(a, k) != getattr(b, k)]
        assert changed in ([field], []) and getattr(b, field) == value


@pytest.mark.parametrize("model,batch,gamma", [("qwen3-235b-a22b", 1, 3), ("olmoe-1b-7b", 16, 5)])
def test_walk_ends_match_sweep(model, batch, gamma):
    a = explain(model, "h100-sxm", batch=batch, draft_len=gamma)
    r = run_sweep([model], batch=[batch], draft_len=[gamma])
    arr = r.to_array()
    for step, mode in ((a.prior, "prior"), (a.refined, "refined")):
        row = arr[arr["mode"] == mode][0]
        assert step.speedup == pytest.approx(row["speedup"], rel=1e-12)
        assert step.t_verify_us == pytest.approx(row["t_verify_us"], rel=1e-12)
        assert step.t_decode_us == pytest.approx(row["t_decode_us"], rel=1e-12)
    for s in a.steps:
        assert s.verify_decode_ratio == pytest.approx(1 / s.decode_verify_ratio)
        assert s.speedup <= s.accept_length * (1 + 1e-12)
    assert len(a.steps) == len(WALK) + 1


def test_format_and_plot(tmp_path):
    a = explain("qwen3-30b-a3b", batch=4)
    text = format_attribution(a)
    assert all(s.name in text for s in a.steps) and "prior -> refined" in text
    p = Path(plot_waterfall(a, tmp_path / "w.png"))
    data = p.read_bytes()
    assert data[:4] == b"\x89PNG" and len(data) > 5_000
    d = a.as_dict()
    assert len(d["steps"]) == len(a.steps) and np.isfinite(d["steps"][-1]["speedup"])


@pytest.mark.parametrize("kw", [dict(draft_len=0), dict(batch=0)])
def test_explain_bad(kw):
    with pytest.raises(ParameterError):
        explain("olmoe-1b-7b", **kw)
