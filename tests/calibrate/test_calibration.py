"""Calibration on the bundled measurements: the fit reproduces the bundled H100 profile within physically
meaningful tolerances, writes only the values it fits, and refuses profiles of other GPUs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from simulator.calibrate.blocks import paths as _paths
from simulator.calibrate.fit import calibrate
from simulator.calibrate.profile_io import fitted_values, write_profile
from simulator.calibrate.report import report_markdown
from simulator.errors import ConfigError, ParameterError
from simulator.specs.catalog import load_hardware
from simulator.specs.hardware import read_hardware
from simulator.specs.kernels import TIME_PARAMS
from simulator.specs.yamlio import load_yaml_file

pytestmark = pytest.mark.xdist_group("h100_calibration")  # the readers of the session's H100 calibration (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "hardware/h100-sxm.yaml"
TIME_ABS, REL, EFF_ABS = 1e-9, 1e-4, 1e-4  # 1e-3 µs or 1e-4 relative for times; 1e-4 for efficiencies


@pytest.fixture(scope="module")
def cal(h100_calibration):
    return h100_calibration


def _read(path: Path):
    return read_hardware(load_yaml_file(path), str(path))


def _close_time(a: float, b: float) -> bool:
    return abs(a - b) <= max(TIME_ABS, REL * abs(b))


def kernel_mismatches(got, want) -> list[str]:
    """Every kernel parameter of ``got`` that differs from ``want`` beyond the tolerances above."""
    bad = []
    for cls, table in want.kernels.classes.items():
        for var, w in table.items():
            g = got.kernels.classes[cls][var]
            where = f"{cls}.{var}"
            if not _close_time(g.fixed, w.fixed):
                bad.append(f"{where}.fixed {g.fixed * 1e6:.6g} vs {w.fixed * 1e6:.6g} µs")
            for part in ("memory", "compute"):
                gc, wc = getattr(g, part), getattr(w, part)
                if (gc is None) != (wc is None):
                    bad.append(f"{where}.{part} present in one profile only")
                elif gc is not None and (gc.xs != wc.xs or np.max(np.abs(np.subtract(gc.ys, wc.ys))) > EFF_ABS):
                    bad.append(f"{where}.{part} {gc.ys} vs {wc.ys}")
            if set(g.params) != set(w.params):
                bad.append(f"{where} params {sorted(g.params)} vs {sorted(w.params)}")
                continue
            for name, wv in w.params.items():
                gv = g.params[name]
                ok = _close_time(gv, wv) if name in TIME_PARAMS else abs(gv - wv) <= max(EFF_ABS, REL * abs(wv))
                if not ok:
                    bad.append(f"{where}.{name} {gv:.6g} vs {wv:.6g}")
    for name, w in want.kernels.collectives.items():
        g = got.kernels.collectives[name]
        for attr in ("latency", "latency_per_gpu", "large_latency"):
            gv, wv = getattr(g, attr), getattr(w, attr)
            if (gv is None) != (wv is None) or (gv is not None and not _close_time(gv, wv)):
                bad.append(f"collectives.{name}.{attr} {gv} vs {wv}")
        for attr in ("efficiency", "large_efficiency"):
            gv, wv = getattr(g, attr), getattr(w, attr)
            if (gv is None) != (wv is None) or (gv is not None and abs(gv - wv) > EFF_ABS):
                bad.append(f"collectives.{name}.{attr} {gv} vs {wv}")
    for name, wv in want.kernels.step.items():
        if not _close_time(got.kernels.step[name], wv):
            bad.append(f"step.{name} {got.kernels.step[name]} vs {wv}")
    if got.kernels.global_efficiency != want.kernels.global_efficiency:
        bad.append("global_efficiency")
    return bad


def test_calibration_reproduces_the_bundled_profile(cal, tmp_path):
    """Refitting on the bundled measurements and writing into a copy of the bundled profile gives the bundled
    profile's parameters back (times within 1e-3 µs or 1e-4 relative, efficiencies within 1e-4)."""
    prof = tmp_path / "h100.yaml"
    shutil.copy(BUNDLED, prof)
    assert write_profile(prof, cal) == len(fitted_values(cal)) >= 50
    assert kernel_mismatches(_read(prof), _read(BUNDLED)) == []


def test_the_tolerance_sees_a_small_change(tmp_path):
    """The comparison above can fail: a 0.1% change of one fitted efficiency is reported."""
    text = BUNDLED.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if "activation_efficiency" in x and "fit-h100" in x)
    value = float(re.search(r"value: ([0-9.e+-]+)", line)[1])
    changed = line.replace(f"value: {re.search(r'value: ([0-9.e+-]+)', line)[1]}", f"value: {value * 1.001:.6g}")
    prof = tmp_path / "h100.yaml"
    prof.write_text(text.replace(line, changed), encoding="utf-8")
    bad = kernel_mismatches(_read(prof), _read(BUNDLED))
    assert len(bad) == 1 and "activation_efficiency" in bad[0]


def test_write_changes_only_fitted_lines(cal, tmp_path):
    """Hand-set values, comments and order survive a write; a spoiled fitted value is put back."""
    lines = BUNDLED.read_text(encoding="utf-8").splitlines(keepends=True)
    paths = {p: i for i, p, _ in _paths(lines)}
    fitted = fitted_values(cal)
    hand = {"kernels.step.host_overhead": "{value: 77, unit: us, source: assumed, reason: \"edited by hand\"}",
            "kernels.global_efficiency": "{value: 0.7, unit: fraction, source: A1}",
            "kernels.classes.moe.fp8.tile_rows": "{value: 64, unit: count, source: assumed, "
                                                 "reason: \"set by hand for this test\"}"}
    edited = list(lines)
    for p, v in hand.items():
        i = paths[p]
        edited[i] = edited[i][: edited[i].index(":") + 1] + f" {v}\n"
    spoil = paths["kernels.classes.gemm.bf16.fixed"]
    edited[spoil] = edited[spoil].replace("value: 2.", "value: 9.")
    edited.insert(paths["kernels.step.host_overhead"], "    # a hand-written comment\n")
    prof = tmp_path / "h100.yaml"
    prof.write_text("".join(edited), encoding="utf-8")
    write_profile(prof, cal)
    after = prof.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(after) == len(edited)
    fitted_lines = {i for i, p, _ in _paths(edited) if p in fitted or p == "sources.fit-h100"}
    fitted_lines |= {i for i, p, rest in _paths(edited) if any(f.startswith(p + ".") for f in fitted)
                     and rest.startswith("{")}
    assert [a for i, a in enumerate(after) if i not in fitted_lines] == \
        [e for i, e in enumerate(edited) if i not in fitted_lines]
    got = _read(prof)
    assert got.kernels.step["host_overhead"] == pytest.approx(77e-6)
    assert got.kernels.global_efficiency == 0.7
    assert got.kernels.classes["moe"]["fp8"].params["tile_rows"] == 64
    assert got.kernels.classes["gemm"]["bf16"].fixed == pytest.approx(cal.fits[0].kernel.fixed, rel=1e-5)


def test_write_refuses_another_gpus_profile(cal, tmp_path):
    prof = tmp_path / "b200.yaml"
    shutil.copy(ROOT / "hardware/b200.yaml", prof)
    before = prof.read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match="not the calibrated GPU 'h100-sxm'"):
        write_profile(prof, cal)
    assert prof.read_text(encoding="utf-8") == before
    # forced: the what-if profile's `kernels: {derive_from: ...}` becomes a whole block (fitted + derived values)
    write_profile(prof, cal, force=True)
    got = _read(prof)
    assert not got.what_if and got.kernels.resolved
    assert got.kernels.classes["gemm"]["bf16"].fixed == pytest.approx(cal.fits[0].kernel.fixed, rel=1e-5)
    derived = load_hardware("b200").kernels.classes["sampling"]["any"].fixed
    assert got.kernels.classes["sampling"]["any"].fixed == pytest.approx(derived)


def test_write_refuses_a_stale_fitted_value(cal, tmp_path):
    text = BUNDLED.read_text(encoding="utf-8").replace(
        "sampling:\n      any: {fixed: {value: 10, unit: us, source: assumed, reason:",
        "sampling:\n      any: {fixed: {value: 10, unit: us, source: fit-h100, note:")
    prof = tmp_path / "h100.yaml"
    prof.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="sampling.*does not fit it"):
        write_profile(prof, cal)


def test_calibrating_another_profile_on_these_measurements_is_refused():
    with pytest.raises(ParameterError, match="'hw' parameter of calibrate must be the h100-sxm profile") as e:
        calibrate(load_hardware("b200"))
    assert (e.value.param, e.value.value) == ("hw", "b200")


def _percentages(text: str) -> list[float]:
    rows = [x for x in text.splitlines() if x.startswith("| ") and "%" in x]
    return [float(v) for r in rows for v in re.findall(r"([0-9.]+)%", r)]


def test_docs_calibration_report_is_current(cal):
    """docs/CALIBRATION.md holds this fit's errors (to the printed 0.1%, with one step of rounding slack)."""
    docs = (ROOT / "docs/CALIBRATION.md").read_text(encoding="utf-8")
    new = report_markdown(cal)
    assert "shared/" not in docs
    got, want = _percentages(new), _percentages(docs)
    assert len(got) == len(want) == 3 * len(cal.fits)  # fit, leave-one-shape-out, all rows
    assert np.max(np.abs(np.subtract(got, want))) <= 0.1 + 1e-9


def test_write_is_idempotent_and_keeps_the_bundled_bytes(cal, tmp_path):
    """The bundled profile is what the write produces: writing this fit into a copy changes no byte, twice."""
    prof = tmp_path / "h100.yaml"
    shutil.copy(BUNDLED, prof)
    write_profile(prof, cal)
    once = prof.read_text(encoding="utf-8")
    write_profile(prof, cal)
    assert prof.read_text(encoding="utf-8") == once
    changed = [i for i, (a, b) in enumerate(zip(once.splitlines(), BUNDLED.read_text(encoding="utf-8").splitlines(),
                                                strict=True)) if a != b]
    values = fitted_values(cal)
    fitted = {i for i, p, _ in _paths(once.splitlines(keepends=True))
              if p in values or any(v.startswith(p + ".") for v in values)}
    assert set(changed) <= fitted  # only fitted numbers may differ (in their last printed digit) across machines
