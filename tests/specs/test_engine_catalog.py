"""The engine catalog (engines/*.yaml; docs/MODEL.md §3.10): one file per engine, releases as cumulative deltas, every
fact sourced, read strictly, listed and shown by the CLI; a user's engine file by path is priced like a bundled one
(adding an engine release is one YAML file and no Python)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from simulator.cli import invoke
from simulator.cost.deployment import Deployment, engine_release
from simulator.errors import ConfigError
from simulator.pricing import bound, price_pass, resolve
from simulator.pricing.resolve import request
from simulator.specs.catalog import ENGINES, list_engines, load_engine, load_hardware
from simulator.specs.engine_file import merge, read_engine

ROOT = Path(__file__).resolve().parents[2]
SGL = yaml.safe_load((ROOT / "engines/sglang.yaml").read_text())


def _error(mutate) -> str:
    obj = copy.deepcopy(SGL)
    mutate(obj)
    with pytest.raises(ConfigError) as err:
        read_engine(obj, "bad.yaml")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("bad.yaml: ")
    return msg


def test_every_bundled_engine_loads_with_sourced_releases():
    assert ENGINES[0] == "trtllm" and set(ENGINES) == {"trtllm", "sglang", "vllm"}
    for e in list_engines():
        assert e.releases and e.default is e.releases[-1]
        for r in e.releases:
            assert r.execution.source and r.serving.source and r.schedule.tbo_source and r.ops.source
            assert all(b.source for b in vars(r.round).values())
            assert r.graphs is not None and r.graphs.source
        assert load_engine(e.name) is e  # one object per engine: releases compare by identity


def test_releases_are_cumulative_deltas():
    """A release changes only what it states and keeps what the releases before it changed (vLLM 0.14 turns async
    scheduling on; 0.13 is the file's sections as written)."""
    v = load_engine("vllm")
    old, new = v.release("0.13"), v.release("0.14")
    assert (old.execution.decode_overlap, old.execution.sd_overlap) == ("off", "off")
    assert (new.execution.decode_overlap, new.execution.sd_overlap) == ("on", "on")
    assert old.execution.sd_overlap_off == new.execution.sd_overlap_off == ("ngram",)  # inherited
    assert old.graphs == new.graphs and old.round == new.round
    assert merge({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"c": 5}}) == {"a": {"b": 1, "c": 5}, "d": 3}


@pytest.mark.parametrize("mutate, expect", [
    (lambda o: o.update(colour="red"), "unknown key 'colour'"),
    (lambda o: o["execution"].update(sd_overlap="maybe"), "execution.sd_overlap"),
    (lambda o: o["serving"].update(prefill="sometimes"), "serving.prefill"),
    (lambda o: o["round"]["sync"].update(unit="GB"), "round.sync.low.unit"),
    (lambda o: o["round"]["sync"].update(low=50), "round.sync.*low <= central <= high"),
    (lambda o: o["round"]["dp_sync"].update(source="NOPE"), "round.dp_sync.low.source"),
    (lambda o: o["schedule"]["two_batch_overlap"].update(auto="always"), "schedule.two_batch_overlap.auto"),
    (lambda o: o["releases"].append({"version": "0.3", "since": "older"}), "not above the release before it"),
    (lambda o: o["releases"].append({"version": "next", "since": "x"}), "releases\\[2\\].version"),
    (lambda o: o["vendors"].update(names=["intel"]), "vendors.names\\[0\\]"),
])
def test_bad_engine_file_is_one_line(mutate, expect):
    import re
    assert re.search(expect, _error(mutate))


def test_list_and_show_engines():
    r = invoke("list", "engines")
    assert r.returncode == 0 and all(e in r.stdout for e in ENGINES)
    s = invoke("show", "engine", "sglang", "--json")
    data = json.loads(s.stdout)
    assert data["name"] == "sglang" and data["releases"][-1]["sd_running_cap"] == 48
    assert "S-spec-v1" in data["sources"]
    assert invoke("show", "engine", "TensorRT-LLM").returncode == 0  # an alias, any case
    bad = invoke("show", "engine", "lmdeploy")
    assert bad.returncode == 2 and "unknown engine 'lmdeploy'" in bad.stderr


def test_a_user_engine_file_is_priced_by_path(tmp_path):
    """A copy of SGLang's file with one new release (SD rounds without overlap again) prices exactly as the bundled
    engine with --sd-overlap off: an engine release is one YAML file, no Python."""
    obj = copy.deepcopy(SGL)
    obj["releases"].append({"version": "0.6", "since": "spec v1 again (test)",
                            "execution": {"sd_overlap": False, "source": "S-spec-v1"}})
    path = tmp_path / "sglang-v2.yaml"
    path.write_text(yaml.safe_dump(obj))
    mine = engine_release(Deployment(engine=str(path)))
    assert mine.version == "0.6" and mine.execution.sd_overlap == "off" and mine.kernel_block == "sglang"
    with_file = resolve("qwen3-30b-a3b", "h100-sxm", request(engine=str(path), tp=2, ep=2))
    bundled = resolve("qwen3-30b-a3b", "h100-sxm", request(engine="sglang", tp=2, ep=2, sd_overlap="off"))
    from simulator.pricing import price
    a, b = price(with_file, [1, 8], [3]).result, price(bundled, [1, 8], [3]).result
    assert a.sd_overlap == b.sd_overlap == "off"
    assert (a.speedup == b.speedup).all() and (a.t_round == b.t_round).all()
    run = invoke("sweep", "--model", "qwen3-30b-a3b", "--engine", str(path), "--batch", "1,8", "--draft-len", "3",
                 "--no-plots", "--quiet", "--out", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    old = invoke("sweep", "--model", "qwen3-30b-a3b", "--engine", str(path), "--engine-version", "0.9",
                 "--no-plots", "--quiet", "--out", str(tmp_path / "o2"))
    assert old.returncode == 2 and "engine_version" in old.stderr and "['0.4', '0.5.13', '0.6']" in old.stderr


def test_a_profile_is_bound_once_and_checked_below_pricing():
    """step_time refuses a profile bound to another engine than the deployment's (pricing binds it once)."""
    from simulator.cost.step import step_time
    from simulator.errors import ParameterError
    from simulator.specs.catalog import load_model

    hw, m = load_hardware("h100-sxm"), load_model("qwen3-30b-a3b")
    dep = Deployment(dtype="fp8_block", tp=2, ep=2, engine="sglang")
    with pytest.raises(ParameterError, match="bound to trtllm 1.3.*bound\\(hw, deployment\\)"):
        step_time(m, hw, dep, [1], 1)
    assert step_time(m, bound(hw, dep), dep, [1], 1).time[0] > 0
    sc = resolve("qwen3-30b-a3b", "h100-sxm", request(engine="sglang", tp=2, ep=2))
    assert sc.hw.engine_spec is engine_release(sc.deployment) and sc.hw.engine == "sglang"
    assert price_pass(sc, [1], 1).time[0] == pytest.approx(
        step_time(m, sc.hw, sc.deployment, [1], 1, sc.context).time[0], rel=1e-12)
