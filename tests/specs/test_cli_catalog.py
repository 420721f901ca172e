"""`list` and `show` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "simulator", *args], capture_output=True, text=True, cwd=cwd)


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
    r = run("show", "hardware", str(ROOT / "hardware/b200.yaml"), "--json")
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["what_if"] is True
    assert d["kernels"]["classes"]["moe"]["fp8_block"]["fixed_us"] > 0  # derived from H100 by the what-if rule


def test_help_has_examples():
    for cmd in ("list", "show", "step", "op", "op moe", "op gemm", "op attention", "op allreduce", "calibrate",
                "sweep", "explain", "overlap", "overlap predict", "overlap fit", "overlap synth", "experiment"):
        r = run(*cmd.split(), "--help")
        assert r.returncode == 0 and "example" in r.stdout.lower(), cmd
