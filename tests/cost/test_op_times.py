"""cost.engine.op_times (a step's ops of one kernel priced together on stacked arrays) gives exactly op_time's
numbers, op by op, for every mechanism preset, engine and eager flag pattern."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cost import step as S
from simulator.cost.deployment import PRESETS
from simulator.cost.engine import op_time, op_times
from simulator.pricing import resolve

FIELDS = ("time", "fixed", "compute", "memory", "hbm_bytes", "l2_bytes", "flops")


@pytest.mark.parametrize("model,hardware,engine", [("qwen3-235b-a22b", "h100-sxm", "trtllm"),
                                                   ("deepseek-v3", "b200", "sglang"),
                                                   ("gpt-oss-120b", "h200-sxm", "vllm"),
                                                   ("qwen3-next-80b-a3b", "b200", "trtllm")])
@pytest.mark.parametrize("mode", ["refined", "prior"])
def test_stacked_equals_op_by_op(model, hardware, engine, mode):
    sc = resolve(model, hardware, engine=engine)
    hw, dep = S.resolved(sc.model, sc.hw, sc.deployment)
    mech = PRESETS[mode]
    batch = np.tile([1.0, 3.0, 64.0, 512.0], 3)
    tokens = np.repeat([1.0, 4.0, 9.0], 4)
    groups, head, _ = S.describe(sc.model, dep, S.Workload(batch, tokens, 2048), mech)
    ops = [op for g in groups for op in g.ops] + list(head)
    assert len({(o.cls, o.variant, o.compute) for o in ops}) < len(ops)  # some ops do share a kernel
    for graphs in (True, False, batch < 100):  # graph-captured, eager, and per point
        stacked = op_times(ops, hw, mech, graphs, batch.shape)
        for op, c in zip(ops, stacked, strict=True):
            one = op_time(op, hw, mech, graphs)
            assert c.name == op.name and c.cls == one.cls
            for f in FIELDS:
                np.testing.assert_array_equal(np.broadcast_to(getattr(c, f), batch.shape),
                                              np.broadcast_to(getattr(one, f), batch.shape), err_msg=f"{op.name} {f}")
