"""The SD server's memory: the drafter's weights sit beside the target's on every GPU (issue 18, the memory items)."""

import pytest

from simulator.cost.step import resident_weights
from simulator.pricing import fitting_batches, resolve
from simulator.specdec.drafters import drafter_deployment, drafter_spec, drafter_weights, parse_drafter
from simulator.specs.derived import param_counts
from simulator.sweep import run_sweep


@pytest.mark.parametrize("kind,shared", [("eagle", ("embedding", "lm_head")), ("mtp", ("embedding", "lm_head")),
                                         ("eagle3", ("embedding",)), ("model:qwen3-0.6b", ())])
def test_drafter_weights_are_its_layout_less_what_it_shares(kind, shared):
    sc = resolve("qwen3-235b-a22b", "h100-sxm")
    d = parse_drafter(kind)
    spec = drafter_spec(d, sc.model)
    ddep = drafter_deployment(d, spec, sc.deployment, sc.hw)
    c = param_counts(spec)
    want = resident_weights(spec, ddep) - sum(getattr(c, p) for p in shared) * 2.0 / ddep.tp
    got = drafter_weights(kind, sc.model, sc.deployment, sc.hw)
    assert got == pytest.approx(want) and got > 0


def test_lookup_drafters_add_no_weights():
    sc = resolve("qwen3-235b-a22b", "h100-sxm")
    assert drafter_weights("ngram", sc.model, sc.deployment, sc.hw) == 0.0
    assert drafter_weights("ratio:0.05", sc.model, sc.deployment, sc.hw) == 0.0


def test_a_drafter_can_cost_the_largest_batch():
    # DBRX on 8x H100 PCIe fits batch 64 alone but not with an EAGLE head's weights beside it on every GPU
    eagle = resolve("dbrx", "h100-pcie")
    ngram = resolve("dbrx", "h100-pcie", drafter="ngram", acceptance=0.5)
    ok_e, why_e = fitting_batches(eagle, [32, 64], 4)
    ok_n, why_n = fitting_batches(ngram, [32, 64], 4)
    assert ok_n == [32.0, 64.0] and why_n == ""
    assert ok_e == [32.0] and "drafter" in why_e
    r = run_sweep(["dbrx"], ["h100-pcie"], batch=[32, 64], draft_len=[3], modes=["refined"])
    assert sorted(set(r.columns["batch"].tolist())) == [32]
    assert any("batches above 32 dropped" in n for n in r.notes)
