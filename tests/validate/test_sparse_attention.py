"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): the indexer's weights and its cost term in attention."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulator.cost.deployment import Deployment
from simulator.cost.ops import Workload, attention_ops
from simulator.cost.step import step_time
from simulator.errors import ConfigError
from simulator.specs import load_hardware, load_model
from simulator.specs.derived import param_counts
from simulator.specs.model import read_model

DEP = Deployment(dtype="fp8_block", tp=8, ep=8)


def test_indexer_parameters_are_counted():
    v32, v3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    a = v32.attention
    per_layer = a.q_lora_rank * a.indexer_heads * a.indexer_head_dim + v32.hidden_size * a.indexer_head_dim \
        + 2 * a.indexer_head_dim + v32.hidden_size * a.indexer_heads
    assert param_counts(v32).total - param_counts(v3).total == per_layer * v32.layers


def _core(model, context, tokens=1):
    wl = Workload(np.array([8.0]), np.array([float(tokens)]), context)
    return {o.name: o for o in attention_ops(model, DEP, wl, "full")}


def test_core_reads_at_most_topk_tokens_and_indexer_reads_all():
    v32 = load_model("deepseek-v3.2")
    k = v32.attention.indexer_topk
    long, longer = _core(v32, 16 * k), _core(v32, 32 * k)
    assert "indexer_scores" in long and "indexer_scores" not in _core(load_model("deepseek-v3"), 16 * k)

    def flops(ops, name):
        return float(np.ravel(ops[name].flops)[0])

    assert flops(long, "attention") == flops(longer, "attention")  # capped at top-k tokens
    assert flops(longer, "indexer_scores") == pytest.approx(2 * flops(long, "indexer_scores"), rel=1e-3)
    dense = _core(load_model("deepseek-v3"), 16 * k)
    assert flops(dense, "attention") > 10 * flops(long, "attention")


def test_long_context_decode_grows_slower_than_dense_mla():
    hw = load_hardware("h200-sxm")
    v32, v3 = load_model("deepseek-v3.2"), load_model("deepseek-v3")
    t = {m.name: step_time(m, hw, DEP, [32, 32], 1, context=8192, check_fit=False).time[0] for m in (v32, v3)}
    t_long = {m.name: step_time(m, hw, DEP, [32], 1, context=65536, check_fit=False).time[0] for m in (v32, v3)}
    assert t_long["deepseek-v3.2"] - t["deepseek-v3.2"] < 0.5 * (t_long["deepseek-v3"] - t["deepseek-v3"])
    # at a context below top-k the indexer is pure extra work
    short = {m.name: step_time(m, hw, DEP, [32], 1, context=1024, check_fit=False).time[0] for m in (v32, v3)}
    assert short["deepseek-v3.2"] > short["deepseek-v3"]


def test_indexer_fields_all_or_none():
    import yaml

    from simulator.specs.catalog import bundled_files
    doc = yaml.safe_load(bundled_files("models")["deepseek-v3.2"].read_text(encoding="utf-8"))
    del doc["attention"]["indexer_topk"]
    with pytest.raises(ConfigError, match="indexer_topk"):
        read_model(doc, "t.yaml")
    doc = yaml.safe_load(bundled_files("models")["qwen3-32b"].read_text(encoding="utf-8"))
    doc["attention"]["indexer_heads"] = 8
    with pytest.raises(ConfigError, match="indexer_heads"):
        read_model(doc, "t.yaml")
    assert dataclasses.replace(load_model("deepseek-v3").attention).sparse is False
