"""vLLM's CUDA-graph capture as its code runs it (docs/MODEL.md §4.5): a static draft length K replays FULL decode
graphs at the listed token sizes rounded up to multiples of K + 1 (``adjust_cudagraph_sizes_for_spec_decode``); a
per-batch draft-length table forces piecewise graphs on the V1 runner, so the verify pass replays the next *listed*
token count. The rule is the engine file's (``graphs.round_to_pass``, ``graphs.per_batch_table``); SGLang and
TensorRT-LLM state no table rule and pad as before."""

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cost.deployment import Deployment, Mechanisms
from simulator.errors import SimulatorError
from simulator.pricing import bound
from simulator.specdec import StepCache
from simulator.specdec.overheads import graph_batch, padded_step
from simulator.specs.catalog import bundled_files, load_engine, load_hardware, load_model
from simulator.specs.engine_file import read_engine

VLLM = load_engine("vllm").default.graphs


def _vllm_rounded(sizes, q):
    """vLLM's CompilationConfig.adjust_cudagraph_sizes_for_spec_decode, written out again: every size rounded up
    to a multiple of q, those above the cap dropped (or [q] when none is left)."""
    cap = max(sizes)
    out = sorted({-(-c // q) * q for c in sizes if -(-c // q) * q <= cap})
    return out or ([q] if q <= cap else [])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(batch=st.integers(1, 600), k=st.integers(1, 8))
def test_verify_pass_pads_to_the_capture_vllm_uses(batch, k):
    """Static K: the verify pass of B requests replays the smallest rounded size >= B(K+1) (padded batch = that
    size / (K+1)); with a per-batch table: the smallest listed size >= B(K+1), a fraction of a request where K+1
    does not divide it. Above the cap (512 tokens) the pass runs eagerly at its own batch either way."""
    q = k + 1
    for graphs, sizes in ((VLLM, _vllm_rounded(VLLM.sizes, q)), (VLLM.for_table(), list(VLLM.sizes))):
        padded, eager = graph_batch(graphs, [batch], q)
        fits = [c for c in sizes if c >= batch * q]
        if fits:
            assert not eager[0] and padded[0] * q == pytest.approx(min(fits))
        else:
            assert eager[0] and padded[0] == batch


def test_the_table_rule_differs_only_where_k_plus_one_does_not_divide_the_sizes():
    b = np.arange(1, 65)
    for k in (1, 3, 7):  # K + 1 = 2, 4, 8 divides 8, 16, ...: rounding changes nothing
        np.testing.assert_array_equal(graph_batch(VLLM, b, k + 1)[0], graph_batch(VLLM.for_table(), b, k + 1)[0])
    for k in (2, 4, 5):
        assert not np.array_equal(graph_batch(VLLM, b, k + 1)[0], graph_batch(VLLM.for_table(), b, k + 1)[0])


def test_only_vllm_states_a_table_rule():
    assert VLLM.round_to_pass and VLLM.table_round_to_pass is False and VLLM.table_source == "V-dsd-graphs"
    for e in ("sglang", "trtllm"):
        g = load_engine(e).default.graphs
        assert g.for_table() == g and not g.round_to_pass


def test_fractional_padding_is_priced_between_whole_batches():
    """A pass padded to 16 tokens at 3 tokens per request (16/3 requests) costs between 5 and 6 requests' pass,
    every part alike (the breakdown still adds up)."""
    model, hw0 = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm")
    dep = Deployment(dtype="fp8_block", tp=2, ep=2, engine="vllm")
    hw, cache = bound(hw0, dep), StepCache()
    tab = padded_step(cache, model, hw, dep, [3], 3, 1024, Mechanisms(graph_padding="table"), speculative=True)
    whole = padded_step(cache, model, hw, dep, [5, 6], 3, 1024, Mechanisms(graph_padding="off"))
    assert whole.time[0] < tab.time[0] < whole.time[1]
    assert tab.batch[0] == pytest.approx(16 / 3)
    assert sum(tab.breakdown.values())[0] == pytest.approx(tab.time[0], rel=1e-9)
    static = padded_step(cache, model, hw, dep, [3], 3, 1024, Mechanisms(), speculative=True)  # 9 tokens captured
    assert static.time[0] == pytest.approx(padded_step(cache, model, hw, dep, [3], 3, 1024,
                                                       Mechanisms(graph_padding="off")).time[0])


def test_bad_table_rule_is_one_line():
    obj = yaml.safe_load(bundled_files("engines")["vllm"].read_text())
    obj["graphs"]["per_batch_table"] = {"round_to_pass": "no", "source": "V-dsd-graphs"}
    with pytest.raises(SimulatorError, match="per_batch_table.round_to_pass"):
        read_engine(obj, "x.yaml")
    obj["graphs"]["per_batch_table"] = {"round_to_pass": False, "sorce": "V-dsd-graphs"}
    with pytest.raises(SimulatorError, match="sorce"):
        read_engine(obj, "x.yaml")
    obj = yaml.safe_load(bundled_files("engines")["sglang"].read_text())
    obj["graphs"]["round_to_pass"] = True  # SGLang's sizes count requests
    with pytest.raises(SimulatorError, match="round_to_pass.*unit"):
        read_engine(obj, "x.yaml")
