"""`list` and `show` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from simulator.cli import invoke

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=ROOT):
    """The CLI in process from ``cwd`` (simulator.cli.invoke)."""
    return invoke(*args, cwd=cwd)


def test_list_json_counts(tmp_path):
    r = run("list", "--json", cwd=tmp_path)  # from any working directory
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert len(data["hardware"]) >= 10
    targets = [m for m in data["models"] if m["role"] == "target" and m["experts"] > 0]
    assert len(targets) >= 16
    assert len([m for m in data["models"] if m["role"] == "drafter"]) >= 2
    assert all(isinstance(m["total_params"], float) and m["total_params"] > 1e8 for m in data["models"])


def test_show_model_json_has_param_counts_not_billions():
    d = json.loads(run("show", "model", "qwen3-235b-a22b", "--json").stdout)
    assert 2.3e11 < d["total_params"] < 2.4e11 and 2.1e10 < d["active_params"] < 2.3e10
    assert d["derived"]["kv_bytes_per_token"]["bf16"] > 0


def test_show_hardware_by_path_and_what_if_kernels(tmp_path):
    r = run("show", "hardware", str(ROOT / "hardware/b300.yaml"), "--json")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["what_if"] is True
    assert d["kernels"]["classes"]["moe"]["fp8_block"]["fixed_us"] > 0  # derived from H100 by the what-if rule


def test_help_has_examples():
    for cmd in ("list", "show", "step", "op", "op moe", "op gemm", "op attention", "op allreduce", "calibrate",
                "sweep", "explain", "overlap", "overlap predict", "overlap fit", "overlap synth", "experiment"):
        r = run(*cmd.split(), "--help")
        assert r.returncode == 0 and "example" in r.stdout.lower(), cmd


def test_list_routing_profiles_and_show_model_citation():
    d = json.loads(run("list", "routing", "--json").stdout)
    cohere = next(r for r in d["routing"] if r["name"] == "cohere-128x8")
    assert cohere["lags"] == [0.381, 0.329, 0.301, 0.299] and "Cohere" in cohere["citation"]
    r = run("show", "model", "qwen3-235b-a22b")
    assert r.returncode == 0 and "profile=cohere-128x8" in r.stdout and "0.381" in r.stdout and "Cohere" in r.stdout


def _error(*args, cwd=ROOT) -> str:
    r = run(*args, cwd=cwd)
    assert r.returncode == 2 and not r.stdout, (args, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_bad_flags_are_one_line_errors_naming_the_flag():
    """Library errors name library parameters; the CLI says the same with its flag (cli/_common.flag_of)."""
    step = ("step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--tokens", "1")
    assert _error(*step, "--batch", "0") == ("error: --batch: must be a non-empty list of ints in the range "
                                             "[1, inf) (requests); got [0]")
    assert _error(*step, "--batch", "1", "--context", "-1").startswith("error: --context: must be an int")
    assert _error(*step, "--batch", "1", "--tp", "0").startswith("error: --tp: must be an int in the range [1, 1024]")
    assert "--overlap: must be" in _error(*step, "--batch", "1", "--overlap", "38.1")
    moe = ("op", "moe", "--hardware", "h100-sxm", "--hidden", "4096", "--inter", "1536", "--experts", "128",
           "--top-k", "8", "--dtype", "fp8_block")
    assert _error(*moe, "--tokens", "-4").startswith("error: --tokens: must be a non-empty list of ints")
    assert "--top-k: must be at most the number of experts (128); got 129" in _error(
        *moe[:-4], "--top-k", "129", "--dtype", "fp8_block", "--tokens", "1")


def test_bad_routing_profile_name_in_a_user_model(tmp_path):
    text = (ROOT / "models/qwen3-235b-a22b.yaml").read_text().replace("profile: cohere-128x8", "profile: cohere-12x8")
    (tmp_path / "m.yaml").write_text(text)
    line = _error("show", "model", "m.yaml", cwd=tmp_path)
    assert "routing_overlap.profile" in line and "did you mean 'cohere-128x8'" in line
