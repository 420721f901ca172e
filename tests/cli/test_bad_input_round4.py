"""Round 4 of the bad-input campaigns, as users meet them: each meaningless input is one line naming the flag or
field, the value and the fix, exit status 2, nothing written; each valid neighbour is accepted and priced.

Runs the CLI in process (``simulator.cli.main``), so a traceback fails the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.cli import main

ROOT = Path(__file__).resolve().parents[2]

EXPLAIN = ["explain", "--model", "qwen3-30b-a3b"]

# (id, argv, text the one line must contain)
REFUSED = [
    ("eagle3-full-model", [*EXPLAIN, "--drafter", "eagle3:qwen3-0.6b"], "--drafter: must be an EAGLE-3 head"),
    ("eagle3-full-model-sweep", ["sweep", "--model", "qwen3-30b-a3b", "--drafter", "eagle3:qwen3-0.6b", "--no-plots",
                                 "--quiet", "--out", "{tmp}/run"], "model:qwen3-0.6b"),
    ("eagle3-head-of-another-target", [*EXPLAIN, "--drafter", "eagle3:gpt-oss-120b-eagle3"], "gpt-oss-120b's hidden"),
    ("model-typed-short", ["explain", "--model", "qwen3-235b"], "did you mean 'qwen3-235b-a22b'"),
    ("eager-with-graph-padding", [*EXPLAIN, "--eager", "--graph-padding", "on"], "--graph-padding: 'on'"),
    ("fp8-peak-in-gflops", [*EXPLAIN, "--hardware", "{gflops}"], "compute.peak_flops.fp8' is 1.979 TFLOPS"),
    ("hbm-bandwidth-in-gbps", [*EXPLAIN, "--hardware", "{gbps}"], "memory.hbm_bandwidth' is 0.00335 TB/s"),
    ("negative-popularity-weight", ["overlap", "predict", "--experts", "4", "--top-k", "1", "--tokens", "2",
                                    "--popularity", "{pop}"], "weight 3 of 4 is -0.1"),
    ("write-profile-folder", ["overlap", "fit", "{trace}", "--write-profile", "{tmp}/profiles/"],
     "--write-profile: cannot write"),
    ("write-profile-not-yaml", ["overlap", "fit", "{trace}", "--write-profile", "{tmp}/p.txt"],
     "--write-profile: cannot write"),
    ("write-profile-thirds-of-one-layer", ["overlap", "fit", "{trace1}", "--write-profile", "{tmp}/p.yaml"],
     "--profile-split: must be per_layer"),
    ("prompt-beyond-the-models-context", ["serve", "--model", "qwen3-30b-a3b", "--isl", "1000000"],
     "--isl: must be at most 130,560 tokens"),
    ("context-beyond-the-models-context", [*EXPLAIN, "--context", "200000"], "--context: must be at most 131,068"),
    ("fp8-checkpoint-on-a100", ["explain", "--model", "Qwen/Qwen3-30B-A3B-FP8", "--hardware", "a100-sxm"],
     "dtype=fp8_block (its checkpoint's format)"),
    ("mtp-without-an-mtp-module", [*EXPLAIN, "--drafter", "mtp"], "--drafter: 'mtp' needs a target with an MTP module"),
    ("two-batch-overlap-on-one-gpu", [*EXPLAIN, "--gpus", "1", "--two-batch-overlap", "on"],
     "--two-batch-overlap: 'on' overlaps"),
    ("two-batch-overlap-under-attention-tp", [*EXPLAIN, "--tp", "8", "--two-batch-overlap", "on"],
     "attention TP, dp 1"),
    ("two-batch-overlap-on-a-dense-model", ["explain", "--model", "llama-3.1-8b", "--tp", "4", "--dp", "2",
                                            "--two-batch-overlap", "on"], "a dense model"),
    ("nvfp4-dispatch-on-a100", [*EXPLAIN, "--hardware", "a100-sxm", "--dispatch-dtype", "nvfp4"],
     "needs fp4 tensor cores, which a100-sxm does not have"),
    ("fp8-dispatch-on-a100", [*EXPLAIN, "--hardware", "a100-sxm", "--dispatch-dtype", "fp8"],
     "needs fp8 tensor cores, which a100-sxm does not have"),
]
ACCEPTED = [
    ("eagle3-head-of-its-target", ["explain", "--model", "gpt-oss-120b", "--drafter", "eagle3:gpt-oss-120b-eagle3"]),
    ("long-prompt-within-the-models-context", ["serve", "--model", "qwen3-30b-a3b", "--isl", "100000", "--osl",
                                               "1000", "--concurrency", "1"]),
    ("fp8-checkpoint-on-h100", ["explain", "--model", "Qwen/Qwen3-30B-A3B-FP8"]),
    ("bf16-checkpoint-on-a100", ["explain", "--model", "Qwen/Qwen3-30B-A3B", "--hardware", "a100-sxm"]),
    ("fp8-checkpoint-as-bf16-when-asked", ["explain", "--model", "Qwen/Qwen3-30B-A3B-FP8", "--hardware", "a100-sxm",
                                           "--dtype", "bf16"]),
    ("eagle3-head-of-the-same-architecture", ["explain", "--model", "deepseek-r1", "--gpus", "16",
                                              "--drafter", "eagle3:deepseek-v3-eagle3"]),
    ("mtp-with-its-module", ["explain", "--model", "glm-4.7-flash", "--drafter", "mtp"]),
    ("two-batch-overlap-under-attention-dp", [*EXPLAIN, "--tp", "4", "--dp", "2", "--two-batch-overlap", "on"]),
    ("nvfp4-dispatch-on-b200", [*EXPLAIN, "--hardware", "b200", "--tp", "4", "--dp", "2", "--dispatch-dtype",
                                "nvfp4"]),
]


def _inputs(tmp: Path) -> dict:
    """Files the cases read, written into ``tmp/in`` (the cases' outputs go to ``tmp``, which must stay empty)."""
    import numpy as np

    d = tmp / "in"
    d.mkdir()
    hw = (ROOT / "hardware/h100-sxm.yaml").read_text(encoding="utf-8")
    fp8, bw = "fp8: {value: 1978.9, unit: TFLOPS", "hbm_bandwidth: {value: 3.35, unit: TB/s"
    assert fp8 in hw and bw in hw
    (d / "gflops.yaml").write_text(hw.replace(fp8, fp8.replace("TFLOPS", "GFLOPS")), encoding="utf-8")
    (d / "gbps.yaml").write_text(hw.replace(bw, bw.replace("TB/s", "GB/s")), encoding="utf-8")
    (d / "pop.txt").write_text("0.5\n0.3\n-0.1\n0.3\n")
    rng = np.random.default_rng(0)
    for name, layers in (("trace", 3), ("trace1", 1)):
        ids = np.stack([rng.permutation(8)[:2] for _ in range(2 * 16 * layers)]).reshape(2, 16, layers, 2)
        np.save(d / f"{name}.npy", ids)
    return {"gflops": d / "gflops.yaml", "gbps": d / "gbps.yaml", "pop": d / "pop.txt", "trace": d / "trace.npy",
            "trace1": d / "trace1.npy"}


@pytest.mark.parametrize("argv,text", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_in_one_line(tmp_path, capsys, argv, text):
    files = _inputs(tmp_path)
    assert main([a.format(tmp=tmp_path, **files) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and text in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]  # nothing written


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


def test_every_target_states_its_longest_context_with_a_source():
    from simulator.specs.catalog import list_models

    targets = [m for m in list_models() if m.role == "target"]
    assert targets and all(m.max_context >= 4096 for m in targets), [m.name for m in targets if not m.max_context]
    for m in targets:
        assert m.provenance["max_context"].source in m.sources, m.name


def test_a_sweep_skips_the_models_a_context_exceeds(tmp_path, capsys):
    argv = ["sweep", "--model", "olmoe-1b-7b,qwen3-30b-a3b", "--context", "8000", "--batch", "1", "--draft-len", "1",
            "--no-plots", "--out", str(tmp_path)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "skipped olmoe-1b-7b on h100-sxm" in err and "4,096" in err and "qwen3-30b-a3b" in out
