"""`serve`: the serving-level speedup of a workload beside the step-level one (issue 17 item 4)."""

from __future__ import annotations

import json

import pytest

from simulator.cli import main

BASE = ["serve", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--json"]


def _points(capsys, *extra):
    assert main([*BASE, *extra]) == 0
    return json.loads(capsys.readouterr().out)["points"]


def test_without_prompts_and_caps_serving_equals_the_step(capsys):
    # ISL 0: no prefill shares the iterations, every request decodes: the served speedup is the step speedup at C
    for p in _points(capsys, "--isl", "0", "--concurrency", "1,16"):
        assert p["decode_batch_base"] == p["decode_batch_sd"] == p["concurrency"]
        assert p["speedup_throughput"] == pytest.approx(
            p["step_speedup"] * p["accept_length"] / p["round_accept_length"], rel=1e-9)


def test_plain_decoding_is_no_speedup_at_any_workload(capsys):
    for p in _points(capsys, "--draft-len", "0", "--concurrency", "1,32", "--engine", "sglang"):
        assert p["speedup_throughput"] == pytest.approx(1.0, rel=1e-12)
        assert p["speedup_tpot"] == pytest.approx(1.0, rel=1e-12)


def test_the_sd_cap_lowers_the_served_speedup_below_the_step_one(capsys):
    # SGLang caps the running requests under SD (48 by default): at C = 64 the SD arm decodes fewer at once
    (p,) = _points(capsys, "--engine", "sglang", "--gpus", "1", "--concurrency", "64")
    assert p["decode_batch_sd"] < p["decode_batch_base"]
    assert p["speedup_throughput"] < p["step_speedup"]


def test_table_and_bad_input(capsys):
    assert main(["serve", "--model", "qwen3-30b-a3b", "--concurrency", "1,8"]) == 0
    out = capsys.readouterr().out
    assert "step S" in out and "tok/s S" in out and max(map(len, out.splitlines())) <= 100
    for bad, field in ((["--concurrency", "0"], "concurrency"), (["--osl", "0"], "osl"),
                       (["--prefill", "x"], "prefill"), (["--draft-len", "-1"], "draft")):
        assert main(["serve", "--model", "qwen3-30b-a3b", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and field in err[0]


def test_a_tree_is_priced_beside_the_chain(capsys):
    """--tree adds rows ("also price"): the chain rows are those of the run without it."""
    chain = _points(capsys, "--concurrency", "1,8")
    both = _points(capsys, "--concurrency", "1,8", "--tree", "2,2")
    assert [p["draft"] for p in both] == ["γ = 3", "γ = 3", "tree 2,2 (7 nodes)", "tree 2,2 (7 nodes)"]
    assert both[:2] == chain
    assert both[2]["round_accept_length"] > chain[0]["round_accept_length"]


@pytest.mark.parametrize("argv,flag", [(["--context", "8192"], "--context"),
                                       (["--tree", "2,2", "--draft-len", "0"], "--draft-len")])
def test_meaningless_serve_flags_are_one_line(capsys, argv, flag):
    assert main(["serve", "--model", "qwen3-30b-a3b", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {flag}:"), err
