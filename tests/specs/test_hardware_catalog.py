"""The bundled hardware catalog: every profile loads, is internally consistent and cites real sources."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator.specs.catalog import _raw_hardware, bundled_files

# calibrated per engine on aiconfigurator-core's tables (python -m simulator calibrate --all; docs/calibration/)
MEASURED = ("h100-sxm", "a100-sxm", "h200-sxm", "b200", "gb200")
REQUIRED = ("a100-sxm", "h100-sxm", "h100-pcie", "h200-sxm", "b200", "b300", "gb200", "mi300x", "mi325x", "mi355x")
HARDWARE_MD = Path(__file__).resolve().parents[2] / "docs" / "sources" / "hardware.md"  # indexed by docs/SOURCES.md
# "(hardware.md [A14], [A15]; caveat 3)" or "(hardware.md [A14, A15])": every bracketed key inside the parentheses.
CITATION = re.compile(r"\(hardware\.md ([^)]*)\)")
BRACKET = re.compile(r"\[([^\]]+)\]")
KEY = re.compile(r"[A-Z]+\d+")
# Known source-table entries that no number uses, in files this test does not own: (profile, key) -> why.

NAMES = list(bundled_files("hardware"))


def test_required_profiles_are_bundled():
    missing = [n for n in REQUIRED if n not in NAMES]
    assert not missing, f"missing bundled hardware profiles: {missing}"
    assert len(NAMES) >= len(REQUIRED)


@pytest.mark.parametrize("name", NAMES)
def test_profile_loads_and_is_consistent(name):
    hw = _raw_hardware(name)
    assert hw.name == name
    assert hw.hbm_capacity > 0 and hw.hbm_bandwidth > 0
    assert hw.l2_bandwidth >= hw.hbm_bandwidth
    assert hw.sm_count >= 1 and hw.clock > 0
    assert "bf16" in hw.peak_flops
    for dtype, peak in hw.peak_flops.items():
        assert peak > 0, dtype
    if "fp8" in hw.peak_flops:
        assert hw.peak_flops["fp8"] >= hw.peak_flops["bf16"]
    if "fp4" in hw.peak_flops:
        assert hw.peak_flops["fp4"] >= hw.peak_flops.get("fp8", hw.peak_flops["bf16"])
    assert hw.link_bandwidth > 0 and hw.domain_size >= 1
    if hw.llc_size > 0:
        assert hw.llc_bandwidth > 0


@pytest.mark.parametrize("name", NAMES)
def test_only_the_calibrated_profiles_are_not_what_if(name):
    hw = _raw_hardware(name)
    assert hw.what_if is (name not in MEASURED)
    if name in MEASURED:
        assert hw.kernels.resolved and hw.engines == ("trtllm", "sglang", "vllm")
    else:  # derived from a calibrated profile, and its grounding names that profile (specs.whatif.grounding)
        assert hw.kernels.derive_from in MEASURED
        assert hw.grounding.split(":")[1] == hw.kernels.derive_from


@pytest.mark.parametrize("name", NAMES)
def test_every_source_entry_is_used(name):
    hw = _raw_hardware(name)
    used = {p.source for p in hw.provenance.values()}
    dangling = sorted(set(hw.sources) - used)
    assert not dangling, f"{name}: sources {dangling} are cited by no number"


@pytest.mark.parametrize("name", NAMES)
def test_assumed_numbers_carry_a_reason(name):
    hw = _raw_hardware(name)
    for path, prov in hw.provenance.items():
        if prov.source == "assumed":
            assert "assumed:" in prov.note, path


@pytest.mark.parametrize("name", NAMES)
def test_hardware_md_citations_exist(name):
    text = HARDWARE_MD.read_text(encoding="utf-8")
    hw = _raw_hardware(name)
    for key, citation in hw.sources.items():
        for group in CITATION.findall(citation):
            for bracket in BRACKET.findall(group):
                for ref in KEY.findall(bracket):
                    assert f"[{ref}]" in text, f"{name}: sources.{key} cites hardware.md [{ref}], which is not there"
    # notes and assumed reasons cite hardware.md keys in brackets too, e.g. "spec sheet 192 GB [A13]"
    for path, prov in hw.provenance.items():
        for bracket in BRACKET.findall(prov.note):
            for ref in KEY.findall(bracket):
                assert f"[{ref}]" in text, f"{name}: {path} note cites [{ref}], which is not in hardware.md"
