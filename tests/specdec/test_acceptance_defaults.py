"""Default acceptance by drafter family and target kind (docs/MODEL.md §4.1): the central log as engines logged it,
a band spanning every public log of the family, ngram refused (library, CLI, study files)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.errors import ConfigError, ParameterError
from simulator.specdec import default_acceptance
from simulator.specdec.acceptance import (
    CENTRAL_AT,
    MAX_POSITIONS,
    PUBLISHED,
    Published,
    median_log,
    spanned,
    target_logs,
)
from simulator.specdec.rounds import MAX_DRAFT_LEN
from simulator.specs.catalog import bundled_files, load_model

FAMILIES = [("eagle", True), ("eagle", False), ("mtp", True)]
G = np.arange(0, MAX_DRAFT_LEN + 1)


@pytest.mark.parametrize("kind, moe", FAMILIES)
def test_central_is_the_logged_vector_with_a_geometric_tail(kind, moe):
    d = default_acceptance(kind, moe)
    central = PUBLISHED[(kind, None) if (kind, None) in PUBLISHED else (kind, moe)][0]
    u = np.cumprod(d.central.per_position)
    np.testing.assert_allclose(u[:len(central.rates)], central.rates, rtol=1e-12)
    assert len(d.central.per_position) == MAX_POSITIONS == MAX_DRAFT_LEN
    n = len(central.rates)
    np.testing.assert_allclose(d.central.per_position[n - 1:], d.central.per_position[n - 1])
    assert d.central.accept_length(n)[0] == pytest.approx(1 + sum(central.rates), rel=1e-12)


@pytest.mark.parametrize("kind, moe", FAMILIES)
def test_band_spans_central_and_every_public_log(kind, moe):
    d = default_acceptance(kind, moe)
    lo, mid, hi = (a.accept_length(G) for a in (d.low, d.central, d.high))
    assert np.all(lo <= mid + 1e-12) and np.all(mid <= hi + 1e-12)
    assert np.any(hi > mid + 1e-3)  # a real band, not a point
    _, every = PUBLISHED[(kind, None) if (kind, None) in PUBLISHED else (kind, moe)]
    for p in every:
        al = p.acceptance().accept_length(G)
        assert np.all(lo <= al + 1e-9) and np.all(al <= hi + 1e-9), p.key
        if p.al:  # a mean-AL report is reproduced at the draft length it was measured at
            assert p.acceptance().accept_length(p.at)[0] == pytest.approx(p.al, rel=1e-9)


def test_families_and_target_kinds_are_told_apart():
    moe, dense, mtp = (default_acceptance(k, m).central for k, m in FAMILIES)
    assert default_acceptance("eagle3", True).central == moe  # EAGLE and EAGLE-3 heads: one family
    assert "#42764" in moe.label and "#24344" in dense.label and "#48892" in mtp.label
    assert moe.accept_length(3)[0] == pytest.approx(1 + 0.622 + 0.356 + 0.203)  # gpt-oss EAGLE-3, MoE target
    assert dense.accept_length(3)[0] == pytest.approx(2.46)  # Llama-3.1-8B EAGLE, dense target
    assert default_acceptance("mtp", False).central == mtp  # one MTP default (the logs do not split by kind)
    assert "borrowed" in default_acceptance("model", True).central.label


def test_ngram_has_no_default():
    with pytest.raises(ParameterError, match="ngram drafter has no default acceptance") as e:
        default_acceptance("ngram", True)
    assert "--accept-length" in str(e.value) and "--acceptance" in str(e.value)


def test_pricing_uses_the_targets_kind():
    """A target with no public log of its own takes its kind's family default, and its label says so."""
    from simulator.pricing import price, resolve

    for name, key in (("olmoe-1b-7b", "#42764"), ("qwen3-0.6b", "#24344")):
        assert not target_logs(name, "eagle") and not target_logs(name, "mtp")
        label = price(resolve(name, gpus=1), [1], [3]).acceptance.label
        assert key in label and label.startswith(f"no public log for {name}: family default eagle")
        with pytest.raises(ParameterError, match="MTP module"):  # no MTP module to draft with
            price(resolve(name, gpus=1, drafter="mtp"), [1], [3])
    assert not target_logs("glm-4.7-flash", "mtp")
    label = price(resolve("glm-4.7-flash", gpus=1, drafter="mtp"), [1], [3]).acceptance.label
    assert label.startswith("no public log for glm-4.7-flash: family default mtp") and "#48892" in label
    with pytest.raises(ParameterError, match="ngram"):
        price(resolve("qwen3-30b-a3b", gpus=1, drafter="ngram"), [1], [3])


@pytest.mark.parametrize("cmd", [["sweep", "--batch", "1"], ["explain", "--batch", "1"],
                                 ["schedule", "--batch", "1,2", "--format", "json", "--out", "OUT"]])
def test_cli_refuses_ngram_without_acceptance(cmd, tmp_path, capsys):
    cmd = [str(tmp_path / "s.json") if x == "OUT" else x for x in cmd]
    base = [*cmd, "--model", "qwen3-30b-a3b", "--gpus", "1", "--drafter", "ngram"]
    if cmd[0] == "sweep":
        base += ["--out", str(tmp_path / "sw")]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ngram" in err and "--accept-length" in err
    assert not (tmp_path / "s.json").exists() and not (tmp_path / "sw").exists()
    assert main([*base, "--accept-length", "1.5@3", "--quiet"] if cmd[0] == "sweep" else
                [*base, "--accept-length", "1.5@3"]) == 0


def test_study_with_ngram_needs_an_acceptance(tmp_path, capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "experiments"))
    from experiments_helpers import small_study, write_yaml

    from simulator.experiments import load_experiment
    from simulator.specdec.acceptance import Acceptance

    doc = small_study()
    doc["speculation"]["drafter"] = "ngram"
    doc["speculation"].pop("acceptance", None)
    path = write_yaml(tmp_path, doc, "ng.yaml")
    with pytest.raises(ConfigError, match="ngram"):
        load_experiment(str(path))
    assert main(["experiment", str(path), "--check", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "speculation" in err and "accept_length" in err
    doc["speculation"]["acceptance"] = {"accept_length": 1.5, "draft_len": 3}
    study = load_experiment(str(write_yaml(tmp_path, doc, "ok.yaml")))
    assert isinstance(study.speculation.acceptance.build(), Acceptance)
    del doc["speculation"]["acceptance"]
    doc["speculation"]["drafter"] = "eagle"
    assert load_experiment(str(write_yaml(tmp_path, doc, "d.yaml"))).speculation.acceptance.build() is None


def test_every_public_log_is_cited():
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[2] / "docs/sources/published.md").read_text().split())
    for _central, every in PUBLISHED.values():
        for p in every:
            assert f"**{p.key}**" in text, p.key


def test_default_carries_its_band_into_the_speedup_band():
    """The central default carries (low, high): the speedup band prices both acceptance ends (item 5), and a stated
    acceptance carries none."""
    from simulator.pricing import price, resolve
    from simulator.specdec import Acceptance

    d = default_acceptance("eagle", True, "olmoe-1b-7b")
    assert d.central.band == (d.low, d.high)
    sc = resolve("olmoe-1b-7b", gpus=1)
    r = price(sc, [1, 64], [3]).result
    stated = price(sc.edit(acceptance=Acceptance.from_positions(d.central.per_position)), [1, 64], [3]).result
    np.testing.assert_allclose(r.speedup, stated.speedup, rtol=1e-12)  # same central acceptance at γ = 3
    assert np.all(r.speedup_low < stated.speedup_low) and np.all(r.speedup_high > stated.speedup_high)


# -- Per-target defaults from the public logs of measured/acceptance/logs.csv (issue 26 item 3) --------------------
TARGETS = [n for n in bundled_files("models") if load_model(n).role == "target"]
KINDS = {"eagle": "eagle3", "mtp": "mtp"}  # a drafter kind of each family


def _cases(with_logs: bool):
    return [(t, f) for t in TARGETS for f in KINDS if bool(target_logs(t, f)) == with_logs]


def test_some_targets_have_logs_and_some_do_not():
    assert len(_cases(True)) >= 8 and len(_cases(False)) >= 20
    assert {"gpt-oss-120b", "kimi-k2.5", "llama-4-maverick", "qwen3-next-80b-a3b"} <= {t for t, f in _cases(True)}


@pytest.mark.parametrize("target, family", _cases(True))
def test_a_target_with_its_own_logs_gets_the_median_one_and_their_band(target, family):
    logs = target_logs(target, family)
    d = default_acceptance(KINDS[family], load_model(target).ffn.is_moe, target)
    central = median_log(logs)
    assert d.own and d.logs == tuple(p.key for p in logs)
    assert d.source.startswith(f"default {family} for {target}: {central.key}") and d.central.label == d.source
    n = len(central.rates) or central.at  # the central's own measurement is reproduced where it was taken
    want = 1 + sum(central.rates) if central.rates else central.al
    assert d.central.accept_length(n)[0] == pytest.approx(want, rel=1e-9)
    u = np.stack([p.rates_to(MAX_POSITIONS) for p in logs])  # the band's ends: the logs' per-position min / max
    np.testing.assert_allclose(np.cumprod(d.low.per_position), u.min(axis=0), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(np.cumprod(d.high.per_position), u.max(axis=0), rtol=1e-9, atol=1e-300)
    assert d.central.band == (d.low, d.high)


@pytest.mark.parametrize("target, family", _cases(False))
def test_a_target_without_logs_takes_its_family_default_and_says_so(target, family):
    moe = load_model(target).ffn.is_moe
    d, fam = default_acceptance(KINDS[family], moe, target), default_acceptance(KINDS[family], moe)
    assert not d.own and d.source == f"no public log for {target}: family {fam.source}" == f"no public log for " \
                                                                                          f"{target}: family {d.family}"
    assert d.central.per_position == fam.central.per_position and d.logs == fam.logs
    assert (d.low.per_position, d.high.per_position) == (fam.low.per_position, fam.high.per_position)


_RATES = st.lists(st.floats(0.05, 0.98), min_size=1, max_size=8).map(lambda a: tuple(np.cumprod(a).tolist()))
_AL = st.tuples(st.integers(1, 8), st.floats(0.0, 1.0)).map(lambda t: (t[0], 1 + t[1] * t[0]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_RATES.map(lambda r: ("r", r)), _AL.map(lambda a: ("a", a))), min_size=1, max_size=6))
def test_band_ends_are_the_logs_min_and_max_and_the_central_is_their_median(specs):
    """Whatever logs a target has: the band's ends bound every log at every draft length (and are the per-position
    min / max), and the central is one of the logs, the median of those measured at CENTRAL_AT or beyond."""
    logs = [Published(f"log {i}", rates=v) if k == "r" else Published(f"log {i}", al=v[1], at=v[0])
            for i, (k, v) in enumerate(specs)]
    central = median_log(logs)
    mid, low, high = spanned(central, logs, "x")
    g = np.arange(0, MAX_DRAFT_LEN + 1)
    lo, hi = low.accept_length(g), high.accept_length(g)
    for p in logs:
        al = p.acceptance().accept_length(g)
        assert np.all(lo <= al + 1e-9) and np.all(al <= hi + 1e-9)
    assert np.all(lo <= mid.accept_length(g) + 1e-9) and np.all(mid.accept_length(g) <= hi + 1e-9)
    cand = [p for p in logs if max(len(p.rates), p.at) >= CENTRAL_AT] or logs
    at = sorted(float(p.acceptance().accept_length(CENTRAL_AT)[0]) for p in cand)
    assert central in cand
    assert float(central.acceptance().accept_length(CENTRAL_AT)[0]) == pytest.approx(at[(len(at) - 1) // 2])


def test_the_sweep_names_the_log_each_target_uses(tmp_path):
    """The table's header says the acceptance is per target, and its notes name each target's log (or say that a
    target has none); the JSON carries them too."""
    import json

    from simulator.sweep import run_sweep
    from simulator.sweep.io import write_json
    from simulator.sweep.report import format_table

    r = run_sweep(["gpt-oss-120b", "olmoe-1b-7b"], "h100-sxm", batch=[1, 8], draft_len=[3])
    text = " ".join(format_table(r).split())
    own = default_acceptance("eagle", True, "gpt-oss-120b")
    assert "acceptance of each target (below)" in text and f"acceptance: {own.source}" in text
    assert "acceptance: no public log for olmoe-1b-7b: family default eagle (MoE target): vLLM PR #42764" in text
    doc = json.loads((tmp_path / "s.json").read_text()) if write_json(r, tmp_path / "s.json") else {}
    assert [a["models"] for a in doc["meta"]["acceptances"]] == [["gpt-oss-120b"], ["olmoe-1b-7b"]]
    assert {s["model"]: s["acceptance"] for s in doc["summary"]}["gpt-oss-120b"] == own.source
    one = run_sweep(["gpt-oss-120b"], "h100-sxm", batch=[1], draft_len=[3])
    assert f"acceptance {own.source} (AL(3)=" in " ".join(format_table(one).split())


def test_explain_names_the_targets_log(capsys):
    assert main(["explain", "--model", "gpt-oss-120b", "--gpus", "1", "--batch", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert default_acceptance("eagle", True, "gpt-oss-120b").source in out
