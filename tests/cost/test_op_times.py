"""cost.engine.op_times (a step's ops of one kernel priced together on stacked arrays) gives exactly op_time's
numbers, op by op, for every mechanism preset, engine and eager flag pattern."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cost import step as S
from simulator.cost.deployment import PRESETS
from simulator.cost.engine import op_time, op_times, plan_ops
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


def test_plan_made_once_prices_every_gpu_alike():
    """A plan of the ops (the grouping, made without a GPU) reused on another GPU gives that GPU's own numbers."""
    sc = resolve("qwen3-235b-a22b", "h100-sxm")
    batch, tokens = np.array([1.0, 8.0, 64.0]), np.array([1.0, 4.0, 4.0])
    groups, head, _ = S.describe(sc.model, sc.deployment, S.Workload(batch, tokens, 1024), PRESETS["refined"])
    ops = [op for g in groups for op in g.ops] + list(head)
    plan = plan_ops(ops, batch.shape)
    assert plan.stacks and sorted(plan.single + sum((s[2] for s in plan.stacks), ())) == list(range(len(ops)))
    for gpu in ("h100-sxm", "b200"):
        hw, _ = S.resolved(sc.model, resolve("qwen3-235b-a22b", gpu).hw, sc.deployment)
        fresh = op_times(ops, hw, PRESETS["refined"], True, batch.shape)
        reused = op_times(ops, hw, PRESETS["refined"], True, batch.shape, plan)
        for a, b in zip(fresh, reused, strict=True):
            np.testing.assert_array_equal(a.time, b.time)


def test_step_memo_of_ops_keys_on_every_input():
    """resolved_step through a describe memo (what a sweep's StepCache keeps) equals it without one, for inputs
    that differ in one field each (tokens, batch, context, mechanisms, GPU), whatever was priced before; and the
    memo serves a second GPU the ops it described for the first."""
    sc = resolve("qwen3-30b-a3b", "h100-sxm")
    memo: dict = {}
    b = np.array([1.0, 2.0, 32.0])
    cases = [("h100-sxm", b, 1.0, 1024, "refined"), ("h100-sxm", b, 4.0, 1024, "refined"),
             ("h100-sxm", b * 2, 4.0, 1024, "refined"), ("h100-sxm", b, 4.0, 4096, "refined"),
             ("h100-sxm", b, 4.0, 1024, "prior"), ("b200", b, 4.0, 1024, "refined")]
    for gpu, batch, tokens, ctx, mode in cases:
        hw, dep = S.resolved(sc.model, resolve("qwen3-30b-a3b", gpu).hw, sc.deployment)
        want = S.resolved_step(sc.model, hw, dep, batch, tokens, ctx, PRESETS[mode])
        got = S.resolved_step(sc.model, hw, dep, batch, tokens, ctx, PRESETS[mode], described=memo)
        np.testing.assert_array_equal(got.time, want.time, err_msg=f"{gpu} {tokens} {ctx} {mode}")
        np.testing.assert_array_equal(got.unique_experts, want.unique_experts)
    # the b200 case reused the h100 ops of the same workload: one describe per distinct workload and mechanisms
    assert sum(1 for k in memo if k[0] != "plan") == len(cases) - 1
