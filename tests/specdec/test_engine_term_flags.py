"""--graph-padding / --round-overheads on sweep, explain and schedule (docs/MODEL.md §4.5): the switch is forced in
every mechanism set priced, so its Shapley value is 0 when forced off; bad values are one line, exit 2."""

from __future__ import annotations

import json

from simulator.cli import invoke
from simulator.cli._common import flag_of
from simulator.cli._scenario import MECHANISM_FLAGS


def _run(argv):
    r = invoke(*argv)
    return r.returncode, r.stdout, r.stderr


def _shapley(extra):
    rc, out, _ = _run(["explain", "--model", "qwen3-next-80b-a3b", "--batch", "64", "--json", *extra])
    assert rc == 0
    attrs = json.loads(out)["attributions"]  # decode/verify ratio, then speedup
    return next(a for a in attrs if a["quantity"] == "speedup")["contributions"]


def test_flags_are_declared_once_and_mapped():
    from dataclasses import fields

    from simulator.cost.deployment import Mechanisms

    new = {"graph_padding", "round_overheads", "draft_extend", "round_kernels", "host_time", "sd_overlap",
           "decode_overlap", "model_error"}
    assert new <= {f.name for f in fields(Mechanisms)} and new <= set(MECHANISM_FLAGS)
    for f in new:  # each a declared Mechanisms field with its flag
        assert flag_of(f) == "--" + f.replace("_", "-")


def test_explain_forced_off_term_contributes_nothing():
    assert _shapley([])["round_overheads"] != 0.0  # Qwen3-Next: GDN state checkpoints cost something
    assert _shapley(["--round-overheads", "off"])["round_overheads"] == 0.0


def test_sweep_round_overheads_off_is_faster_for_linear_attention(tmp_path):
    speeds = {}
    for flag in ("on", "off"):
        rc, _, _ = _run(["sweep", "--model", "qwen3-next-80b-a3b", "--batch", "64", "--draft-len", "3",
                         "--mode", "refined", "--round-overheads", flag, "--no-plots", "--quiet", "--format", "json",
                         "--out", str(tmp_path / flag)])
        assert rc == 0
        rows = json.loads((tmp_path / flag / "sweep.json").read_text())
        rows = rows["points"] if isinstance(rows, dict) and "points" in rows else rows
        speeds[flag] = rows
    assert speeds["on"] != speeds["off"]


def test_bad_value_is_one_line_exit_2(tmp_path):
    rc, _, err = _run(["sweep", "--graph-padding", "maybe", "--out", str(tmp_path / "x")])
    assert rc == 2 and "--graph-padding" in err and len(err.strip().splitlines()) == 1


def test_model_error_flag_narrows_the_sweep_band_only(tmp_path):
    rows = {}
    for v in ("on", "off"):
        rc, out, err = _run(["sweep", "--model", "qwen3-30b-a3b", "--batch", "1,64", "--draft-len", "3", "--mode",
                             "refined", "--model-error", v, "--format", "json", "--no-plots", "--quiet", "--out",
                             str(tmp_path / v)])
        assert rc == 0, err
        rows[v] = json.loads((tmp_path / v / "sweep.json").read_text())["rows"]
    assert len(rows["on"]) == len(rows["off"]) == 2
    for on, off in zip(rows["on"], rows["off"], strict=True):
        assert on["speedup"] == off["speedup"]
        assert on["speedup_low"] < off["speedup_low"] <= off["speedup"] <= off["speedup_high"] < on["speedup_high"]
