"""Provenance helper (not imported by the package; used by benchmarks/derive_launch.py): the srt-slurm recipe an
InferenceX multi-node (Dynamo) sweep entry ran, and what its decode workers were launched with.

Which recipe. A multi-node entry of .github/configs/nvidia-master.yaml names its recipe in its additional settings
(``CONFIG_FILE=recipes/...yaml``); the node's launcher ``runners/launch_{node}.sh`` clones the srt-slurm repository
and checks out a branch, then runs ``srtctl apply -f $CONFIG_FILE`` (.github/workflows/benchmark-multinode-tmpl.yml).
The launcher's own if/else decides which repository and branch (its ``git clone``/``git checkout`` lines read as
assignments and run in bash with the entry's environment, benchmarks/script_params.py; nothing runs). The runner group's
nodes are those .github/configs/runners.yaml lists; a group it does not list (``h200-multinode-slurm``) runs on the
GPU's launchers that call ``srtctl`` (``runners/launch_h200-*.sh``).

Which version. ``github.com/ishandhanani/srt-slurm`` branch ``sa-submission-q1-2026`` (what the launchers of January to
March 2026 check out) was squash-merged into ``github.com/NVIDIA/srt-slurm`` (#202 on 2026-03-03, #228 on 2026-03-25),
and InferenceX's launchers clone NVIDIA/srt-slurm from April 2026 (branch ``sa-submission-q2-2026``); the branch's own
history is not stored. So a recipe file is read in every version NVIDIA/srt-slurm stores (all refs); a value is taken
only where every stored version states the same one (:func:`decode_settings`).

What it sets. srtctl passes ``backend.{trtllm,sglang,vllm}_config.decode`` to the decode workers as written (srtctl
sets no MoE option itself). The results carry the concurrency of the benchmark run (``results_concurrency_{C}_...``):
the recipe's ``benchmark.concurrencies`` (a list or an ``x``-separated string), not the entry's ``conc-list``.
"""

from __future__ import annotations

import functools
import re

import yaml
from inferencex import git
from script_params import evaluate

RUNNERS = ".github/configs/runners.yaml"
STORED = ("github.com/ishandhanani/srt-slurm", "github.com/NVIDIA/srt-slurm")  # both read from NVIDIA/srt-slurm
CLONE = re.compile(r"^(\s*)git\s+clone\s+(?:-\S+\s+)*(\S*srt-slurm\S*)")
CHECKOUT = re.compile(r"^(\s*)git\s+checkout\s+(\S+)\s*$")
KNOWN = {"name", "model", "resources", "backend", "benchmark", "frontend", "dynamo", "health_check", "slurm",
         "sbatch_directives", "setup_script", "environment", "srun_options", "infra", "profiling", "extra_mount",
         "container_mounts", "output", "reporting", "identity", "metadata"}


def config_file(entry: dict) -> str | None:
    """The ``CONFIG_FILE=`` an entry's prefill or decode additional settings name (None: a script-launched entry)."""
    for side in ("prefill", "decode"):
        for s in (entry.get(side) or {}).get("additional-settings") or []:
            if str(s).startswith("CONFIG_FILE="):
                return str(s).split("=", 1)[1].strip()
    return None


def launchers(ix: str, rev: str, key: dict) -> tuple[str, ...]:
    """The launchers that run the key's runner group at ``rev`` (module docstring)."""
    label = str(key.get("runner", ""))
    nodes = ((yaml.safe_load(git(ix, "show", f"{rev}:{RUNNERS}")) or {}).get(label) or [])
    if nodes:
        names = {f"runners/launch_{str(n).split('_')[0]}.sh" for n in nodes}
        return tuple(sorted(n for n in names if git(ix, "cat-file", "-t", f"{rev}:{n}").strip() == "blob"))
    gpu = label.split("-")[0]
    listed = git(ix, "ls-tree", "--name-only", rev, "runners/").split()
    return tuple(sorted(p for p in listed if p.startswith(f"runners/launch_{gpu}-")
                        and "srtctl apply" in git(ix, "show", f"{rev}:{p}")))


def as_assignments(text: str) -> str:
    """The launcher with its srt-slurm ``git clone URL`` line read as ``__CLONE=URL`` and a ``git checkout BRANCH``
    line following it as ``__CHECKOUT=BRANCH`` (so the script's own if/else decides them)."""
    out, cloned = [], False
    for line in text.split("\n"):
        m, c = CLONE.match(line), CHECKOUT.match(line)
        if m:
            line, cloned = f"{m.group(1)}__CLONE={m.group(2)}", True
        elif c and cloned:
            line = f"{c.group(1)}__CHECKOUT={c.group(2)}"
        out.append(line)
    return "\n".join(out)


@functools.lru_cache(None)
def recipe_source(ix: str, rev: str, key_name: str, env_items: tuple) -> tuple[tuple[str, str] | None, str]:
    """((repository URL, branch) the launchers clone for this run, note); None where they disagree or a command
    decides it."""
    key = (yaml.safe_load(git(ix, "show", f"{rev}:.github/configs/nvidia-master.yaml")) or {}).get(key_name) or {}
    found = set()
    for path in launchers(ix, rev, key):
        r = evaluate(as_assignments(git(ix, "show", f"{rev}:{path}")), dict(env_items),
                     names=("__CLONE", "__CHECKOUT"))
        if {"__CLONE", "__CHECKOUT"} & r.uncertain:
            return None, f"{path}: the srt-slurm clone is decided by a line that calls a program"
        found.add((r.variables.get("__CLONE", ""), r.variables.get("__CHECKOUT", "")))
    if len(found) != 1 or not all(found.copy().pop()):
        return None, f"{key_name}@{rev[:9]}: launchers {list(launchers(ix, rev, key))} clone {sorted(found)}"
    return found.pop(), ""


@functools.lru_cache(None)
def versions(srt: str, path: str) -> tuple[dict, ...]:
    """Every stored version of recipe ``path`` in the srt-slurm git dir (all refs, newest first; deletions skipped)."""
    out = []
    for h in git(srt, "log", "--all", "--format=%H", "--", path).split():
        text = git(srt, "show", f"{h}:{path}")
        try:
            doc = yaml.safe_load(text) if text else None
        except yaml.YAMLError:
            doc = {"__unparsed__": h}
        if isinstance(doc, dict):
            out.append(doc)
    return tuple(out)


def concurrencies(doc: dict) -> frozenset[int]:
    """The concurrencies a recipe benchmarks (srtctl sa_bench/sglang_bench: a list or an ``x``-separated string)."""
    c = (doc.get("benchmark") or {}).get("concurrencies")
    items = c if isinstance(c, list) else str(c or "").split("x")
    return frozenset(int(v) for v in items if str(v).strip().isdigit())


def ran(srt: str, path: str, isl: int, osl: int) -> frozenset[int]:
    """Concurrencies any stored version of the recipe benchmarks at this isl/osl."""
    return frozenset(c for d in versions(srt, path)
                     if ((d.get("benchmark") or {}).get("isl"), (d.get("benchmark") or {}).get("osl")) == (isl, osl)
                     for c in concurrencies(d))


def _decode(doc: dict, engine: str) -> tuple[dict, dict]:
    backend = doc.get("backend") or {}
    return ((backend.get(f"{engine}_config") or {}).get("decode") or {}), (backend.get("decode_environment") or {})


def decode_view(doc: dict, engine: str) -> tuple[str | None, tuple[int, int, bool], int, tuple]:
    """(MoE backend the decode workers are given or None, decode layout (TP = GPUs per worker, EP, attention DP),
    MTP draft tokens, other MoE settings) of one recipe version, for engine 'trtllm', 'sglang' or 'vllm'."""
    d, env = _decode(doc, engine)
    others = tuple(sorted(f"{k}={v}" for k, v in env.items() if re.search(r"MOE|DEEP_GEMM", k)))
    if engine == "trtllm":
        spec = d.get("speculative_config") or {}
        layout = (int(d.get("tensor_parallel_size") or 1), int(d.get("moe_expert_parallel_size") or 1),
                  bool(d.get("enable_attention_dp")))
        value = (d.get("moe_config") or {}).get("backend")
        return (str(value) if value else None), layout, int(spec.get("num_nextn_predict_layers") or 0), others
    if engine == "sglang":
        tp, dp = int(d.get("tp-size") or d.get("tensor-parallel-size") or 1), int(d.get("dp-size") or 1)
        layout = (tp, int(d.get("ep-size") or d.get("expert-parallel-size") or 1),
                  bool(d.get("enable-dp-attention")) and dp > 1)
        steps = int(d.get("speculative-num-steps") or 0) if d.get("speculative-algorithm") else 0
        value = d.get("moe-runner-backend")
        return (str(value) if value else None), layout, steps, others
    tp, dp = int(d.get("tensor-parallel-size") or 1), int(d.get("data-parallel-size") or 1)
    spec = d.get("speculative-config") or {}
    steps = int(spec.get("num_speculative_tokens") or 0) if isinstance(spec, dict) else 0
    value = d.get("moe-backend")
    return (str(value) if value else None), (tp * dp, tp * dp if d.get("enable-expert-parallel") else 1, dp > 1), \
        steps, others


@functools.lru_cache(None)
def decode_settings(srt: str, path: str, engine: str) -> tuple[str, str | None, frozenset, str]:
    """(status, MoE backend, {(layout, MTP draft tokens)}, note) of a recipe over its stored versions: status 'read'
    (every version states the same backend, or none: None), 'differs' (versions disagree), 'not-stored' or 'not-read'
    (a version sweeps or overrides settings this reader does not follow, or does not parse)."""
    docs = versions(srt, path)
    if not docs:
        return "not-stored", None, frozenset(), f"{path}: no stored version"
    odd = sorted({k for d in docs for k in d if k not in KNOWN})
    if odd or any("__unparsed__" in d for d in docs):
        return "not-read", None, frozenset(), f"{path}: sections {odd or ['unparsed']} not read"
    views = [decode_view(d, engine) for d in docs]
    values = {v for v, _, _, _ in views}
    shapes = frozenset((layout, mtp) for _, layout, mtp, _ in views)
    others = sorted({o for *_, extra in views for o in extra})
    note = f"{path} ({len(docs)} stored versions)" + (f" [{', '.join(others)}]" if others else "")
    if len(values) > 1:
        return "differs", None, shapes, f"{note}: states {sorted(map(str, values))}"
    return "read", values.pop(), shapes, note
