"""`step`, `op` and `calibrate` from the command line: stable JSON, one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.cli import invoke

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=ROOT):
    """The CLI in process from ``cwd`` (simulator.cli.invoke)."""
    return invoke(*args, cwd=cwd)


def test_step_json_has_time_breakdown_and_bound():
    r = run("step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--dtype", "fp8_block", "--tp", "8",
            "--ep", "8", "--batch", "1,16", "--tokens", "4", "--mode", "prior", "--json")
    assert r.returncode == 0, r.stderr
    recs = json.loads(r.stdout)
    assert [x["batch"] for x in recs] == [1, 16]
    for x in recs:
        assert x["time_us"] > 0 and x["bound"] in ("compute", "memory", "fixed")
        assert abs(sum(x["breakdown"].values()) - x["time_us"]) < 1e-6 * x["time_us"]
        assert isinstance(x["time_us"], float) and x["mechanisms"]["routing"] == "uniform"


def test_step_mechanism_flags_override_the_preset():
    base = ["step", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--tp", "2", "--ep", "2", "--batch", "1",
            "--tokens", "4", "--json"]
    on = json.loads(run(*base).stdout)[0]
    off = json.loads(run(*base, "--fixed-costs", "off").stdout)[0]
    assert off["time_us"] < on["time_us"] and off["mechanisms"]["fixed_costs"] == "off"


@pytest.mark.parametrize("args, fragment", [
    (("step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--batch", "1", "--tokens", "1", "--tp", "3"),
     "tp"),
    (("step", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--batch", "1", "--tokens", "1",
     "--gpus", "1"), "GB per GPU"),
    (("step", "--model", "nope", "--hardware", "h100-sxm", "--batch", "1", "--tokens", "1"), "unknown model"),
    (("step", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--batch", "x", "--tokens", "1"), "--batch"),
    (("step", "--model", "qwen3-30b-a3b", "--hardware", "h100-sxm", "--batch", "1", "--tokens", "1",
      "--overlap", "38.1"), "fractions"),
    (("op", "gemm", "--hardware", "h100-sxm", "--m", "1", "--n", "8", "--k", "8", "--dtype", "nvfp4"),
     "fp4 tensor cores"),
    (("op", "allreduce", "--hardware", "h100-sxm", "--bytes", "1024", "--gpus", "64"), "gpus"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    r = run(*args)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1 and fragment in r.stderr
    assert "Traceback" not in r.stderr


def test_op_moe_mirrors_the_csv_columns():
    r = run("op", "moe", "--hardware", "h100-sxm", "--hidden", "4096", "--inter", "1536", "--experts", "128",
            "--top-k", "8", "--ep", "8", "--dtype", "fp8_block", "--tokens", "1,16")
    rows = json.loads(r.stdout)
    assert {"num_tokens", "hidden_size", "inter_size", "num_experts", "topk", "moe_tp_size", "moe_ep_size",
            "moe_dtype", "time_us", "roofline_us"} <= set(rows[0])
    assert rows[0]["roofline_us"] < rows[0]["time_us"] < rows[1]["time_us"]


def test_calibrate_runs_with_no_arguments_from_any_directory(tmp_path):
    """A fresh clone or a wheel: the bundled measurements are found without --data, and nothing is written."""
    r = subprocess.run([sys.executable, "-m", "simulator", "calibrate", "--json", "--quiet", "--report", "R.md"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["gpu"] == "h100-sxm"
    assert {(f["op"], f["variant"]) for f in out["fits"]} >= {("gemm", "bf16"), ("moe", "fp8_block"),
                                                              ("attention", "bf16"), ("collective", "all_reduce")}
    moe = [f for f in out["fits"] if f["op"] == "moe" and f["variant"] == "fp8_block"][0]
    assert moe["mape_fit"] < 0.05 and moe["mape_leave_one_shape_out"] < 0.05
    assert sorted(p.name for p in tmp_path.iterdir()) == ["R.md"]
    assert "measured/h100-sxm" in (tmp_path / "R.md").read_text(encoding="utf-8")


def test_calibrate_write_refuses_a_profile_of_another_gpu(tmp_path):
    prof = tmp_path / "b200.yaml"
    prof.write_text((ROOT / "hardware/b200.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    before = prof.read_text(encoding="utf-8")
    r = run("calibrate", "--quiet", "--write", str(prof))
    assert r.returncode == 2 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "not the calibrated GPU 'h100-sxm'" in r.stderr and "Traceback" not in r.stderr
    assert prof.read_text(encoding="utf-8") == before


def test_calibrate_refuses_another_gpus_spec_sheet_on_these_measurements():
    r = run("calibrate", "--quiet", "--hardware", "b200")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: --hardware: must be the h100-sxm profile"), r.stderr
