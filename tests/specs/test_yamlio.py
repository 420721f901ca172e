"""YAML loading: libyaml and the pure-Python parser give the same data and the same one-line errors naming the file;
scientific notation without a dot or exponent sign (3.35e12, 1e30) is a number."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.errors import ConfigError
from simulator.specs.catalog import bundled_files
from simulator.specs.hardware import read_hardware
from simulator.specs.yamlio import C_LOADER, PY_LOADER, dump_yaml, load_yaml_file, load_yaml_text

LOADERS = [PY_LOADER] + ([C_LOADER] if C_LOADER is not None else [])


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("text, value", [
    ("3.35e12", 3.35e12), ("3.35e+12", 3.35e12), ("3.35E12", 3.35e12), ("1e30", 1e30), ("-2E-3", -2e-3),
    ("+4e2", 400.0), (".5e3", 500.0), ("1_000.5e3", 1_000_500.0), ("2.", 2.0), ("1.5", 1.5), (".inf", float("inf")),
])
def test_scientific_notation_is_a_number(loader, text, value):
    got = load_yaml_text(f"x: {text}\n", "t.yaml", loader_class=loader)["x"]
    assert isinstance(got, float) and got == value


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("text, value", [
    ("12", 12), ("1_000", 1000), ("0x1f", 31), ("'3.35e12'", "3.35e12"), ('"1e30"', "1e30"), ("e12", "e12"),
    ("1e", "1e"), ("3.35e", "3.35e"), ("1e1.5", "1e1.5"), ("tp8", "tp8"), ("1.2.3", "1.2.3"),
])
def test_integers_quoted_values_and_words_are_unchanged(loader, text, value):
    got = load_yaml_text(f"x: {text}\n", "t.yaml", loader_class=loader)["x"]
    assert type(got) is type(value) and got == value


def test_hbm_bandwidth_written_as_3_35e12_reads_as_the_same_hardware():
    h100 = load_yaml_file(bundled_files("hardware")["h100-sxm"])
    plain = copy.deepcopy(h100)
    plain["memory"]["hbm_bandwidth"] = load_yaml_text("{value: 3.35e12, unit: B/s, source: A6}", "t.yaml")
    assert read_hardware(plain, "bad.yaml").hbm_bandwidth == pytest.approx(read_hardware(h100, "h").hbm_bandwidth)


@pytest.mark.skipif(C_LOADER is None, reason="PyYAML built without libyaml")
@pytest.mark.parametrize("kind", ["hardware", "models", "routing", "experiments"])
def test_both_parsers_read_every_bundled_file_alike(kind):
    files = bundled_files(kind)
    assert files
    for name, f in files.items():
        text = f.read_text(encoding="utf-8")
        assert load_yaml_text(text, name, loader_class=C_LOADER) == load_yaml_text(text, name,
                                                                                    loader_class=PY_LOADER)


@pytest.mark.parametrize("loader", LOADERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("text, needle", [
    ("a: 1\nb: 2\na: 3\n", "field 'a' appears twice (line 3)"),
    ("a: [1\n", "is not valid YAML (line 2"),
    ("a:\n  - b\n c: 1\n", "is not valid YAML (line 3"),
    ("? [1, 2]\n: 3\n", "is not valid YAML (line 1"),
    ("a: !!python/object:os.system x\n", "is not valid YAML (line 1"),
    ("---\na: 1\n---\nb: 2\n", "is not valid YAML (line 3"),
])
def test_bad_yaml_is_one_line_naming_the_file(loader, text, needle):
    with pytest.raises(ConfigError) as err:
        load_yaml_text(text, "models/bad.yaml", loader_class=loader)
    msg = str(err.value)
    assert msg.startswith("models/bad.yaml: ") and "\n" not in msg and needle in msg


def test_file_errors_name_the_path(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("x: 1\nx: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"dup\.yaml: field 'x' appears twice \(line 2\)"):
        load_yaml_file(p)


_scalars = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False, width=64),
                     st.text("abcxyz_e0123456789.+-", max_size=8), st.booleans(), st.none())
_docs = st.dictionaries(st.text("abcdefgh", min_size=1, max_size=6), st.one_of(_scalars, st.lists(_scalars,
                                                                                                  max_size=4)),
                        max_size=6)


@settings(max_examples=60, deadline=None)
@given(_docs)
def test_dump_yaml_round_trips_and_parsers_agree(doc):
    text = dump_yaml(doc, sort_keys=False)
    for loader in LOADERS:
        assert load_yaml_text(text, "t.yaml", loader_class=loader) == doc


def test_strings_that_look_like_numbers_are_quoted_when_written():
    assert dump_yaml({"a": "1e5", "b": 1e5, "c": "3.35e12"}) == "a: '1e5'\nb: 100000.0\nc: '3.35e12'\n"
    assert yaml.safe_dump({"a": "1e5"}) == "a: 1e5\n"  # why: PyYAML's own dumper would not quote it
