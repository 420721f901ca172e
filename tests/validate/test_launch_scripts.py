"""benchmarks/script_params.py (the provenance tool that reads a launch script's MoE backend for
measured/silicon/silicon_sample.csv's moe_backend column): the script's own variable logic decides, its heredoc
config is read with variables expanded, no command of the script runs, and a value a command would decide is
reported uncertain."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

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


# benchmarks/srt_recipes.py: the srt-slurm recipe a multi-node (Dynamo) sweep entry ran, read as srtctl reads it
sys.path.insert(0, str(_PATH.parent))
try:
    import srt_recipes as sr
finally:
    sys.path.remove(str(_PATH.parent))

LAUNCHER = """#!/usr/bin/bash
SRT_REPO_DIR="srt-slurm"
if [[ $FRAMEWORK == "dynamo-vllm" ]]; then
    git clone https://github.com/NVIDIA/srt-slurm.git "$SRT_REPO_DIR"
    cd "$SRT_REPO_DIR"
    git checkout sa-submission-q2-2026
else
    git clone https://github.com/ishandhanani/srt-slurm.git "$SRT_REPO_DIR"
    cd "$SRT_REPO_DIR"
    git checkout sa-submission-q1-2026
fi
touch {marker}
srtctl apply -f "$CONFIG_FILE"
"""


@pytest.mark.parametrize("framework, want", [
    ("dynamo-vllm", ("https://github.com/NVIDIA/srt-slurm.git", "sa-submission-q2-2026")),
    ("dynamo-trt", ("https://github.com/ishandhanani/srt-slurm.git", "sa-submission-q1-2026")),
])
def test_the_launchers_own_branches_pick_the_recipe_repository(tmp_path, framework, want):
    marker = tmp_path / "ran"
    r = sp.evaluate(sr.as_assignments(LAUNCHER.format(marker=marker)), {"FRAMEWORK": framework},
                    names=("__CLONE", "__CHECKOUT"))
    assert (r.variables["__CLONE"], r.variables["__CHECKOUT"]) == want and not r.uncertain
    assert not marker.exists()  # nothing of the launcher ran


def _recipe(backend="TRTLLM", conc="4x8", mtp=0, extra=""):
    spec = f"\n      speculative_config:\n        num_nextn_predict_layers: {mtp}" if mtp else ""
    return (f"name: r\nbackend:\n  type: trtllm\n  trtllm_config:\n    prefill:\n      moe_config:\n"
            f"        backend: DEEPGEMM\n    decode:\n      tensor_parallel_size: 8\n"
            f"      moe_expert_parallel_size: 8\n      enable_attention_dp: true\n      moe_config:\n"
            f"        backend: {backend}{spec}\nbenchmark:\n  isl: 1024\n  osl: 1024\n"
            f"  concurrencies: {conc}\n{extra}")


def test_recipe_read_as_srtctl_runs_it():
    """Concurrencies as srtctl's sa-bench takes them (a list or an x-separated string); the decode workers'
    moe_config.backend, not the prefill's; the decode layout and MTP depth."""
    doc = yaml.safe_load(_recipe(conc='"4x8x16"', mtp=3))
    assert sr.concurrencies(doc) == {4, 8, 16} and sr.concurrencies(yaml.safe_load(_recipe(conc="[128]"))) == {128}
    assert sr.concurrencies(yaml.safe_load(_recipe(conc='"576"'))) == {576}
    assert sr.decode_view(doc, "trtllm")[:3] == ("TRTLLM", (8, 8, True), 3)
    none = yaml.safe_load(_recipe(backend="null"))  # not stated: the release default runs
    assert sr.decode_view(none, "trtllm")[0] is None


def _commit(repo, text, n):
    (repo / "recipes").mkdir(exist_ok=True)
    (repo / "recipes" / "r.yaml").write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"v{n}"], check=True, env=env)


def test_a_value_is_read_only_where_every_stored_version_agrees(tmp_path):
    """The branch a launcher checked out is not stored (squash-merged), so every stored version of the recipe must
    state the same decode backend; versions that change it, or a section the reader does not follow, are not read."""
    repo = tmp_path / "srt"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _commit(repo, _recipe(conc="[4]"), 1)
    _commit(repo, _recipe(conc="[4, 8]"), 2)
    status, value, shapes, _ = sr.decode_settings(str(repo), "recipes/r.yaml", "trtllm")
    assert (status, value, shapes) == ("read", "TRTLLM", {((8, 8, True), 0)})
    assert sr.ran(str(repo), "recipes/r.yaml", 1024, 1024) == {4, 8}
    assert not sr.ran(str(repo), "recipes/r.yaml", 8192, 1024)  # no version benchmarks 8192/1024
    _commit(repo, _recipe(backend="CUTLASS"), 3)
    sr.versions.cache_clear(), sr.decode_settings.cache_clear()
    status, value, _, note = sr.decode_settings(str(repo), "recipes/r.yaml", "trtllm")
    assert (status, value) == ("differs", None) and "CUTLASS" in note and "TRTLLM" in note
    _commit(repo, _recipe(extra="zip_override_lowlat:\n  decode:\n    moe-runner-backend: x\n"), 4)
    sr.versions.cache_clear(), sr.decode_settings.cache_clear()
    assert sr.decode_settings(str(repo), "recipes/r.yaml", "trtllm")[0] == "not-read"
    assert sr.decode_settings(str(repo), "recipes/none.yaml", "trtllm")[0] == "not-stored"
