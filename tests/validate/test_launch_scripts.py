"""benchmarks/script_params.py (the provenance tool that reads a launch script's MoE backend for
measured/silicon/silicon_sample.csv's moe_backend column): the script's own variable logic decides, its heredoc
config is read with variables expanded, no command of the script runs, and a value a command would decide is
reported uncertain."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "script_params.py"
_SPEC = importlib.util.spec_from_file_location("_benchmarks_script_params", _PATH)
sp = sys.modules.setdefault(_SPEC.name, importlib.util.module_from_spec(_SPEC))
_SPEC.loader.exec_module(sp)

SCRIPT = """#!/usr/bin/env bash
source "$(dirname "$0")/benchmark_lib.sh"
hf download "$MODEL"
MOE_BACKEND="TRTLLM"
if [[ "$ISL" == "1024" && "$OSL" == "8192" ]]; then
    if [[ $CONC -ge 256 ]]; then
        MOE_BACKEND="DEEPGEMM"
    fi
fi
[[ "$DP_ATTENTION" == "true" ]] && MOE_BACKEND="CUTLASS"
cat > extra.yml << EOF
moe_config:
    backend: $MOE_BACKEND
EOF
touch {marker}
PYTHONNOUSERSITE=1 trtllm-serve $MODEL \\
    --tp_size=$TP > {marker}.log 2>&1 &
"""


@pytest.mark.parametrize("env, want", [
    ({"ISL": "1024", "OSL": "8192", "CONC": "256", "DP_ATTENTION": "false"}, "DEEPGEMM"),
    ({"ISL": "1024", "OSL": "8192", "CONC": "128", "DP_ATTENTION": "false"}, "TRTLLM"),
    ({"ISL": "8192", "OSL": "1024", "CONC": "256", "DP_ATTENTION": "true"}, "CUTLASS"),
])
def test_the_scripts_own_logic_decides(tmp_path, env, want):
    marker = tmp_path / "ran"
    r = sp.evaluate(SCRIPT.format(marker=marker), {**env, "MODEL": "m", "TP": "8"}, names=("MOE_BACKEND",),
                    words=('"$MOE_BACKEND"',), config_mark="moe_config")
    assert r.complete and r.variables["MOE_BACKEND"] == want and r.words == (want,)
    assert r.config.strip() == f"moe_config:\n    backend: {want}"
    assert not r.uncertain
    assert not marker.exists() and not Path(f"{marker}.log").exists()  # no command of the script ran


def test_a_value_decided_by_a_command_is_uncertain():
    text = 'MOE_BACKEND=TRTLLM\nif nvidia-smi | grep -q B200; then\n  MOE_BACKEND=CUTLASS\nfi\nGPUS=$(nproc)\n' \
           'X=$GPUS\n'
    r = sp.evaluate(text, {}, names=("MOE_BACKEND", "X"))
    assert r.uncertain == {"MOE_BACKEND", "X"} and r.failed
    assert sp.evaluate("MOE_BACKEND=TRTLLM\nN=$(nproc)\n", {}, names=("MOE_BACKEND",)).uncertain == frozenset()
    gated = 'if nvidia-smi; then\ncat > x.yml << EOF\nmoe_config:\n  backend: CUTLASS\nEOF\nfi\n'
    assert sp.evaluate(gated, {}, config_mark="moe_config").uncertain == {"moe_config"}
    assert sp.evaluate(gated.replace("nvidia-smi", '[[ -n "$X" ]]'), {"X": "1"}, config_mark="moe_config").config \
        .strip() == "moe_config:\n  backend: CUTLASS"
