"""The what-if rule (simulator/specs/whatif.py, docs/MODEL.md §3.8) and the grounding every profile states."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.specs.catalog import bundled_files, list_hardware, load_hardware, measured_dir
from simulator.specs.dtypes import FORMATS, compute_dtype
from simulator.specs.whatif import derivation, derive_kernels, grounding

B200, H100 = load_hardware("b200"), load_hardware("h100-sxm")


def _same(a, b) -> bool:
    return a.fixed == pytest.approx(b.fixed, rel=1e-12) and a.memory == b.memory and a.compute == b.compute \
        and dict(a.params) == pytest.approx(dict(b.params), rel=1e-12)


@pytest.mark.parametrize("base", ["h100-sxm", "b200", "gb200"])
def test_derived_profile_equals_its_sibling_when_every_spec_ratio_is_one(base):
    b = load_hardware(base)
    k = derive_kernels(b.with_changes(name="copy"), b)
    for cls, variants in b.kernels.classes.items():
        for v, c in variants.items():
            assert _same(k.classes[cls][v], c), (cls, v)
    assert dict(k.collectives) == dict(b.kernels.collectives)
    assert dict(k.step) == dict(b.kernels.step)


@settings(max_examples=25, deadline=None)
@given(bw=st.floats(0.3, 8.0), sm=st.floats(0.5, 3.0), clk=st.floats(0.5, 2.0), x=st.floats(1e5, 1e10),
       p=st.floats(1.0, 1000.0))
def test_each_spec_ratio_moves_only_its_own_axis(bw, sm, clk, x, p):
    t = B200.with_changes(hbm_bandwidth=B200.hbm_bandwidth * bw, sm_count=int(round(B200.sm_count * sm)),
                          clock=B200.clock * clk)
    k = derive_kernels(t, B200)
    sm_ratio = t.sm_count / B200.sm_count
    for cls, variants in B200.kernels.classes.items():
        for v, c in variants.items():
            d = k.classes[cls][v]
            assert d.fixed == pytest.approx(c.fixed / clk, rel=1e-9)  # rule "clock"
            if c.memory is not None and c.memory.x == "bytes":  # rule "bytes": η_T(x·BW_T/BW_B) = η_B(x)
                assert float(d.memory(x * bw)) == pytest.approx(float(c.memory(x)), rel=1e-9, abs=1e-12)
            if c.memory is not None and c.memory.x == "parallel":  # rule "tiles"
                assert float(d.memory(p * sm_ratio)) == pytest.approx(float(c.memory(p)), rel=1e-9)


def test_nvfp4_is_derived_by_a_named_rule_not_borrowed_silently():
    t = load_hardware("b200").with_changes(name="b200-spec")
    rows = {(d.cls, d.variant): d for d in derivation(t, H100)}
    assert rows[("moe", "nvfp4")].rule == "native" and rows[("moe", "nvfp4")].source == "fp8_block"
    k = derive_kernels(t, H100)
    assert "nvfp4" in k.classes["moe"] and "nvfp4" not in H100.kernels.classes["moe"]
    # the base's own mxfp4 (W4A16) kernel is kept: not overwritten by the native rule
    assert k.classes["moe"]["mxfp4"].fixed == pytest.approx(H100.kernels.classes["moe"]["mxfp4"].fixed)
    # a GPU without fp4 tensor cores gets no nvfp4 rule: the format is refused, as on the calibrated base
    pcie = load_hardware("h100-pcie")
    assert all(d.rule != "native" for d in derivation(pcie, H100))
    assert compute_dtype(FORMATS["nvfp4"], pcie.peak_flops) is None
    # a format neither the base has nor a rule derives is listed as the base's documented fallback
    assert rows[("moe", "int4_wo")].rule == "fallback"


def test_fixed_costs_come_from_the_siblings_generation():
    b300 = load_hardware("b300")
    assert b300.grounding == "derived:b200"
    for fmt in ("fp8_block", "nvfp4", "mxfp4"):
        assert b300.kernels.get("moe", fmt).fixed == pytest.approx(B200.kernels.get("moe", fmt).fixed
                                                                 * B200.clock / b300.clock)
    assert b300.kernels.get("moe", "nvfp4").fixed != pytest.approx(H100.kernels.get("moe", "fp8_block").fixed)
    assert load_hardware("gb300").kernels.collectives["all_reduce"] == load_hardware("gb200").kernels.collectives[
        "all_reduce"]  # same NVLink5 rack: the sibling's collectives


def test_collective_latency_by_fabric():
    other = B200.with_changes(fabric="pcie5", link_latency=2 * B200.link_latency)
    k = derive_kernels(other, B200)
    assert k.collectives["all_reduce"].latency == pytest.approx(2 * B200.kernels.collectives["all_reduce"].latency)
    same = derive_kernels(B200.with_changes(link_latency=2 * B200.link_latency), B200)
    assert same.collectives["all_reduce"].latency == B200.kernels.collectives["all_reduce"].latency


def test_every_profile_states_its_grounding():
    expect = {"b300": "derived:b200", "gb300": "derived:gb200", "rubin": "spec-only:gb200",
              "h100-pcie": "derived:h100-sxm", "mi300x": "spec-only:h100-sxm", "mi325x": "spec-only:h100-sxm",
              "mi355x": "spec-only:h100-sxm"}
    for hw in list_hardware():
        assert hw.grounding == expect.get(hw.name, "calibrated"), hw.name
        assert (hw.grounding == "calibrated") is (not hw.what_if)
        if hw.grounding != "calibrated":
            assert hw.label == f"{hw.name} ({hw.grounding})" and hw.basis
    assert grounding(load_hardware("b200"), H100) == "spec-only:h100-sxm"  # another generation


@pytest.mark.parametrize("name", ["mi300x", "mi325x", "mi355x"])
def test_amd_profiles_state_what_they_rest_on(name):
    hw = load_hardware(name)
    assert hw.grounding.startswith("spec-only:") and "H100" in hw.basis and "Infinity Cache" in hw.basis


def test_grounding_in_list_show_and_step_json(capsys):
    assert main(["list", "hardware", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["hardware"]}
    assert rows["gb300"]["grounding"] == "derived:gb200" and rows["h100-sxm"]["grounding"] == "calibrated"
    assert main(["list", "hardware"]) == 0
    assert "spec-only:gb200" in capsys.readouterr().out
    assert main(["show", "hardware", "rubin"]) == 0
    assert "spec-only:gb200" in capsys.readouterr().out
    assert main(["step", "--model", "qwen3-30b-a3b", "--hardware", "b300", "--batch", "1", "--tokens", "1",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["grounding"] == "derived:b200"


def test_bundled_derived_profiles_load_in_a_fresh_interpreter(tmp_path):
    code = ("from simulator.specs.catalog import load_hardware, list_hardware\n"
            "print(','.join(f'{h.name}={load_hardware(h.name).grounding}' for h in list_hardware()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    got = dict(x.split("=") for x in out.strip().split(","))
    assert got["gb300"] == "derived:gb200" and got["rubin"] == "spec-only:gb200"
    assert set(got) == set(bundled_files("hardware"))


def test_gpu_out_rows_ship_without_the_held_out_gpus():
    for gpu in ("h200-sxm", "b200", "gb200"):
        d = measured_dir(gpu)
        assert all((d / f"{t}.csv").is_file() for t in ("moe", "gemm", "decode_attention", "collectives"))
        assert (d / "README.md").is_file() and (d / "LICENSE-Apache-2.0.txt").is_file()
    for held in ("b300", "gb300", "b300_sxm"):
        with pytest.raises(Exception, match="no bundled measurements"):
            measured_dir(held)


def test_gpu_out_validation_prices_the_shipped_rows():
    from simulator.validate.whatif import _errors, derived_profile

    hw, _ = derived_profile("gb200", "b200")
    assert hw.grounding == "derived:b200"
    e = _errors(hw, measured_dir("gb200"))
    assert {"moe", "gemm", "attention", "collective"} <= {op for op, _ in e}
    pooled = e[("moe", "all formats")]
    assert pooled.n > 1000 and np.isfinite(pooled.mape) and 0 < pooled.mape < 1
