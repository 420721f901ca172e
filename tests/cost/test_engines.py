"""Engines as a dimension: the profile's per-engine kernel blocks select the parameters that price a step."""

from pathlib import Path

import pytest

from simulator.cli import invoke
from simulator.cost.deployment import Deployment
from simulator.cost.step import step_time
from simulator.errors import ConfigError, ParameterError
from simulator.pricing import bound
from simulator.specs.catalog import ENGINES, load_hardware, load_model

MODEL = "qwen3-235b-a22b"

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=ROOT):
    """The CLI in process from ``cwd`` (simulator.cli.invoke)."""
    return invoke(*args, cwd=cwd)


def _t(hw, engine, **kw):
    dep = Deployment(dtype="fp8_block", tp=8, ep=8, engine=engine, **kw)
    return step_time(load_model(MODEL), bound(hw, dep), dep, [1, 16, 64], 1).time


def test_engine_selects_its_kernel_parameters():
    """Engines whose measured parameters differ price the same step differently."""
    hw = load_hardware("h200-sxm")
    assert hw.engines == ENGINES
    times = {e: _t(hw, e) for e in ENGINES}
    assert not (times["trtllm"] == times["sglang"]).all()
    assert not (times["trtllm"] == times["vllm"]).all()


def test_equal_parameters_give_equal_times():
    """An engine block equal to the default block prices exactly like the default engine."""
    hw = load_hardware("h200-sxm")
    same = hw.with_changes(engine_kernels={**hw.engine_kernels, "sglang": hw.kernels})
    assert (_t(same, "sglang") == _t(same, "trtllm")).all()


def test_engine_block_overrides_only_what_it_states():
    """A variant the engine block does not state is the default engine's (the documented fallback)."""
    hw = load_hardware("h100-sxm")
    sg = hw.kernel_block("sglang").kernels
    assert sg.classes["sampling"]["any"] == hw.kernels.classes["sampling"]["any"]
    assert sg.classes["gemm"]["bf16"] != hw.kernels.classes["gemm"]["bf16"]
    assert sg.collectives["all_to_all"] == hw.kernels.collectives["all_to_all"]  # NCCL: engine-independent


def test_profile_without_the_engine_is_refused_in_one_line():
    hw = load_hardware("h100-sxm").with_changes(engine_kernels={})
    with pytest.raises(ConfigError, match="no kernel parameters for engine 'vllm'.*--engine vllm"):
        hw.kernel_block("vllm")


def test_bad_engine_value_names_the_parameter():
    with pytest.raises(ParameterError, match="'engine'"):
        Deployment(engine="tensorrt")


@pytest.mark.parametrize("cmd", [["step", "--model", MODEL, "--hardware", "h100-sxm", "--batch", "1", "--tokens",
                                  "1", "--engine", "foo"],
                                 ["op", "gemm", "--hardware", "h100-sxm", "--m", "1", "--n", "4096", "--k", "4096",
                                  "--dtype", "bf16", "--engine", "foo"],
                                 ["explain", "--model", MODEL, "--hardware", "h100-sxm", "--engine", "foo"],
                                 ["sweep", "--model", MODEL, "--hardware", "h100-sxm", "--engine", "foo", "--batch",
                                  "1", "--no-plots", "--quiet"]])
def test_cli_bad_engine_exits_2_with_one_line(cmd, tmp_path):
    out = ["--out", str(tmp_path / "run")] if cmd[0] == "sweep" else []
    r = run(*cmd, *out)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--engine" in r.stderr and "Traceback" not in r.stderr


def test_cli_engine_changes_the_step_time():
    base = ["step", "--model", MODEL, "--hardware", "b200", "--dtype", "fp8_block", "--tp", "8", "--ep", "8",
            "--batch", "8", "--tokens", "1", "--json"]
    out = {e: run(*base, "--engine", e).stdout for e in ("trtllm", "vllm")}
    assert out["trtllm"] != out["vllm"] and '"engine": "vllm"' in out["vllm"]


def test_sweep_engine_and_a_variant_edit_of_the_engines_kernels():
    """run_sweep(engine=...) prices with that engine's block; a hardware variant edits the selected engine's kernels
    (not the default engine's)."""
    from simulator.pricing import HardwareEdit, price
    from simulator.sweep import Variant
    from simulator.sweep.runner import run_sweep

    runs = {e: run_sweep([MODEL], ["h200-sxm"], batch=[1, 16], draft_len=[3], engine=e, modes=["refined"]).cases[0]
            for e in (None, "sglang")}
    assert runs[None].deployment.engine == "trtllm" and runs["sglang"].deployment.engine == "sglang"
    assert not (runs[None].result.t_decode == runs["sglang"].result.t_decode).all()
    hw = load_hardware("h200-sxm")
    half = Variant(name="half", hardware=HardwareEdit(fixed_cost_scale=0.5))
    case = price(half.apply(runs["sglang"].scenario), [1], [3])
    sg = hw.kernel_block("sglang").kernels.classes["gemm"]["bf16"].fixed
    assert case.hardware.engine == "sglang"
    assert case.hardware.kernels.classes["gemm"]["bf16"].fixed == pytest.approx(0.5 * sg)
    assert case.hardware.kernel_block("sglang") is case.hardware  # selecting it again keeps the edit


def _study(target_engine=None, variant_engine="vllm"):
    t = {"model": MODEL, "hardware": "h200-sxm", "dtype": "fp8_block", "tp": 8, "ep": 8}
    if target_engine:
        t["engine"] = target_engine
    return {"schema": "study/v2", "name": "engines", "title": "engines", "description": "engine axis",
            "question": "q", "grid": {"targets": [t], "batch": [1], "draft_len": [3], "modes": ["prior", "refined"],
                                      "variants": [{"name": "other-engine", "engine": variant_engine}]},
            "speculation": {"drafter": "eagle", "acceptance": {"alpha": 0.7}},
            "analyses": {"curve_shapes": {"tolerance": 0.1, "low_batch_max": 8}}}


def test_study_engine_axis_target_and_variant():
    """A study states the engine per target and as a variant (an axis); a bad name is a one-line error."""
    from simulator.experiments.grid import build_variant
    from simulator.experiments.runner import read_experiment

    st = read_experiment(_study("sglang"), "x.yaml")
    assert st.grid.targets[0].engine == "sglang"
    (e,) = st.variants
    assert dict(build_variant(e, load_model(MODEL)).deployment) == {"engine": "vllm"}
    with pytest.raises(ConfigError, match="engine"):
        read_experiment(_study(variant_engine="tensorrt"), "x.yaml")
    with pytest.raises(ConfigError, match="engine"):
        read_experiment(_study(target_engine="tensorrt"), "x.yaml")
