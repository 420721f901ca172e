"""The bundled model catalog: every spec loads, its derived parameter counts reproduce the official figures, and
the set covers the study's range (10 sparse MoEs, 30B-1T parameters, 8-512 experts) plus the drafters."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from simulator.specs import load_model
from simulator.specs.catalog import bundled_files, load_routing_profile
from simulator.specs.derived import active_params_official_convention, kv_bytes_per_token, param_counts
from simulator.specs.model import Attention

TOLERANCE = 0.03
NAMES = list(bundled_files("models"))
MODELS_MD = Path(__file__).resolve().parents[2] / "docs/sources/models.md"  # indexed by docs/SOURCES.md

# Official active figures that are rounded model names, not parameter counts: (looser bound, reason). The spec's
# official.note must say so.
ROUNDED_NAME_ACTIVE = {"qwen3-next-80b-a3b": (0.35, "'A3B' is the rounded name; the fields give 3.9B"),
                      "glm-4.7-flash": (0.35, "'A3B' is the rounded name; the fields give 3.9B")}


def _all():
    return [load_model(n) for n in NAMES]


def _with_official():
    return [n for n in NAMES if load_model(n).official is not None]


@pytest.mark.parametrize("name", NAMES)
def test_bundled_model_loads(name):
    m = load_model(name)
    assert m.name == name
    assert m.role in ("target", "drafter")
    assert m.layers > 0 and m.hidden_size > 0 and m.vocab_size > 0


def test_catalog_has_the_study_range():
    models = _all()
    targets = [m for m in models if m.role == "target" and m.ffn.is_moe]
    drafters = [m for m in models if m.role == "drafter"]
    assert len(targets) >= 16, [m.name for m in targets]
    assert len(drafters) >= 2, [m.name for m in drafters]
    experts = {m.ffn.experts for m in targets}
    assert min(experts) == 8 and max(experts) == 512, sorted(experts)
    totals = [param_counts(m).total for m in targets]
    assert min(totals) <= 30.6e9, "no target at the study's 30B end"
    assert max(totals) >= 0.99e12, "no target at the study's 1T end"


@pytest.mark.parametrize("name", NAMES)
def test_moe_fields_are_consistent(name):
    m = load_model(name)
    f = m.ffn
    if m.role == "drafter" or not f.is_moe:  # drafters and dense targets (Llama-3.1, Qwen3-32B)
        assert not f.is_moe and m.overlap is None
        return
    assert 1 <= f.top_k <= f.experts
    assert f.expert_intermediate > 0
    assert (f.shared_experts > 0) == (f.shared_intermediate > 0)


@pytest.mark.parametrize("name", _with_official())
def test_derived_total_matches_official(name):
    m = load_model(name)
    total = param_counts(m).total
    err = total / m.official.total_params - 1
    assert abs(err) <= TOLERANCE, f"{name}: derived total {total / 1e9:.2f}B vs official " \
                                  f"{m.official.total_params / 1e9:.2f}B ({err:+.1%})"


@pytest.mark.parametrize("name", _with_official())
def test_derived_active_matches_official(name):
    m = load_model(name)
    official = m.official.active_params
    o = m.official
    if not (o.counts_input_embedding and o.counts_lm_head):
        assert "embedding" in o.note, f"{name}: official.note must explain the embedding convention"
    if name in ROUNDED_NAME_ACTIVE:
        active, tol = active_params_official_convention(m), ROUNDED_NAME_ACTIVE[name][0]
        assert "rounded name" in m.official.note, f"{name}: official.note must say the active figure is a name"
    else:
        active, tol = active_params_official_convention(m), TOLERANCE
    err = active / official - 1
    assert abs(err) <= tol, f"{name}: derived active {active / 1e9:.2f}B vs official {official / 1e9:.2f}B ({err:+.1%})"


def test_convention_exceptions_name_bundled_models():
    assert set(ROUNDED_NAME_ACTIVE) <= set(NAMES)


def test_drafters_are_dense_and_tied():
    for name in ("qwen3-0.6b", "qwen2-0.5b"):
        m = load_model(name)
        assert m.role == "drafter" and not m.ffn.is_moe and m.tied_embeddings
        assert param_counts(m).lm_head == 0


@pytest.mark.parametrize("name", NAMES)
def test_kv_bytes_positive_unless_all_linear(name):
    m = load_model(name)
    kinds = {m.layer_kind(i) for i in range(m.layers)}
    if kinds == {"linear"}:
        assert kv_bytes_per_token(m) == 0
    else:
        assert kv_bytes_per_token(m) > 0


def test_mla_kv_is_smaller_than_gqa_of_the_same_width():
    mla = [m for m in _all() if m.attention.kind == "mla"]
    assert mla, "expected MLA models (DeepSeek-V3, Kimi-K2) in the catalog"
    for m in mla:
        gqa = Attention("gqa", q_heads=m.hidden_size // 128, kv_heads=8, head_dim=128)
        as_gqa = dataclasses.replace(m, attention=gqa)
        assert kv_bytes_per_token(m) < kv_bytes_per_token(as_gqa) / 3, m.name


def test_hybrid_and_local_attention_patterns():
    nxt = load_model("qwen3-next-80b-a3b")
    assert [nxt.layer_kind(i) for i in range(4)] == ["linear", "linear", "linear", "full"]
    assert sum(nxt.layer_kind(i) == "full" for i in range(nxt.layers)) == 12
    oss = load_model("gpt-oss-120b")
    assert oss.layer_kind(0) == "sliding" and oss.layer_kind(1) == "full" and oss.attention.window == 128
    mav = load_model("llama-4-maverick")
    assert [mav.layer_kind(i) for i in range(4)] == ["chunked", "chunked", "chunked", "full"]
    assert [mav.is_moe_layer(i) for i in range(4)] == [False, True, False, True]
    assert param_counts(mav).moe_layers == 24


@pytest.mark.parametrize("name", [n for n in NAMES if load_model(n).overlap is not None])
def test_overlap_profiles_are_fractions_on_matching_routing(name):
    m = load_model(name)
    o = m.overlap
    assert all(0 < x < 1 for x in o.lags)
    assert all(a >= b for a, b in zip(o.lags, o.lags[1:], strict=False)), "overlap should not grow with lag"
    assert o.citation.strip(), f"{name}: routing_overlap has no citation"
    if o.profile:  # a named profile's statistics only transfer to a model of the same E and k
        prof = load_routing_profile(o.profile)
        assert (m.ffn.experts, m.ffn.top_k) == (prof.experts, prof.top_k), name
        assert (o.lags, o.popularity, o.citation) == (prof.lags, prof.popularity, prof.citation)


def test_models_md_citations_exist():
    keys = set(re.findall(r"^- \[(B\d+)\]", MODELS_MD.read_text(encoding="utf-8"), flags=re.M))
    assert keys, "no [Bn] source keys found in models.md"
    for m in _all():
        for key, text in m.sources.items():
            for cited in re.findall(r"\(models\.md \[(B\d+)\]\)", text):
                assert cited in keys, f"{m.name}: sources.{key} cites models.md [{cited}], which does not exist"
    # header comments cite keys too ("from the model card [B18] (docs/sources/models.md)")
    for name, f in bundled_files("models").items():
        for cited in re.findall(r"\[(B\d+)\]", f.read_text(encoding="utf-8")):
            assert cited in keys, f"models/{name}.yaml cites [{cited}], which is not in models.md"
