"""Round 4 of the bad-input campaigns, as users meet them: each meaningless input is one line naming the flag or
field, the value and the fix, exit status 2, nothing written; each valid neighbour is accepted and priced.

Runs the CLI in process (``simulator.cli.main``), so a traceback fails the test."""

from __future__ import annotations

import pytest

from simulator.cli import main

EXPLAIN = ["explain", "--model", "qwen3-30b-a3b"]

# (id, argv, text the one line must contain)
REFUSED = [
    ("eagle3-full-model", [*EXPLAIN, "--drafter", "eagle3:qwen3-0.6b"], "--drafter: must be an EAGLE-3 head"),
    ("eagle3-full-model-sweep", ["sweep", "--model", "qwen3-30b-a3b", "--drafter", "eagle3:qwen3-0.6b", "--no-plots",
                                 "--quiet", "--out", "{tmp}/run"], "model:qwen3-0.6b"),
    ("eagle3-head-of-another-target", [*EXPLAIN, "--drafter", "eagle3:gpt-oss-120b-eagle3"], "gpt-oss-120b's hidden"),
    ("model-typed-short", ["explain", "--model", "qwen3-235b"], "did you mean 'qwen3-235b-a22b'"),
    ("fp8-checkpoint-on-a100", ["explain", "--model", "Qwen/Qwen3-30B-A3B-FP8", "--hardware", "a100-sxm"],
     "dtype=fp8_block (its checkpoint's format)"),
]
ACCEPTED = [
    ("eagle3-head-of-its-target", ["explain", "--model", "gpt-oss-120b", "--drafter", "eagle3:gpt-oss-120b-eagle3"]),
    ("fp8-checkpoint-on-h100", ["explain", "--model", "Qwen/Qwen3-30B-A3B-FP8"]),
    ("bf16-checkpoint-on-a100", ["explain", "--model", "Qwen/Qwen3-30B-A3B", "--hardware", "a100-sxm"]),
    ("fp8-checkpoint-as-bf16-when-asked", ["explain", "--model", "Qwen/Qwen3-30B-A3B-FP8", "--hardware", "a100-sxm",
                                           "--dtype", "bf16"]),
    ("eagle3-head-of-the-same-architecture", ["explain", "--model", "deepseek-r1", "--gpus", "16",
                                              "--drafter", "eagle3:deepseek-v3-eagle3"]),
]


@pytest.mark.parametrize("argv,text", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_in_one_line(tmp_path, capsys, argv, text):
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and text in err[0], err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_and_priced(capsys, argv):
    assert main(argv) == 0, capsys.readouterr().err
    assert "speedup" in capsys.readouterr().out


def test_a_hub_id_keeps_its_checkpoints_format():
    """Named by its FP8 checkpoint's hub id, a model deploys in that format (as --dtype would)."""
    from simulator.pricing import resolve

    assert resolve("Qwen/Qwen3-30B-A3B-FP8", "h100-sxm").deployment.dtype == "fp8_block"
    assert resolve("Qwen/Qwen3-30B-A3B-FP8", "h100-sxm").model.name == "qwen3-30b-a3b"
    assert resolve("qwen3-30b-a3b", "a100-sxm").deployment.dtype == "bf16"
