"""`schedule --format vllm`: the file is what vLLM's SpeculativeConfig declares and its validator accepts (a pydantic
model of the declared types plus vLLM's rules), K = 0 where the sweep at the same settings says SD loses, vLLM's
kernels unless another engine is named, refused under data parallelism, and the schedule's own cost (issue #49548)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulator.cli import main
from simulator.errors import ParameterError
from simulator.specs.catalog import load_hardware, load_model
from simulator.sweep.runner import run_sweep
from simulator.sweep.schedule import (
    DYNAMIC_COST_K0,
    DYNAMIC_COST_PIECEWISE,
    build_schedule,
    dynamic_cost,
    render,
    schedule_cost,
    vllm_config,
)

ALPHA = 0.2  # low enough that SD loses at some batches and pays at others (qwen3-30b-a3b, 1x H100, vLLM)
BATCH = [1, 2, 4, 16, 64, 256]
DRAFT = [1, 2, 3, 4]


class VllmSpeculativeConfig(BaseModel):
    """The SpeculativeConfig fields the file sets, as vLLM declares them (vllm/config/speculative.py):
    ``num_speculative_tokens: int = Field(default=None, gt=0)``, ``method: SpeculativeMethod | None``,
    ``num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None``, ``model: str | None`` (the draft
    checkpoint). Strict: ints must be ints and
    the schedule a list (vLLM's validator rejects anything that is not a list); no other keys."""

    model_config = ConfigDict(extra="forbid", strict=True)
    num_speculative_tokens: int = Field(gt=0)
    method: Literal["ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3",
                    "mtp"] | None = None
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = None
    model: str | None = None


def vllm_rules(cfg: VllmSpeculativeConfig) -> None:
    """vLLM's validate_and_normalize_dynamic_sd_schedule (vllm/v1/spec_decode/dynamic/utils.py), plus the file's
    own rules: contiguous, consecutive equal K merged, K <= num_speculative_tokens, the largest K written."""
    table = cfg.num_speculative_tokens_per_batch_size
    if table is None:  # one K everywhere: num_speculative_tokens alone
        return
    assert isinstance(table, list) and len(table) > 1
    prev = 0
    for i, (lo, hi, k) in enumerate(table):
        assert lo > 0 and hi > 0 and lo <= hi and k >= 0  # positive, start <= end, K >= 0
        assert lo > prev  # sorted, non-overlapping
        assert lo == prev + 1  # ours: no gaps (vLLM fills a gap with the previous K)
        assert i == 0 or k != table[i - 1][2]  # ours: equal K merged
        assert k <= cfg.num_speculative_tokens
        prev = hi
    assert table[0][0] == 1  # every runtime batch size has a defined K
    assert cfg.num_speculative_tokens == max(k for *_, k in table)


def vllm_lookup(table, max_batch: int, num_spec: int) -> list[int]:
    """vLLM's build_dynamic_sd_schedule_lookup: K per batch 1..max_batch (gaps and the tail inherit, K clamped);
    no table: num_speculative_tokens at every batch."""
    if table is None:
        return [num_spec] * max_batch
    dense, nxt, last = [0] * (max_batch + 1), 1, None
    for lo, hi, k in sorted(table):
        for b in range(nxt, min(lo, max_batch + 1)):
            dense[b] = min(num_spec, last)
        for b in range(max(lo, nxt), min(hi, max_batch) + 1):
            dense[b] = min(num_spec, k)
        nxt, last = max(nxt, hi + 1), k
    for b in range(nxt, max_batch + 1):
        dense[b] = min(num_spec, last)
    return dense[1:]


@pytest.fixture(scope="module")
def sched():
    m, hw = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm")
    return build_schedule(m, hw, gpus=1, batch=BATCH, draft_len=DRAFT, acceptance=ALPHA, fmt="vllm")


def test_file_is_vllms_declared_type_and_passes_its_rules(sched):
    text = render(sched, "vllm")
    cfg = VllmSpeculativeConfig.model_validate_json(text)
    vllm_rules(cfg)
    c = sched.primary
    lookup = vllm_lookup(cfg.num_speculative_tokens_per_batch_size, int(c.batch[-1]), cfg.num_speculative_tokens)
    assert lookup == c.k.tolist()  # vLLM schedules exactly the K the model chose, at every batch
    assert 0 in lookup and max(lookup) > 0  # the case has both: K = 0 ranges are written, not dropped
    assert cfg.method == "eagle"


def test_the_checks_reject_what_vllm_rejects():
    """The pydantic model and the rules fail on the earlier dict format and on broken tables."""
    with pytest.raises(ValidationError):
        VllmSpeculativeConfig.model_validate_json('{"num_speculative_tokens": 3, '
                                                  '"num_speculative_tokens_per_batch_size": {"1-16": 3}}')
    with pytest.raises(ValidationError):
        VllmSpeculativeConfig.model_validate_json('{"num_speculative_tokens": 0}')
    for bad in ([[2, 16, 3]], [[1, 16, 3], [16, 32, 2]], [[1, 16, 3], [17, 32, 3]], [[1, 16, 4]]):
        with pytest.raises(AssertionError):
            vllm_rules(VllmSpeculativeConfig.model_validate_json(json.dumps(
                {"num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": bad})))


def _sweep(**kw):
    return run_sweep(["qwen3-30b-a3b"], gpus=1, engine="vllm", modes=("refined",), batch=BATCH, draft_len=DRAFT,
                     acceptance=ALPHA, **kw).cases[0].result


def test_k_zero_exactly_where_the_sweep_says_sd_loses(sched):
    """The sweep at the same settings: vLLM runs a per-batch table with its table capture (piecewise graphs at the
    listed sizes, docs/MODEL.md §4.5), the sweep's --graph-padding table."""
    r = _sweep(graph_padding="table")
    k_sweep, best = r.best()
    c = sched.primary
    k = c.k[np.asarray(BATCH) - 1]
    assert np.array_equal(k == 0, best <= 1.0)
    assert np.any(best <= 1.0) and np.any(best > 1.0)
    np.testing.assert_array_equal(c.k_opt[np.asarray(BATCH) - 1][best > 1.0], k_sweep[best > 1.0])
    np.testing.assert_allclose(c.best_chain_speedup[np.asarray(BATCH) - 1], best, rtol=1e-12)
    spd = c.speedup[np.asarray(BATCH) - 1]  # the deployable table's K: within 1% of the sweep's best where SD pays
    assert np.all(spd[best > 1.0] >= 0.99 * best[best > 1.0]) and np.all(spd[best <= 1.0] == 1.0)


def test_each_format_prices_its_own_engine_and_refuses_another(tmp_path, capsys):
    # a high acceptance, so that SD pays under every engine's kernels and a schedule is written for each
    base = ["schedule", "--model", "qwen3-30b-a3b", "--gpus", "1", "--batch", "1,4", "--draft-len", "1,2",
            "--acceptance", "0.9", "--out", str(tmp_path / "o.json")]
    for fmt in ("vllm", "trtllm", "sglang"):
        for extra in ([], ["--engine", fmt]):
            assert main(base + ["--format", fmt, *extra]) == 0
            out = capsys.readouterr().out
            assert f"engine {fmt}," in out
            assert ("schedule cost (vLLM #49548" in out) == (fmt == "vllm")  # said where public data give it
        other = "sglang" if fmt != "sglang" else "vllm"
        (tmp_path / "o.json").unlink()
        assert main(base + ["--format", fmt, "--engine", other]) == 2  # priced as another engine: refused
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"engine given is {other}" in err
        assert not (tmp_path / "o.json").exists()
    assert main(base + ["--format", "json"]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["engine"] == "trtllm"  # json: the deployment's default


def test_refused_under_data_parallelism(tmp_path):
    m, hw = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm")
    with pytest.raises(ParameterError, match="data parallelism"):
        build_schedule(m, hw, gpus=2, tp=1, batch=[1], draft_len=[1], fmt="vllm")
    s = build_schedule(m, hw, gpus=2, tp=1, batch=[1, 2], draft_len=[1], fmt="json")
    assert s.deployment.dp == 2
    with pytest.raises(ParameterError, match="data parallelism"):
        vllm_config(s)


def test_dynamic_cost_is_the_published_band():
    (b0, t0), (b1, t1) = DYNAMIC_COST_K0
    assert t0 == pytest.approx(0.0656, abs=5e-4) and t1 == pytest.approx(0.2158, abs=5e-4)
    assert abs(DYNAMIC_COST_PIECEWISE - 0.192) < 1e-3
    b = np.arange(1, 513)
    tau, lo, hi = dynamic_cost(b)
    assert tau[b0 - 1] == pytest.approx(t0) and tau[b1 - 1] == pytest.approx(t1)
    assert np.all(np.diff(tau) >= 0) and np.all(lo <= tau) and np.all(hi >= tau) and np.all(hi >= 0.19)
    assert tau[0] == tau[1] and tau[-1] == tau[b1 - 1]  # constant outside the measured concurrencies


def test_the_table_is_priced_as_vllm_runs_it(sched):
    """The table's matrix is priced with the capture vLLM replays under a per-batch table (sizes as listed, not
    rounded to K + 1), the static-K comparison with a static length's (rounded); they differ where K + 1 does not
    divide the listed sizes (K = 2, 4 here) and agree where it does (K = 1, 3)."""
    c = sched.primary
    cols = np.asarray(BATCH) - 1
    table, static = _sweep(graph_padding="table").speedup, _sweep().speedup
    np.testing.assert_allclose(c.speedup_all[1:, cols], table, rtol=1e-12)
    np.testing.assert_allclose(c.speedup_static[1:, cols], static, rtol=1e-12)
    same = np.isin(c.gammas, [0, 1, 3])
    np.testing.assert_allclose(c.speedup_all[same], c.speedup_static[same], rtol=1e-12)
    assert not np.allclose(c.speedup_all[~same], c.speedup_static[~same])
    cost = schedule_cost(sched)  # one static K serves without a table: a static length's graphs
    j = list(c.gammas).index(cost["static_k"])
    np.testing.assert_allclose([r["static_speedup"] for r in cost["per_batch"]], c.speedup_static[j], rtol=1e-12)
    other = build_schedule(load_model("qwen3-30b-a3b"), load_hardware("h100-sxm"), gpus=1, batch=[1, 2, 3],
                           draft_len=[2], acceptance=0.6, fmt="sglang")
    np.testing.assert_array_equal(other.primary.speedup_all, other.primary.speedup_static)  # no table rule


def test_schedule_cost_says_what_it_does(sched):
    cost = schedule_cost(sched)
    c = sched.primary
    rows = cost["per_batch"]
    assert [r["batch"] for r in rows] == c.batch.tolist()
    for r, sp in zip(rows, c.speedup, strict=True):
        assert r["dynamic_speedup"] == pytest.approx(sp / (1 + r["tau"]))
        assert r["dynamic_speedup_low"] <= r["dynamic_speedup"]
    fastest = {b: name for lo, hi, name in cost["fastest"] for b in range(lo, hi + 1)}
    for b, k in zip(c.batch, c.k, strict=True):
        if k in (0, cost["static_k"]):  # the table changes nothing there, so its cost only loses
            assert fastest[int(b)] != "dynamic schedule"
    assert {n for *_, n in cost["fastest"]} <= {"dynamic schedule", f"static K={cost['static_k']}", "no SD"}
    assert json.loads(render(sched, "json"))["contexts"][0]["schedule_cost"]["static_k"] == cost["static_k"]
    other = build_schedule(load_model("qwen3-30b-a3b"), load_hardware("h100-sxm"), gpus=1, batch=[1, 2],
                           draft_len=[1], acceptance=0.6)
    assert other.deployment.engine == "trtllm" and schedule_cost(other) is None  # no public data off vLLM


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 8), min_size=1, max_size=300).filter(lambda k: max(k) > 0))
def test_any_k_per_batch_writes_a_file_vllm_reads_back(sched, ks):
    """Whatever K per batch the pricing gives (K = 0 included), the file passes vLLM's declared type and rules and
    vLLM's lookup returns exactly those K."""
    k = np.asarray(ks)
    b = np.arange(1, k.size + 1)
    ctx = replace(sched.primary, batch=b, k=k, speedup=np.ones(k.size), best_chain_speedup=np.ones(k.size))
    cfg = VllmSpeculativeConfig.model_validate_json(render(replace(sched, contexts=(ctx,)), "vllm"))
    vllm_rules(cfg)
    assert vllm_lookup(cfg.num_speculative_tokens_per_batch_size, k.size, cfg.num_speculative_tokens) == ks
