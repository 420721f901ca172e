"""Start-up cost: pricing a sweep or explaining a point imports neither scipy, networkx nor matplotlib (together
~1 s of a ~1 s command). They load only where used: scipy for calibration fits and the max-ent engines, networkx for
junction trees, matplotlib for figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scipy", "networkx", "matplotlib")

_PROBE = """
import contextlib, io, sys
from simulator.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    rcs = [main(["sweep", "--model", "qwen3-30b-a3b,mixtral-8x7b", "--batch", "1,16", "--draft-len", "1,3",
                 "--no-plots", "--quiet", "--out", sys.argv[1]]),
           main(["explain", "--model", "qwen3-235b-a22b", "--batch", "8"])]
print(rcs, sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:])))
"""


def test_sweep_and_explain_import_no_scipy_networkx_or_matplotlib(tmp_path):
    res = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "out"), *HEAVY], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[0, 0] []"
    assert (tmp_path / "out" / "sweep.csv").is_file()
