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
]
ACCEPTED = [
    ("eagle3-head-of-its-target", ["explain", "--model", "gpt-oss-120b", "--drafter", "eagle3:gpt-oss-120b-eagle3"]),
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
