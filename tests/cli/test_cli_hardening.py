"""Issue 13's list of bad or odd inputs, one case each: exit status 2, exactly one line on stderr that names the
parameter (flag, or file and field), no traceback, and no output file left behind. Plus the write rules: outputs
appear atomically (a failure or Ctrl-C leaves nothing partial, exit 130 with one line), a run folder carries a
manifest and refuses a different run's folder unless --force.

Runs the CLI in process (``simulator.cli.main``), so an uncaught exception (a traceback) fails the test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simulator.cli import main

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ["sweep", "--model", "qwen3-30b-a3b", "--batch", "1,4", "--draft-len", "1,2", "--quiet", "--out", "{tmp}/run"]
EXPLAIN = ["explain", "--model", "qwen3-30b-a3b"]
STEP = ["step", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--batch", "1", "--tokens", "2"]
MOE = ["op", "moe", "--hardware", "h100-sxm", "--hidden", "4096", "--inter", "1536", "--experts", "128",
       "--top-k", "8", "--dtype", "fp8_block"]
GEMM = ["op", "gemm", "--hardware", "h100-sxm", "--k", "4096", "--dtype", "bf16"]
ATTN = ["op", "attention", "--hardware", "h100-sxm", "--kv-len", "2048"]
ATTN_OK = {"--batch": "8", "--heads": "8", "--kv-heads": "1", "--head-dim": "128"}


def _attention(**bad):
    flags = {**ATTN_OK, **{f"--{k.replace('_', '-')}": v for k, v in bad.items()}}
    return [*ATTN, *[x for kv in flags.items() for x in kv]]


def _yaml(tmp: Path, src: str, name: str, old: str, new: str) -> str:
    text = (ROOT / src).read_text(encoding="utf-8")
    assert old in text, old
    path = tmp / name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return str(path)


def _files(tmp: Path) -> dict:
    """Bad input files each case may use (written into the test's folder)."""
    (tmp / "afile").write_text("not a folder\n")
    hw = "hardware/h100-sxm.yaml"
    model = "models/qwen3-235b-a22b.yaml"
    cohere = "  profile: cohere-128x8  # routing/cohere-128x8.yaml (Cohere blog, published.md)"
    return {
        "sm_half": _yaml(tmp, hw, "sm-half.yaml", "sm_count: {value: 132,", "sm_count: {value: 131.5,"),
        "sm_huge": _yaml(tmp, hw, "sm-huge.yaml", "sm_count: {value: 132,", "sm_count: {value: 1e30,"),
        "kv7": _yaml(tmp, model, "kv7.yaml", "  q_heads: 64\n  kv_heads: 4", "  q_heads: 56\n  kv_heads: 7"),
        "skew5": _yaml(tmp, model, "skew5.yaml", cohere, '  source: B1\n  lags: [0.3]\n  popularity: "skew:5"'),
        "lags_bad": _yaml(tmp, model, "lags.yaml", cohere, "  source: B1\n  lags: [0.118, 0.506, 0.816]"),
        "lags_tri": _yaml(tmp, model, "tri.yaml", cohere, "  source: B1\n  lags: [0.9, 0.1, 0.9, 0.1]"),
        "tp3": _yaml(tmp, "experiments/paper-headline.yaml", "tp3.yaml", "      tp: 8", "      tp: 3"),
    }


# (id, argv with {tmp}/{name} placeholders, text the one line must contain: the parameter it names)
CASES = [
    # unwritable outputs
    ("sweep-out-file", [*SWEEP, "--out", "{tmp}/afile"], "--out"),
    ("sweep-out-sys", [*SWEEP, "--out", "/sys/x"], "--out"),
    ("sweep-out-proc", [*SWEEP, "--out", "/proc/x"], "--out"),
    ("explain-plot-bad-path", [*EXPLAIN, "--plot", "{tmp}/afile/w.png"], "--plot"),
    ("explain-plot-proc", [*EXPLAIN, "--plot", "/proc/x/w.png"], "--plot"),
    ("explain-plot-txt", [*EXPLAIN, "--plot", "{tmp}/w.txt"], "--plot"),
    ("explain-plot-no-suffix", [*EXPLAIN, "--plot", "{tmp}/waterfall"], "--plot"),
    ("overlap-synth-out", ["overlap", "synth", "--experts", "8", "--top-k", "2", "--sequences", "2", "--tokens", "4",
                           "--out", "/proc/x.npz"], "cannot write"),
    ("calibrate-report-sys", ["calibrate", "--report", "/sys/x.md"], "--report"),
    ("calibrate-report-bad-path", ["calibrate", "--report", "{tmp}/afile/r.md"], "--report"),
    ("calibrate-write-new", ["calibrate", "--write", "{tmp}/new.yaml"], "--write"),
    ("calibrate-write-other-gpu", ["calibrate", "--write", "hardware/b200.yaml"], "field 'name'"),
    ("experiment-out-file", ["experiment", "paper-headline", "--out", "{tmp}/afile"], "--out"),
    ("experiment-report-bad", ["experiment", "paper-headline", "--report", "{tmp}/afile/r.md"], "--report"),
    # overflow, samples
    ("sweep-batch-overflow", [*SWEEP[:5], "--batch", "99999999999999999999"], "--batch"),
    ("overlap-fit-samples-0", ["overlap", "fit", "{trace}", "--samples", "0"], "--samples"),
    # op nonsense
    ("op-moe-tokens", [*MOE, "--tokens", "-4"], "--tokens"),
    ("op-moe-hidden", [*MOE[:4], "0", *MOE[5:], "--tokens", "4"], "--hidden"),
    ("op-moe-inter", [*MOE[:6], "-1", *MOE[7:], "--tokens", "4"], "--inter"),
    ("op-moe-ep3", [*MOE, "--tokens", "4", "--ep", "3"], "--ep"),
    ("op-gemm-n", [*GEMM, "--m", "1", "--n", "-1"], "--n"),
    ("op-gemm-m-1e20", [*GEMM, "--m", "1e20", "--n", "1"], "--m"),
    ("op-gemm-m-huge", [*GEMM, "--m", "100000000000000000000", "--n", "1"], "--m"),
    ("op-attention-heads", _attention(heads="0"), "--heads"),
    ("op-attention-kv-heads", _attention(kv_heads="3"), "--kv-heads"),
    ("op-attention-head-dim", _attention(head_dim="-1"), "--head-dim"),
    ("op-attention-batch", _attention(batch="0"), "--batch"),
    ("op-allreduce-bytes", ["op", "allreduce", "--hardware", "h100-sxm", "--bytes", "-1", "--gpus", "8"], "--bytes"),
    # empty strings never become the default
    ("empty-model", [*SWEEP[:1], "--model", "", *SWEEP[3:]], "--model"),
    ("empty-batch", [*SWEEP[:3], "--batch", ""], "--batch"),
    ("empty-draft-len", [*SWEEP[:3], "--draft-len", ""], "--draft-len"),
    ("empty-hardware", [*SWEEP, "--hardware", ""], "--hardware"),
    ("empty-overlap", [*SWEEP, "--overlap", ""], "--overlap"),
    ("empty-mode", [*SWEEP, "--mode", ""], "--mode"),
    ("empty-explain-model", ["explain", "--model", ""], "--model"),
    ("empty-step-dtype", [*STEP, "--dtype", ""], "--dtype"),
    # YAML numbers and physics
    ("sm-count-fraction", ["show", "hardware", "{sm_half}"], "compute.sm_count"),
    ("sm-count-1e30", ["show", "hardware", "{sm_huge}"], "compute.sm_count"),
    ("kv-heads-7-tp-8", ["step", "--model", "{kv7}", "--hardware", "h100-sxm", "--batch", "1", "--tokens", "1",
                         "--tp", "8", "--ep", "8"], "KV heads"),
    ("experiment-check-tp3", ["experiment", "{tp3}", "--check", "--quiet"], "'tp'"),
    ("show-model-skew5", ["show", "model", "{skew5}"], "routing_overlap.popularity"),
    ("sweep-model-skew5", [*SWEEP[:1], "--model", "{skew5}", *SWEEP[3:]], "routing_overlap.popularity"),
    ("show-model-lags-ipf", ["show", "model", "{lags_bad}"], "routing_overlap.lags"),
    ("explain-model-lags-ipf", ["explain", "--model", "{lags_bad}"], "routing_overlap.lags"),
    ("show-model-lags-triangle", ["show", "model", "{lags_tri}"], "routing_overlap.lags"),
    ("explain-overlap-flag", [*EXPLAIN, "--overlap", "0.9,0.1"], "--overlap"),
    ("step-popularity-flag", [*STEP, "--overlap", "0.3", "--popularity", "skew:5"], "--popularity"),
    # messages without internals
    ("accept-length-10", [*EXPLAIN, "--accept-length", "10@3"], "acceptance length 10.0"),
    ("accept-length-gamma-0", [*EXPLAIN, "--accept-length", "2@0"], "--accept-length"),
    ("target-typo", ["explain", "--model", "qwen3-235b-a22x"], "qwen3-235b-a22b"),
    # issue 20: tracebacks and late failures
    ("explain-tree-parents-binary", [*EXPLAIN, "--tree-parents", "/bin/ls"], "--tree-parents"),
    ("experiment-run-tp3", ["experiment", "{tp3}", "--quiet", "--out", "{tmp}/tp3"], "'tp'"),
    ("experiment-all-out-proc", ["experiment", "--all", "--quiet", "--out", "/proc/x"], "--out"),
    ("validate-report-proc", ["validate", "tpot", "tests/validate/tiny_silicon.csv", "--report", "/proc/x.md"],
     "--report"),
    ("validate-ops-file", ["validate", "ops", "{tmp}/afile"], "DIR"),
    # issue 20: physically meaningless combinations, refused with the reason
    ("dense-placement", ["explain", "--model", "llama-3.1-8b", "--placement", "balanced"],
     "'placement' = 'balanced': llama-3.1-8b is dense"),
    ("dense-redundant", ["explain", "--model", "llama-3.1-8b", "--redundant-experts", "8"], "--redundant-experts"),
    ("deepep-pure-tp", [*STEP, "--tp", "8", "--all-to-all", "deepep_low_latency"], "--all-to-all"),
    ("gb200-129", ["step", "--model", "deepseek-r1", "--hardware", "gb200", "--gpus", "129", "--batch", "1",
                   "--tokens", "1"], "--gpus"),
]
INTERNALS = ("np.float64", "np.int64(", "the 'alpha' parameter of Acceptance", "alpha_from_accept_length",
             "range [1, 0]", "allow_pickle", "Traceback", "raise max_iter")


@pytest.mark.parametrize("argv,text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, monkeypatch, argv, text):
    monkeypatch.chdir(ROOT)  # bundled paths (hardware/b200.yaml) are relative to the repository
    names = _files(tmp_path)
    if any("{trace}" in a for a in argv):
        import numpy as np

        from simulator.traces import synth_trace

        names["trace"] = str(tmp_path / "t.npy")
        np.save(names["trace"], np.asarray(synth_trace(16, 2, 2, 8, seed=1).experts))
    before = sorted(p.name for p in tmp_path.iterdir())
    b200 = (ROOT / "hardware/b200.yaml").read_bytes()
    argv = [a.format(tmp=tmp_path, **names) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert text in lines[0], lines[0]
    for internal in INTERNALS:
        assert internal not in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, nothing half-written
    assert (ROOT / "hardware/b200.yaml").read_bytes() == b200


def test_typo_of_a_target_does_not_suggest_a_drafter(tmp_path, capsys):
    assert main(["sweep", "--model", "qwen3-0.6c", "--no-plots", "--out", str(tmp_path / "run")]) == 2
    line = capsys.readouterr().err.strip()
    assert "qwen3-0.6b" not in line and "did you mean" in line, line


def test_ctrl_c_exits_130_with_one_line_and_no_partial_run(tmp_path, capsys, monkeypatch):
    import simulator.sweep as sweep

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "plot_all", interrupted)  # after the CSV is written into the staging folder
    out = tmp_path / "run"
    assert main([*SWEEP[:-2], "--out", str(out)]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
    assert not out.exists()  # the staging folder and the folder the run created are gone


def test_failure_while_writing_leaves_no_file(tmp_path):
    from simulator.outputs import atomic_write

    target = tmp_path / "x.csv"
    with pytest.raises(RuntimeError), atomic_write(target) as f:
        f.write("half")
        raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []


def test_run_folder_manifest_and_force(tmp_path, capsys):
    """Issue 20's output policy: a previous run's own files (its manifest lists them) are replaced without --force;
    a file no run recorded is never overwritten without --force, and files beside the run are left alone."""
    out = tmp_path / "run"
    SWEEP = [a.format(tmp=tmp_path) for a in globals()["SWEEP"]]
    assert main([*SWEEP, "--no-plots", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == "sweep" and manifest["files"] == ["sweep.csv"]
    assert manifest["arguments"]["batch"] == [1, 4] and "version" in manifest
    assert main([*SWEEP, "--no-plots", "--out", str(out)]) == 0  # the same run again: replaced in place
    assert main([*SWEEP, "--no-plots", "--format", "json", "--out", str(out)]) == 0  # a different run: replaces it
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "sweep.json"]  # never mixed
    assert {(p.name, p.stat().st_mode & 0o777) for p in out.iterdir()} == {("manifest.json", 0o644),
                                                                        ("sweep.json", 0o644)}
    capsys.readouterr()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    assert main([*SWEEP, "--no-plots", "--out", str(tmp_path / "mine")]) == 0  # beside files no run recorded
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["manifest.json", "notes.txt", "sweep.csv"]
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "sweep.csv").write_text("someone else's\n")
    assert main([*SWEEP, "--no-plots", "--out", str(tmp_path / "theirs")]) == 2  # would overwrite it
    err = capsys.readouterr().err
    assert "sweep.csv" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "theirs").iterdir()) == ["sweep.csv"]
    assert (tmp_path / "theirs" / "sweep.csv").read_text() == "someone else's\n"
    assert main([*SWEEP, "--no-plots", "--out", str(tmp_path / "theirs"), "--force"]) == 0


def test_output_files_are_0644(tmp_path, monkeypatch):
    import os

    from simulator.outputs import atomic_text

    old = os.umask(0o022)
    try:
        atomic_text(tmp_path / "a.md", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.md").stat().st_mode & 0o777 == 0o644


def test_study_then_default_sweep_share_results(tmp_path, monkeypatch, capsys):
    """A study's run folder inside results/ is this tool's: the default sweep into results/ writes beside it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results" / "paper-headline").mkdir(parents=True)
    (tmp_path / "results" / "paper-headline" / "manifest.json").write_text('{"command": "experiment", "files": []}')
    SWEEP = [a.format(tmp=tmp_path) for a in globals()["SWEEP"]][:-2]
    assert main([*SWEEP, "--no-plots"]) == 0
    assert (tmp_path / "results" / "sweep.csv").is_file()


def test_explain_plot_writes_exactly_the_path_given(tmp_path, capsys):
    path = tmp_path / "w.svg"
    assert main([*EXPLAIN, "--plot", str(path)]) == 0
    out = capsys.readouterr().out
    assert path.is_file() and re.search(rf"wrote {re.escape(str(path))}$", out.strip())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.svg"]


def test_engine_on_a_vendor_it_does_not_run_on(capsys, tmp_path):
    """TRT-LLM kernels on an AMD GPU: refused for a profile of its own, a note for a what-if on NVIDIA kernels."""
    from simulator.cost.deployment import Deployment, engine_note, validate
    from simulator.errors import InfeasibleError
    from simulator.specs import load_hardware, load_model

    m, hw = load_model("qwen3-30b-a3b"), load_hardware("mi300x")
    with pytest.raises(InfeasibleError, match="'engine' = 'trtllm'.*does not run on amd"):
        validate(m, hw.with_changes(what_if=False), Deployment(tp=2, ep=2, engine="trtllm"))
    validate(m, hw.with_changes(what_if=False), Deployment(tp=2, ep=2, engine="vllm"))
    assert engine_note(hw, "vllm") == "" and "what-if" in engine_note(hw, "trtllm")
    assert main(["step", "--model", "qwen3-30b-a3b", "--hardware", "mi300x", "--batch", "1", "--tokens", "1",
                 "--engine", "TRTLLM"]) == 0  # engine names are case-insensitive
    assert "note: trtllm does not run on amd GPUs" in capsys.readouterr().out
    assert main(["sweep", "--model", "qwen3-30b-a3b", "--hardware", "mi300x", "--batch", "1", "--draft-len", "1",
                 "--no-plots", "--out", str(tmp_path / "mi")]) == 0
    assert "note: trtllm does not run on amd GPUs" in capsys.readouterr().err


def test_gb200_128_gpus_are_two_partly_used_racks(capsys):
    """128 GB200 GPUs = 2 NVL72 racks of 64: priced as two domains of 64 GPUs each."""
    import numpy as np

    from simulator.cost.deployment import Mechanisms
    from simulator.cost.engine import collective_seconds
    from simulator.specs import load_hardware

    hw = load_hardware("gb200")
    racks64 = hw.with_changes(domain_size=64)
    for kind in ("all_reduce", "all_to_all"):
        a = collective_seconds(kind, np.array([1e4, 1e7]), 128, hw, Mechanisms())
        b = collective_seconds(kind, np.array([1e4, 1e7]), 128, racks64, Mechanisms())
        assert np.allclose(a, b) and not np.allclose(a, collective_seconds(kind, np.array([1e4, 1e7]), 72, hw,
                                                                         Mechanisms()))
    assert main(["step", "--model", "deepseek-r1", "--hardware", "gb200", "--gpus", "128", "--dp", "128", "--ep",
                 "128", "--batch", "1", "--tokens", "1"]) == 0
    assert "dp128 ep128" in capsys.readouterr().out


def _parsers():
    import argparse

    from simulator.cli import build_parser

    def walk(p, path):
        yield " ".join(path), p
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, [*path, name])

    return list(walk(build_parser(), []))


def test_every_help_fits_100_columns(monkeypatch):
    """Issue 20: every command's --help at COLUMNS=100 (descriptions, examples and usage wrap; nothing clipped)."""
    monkeypatch.setenv("COLUMNS", "100")
    parsers = _parsers()
    assert len(parsers) > 15
    for path, p in parsers:
        text = p.format_help()
        long = [line for line in text.splitlines() if len(line) > 100]
        assert not long, (path, long[0])
    words = " ".join(p.format_help() for _, p in parsers).split()
    assert "python -m simulator explain --model qwen3-235b-a22b --batch 16" in " ".join(words)  # examples intact


TOUR = [
    ["sweep", "--model", "qwen3-30b-a3b", "--batch", "1,4", "--draft-len", "1,2", "--tree", "2,2,2", "--no-plots",
     "--quiet", "--out", "{tmp}/sw"],
    ["overlap", "predict", "--experts", "128", "--top-k", "8", "--tree", "2,2,2"],
    ["validate", "tpot", "tests/validate/tiny_silicon.csv", "--rows"],
    ["validate", "ops", "measured/h100-sxm"],
    ["explain", "--model", "qwen3-30b-a3b", "--tree", "2,2"],
    ["op", "allreduce", "--hardware", "h100-sxm", "--bytes", "1000000", "--gpus", "8"],
    ["step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--batch", "1,16", "--tree", "2,2"],
    ["schedule", "--model", "qwen3-30b-a3b", "--batch", "1,8", "--draft-len", "1,2", "--tree", "2,2", "--format",
     "vllm", "--out", "{tmp}/s.json", "--contexts", "1024,32768"],
    ["list"],
    ["show", "model", "deepseek-r1"],
    ["show", "hardware", "gb200"],
]


@pytest.mark.parametrize("argv", TOUR, ids=[" ".join(a[:2]) for a in TOUR])
def test_tour_output_fits_100_columns(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "100")
    assert main([a.format(tmp=tmp_path) for a in argv]) == 0
    out = capsys.readouterr().out
    assert out.strip() and max(len(line) for line in out.splitlines()) <= 100


def test_experiment_key_numbers_wrap_long_keys(capsys):
    from types import SimpleNamespace

    from simulator.cli.experiment import _print_keys

    keys = (("short", "1.0"), ("a key " * 20, "0.525 / 0.468 / 0.768"))
    _print_keys(SimpleNamespace(key_numbers=keys))
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 100 and len(lines) == 4  # the long key wraps onto two lines, then its value
    assert lines[-1].strip() == "0.525 / 0.468 / 0.768" and lines[0].split() == ["short", "1.0"]


def test_tree_labelled_as_typed_and_waterfall_titled_with_the_tree(capsys, monkeypatch, tmp_path):
    import importlib

    ex = importlib.import_module("simulator.sweep.explain")  # the module (the package exports the function)
    seen = {}
    monkeypatch.setattr(ex, "save", lambda fig, path: seen.setdefault("title", fig._suptitle.get_text()) and path)
    assert main([*EXPLAIN, "--tree", "2,2,2", "--plot", str(tmp_path / "w.png")]) == 0
    out = capsys.readouterr().out
    assert "draft tree 2,2,2 (15 nodes)" in " ".join(out.split()) and "2/4/8" not in out
    title = " ".join(seen["title"].split())
    assert "draft tree 2,2,2 (15 nodes)" in title and "draft length 14" not in title
    assert "units: T_dec, T_ver, T_round in µs" in out


def test_op_allreduce_prints_its_roofline(capsys):
    """README: every op next to its pure roofline; the all-reduce's is the ring's 2(n-1)/n wire bytes over the
    scale-up link bandwidth, with no latency."""
    from simulator.specs import load_hardware

    assert main(["op", "allreduce", "--hardware", "h100-sxm", "--bytes", "1000000,100000000", "--gpus", "8"]) == 0
    rows = json.loads(capsys.readouterr().out)
    bw = load_hardware("h100-sxm").link_bandwidth
    for r in rows:
        assert r["roofline_us"] == pytest.approx(2 * 7 / 8 * r["message_bytes"] / bw * 1e6, rel=1e-9)
        assert r["roofline_us"] < r["time_us"]


def test_errors_are_one_line_for_scripts_and_wrapped_on_a_terminal(capsys, monkeypatch):
    import io
    import sys

    argv = ["step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--dtype", "bf16", "--gpus", "1",
            "--tp", "1", "--ep", "1", "--batch", "1", "--tokens", "1"]  # weights do not fit: a long reason
    assert main(argv) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and len(line) > 100

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(argv) == 2
    lines = tty.getvalue().strip().splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 100 and " ".join(x.strip() for x in lines) == line
