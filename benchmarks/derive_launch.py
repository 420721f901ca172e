"""Provenance tool (not imported by the package): the MoE kernel setting the InferenceX launch script chose for each
row of aiconfigurator-core's silicon_sample.csv. Writes the column ``moe_backend`` of
``measured/silicon/silicon_sample.csv`` (README.md, "MoE backend at launch"); empty = not stated by a launch script.

Which script. A row (agg; disagg rows ran Dynamo launches, not read) is matched to the single-node sweep entries that
can have measured it (benchmarks/inferencex.py; multi-node Dynamo keys are not read). Each is read; where their
scripts disagree, the entries of the row's own layout decide (InferenceX's TP = tp_size x attention_dp_size, EP_SIZE =
moe_ep_size, DP_ATTENTION = attention_dp_size > 1, the columns read as validate tpot reads them). The sweep
runs a key on a node of its ``runner`` group (.github/configs/runners.yaml at the commit); the node's launcher
``runners/launch_{node}.sh`` names the benchmark script (its ``benchmarks/...sh`` word, expanded as below). Every script
the group's launchers name that exists at the commit is read; they must agree.

How a script is read: its parameter-setting lines run in bash with the sweep's environment for the row (what
.github/workflows/benchmark-tmpl.yml passes: MODEL, EXP_NAME, ISL, OSL, MAX_MODEL_LEN = isl + osl + 200, IMAGE,
FRAMEWORK, PRECISION, TP, EP_SIZE, DP_ATTENTION, CONC, SPEC_DECODING), never the server launch (benchmarks/
script_params.py: assignments and the if/case structure only; no program can run). Read from it:
  - TensorRT-LLM: ``moe_config.backend`` of the extra-options YAML the script writes (``backend: $MOE_BACKEND`` with
    the script's value, or a literal), or a ``--moe_backend`` flag;
  - vLLM: ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8`` (1 -> ``flashinfer-mxfp8``, 0 -> ``default``); other MoE variables
    (``VLLM_USE_FLASHINFER_MOE_FP8``, ``VLLM_MOE_USE_DEEP_GEMM``, ...) are reported;
  - SGLang: ``--moe-runner-backend`` (reported).
A value is written only where every matched script states the same one and the engine file lists it (engines/*.yaml
kernels.moe_backend, any release; ``validate tpot`` refuses a row whose release does not list it); others are reported.

Usage: python benchmarks/derive_launch.py AIC_SILICON_CSV INFERENCEX_GIT_DIR [--write]
"""

from __future__ import annotations

import collections
import functools
import re
import sys

import yaml
from inferencex import CFG, GPU, commits, copies, git, read_source, sweep_hits, write_column, yaml_at
from script_params import evaluate

from simulator.specs.catalog import load_engine
from simulator.validate.layouts import squared_dp, squared_tp

COLUMN = "moe_backend"
RUNNERS = ".github/configs/runners.yaml"
SEQ = {(1024, 1024): "1k1k", (1024, 8192): "1k8k", (8192, 1024): "8k1k"}  # generate_sweep_configs.seq_len_to_str
MOE_VAR = re.compile(r"\b((?:VLLM|SGLANG|TRTLLM)?\w*(?:MOE|DEEP_GEMM)\w*)\+?=")
FLAG = {"trtllm": r"--moe_backend[= ]+(\S+)", "sglang": r"--moe-runner-backend[= ]+(\S+)",
        "vllm": r"--moe-backend[= ]+(\S+)"}
VLLM_SWITCH = "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8"


@functools.lru_cache(None)
def listed(engine: str) -> frozenset[str]:
    """The MoE backend values the engine file lists in any release."""
    return frozenset(b for r in load_engine(engine).releases for b in r.kernels.backends)


def row_layout(row: dict) -> tuple[int, int, bool]:
    """(TP, EP_SIZE, DP_ATTENTION) of an InferenceX single-node run as the row's layout columns state it, read as
    ``validate tpot`` reads them (simulator/validate/layouts.py: the squared TP and DP columns)."""
    tp, dp = int(float(row["tp_size"] or 1)), int(float(row["attention_dp_size"] or 1))
    ep = int(float(row["moe_ep_size"] or 1))
    moe_tp = int(float(row["moe_tp_size"] or 1))
    if squared_tp(row, "", tp, ep, moe_tp):
        tp = ep
    elif squared_dp(tp, dp, ep, moe_tp):
        dp = ep
    return tp * dp, ep, dp > 1


def entry_layout(e: dict) -> tuple[int, int, bool]:
    return int(e.get("tp", 1)), int(e.get("ep", 1) or 1), bool(e.get("dp-attn", False))  # the sweep's defaults


def environment(key: dict, e: dict, row: dict) -> dict[str, str]:
    """What benchmark-tmpl.yml passes a script for this row's run."""
    isl, osl = int(float(row["isl"])), int(float(row["osl"]))
    tp, ep, dpa = entry_layout(e)
    conc = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source") or "")
    return {"MODEL": str(key.get("model", "")), "MODEL_PREFIX": str(key.get("model-prefix", "")),
            "EXP_NAME": f"{key.get('model-prefix', '')}_{SEQ.get((isl, osl), f'{isl}_{osl}')}",
            "ISL": str(isl), "OSL": str(osl), "MAX_MODEL_LEN": str(isl + osl + 200),
            "IMAGE": str(key.get("image", "")), "FRAMEWORK": str(key.get("framework", "")),
            "PRECISION": str(key.get("precision", "")), "TP": str(tp), "EP_SIZE": str(ep),
            "DP_ATTENTION": "true" if dpa else "false", "CONC": conc.group(1) if conc else "",
            "SPEC_DECODING": str(e.get("spec-decoding", "none")), "DISAGG": "false", "RUN_EVAL": "false",
            "RANDOM_RANGE_RATIO": "0.8", "RESULT_FILENAME": "result", "PORT": "8888",
            "RUNNER_TYPE": str(key.get("runner", "")), "HF_HUB_CACHE": "/hf-hub-cache"}


def _word_at(line: str, at: int) -> str:
    """The shell word of ``line`` that contains position ``at`` and ends in ``.sh`` (quotes and ``$(...)`` kept)."""
    start = at
    while start > 0 and not line[start - 1].isspace():
        start -= 1
    end = line.index(".sh", at) + 3
    return line[start:end + (line[end:end + 1] == '"')]


@functools.lru_cache(None)
def scripts(repo: str, rev: str, key: str, exp: str, spec: str) -> tuple[str, ...]:
    """The benchmark scripts the launchers of the key's runner group name at ``rev`` (those that exist)."""
    v = yaml_at(repo, rev, CFG).get(key) or {}
    nodes = (yaml_at(repo, rev, RUNNERS) or {}).get(v.get("runner"), []) or []
    env = {"EXP_NAME": exp, "PRECISION": str(v.get("precision", "")), "FRAMEWORK": str(v.get("framework", "")),
           "SPEC_DECODING": spec, "MODEL": str(v.get("model", "")), "IMAGE": str(v.get("image", "")), "TP": "8",
           "USER": "runner"}
    found = set()
    for launcher in sorted({f"runners/launch_{str(n).split('_')[0]}.sh" for n in nodes}):
        text = git(repo, "show", f"{rev}:{launcher}")
        words = tuple(_word_at(line, line.index("benchmarks/")) for line in text.split("\n")
                      if "benchmarks/" in line and ".sh" in line[line.index("benchmarks/"):]
                      and not line.strip().startswith("#"))
        if words:
            for path in evaluate(text, {**env, "RUNNER_NAME": launcher[15:-3] + "_0"}, words=words).words:
                if git(repo, "cat-file", "-t", f"{rev}:{path}").strip() == "blob":
                    found.add(path)
    return tuple(sorted(found))


@functools.lru_cache(None)
def setting(repo: str, rev: str, path: str, engine: str, env_items: tuple) -> tuple[str | None, str]:
    """(the value the script states for the engine's MoE backend setting or None, a note) for one run's environment."""
    text = git(repo, "show", f"{rev}:{path}")
    names = tuple(sorted(set(MOE_VAR.findall(text)) | {VLLM_SWITCH}))
    flags = tuple(dict.fromkeys(m.group(1) for m in re.finditer(FLAG[engine], text)))
    r = evaluate(text, dict(env_items), names=names, words=flags, config_mark="moe_config")
    if not r.complete:
        return None, f"{path}: the parameter lines did not run to the end ({sorted(r.failed.items())[:2]})"
    others = ", ".join(f"{n}={v}" for n, v in r.variables.items() if v and n != VLLM_SWITCH)
    note = f"{path}" + (f" [{others}]" if others else "")
    values = {w for w in r.words if w}
    if engine == "trtllm":
        try:
            cfg = yaml.safe_load(r.config) or {}
        except yaml.YAMLError:
            return None, f"{note}: the extra-options YAML it writes does not parse"
        backend = (cfg.get("moe_config") or {}).get("backend") if isinstance(cfg, dict) else None
        values |= {str(backend)} if backend else set()
        if "moe_config" in r.uncertain:
            return None, f"{note}: moe_config decided by a line that calls a program ({r.failed})"
        if backend is None and re.search(r"moe_config|moe_backend", text):
            return None, f"{note}: names a MoE backend setting in a way not read (not a heredoc config or flag)"
    elif engine == "vllm":
        switch = r.variables.get(VLLM_SWITCH, "")
        if VLLM_SWITCH in r.uncertain:
            return None, f"{note}: {VLLM_SWITCH} decided by a line that calls a program"
        values |= {"flashinfer-mxfp8"} if switch.lower() in ("1", "true") else \
            {"default"} if switch.lower() in ("0", "false") else set()
    if any(f in r.uncertain for f in flags):
        return None, f"{note}: the backend flag is decided by a line that calls a program"
    if len(values) > 1:
        return None, f"{note}: states {sorted(values)}"
    return (values.pop() if values else None), note


def derive(row: dict, repo: str, log: list) -> tuple[str, str, str]:
    """(status, value, note) of a row: status 'stated' (value = the setting), 'not-stated' (the matched scripts set
    none: the engine's default ran), 'ambiguous', 'unlisted' (a value the engine file does not list) or 'unmatched'.
    Every single-node entry the row matches is read; where their scripts disagree, the entries of the row's own
    layout (:func:`row_layout`) decide."""
    if row.get("system") not in GPU:
        return "unmatched", "", "GPU not read (b300_sxm and gb300 are held out)"
    if (row.get("mode") or "") != "agg":
        return "unmatched", "", "disagg row (Dynamo launch, not read)"
    hits = sweep_hits(row, repo, log)
    if not hits:
        return "unmatched", "", "no sweep entry (no stamp, no changelog commit at its time, or no key matches)"
    cfg_of = {rev: yaml_at(repo, rev, CFG) for rev, _, _ in hits}
    runs = []
    for rev, k, e in hits:
        key = cfg_of[rev][k]
        if key.get("multinode") or str(key.get("framework", "")).startswith("dynamo"):
            continue
        env = environment(key, e, row)
        paths = scripts(repo, rev, k, env["EXP_NAME"], env["SPEC_DECODING"])
        if not paths:
            return "unmatched", "", f"{k}@{rev[:9]}: no launcher of its runner names an existing script"
        for path in paths:
            value, note = setting(repo, rev, path, row["backend"], tuple(sorted(env.items())))
            runs.append((entry_layout(e), value, f"{k}@{rev[:9]}:{note}"))
    if not runs:
        return "unmatched", "", "multi-node (Dynamo) keys only"
    if len({v for _, v, _ in runs}) > 1:
        own = [r for r in runs if r[0] == row_layout(row)]
        runs = own or runs
    values, notes = {v for _, v, _ in runs}, sorted({n for _, _, n in runs})
    note = "; ".join(notes)
    if len(values) > 1 or any(w in n for n in notes for w in ("states [", "calls a program", "did not run",
                                                              "not parse", "not read")):
        return "ambiguous", "", note
    value = values.pop()
    if value is None:
        return "not-stated", "", note
    if value not in listed(row["backend"]):
        return "unlisted", value, note
    return "stated", value, note


def main(argv: list[str]) -> int:
    aic, repo = argv[1], argv[2]
    log = commits(repo)
    source = read_source(aic)
    found, tally, reasons = {}, collections.Counter(), collections.Counter()
    for row in source:
        status, value, note = derive(row, repo, log)
        tally[(row["backend"], row["system"], status, value)] += 1
        if status == "stated":
            found[row["id"]] = value
        if status != "unmatched":
            print(f"{row['id']},{status},{value},{note}")
        else:
            reasons[(row["backend"], note.split(" (")[0])] += 1
    for row, value, twin in copies(source, found):
        found[row["id"]] = value
        tally[(row["backend"], row["system"], "stated (copy)", value)] += 1
        print(f"{row['id']},stated,{value},copy of {twin}")
    for k, n in sorted(tally.items()):
        print(f"{n:5d} {' '.join(k)}", file=sys.stderr)
    for k, n in sorted(reasons.items()):
        print(f"{n:5d} unmatched {k[0]}: {k[1]}", file=sys.stderr)
    print(f"{len(found)} rows with a stated MoE backend", file=sys.stderr)
    if "--write" in argv:
        write_column(source, COLUMN, found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
