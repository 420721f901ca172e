"""`python -m simulator sweep` and `explain`: outputs, formats, one-line errors with exit status 2."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest

from simulator.cli import main
from simulator.sweep import COLUMN_NAMES

SMALL = ["--model", "olmoe-1b-7b", "--batch", "1,8", "--draft-len", "1,2", "--quiet"]


def test_sweep_csv(tmp_path, capsys):
    assert main(["sweep", *SMALL, "--out", str(tmp_path), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "olmoe-1b-7b" in out and "prior / refined" in out
    with open(tmp_path / "sweep.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMN_NAMES and len(rows) - 1 == 1 * 2 * 2 * 2
    assert not list(tmp_path.glob("*.png"))


def test_sweep_json_and_plots(tmp_path, capsys):
    assert main(["sweep", *SMALL, "--model", "qwen3-30b-a3b", "--out", str(tmp_path), "--format", "json",
                 "--mode", "refined", "--accept-length", "2.5@3", "--drafter", "ratio:0.05"]) == 0
    doc = json.loads((tmp_path / "sweep.json").read_text())
    assert len(doc["rows"]) == 2 * 2 * 2 and {r["mode"] for r in doc["rows"]} == {"refined"}
    assert {r["drafter"] for r in doc["rows"]} == {"ratio:0.05"}
    assert len(list(tmp_path.glob("*.png"))) == 3


def test_explain_cli(tmp_path, capsys):
    assert main(["explain", "--model", "olmoe-1b-7b", "--batch", "4", "--plot", str(tmp_path / "w.png")]) == 0
    out = capsys.readouterr().out
    assert "prior" in out and "+ l2=on" in out and (tmp_path / "w.png").stat().st_size > 0
    assert main(["explain", "--model", "olmoe-1b-7b", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"][0]["name"] == "prior"


@pytest.mark.parametrize("argv", [
    ["sweep", "--batch", "x"],
    ["sweep", "--batch", "0"],
    ["sweep", "--draft-len", "-1"],
    ["sweep", "--acceptance", "1.5"],
    ["sweep", "--accept-length", "5@3"],
    ["sweep", "--accept-length", "abc"],
    ["sweep", "--acceptance", "0.7", "--accept-length", "2.5"],
    ["sweep", "--drafter", "foo"],
    ["sweep", "--model", "no-such-model"],
    ["sweep", "--hardware", "no-such-gpu"],
    ["sweep", "--mode", "fast"],
    ["sweep", "--tp", "3"],
    ["sweep", "--tp", "0"],
    ["sweep", "--dtype", "fp3"],
    ["sweep", "--context", "-1"],
    ["sweep", "--format", "xml"],
    ["explain"],
    ["explain", "--model", "olmoe-1b-7b", "--draft-len", "0"],
    ["explain", "--model", "olmoe-1b-7b", "--acceptance", "2"],
])
def test_bad_flags_exit_2_with_one_line(argv, tmp_path, capsys):
    args = [*argv, "--out", str(tmp_path)] if argv[0] == "sweep" else argv
    if argv[0] == "sweep" and "--model" not in argv:
        args += ["--model", "olmoe-1b-7b", "--no-plots", "--quiet"]
    try:
        rc = main(args)
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")


def test_no_plots_does_not_import_matplotlib(tmp_path):
    code = ("import sys; from simulator.cli import main; "
            f"rc = main(['sweep', '--model', 'olmoe-1b-7b', '--batch', '1', '--draft-len', '1', '--quiet', "
            f"'--no-plots', '--out', {str(tmp_path)!r}]); "
            "assert rc == 0; assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert res.returncode == 0, res.stderr[-2000:]
