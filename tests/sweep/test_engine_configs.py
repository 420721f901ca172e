"""`schedule --format trtllm|sglang` and deployable tables: each file is what the engine declares (a pydantic model
transcribed from the engine's source) and passes its rules; the engine's own lookup runs the table's K at every batch;
the deployable table is within the tolerance, K = 0 exactly where SD loses, and has the fewest ranges (brute force)."""

from __future__ import annotations

import bisect
import itertools
import json
from typing import Literal

import numpy as np
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from simulator.cli import main
from simulator.errors import InfeasibleError, ParameterError
from simulator.specs.catalog import load_hardware, load_model
from simulator.sweep.deployable import deployable
from simulator.sweep.schedule import build_schedule, k_ranges, launch_flags, render


class TrtllmSpeculativeConfig(BaseModel):
    """TensorRT-LLM's DecodingBaseConfig fields the file sets (tensorrt_llm/llmapi/llm_args.py, StrictBaseModel:
    no other keys): ``max_draft_len: Optional[NonNegativeInt]`` (> 0 for Eagle/Eagle3/MTP/NGram/Draft_Target),
    ``speculative_model: Optional[str]``, ``draft_len_schedule: Optional[dict[int, int]]`` with its validator
    (keys >= 1, values >= 0, the smallest key's value == max_draft_len, every value <= max_draft_len)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    decoding_type: Literal["Eagle", "Eagle3", "MTP", "NGram", "Draft_Target"]
    max_draft_len: int = Field(gt=0)
    speculative_model: str | None = None
    draft_len_schedule: dict[int, int] | None = None
    max_concurrency: int | None = Field(default=None, gt=0)

    @field_validator("draft_len_schedule")
    @classmethod
    def _schedule(cls, v, info):
        if v is not None:
            assert all(b >= 1 and k >= 0 for b, k in v.items())
            mdl = info.data.get("max_draft_len")
            assert v[min(v)] == mdl and all(k <= mdl for k in v.values())
        return v

    @model_validator(mode="after")
    def _exclusive(self):
        assert self.max_concurrency is None or self.draft_len_schedule is None
        return self


def trtllm_lookup(schedule: dict[int, int], batch: int) -> int:
    """get_draft_len_for_batch_size (tensorrt_llm/_torch/speculative/utils.py): first key >= batch, else 0."""
    keys = sorted(schedule)
    i = bisect.bisect_left(keys, batch)
    return schedule[keys[i]] if i < len(keys) else 0


class SglangSlot(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    candidate_steps: list[int] = Field(min_length=1)

    @field_validator("candidate_steps")
    @classmethod
    def _steps(cls, v):
        assert all(s >= 0 for s in v)  # _load_adaptive_config: a list of non-negative ints
        return v


def sglang_config(text: str) -> dict[int, SglangSlot]:
    """SGLang's _load_adaptive_config (adaptive_spec_params.py): a JSON object with at least one integer-string key."""
    raw = json.loads(text)
    assert isinstance(raw, dict) and all(k.isdigit() for k in raw) and raw
    return {int(k): SglangSlot.model_validate(v) for k, v in raw.items()}


def sglang_lookup(cfg: dict[int, SglangSlot], batch: int, capture) -> int:
    """AdaptiveStepRouter.batch_size_key_for_batch: pad to the CUDA-graph batch, largest key <= it."""
    i = bisect.bisect_left(capture, batch)
    padded = capture[i] if i < len(capture) else batch
    keys = sorted(cfg)
    return cfg[keys[max(0, bisect.bisect_right(keys, padded) - 1)]].candidate_steps[0]


@pytest.fixture(scope="module")
def q235():
    return load_model("qwen3-235b-a22b"), load_hardware("h100-sxm")


@pytest.mark.parametrize("fmt", ["trtllm", "sglang"])
def test_file_is_the_engines_type_and_its_lookup_runs_the_table(q235, fmt):
    s = build_schedule(*q235, fmt=fmt)
    c = s.primary
    text = render(s, fmt, "/ckpt/eagle")
    if fmt == "trtllm":
        cfg = TrtllmSpeculativeConfig.model_validate(yaml.safe_load(text)["speculative_config"])
        assert cfg.speculative_model == "/ckpt/eagle" and cfg.decoding_type == "Eagle"
        ran = [trtllm_lookup(cfg.draft_len_schedule, int(b)) for b in c.batch]
    else:
        cfg = sglang_config(text)
        capture = list(s.hardware.engine_spec.graphs.for_round(True).sizes)
        ran = [sglang_lookup(cfg, int(b), capture) for b in c.batch]
        flags = launch_flags(s, "a.json", "/ckpt/eagle")
        assert flags[flags.index("--speculative-num-draft-tokens") + 1] == str(int(c.k.max()) + 1)
        assert "--speculative-adaptive" in flags and flags[-1] == "a.json"
    assert ran == c.k.tolist()  # the engine runs exactly the table's K at every batch
    assert np.all(c.gap <= 0.01 + 1e-12) and np.array_equal(c.k == 0, c.best_chain_speedup <= 1)


def test_checks_reject_what_the_engines_reject():
    ok = {"decoding_type": "Eagle3", "max_draft_len": 3, "draft_len_schedule": {8: 3, 64: 2}}
    TrtllmSpeculativeConfig.model_validate(ok)
    for bad in ({"max_draft_len": 4}, {"draft_len_schedule": {8: 2, 64: 3}}, {"draft_len_schedule": {0: 3}},
                {"decoding_type": "eagle"}, {"max_draft_len": 0}, {"extra": 1}, {"max_concurrency": 8}):
        with pytest.raises(ValidationError):
            TrtllmSpeculativeConfig.model_validate({**ok, **bad})
    for bad in ('{"a": {"candidate_steps": [1]}}', '{"1": {"candidate_steps": []}}', '{"1": {"candidate_steps": [-1]}}',
                '{"1": {"candidate_steps": ["2"]}}', "[]"):
        with pytest.raises((ValidationError, AssertionError)):
            sglang_config(bad)
    assert trtllm_lookup({4: 4, 8: 2, 32: 1}, 33) == 0 and trtllm_lookup({4: 4, 8: 2, 32: 1}, 5) == 2


def test_vllm_table_for_the_reference_is_deployable(q235):
    """Qwen3-235B on 8x H100, vLLM: the per-batch best flips K 24 times (graph padding: vLLM's capture sizes
    rounded to multiples of K + 1); the 1% table keeps every batch within 1% with a third of the ranges, and a 3%
    allowance gives a 3-range table (the remaining flips at batches 3-6 cost vLLM up to 3-11% per batch)."""
    s = build_schedule(*q235, fmt="vllm")
    c = s.primary
    assert len(k_ranges(c.batch, c.k_opt)) >= 20
    assert len(c.ranges()) <= 8 and c.gap.max() <= 0.01
    s3 = build_schedule(*q235, fmt="vllm", tolerance=0.03)
    assert len(s3.primary.ranges()) <= 4 and s3.primary.gap.max() <= 0.03


def test_cli_writes_trtllm_yaml_and_sglang_adaptive(tmp_path, capsys):
    base = ["schedule", "--model", "qwen3-30b-a3b", "--gpus", "1", "--batch", "1,16,64", "--draft-len", "1,2,3"]
    assert main(base + ["--format", "trtllm", "--out", str(tmp_path / "t.yaml"), "--draft-model", "/m"]) == 0
    cfg = yaml.safe_load((tmp_path / "t.yaml").read_text())["speculative_config"]
    TrtllmSpeculativeConfig.model_validate(cfg)
    assert main(base + ["--format", "sglang", "--out", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "--speculative-algorithm EAGLE" in out and "REPLACE" in out and "--draft-model" in out
    sglang_config((tmp_path / "s.json").read_text())
    assert main(base + ["--format", "sglang", "--out", str(tmp_path / "d.json"), "--gpus", "2", "--tp", "1"]) == 2
    assert "attention DP" in capsys.readouterr().err and not (tmp_path / "d.json").exists()


def test_trtllm_refuses_a_table_that_starts_without_speculation():
    s = np.array([[1.0] * 4, [0.9, 1.2, 1.3, 1.1]])  # SD loses at batch 1, pays later
    with pytest.raises(InfeasibleError, match="largest K at batch 1"):
        deployable([0, 1], s, first_is_max=True)
    with pytest.raises(ParameterError, match="tolerance"):
        deployable([0, 1], s, tol=0.9)


def _brute(g, s, tol, starts, first_is_max):
    """The fewest ranges, then the smallest ΣK, then the largest Σ speedup, over every K sequence (small cases)."""
    best_s = s[g >= 1].max(axis=0)
    pays = best_s > 1
    best = None
    for ks in itertools.product(range(len(g)), repeat=s.shape[1]):
        k = g[list(ks)]
        sp = s[list(ks), np.arange(s.shape[1])]
        if np.any((k == 0) != ~pays) or np.any(pays & (sp < (1 - tol) * best_s)):
            continue
        cuts = np.flatnonzero(np.diff(k)) + 1
        if not all(starts[c] for c in cuts) or (first_is_max and k[0] != k.max()):
            continue
        cost = (len(cuts) + 1, int(k.sum()), -float(np.where(k == 0, 1.0, sp).sum()))
        if best is None or cost < best[0]:
            best = (cost, k)
    return best


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 6), st.lists(st.floats(0.6, 2.0), min_size=18, max_size=18), st.sampled_from([0.0, 0.03, 0.1]),
       st.lists(st.booleans(), min_size=6, max_size=6), st.booleans())
@example(1, [1.0] * 18, 0.0, [False] * 6, True)  # SD pays nowhere under TensorRT-LLM's rule: K = 0, not a refusal
def test_deployable_is_the_fewest_ranges_within_tolerance(n, vals, tol, starts, first_is_max):
    g = np.arange(4)
    s = np.vstack([np.ones(n), np.asarray(vals[: 3 * n]).reshape(3, n)])
    starts = np.asarray(starts[:n])
    brute = _brute(g, s, tol, np.r_[True, starts[1:]] | np.r_[True, np.diff(s[1:].max(0) > 1) != 0], first_is_max)
    try:
        k = deployable(g, s, tol, starts=starts, first_is_max=first_is_max)
    except InfeasibleError:
        assert brute is None
        return
    assert brute is not None
    cuts = np.flatnonzero(np.diff(k)) + 1
    sp = s[k, np.arange(n)]
    cost = (len(cuts) + 1, int(k.sum()), -float(np.where(k == 0, 1.0, sp).sum()))
    assert cost[:2] == brute[0][:2] and cost[2] == pytest.approx(brute[0][2])
