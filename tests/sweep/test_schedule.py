"""`schedule`: the best K per batch as ranges, JSON, throughput view, bad input (vLLM file: test_schedule_vllm)."""

import json

import numpy as np
import pytest

from simulator.cli import main
from simulator.specs.catalog import load_hardware, load_model
from simulator.sweep.schedule import build_schedule, k_ranges, schedule_json

ARGS = ["schedule", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--gpus", "1", "--batch", "1,4,16,64",
        "--draft-len", "1,2,3,4"]


def test_k_ranges_merge_and_cover():
    assert k_ranges(np.arange(1, 8), [3, 3, 2, 2, 2, 0, 0]) == [(1, 2, 3), (3, 5, 2), (6, 7, 0)]


@pytest.fixture(scope="module")
def sched():
    m, hw = load_model("qwen3-30b-a3b"), load_hardware("h100-sxm")
    return build_schedule(m, hw, gpus=1, batch=[1, 4, 16, 64], draft_len=[1, 2, 3, 4], contexts=[512, 2048],
                          acceptance=0.6)


def test_ranges_contiguous_from_one_and_match_best_k(sched):
    c = sched.primary
    expect_lo = 1
    for lo, hi, k in c.ranges():
        assert lo == expect_lo and hi >= lo
        expect_lo = hi + 1
        assert np.all(c.k[lo - 1:hi] == k)
    assert expect_lo - 1 == c.batch[-1] == sched.grid[-1]
    # K = 0 exactly where the best chain does not beat plain decoding, within the tolerance elsewhere
    assert np.array_equal(c.k == 0, c.best_chain_speedup <= 1.0)
    assert np.all(c.gap <= sched.tolerance + 1e-12) and len(c.ranges()) <= len(k_ranges(c.batch, c.k_opt))


def test_json_has_every_context_and_throughput(sched):
    d = schedule_json(sched)
    assert [c["context"] for c in d["contexts"]] == [512, 2048]
    tp = d["contexts"][0]["throughput"]
    assert [r["batch"] for r in tp] == sched.grid.tolist()
    for r in tp:  # per GPU = per user x batch / gpus; SD never below plain where K > 0 pays
        assert r["tokens_per_s_gpu_sd"] == pytest.approx(r["tokens_per_s_user_sd"] * r["batch"])
        if r["k"] > 0:
            assert r["tokens_per_s_user_sd"] > r["tokens_per_s_user_plain"]


def test_cli_writes_vllm_fields(tmp_path, capsys):
    out = tmp_path / "sd.json"
    assert main(ARGS + ["--format", "vllm", "--out", str(out), "--tree", "2,2"]) == 0
    cfg = json.loads(out.read_text())
    assert isinstance(cfg["num_speculative_tokens_per_batch_size"], list)
    text = capsys.readouterr().out
    assert "tok/s" in text or "user SD" in text


@pytest.mark.parametrize("extra, word", [
    (["--format", "yaml", "--out", "X"], "format"),
    (["--format", "sglang", "--out", "X", "--engine", "vllm"], "engine given is vllm"),
    (["--format", "json", "--out", "X", "--tolerance", "0.9"], "tolerance"),
    (["--format", "vllm", "--out", "X", "--gpus", "2", "--tp", "1"], "data parallelism"),
    (["--format", "json", "--out", "/proc/nope/x.json"], "out"),
    (["--format", "json", "--out", "X", "--tree", "2,0"], "tree"),
    (["--format", "json", "--out", "X", "--tree", "a"], "tree"),
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, extra, word):
    extra = [str(tmp_path / "o.json") if x == "X" else x for x in extra]
    assert main(ARGS + extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err
    assert not (tmp_path / "o.json").exists()


def test_each_context_keeps_its_own_batches():
    """Issue 20: a long context that fits fewer batches does not cut a short context's schedule; it says so."""
    m, hw = load_model("qwen3-235b-a22b"), load_hardware("h100-sxm")
    s = build_schedule(m, hw, batch=[1, 64, 256], draft_len=[1, 2], contexts=[1024, 32768])
    short, long = s.contexts
    assert short.batch[-1] == 256 and long.batch[-1] < 64
    assert any(n.startswith("context 32768: batches above") for n in s.notes)
    assert not any(n.startswith("context 1024") for n in s.notes)
    assert [r["batch"] for r in schedule_json(s)["contexts"][1]["throughput"]] == [1]
