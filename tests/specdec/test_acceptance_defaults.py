"""Default acceptance by drafter family and target kind (docs/MODEL.md §4.1): the central log as engines logged it,
a band spanning every public log of the family, ngram refused (library, CLI, study files)."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.cli import main
from simulator.errors import ConfigError, ParameterError
from simulator.specdec import default_acceptance
from simulator.specdec.acceptance import MAX_POSITIONS, PUBLISHED
from simulator.specdec.rounds import MAX_DRAFT_LEN

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
    from simulator.pricing import price, resolve

    for name, key in (("qwen3-30b-a3b", "#42764"), ("llama-3.1-8b", "#24344")):
        assert key in price(resolve(name, gpus=1), [1], [3]).acceptance.label
        assert "#48892" in price(resolve(name, gpus=1, drafter="mtp"), [1], [3]).acceptance.label
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

    d = default_acceptance("eagle", True)
    assert d.central.band == (d.low, d.high)
    sc = resolve("qwen3-30b-a3b", gpus=1)
    r = price(sc, [1, 64], [3]).result
    stated = price(sc.edit(acceptance=Acceptance.from_positions(d.central.per_position)), [1, 64], [3]).result
    np.testing.assert_allclose(r.speedup, stated.speedup, rtol=1e-12)  # same central acceptance at γ = 3
    assert np.all(r.speedup_low < stated.speedup_low) and np.all(r.speedup_high > stated.speedup_high)
