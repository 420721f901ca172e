"""Bad YAML never produces a traceback: each mistake gives one line naming the file, field, value and fix."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.errors import ConfigError, SimulatorError
from simulator.specs.catalog import load_routing_profile
from simulator.specs.hardware import read_hardware
from simulator.specs.model import read_model
from simulator.specs.routing_profile import read_routing_profile
from simulator.specs.yamlio import load_yaml_text

ROOT = Path(__file__).resolve().parents[2]
HW = yaml.safe_load((ROOT / "hardware/h100-sxm.yaml").read_text())
MODEL = yaml.safe_load((ROOT / "models/qwen3-235b-a22b.yaml").read_text())


def _hw_error(mutate) -> str:
    obj = copy.deepcopy(HW)
    mutate(obj)
    with pytest.raises(ConfigError) as err:
        read_hardware(obj, "bad.yaml")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("bad.yaml: ")
    return msg


def _model_error(mutate) -> str:
    obj = copy.deepcopy(MODEL)
    mutate(obj)
    with pytest.raises(ConfigError) as err:
        read_model(obj, "bad.yaml", load_routing_profile)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("bad.yaml: ")
    return msg


def test_valid_files_load():
    assert read_hardware(copy.deepcopy(HW), "h").hbm_bandwidth == pytest.approx(3.35e12)
    assert read_model(copy.deepcopy(MODEL), "m", load_routing_profile).ffn.experts == 128


def test_unknown_key_lists_every_offender_and_closest_key():
    def mutate(o):
        o["memory"]["hbm_bandwith"] = o["memory"].pop("hbm_bandwidth")
        o["memory"]["colour"] = "green"

    msg = _hw_error(mutate)
    assert "'hbm_bandwith' (did you mean 'hbm_bandwidth'?)" in msg and "'colour'" in msg


def test_unknown_top_level_key_in_model():
    msg = _model_error(lambda o: o.update(experts=4))
    assert "unknown key 'experts'" in msg


def test_missing_field_is_named():
    msg = _hw_error(lambda o: o["memory"].pop("hbm_capacity"))
    assert "memory.hbm_capacity" in msg and "missing" in msg


def test_wrong_type():
    msg = _model_error(lambda o: o["architecture"].update(layers="ninety-four"))
    assert "architecture.layers" in msg and "'ninety-four'" in msg and "integer" in msg


def test_negative_bandwidth():
    msg = _hw_error(lambda o: o["memory"]["hbm_bandwidth"].update(value=-3.35))
    assert "memory.hbm_bandwidth" in msg and "-3.35" in msg


def test_wrong_unit_names_the_dimension():
    msg = _hw_error(lambda o: o["memory"]["hbm_bandwidth"].update(unit="GB"))
    assert "memory.hbm_bandwidth.unit" in msg and "'GB'" in msg and "bandwidth" in msg and "TB/s" in msg


def test_bandwidth_unit_mixup_caught_by_cross_check():
    msg = _hw_error(lambda o: o["cache"]["l2_bandwidth"].update(unit="GB/s"))
    assert "cache.l2_bandwidth" in msg and "below the HBM bandwidth" in msg


def test_topk_above_experts():
    msg = _model_error(lambda o: o["ffn"].update(top_k=200))
    assert "ffn.top_k" in msg and "200" in msg


def test_heads_not_divisible():
    msg = _model_error(lambda o: o["attention"].update(kv_heads=5))
    assert "attention.q_heads" in msg and "kv_heads 5" in msg


def test_shared_width_required_with_shared_experts():
    msg = _model_error(lambda o: o["ffn"].update(shared_experts=1))
    assert "ffn.shared_intermediate" in msg


def test_unsourced_number_rejected():
    msg = _hw_error(lambda o: o["memory"].update(hbm_bandwidth=3.35))
    assert "memory.hbm_bandwidth" in msg and "without unit and source" in msg


def test_unknown_source_key_rejected():
    msg = _hw_error(lambda o: o["memory"]["hbm_bandwidth"].update(source="A99"))
    assert "memory.hbm_bandwidth.source" in msg and "'A99'" in msg and "sources" in msg


def test_assumed_requires_reason():
    msg = _hw_error(lambda o: o["memory"]["hbm_bandwidth"].update(source="assumed"))
    assert "memory.hbm_bandwidth.reason" in msg


def test_assumed_with_reason_accepted():
    obj = copy.deepcopy(HW)
    obj["memory"]["hbm_bandwidth"] = {"value": 3.0, "unit": "TB/s", "source": "assumed",
                                      "reason": "what-if: derated HBM"}
    hw = read_hardware(obj, "ok.yaml")
    assert hw.provenance["memory.hbm_bandwidth"].source == "assumed"


INLINE = {"source": "B1", "lags": [0.4, 0.3], "popularity": "zipf:0.5", "note": "own measurement"}


def test_percentages_for_overlap_rejected():
    msg = _model_error(lambda o: o.update(routing_overlap={**INLINE, "lags": [38.1, 32.9]}))
    assert "routing_overlap.lags" in msg and "fractions" in msg and "38.1" in msg
    prof = yaml.safe_load((ROOT / "routing/cohere-128x8.yaml").read_text())
    with pytest.raises(ConfigError, match=r"field 'lags' is \[38.1\].*fractions"):
        read_routing_profile({**prof, "lags": [38.1]}, "p.yaml")
    with pytest.raises(ConfigError, match="top_k"):
        read_routing_profile({**prof, "top_k": 129}, "p.yaml")


def test_model_references_a_named_routing_profile():
    """The model YAML names the profile; the reader fills in its numbers and citation (same as the profile file)."""
    m = read_model(copy.deepcopy(MODEL), "m", load_routing_profile)
    prof = yaml.safe_load((ROOT / "routing/cohere-128x8.yaml").read_text())
    assert MODEL["routing_overlap"]["profile"] == "cohere-128x8" and "lags" not in MODEL["routing_overlap"]
    assert m.overlap.lags == tuple(prof["lags"]) and m.overlap.popularity == prof["popularity"]
    assert m.overlap.profile == "cohere-128x8" and m.overlap.citation == prof["sources"][prof["source"]]


def test_model_may_give_its_own_statistics_inline():
    obj = copy.deepcopy(MODEL)
    obj["routing_overlap"] = dict(INLINE)
    m = read_model(obj, "m")  # no profile to resolve: no catalog needed
    assert (m.overlap.lags, m.overlap.popularity, m.overlap.profile) == ((0.4, 0.3), "zipf:0.5", "")
    assert m.overlap.citation == MODEL["sources"]["B1"]


def test_bad_routing_profile_references_are_one_line_errors():
    msg = _model_error(lambda o: o["routing_overlap"].update(profile="cohere-128x9"))
    assert "routing_overlap.profile" in msg and "did you mean 'cohere-128x8'" in msg
    msg = _model_error(lambda o: o["routing_overlap"].update(lags=[0.4]))
    assert "routing_overlap.lags" in msg and "together with profile" in msg
    msg = _model_error(lambda o: o["ffn"].update(experts=160))
    assert "routing_overlap.profile" in msg and "128 experts top-8" in msg and "160 experts top-8" in msg


def test_duplicate_yaml_key_rejected():
    with pytest.raises(ConfigError, match="appears twice"):
        load_yaml_text("a: 1\nb: 2\na: 3\n", "dup.yaml")


def test_yaml_syntax_error_is_one_line():
    with pytest.raises(ConfigError) as err:
        load_yaml_text("a: [1, 2\nb: 3\n", "broken.yaml")
    assert "\n" not in str(err.value) and "not valid YAML" in str(err.value)


def test_cli_bad_file_exits_2_with_one_line(tmp_path):
    obj = copy.deepcopy(HW)
    obj["memory"]["hbm_bandwidth"]["value"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    run = subprocess.run([sys.executable, "-m", "simulator", "show", "hardware", str(path)],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: ") and "hbm_bandwidth" in run.stderr
    assert "Traceback" not in run.stderr


# --- property: random mutations of a valid profile never produce anything but a ConfigError -------------------

_paths = []


def _collect(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            _paths.append(prefix + (k,))
            _collect(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _paths.append(prefix + (i,))
            _collect(v, prefix + (i,))


_collect(HW)
_hw_paths, _paths = _paths, []
_collect(MODEL)
_model_paths = _paths

_values = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                               max_size=2),
)


def _apply(obj, path, action, value):
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if action == "delete":
        del parent[key]
    elif action == "replace":
        parent[key] = value
    elif action == "rename" and isinstance(parent, dict):
        parent[str(key) + "x"] = parent.pop(key)
    else:
        parent[key] = value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_hw_paths), st.sampled_from(["delete", "replace", "rename"]), _values),
                min_size=1, max_size=3))
def test_random_mutations_never_traceback(mutations):
    _mutated_reads_cleanly(HW, mutations, read_hardware)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(_model_paths), st.sampled_from(["delete", "replace", "rename"]), _values),
                min_size=1, max_size=3))
def test_random_model_mutations_never_traceback(mutations):
    """The same for a model spec, whose routing_overlap names a routing profile the reader resolves."""
    _mutated_reads_cleanly(MODEL, mutations, lambda o, w: read_model(o, w, load_routing_profile))


def _mutated_reads_cleanly(doc, mutations, read):
    obj = copy.deepcopy(doc)
    for path, action, value in mutations:
        try:
            _apply(obj, path, action, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or retyped the parent
    try:
        read(obj, "mutated.yaml")
    except SimulatorError as exc:
        assert "\n" not in str(exc)


def test_qk_norm_type_is_checked():
    assert "qk_norm_type" in _model_error(lambda o: o["attention"].update(qk_norm_type="per_token"))
    assert "qk_norm is false" in _model_error(lambda o: o["attention"].update(qk_norm=False, qk_norm_type="per_layer"))
