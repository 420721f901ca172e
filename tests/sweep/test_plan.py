"""`plan`: every point comes from the one pricing path (the serving grid is price_serving at every (K, C), and the
fronts' points are re-priced exactly by it), the fronts are Pareto fronts, the SLA is applied, the issue's command
answers in time with a launch config, bad input is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import simulator.sweep.serving as serving
from simulator.cli import main
from simulator.pricing import request
from simulator.pricing.resolve import scenario_for
from simulator.specs.catalog import load_hardware, load_model
from simulator.sweep.plan import pareto, plan
from simulator.sweep.serving import price_serving, price_serving_grid


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_serving_grid_is_price_serving_everywhere(engine):
    sc = scenario_for(load_model("qwen3-30b-a3b"), load_hardware("h100-sxm"), request(gpus=1, engine=engine))
    g = price_serving_grid(sc, [1, 8, 64], 512, 256, [0, 1, 3])
    for gi, k in enumerate(g.gammas):
        for ci, c in enumerate(g.concurrency):
            p = price_serving(sc, int(c), 512, 256, int(k)).point
            assert g.point.throughput_sd[gi, ci] == pytest.approx(float(p.throughput_sd), rel=1e-12)
            assert g.point.tpot_sd[gi, ci] == pytest.approx(float(p.tpot_sd), rel=1e-12)


@pytest.fixture(scope="module")
def priced():
    """The issue's plan, recording every scenario the one price() prices."""
    seen = []
    real = serving.price

    def recording(sc, *a, **k):
        out = real(sc, *a, **k)
        seen.append(sc)  # priced (a layout the cost model refuses raises before this)
        return out

    serving.price = recording
    try:
        pl = plan("qwen3-235b-a22b", "h100-sxm", 8, isl=1024, osl=1024, tpot_ms=50)
    finally:
        serving.price = real
    return pl, seen


def test_every_front_point_is_priced_by_the_one_price(priced):
    pl, seen = priced
    assert pl.seconds < 10 and pl.layouts >= 10
    contexts = {(id(s.model), s.deployment, s.engine) for s in seen}
    for p in pl.front(False) + pl.front(True):
        assert (id(p.scenario.model), p.scenario.deployment, p.scenario.engine) in contexts
        again = price_serving(p.scenario, p.concurrency, pl.isl, pl.osl, p.k).point
        assert p.tokens_per_s_gpu == pytest.approx(float(again.throughput_sd) / p.gpus, rel=1e-9)
        assert p.tpot_ms == pytest.approx(float(again.tpot_sd) * 1e3, rel=1e-9)
    assert len(seen) == pl.layouts  # one price() per layout: nothing priced twice


def test_fronts_and_sla(priced):
    pl, _ = priced
    for sd in (False, True):
        front = pl.front(sd)
        pts = [p for p in pl.points if (p.k > 0) == sd]
        for p in pts:  # nothing on the same side beats a front point on both axes
            assert not any(q.tokens_per_s_gpu > p.tokens_per_s_gpu and q.tokens_per_s_user > p.tokens_per_s_user
                           for q in front) or p not in front
        for f in front:
            assert not any(q.tokens_per_s_gpu > f.tokens_per_s_gpu and q.tokens_per_s_user > f.tokens_per_s_user
                           for q in pts)
    best = pl.best()
    assert best.meets_sla and best.tpot_ms <= 50
    assert best.tokens_per_s_gpu == max(p.tokens_per_s_gpu for p in pl.points if p.tpot_ms <= 50)
    assert pareto([]) == []


def test_cli_answers_with_front_and_launch_config(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--model", "qwen3-235b-a22b", "--hardware", "h100-sxm", "--gpus", "8", "--isl", "1024",
                 "--osl", "1024", "--tpot", "50", "--quiet", "--engine", "trtllm", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Pareto front with SD" in text and "launch config" in text
    d = json.loads(out.read_text())
    assert d["best"]["launch"]["engine"] == "trtllm" and d["front_sd"]
    assert np.all(np.diff([p["tokens_per_s_user"] for p in d["front_sd"]]) < 0)


@pytest.mark.parametrize("extra, word", [(["--gpus", "0"], "gpus"), (["--gpus", "8", "--engine", "tgi"], "engine"),
                                         (["--gpus", "8", "--tpot", "-1"], "tpot")])
def test_bad_input_one_line(capsys, extra, word):
    assert main(["plan", "--model", "qwen3-30b-a3b", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and word in err
