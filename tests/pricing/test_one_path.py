"""One scenario, one pricing path (issue 16): ``step``, ``sweep`` and ``explain`` accept the same deployment,
mechanism and routing flags and give the same T_decode and T_verify for any layout; Scenario.edit is the one way to
change a field; price() is the only caller of the round functions outside the cost and round layers."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from simulator.cli import invoke
from simulator.errors import ParameterError
from simulator.overlap import full_tree
from simulator.pricing import Request, price, price_pass, request, resolve

PKG = Path(__file__).resolve().parents[2] / "simulator"

# (model, flags, batch, draft length, tree) — layouts the issue names: multi-node EP + redundant experts, attention
# DP + DeepEP, trees, placement, engines, overlap overrides.
LAYOUTS = [
    ("deepseek-v3", ["--hardware", "gb200", "--gpus", "72", "--tp", "1", "--ep", "72", "--redundant-experts", "32"],
     8, 3, None),
    ("deepseek-v3", ["--hardware", "h100-sxm", "--gpus", "16", "--dp", "16", "--ep", "16", "--all-to-all",
                     "deepep_low_latency"], 16, 2, None),
    ("qwen3-235b-a22b", ["--hardware", "h100-sxm", "--dp", "8", "--ep", "8", "--all-to-all", "deepep_low_latency"],
     8, 3, None),
    ("qwen3-235b-a22b", ["--hardware", "h200-sxm", "--overlap", "0.4", "--context", "4096"], 8, 3, None),
    ("qwen3-30b-a3b", ["--hardware", "h100-sxm", "--gpus", "2", "--engine", "sglang", "--placement", "contiguous"],
     4, 3, None),
    ("qwen3-30b-a3b", ["--hardware", "h100-sxm", "--gpus", "1", "--engine", "vllm", "--l2", "off"], 3, 2, None),
    ("qwen3-30b-a3b", ["--hardware", "h100-sxm", "--gpus", "2"], 4, None, "2,2"),
]


def _run(argv) -> str:
    r = invoke(*argv)
    assert r.returncode == 0, argv
    return r.stdout


def _step(model, flags, batch, tokens, tree) -> float:
    shape = ["--tree", tree] if tree and tokens != 1 else ["--tokens", str(tokens)]
    rec = json.loads(_run(["step", "--model", model, *flags, "--batch", str(batch), *shape, "--json"]))
    return rec[0]["time_us"]


@pytest.mark.parametrize("model,flags,batch,gamma,tree", LAYOUTS)
def test_step_sweep_explain_agree(model, flags, batch, gamma, tree, tmp_path):
    nodes = len(full_tree([int(x) for x in tree.split(",")])) if tree else gamma + 1
    shape = ["--tree", tree] if tree else ["--draft-len", str(gamma)]
    step_dec = _step(model, flags, batch, 1, tree)
    step_ver = _step(model, flags, batch, nodes, tree)
    trees = shape if tree else []
    _run(["sweep", "--model", model, *flags, "--batch", str(batch), "--draft-len", str(gamma or 1), *trees,
          "--mode", "refined", "--no-plots", "--quiet", "--out", str(tmp_path)])
    rows = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    row = next(r for r in rows if ("tree" in r["variant"]) == bool(tree) and (tree or int(r["draft_len"]) == gamma))
    ex = json.loads(_run(["explain", "--model", model, *flags, "--batch", str(batch), *shape, "--json"]))
    refined = ex["steps"][-1]
    for name, s, sw, e in (("T_decode", step_dec, row["t_decode_us"], refined["t_decode_us"]),
                           ("T_verify", step_ver, row["t_verify_us"], refined["t_verify_us"])):
        assert float(sw) == pytest.approx(s, rel=1e-6), name  # the CSV keeps 7 significant digits
        assert e == pytest.approx(s, rel=1e-12), name


def test_overlap_override_keeps_the_models_popularity():
    """--overlap without --popularity keeps the model's popularity in every command (the library's one rule)."""
    sc = resolve("qwen3-235b-a22b", "h200-sxm", overlap=[0.4])
    own = resolve("qwen3-235b-a22b", "h200-sxm")
    assert sc.overlap.lags == (0.4,)
    assert sc.overlap.popularity == own.model.overlap.popularity != "uniform"
    assert resolve("qwen3-235b-a22b", "h200-sxm", overlap=[0.4], popularity="uniform").overlap.popularity == "uniform"


def test_edit_routes_each_field_to_its_one_home():
    sc = resolve("qwen3-30b-a3b", "h100-sxm", gpus=2)
    e = sc.edit(engine="vllm", l2="off", context=4096, drafter="mtp")
    assert (e.deployment.engine, e.mechanisms.l2, e.context, e.drafter.kind) == ("vllm", "off", 4096, "mtp")
    assert e.hw.engine == "vllm" and sc.hw.engine == "trtllm"  # the engine selects the kernels in one place
    assert (sc.deployment.engine, sc.mechanisms.l2, sc.context) == ("trtllm", "on", 1024)  # frozen original
    with pytest.raises(ParameterError, match="unknown field 'colour'"):
        sc.edit(colour="red")
    with pytest.raises(ParameterError, match="unknown knob 'colour'"):
        request(colour="red")
    with pytest.raises(ParameterError):
        sc.edit(l2="maybe")


def test_request_knobs_reach_the_priced_scenario():
    req = request(Request(), engine="sglang", placement="balanced", graph_padding="off", acceptance=0.6, tp=2,
                  gpus=2)
    sc = resolve("qwen3-30b-a3b", "h100-sxm", req)
    assert (sc.deployment.engine, sc.deployment.placement, sc.deployment.tp) == ("sglang", "balanced", 2)
    assert sc.mechanisms.graph_padding == "off" and sc.accept.alpha == pytest.approx(0.6)
    case = price(sc, [1, 4], [0, 2])
    dec = price_pass(sc, [1, 4], 1)
    assert case.result.t_decode.tolist() == dec.time.tolist()
    assert (case.result.speedup[0] == 1.0).all()  # γ = 0 is plain decoding


# The round functions and the step model may be called from the cost and round layers and from pricing only.
ROUND_FUNCTIONS = {"speculative", "speculative_tree", "step_time", "padded_step"}
ALLOWED = ("cost", "specdec", "pricing")
KNOWN_EXCEPTIONS = {"simulator.validate.tpot"}  # prices aiconfigurator's per-row decode/prefill steps (issue 16: next)


def test_price_is_the_only_caller_of_the_round_functions():
    offenders = []
    for path in PKG.rglob("*.py"):
        mod = ".".join(path.relative_to(PKG.parent).with_suffix("").parts)
        if mod.split(".")[1] in ALLOWED or mod in KNOWN_EXCEPTIONS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and any(a.name in ROUND_FUNCTIONS for a in node.names):
                offenders.append(f"{mod}: {[a.name for a in node.names if a.name in ROUND_FUNCTIONS]}")
    assert not offenders, offenders


def test_class_times_is_one_pass_in_the_mode():
    """class_times: the pass of price_pass in the mode's preset mechanisms, split by op class (memory not checked)."""
    from simulator.cost.deployment import PRESETS
    from simulator.cost.step import CLASSES
    from simulator.pricing import class_times

    sc = resolve("qwen3-30b-a3b", "h100-sxm")
    for mode in ("prior", "refined"):
        t = class_times(sc, mode, [4], 4)
        st = price_pass(sc.edit(mode=mode, mechanisms=PRESETS[mode]), [4], 4, check_fit=False)
        assert t["total"] == float(st.time[0]) and set(CLASSES) <= set(t)
        assert 0 < t["moe"] < t["total"]
    assert class_times(sc, "prior", [4], 4) != class_times(sc, "refined", [4], 4)
