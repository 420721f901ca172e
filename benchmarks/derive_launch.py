"""Provenance tool (not imported by the package): the MoE kernel setting the InferenceX launch script chose for each
row of aiconfigurator-core's silicon_sample.csv. Writes the column ``moe_backend`` of
``measured/silicon/silicon_sample.csv`` (README.md, "MoE backend at launch"); empty = not stated by a launch script.

Which script. An agg row is matched to the single-node sweep entries that can have measured it
(benchmarks/inferencex.py; multi-node keys are not read for it). Each is read; where their
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
  - vLLM: ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8`` (1 -> ``flashinfer-mxfp8``, 0 -> ``default``);
    ``VLLM_USE_FLASHINFER_MOE_FP8=0`` with ``VLLM_MOE_USE_DEEP_GEMM=0`` -> ``triton`` (the FP8 MoE oracle's next
    backend once FlashInfer and DeepGEMM are removed: engines/vllm.yaml source V-fp8-oracle); other MoE variables
    are reported;
  - SGLang: ``--moe-runner-backend`` (reported).
A disagg row ran a multi-node (Dynamo) launch: it is matched to the multi-node (``disagg: true``) entries of the sweeps
at its time whose srt-slurm recipe benchmarks its concurrency (the recipe's own list, not the entry's ``conc-list``),
and read from that recipe's decode workers (benchmarks/srt_recipes.py: TensorRT-LLM ``trtllm_config.decode.moe_config
.backend``; SGLang ``moe-runner-backend`` and vLLM's, reported); entries launched by a benchmarks/ script (the Dynamo
repository's sweep scripts, December 2025 to January 2026) are not read. Where the matched recipes disagree, those of
the row's decode layout decide (decode_* columns, read as for agg rows).
A value is written only where every matched script states the same one and the engine file lists it (engines/*.yaml
kernels.moe_backend, any release; ``validate tpot`` refuses a row whose release does not list it); others are reported.

Usage: python benchmarks/derive_launch.py AIC_SILICON_CSV INFERENCEX_GIT_DIR [SRT_SLURM_GIT_DIR] [--write]
(SRT_SLURM_GIT_DIR: a clone of github.com/NVIDIA/srt-slurm; without it disagg rows are not read)
"""

from __future__ import annotations

import collections
import functools
import re
import sys

import srt_recipes as recipes
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
VLLM_FP8_OFF = ("VLLM_USE_FLASHINFER_MOE_FP8", "VLLM_MOE_USE_DEEP_GEMM")  # both 0: the FP8 MoE oracle runs TRITON


@functools.lru_cache(None)
def listed(engine: str) -> frozenset[str]:
    """The MoE backend values the engine file lists in any release."""
    return frozenset(b for r in load_engine(engine).releases for b in r.kernels.backends)


def row_layout(row: dict, pre: str = "") -> tuple[int, int, bool]:
    """(TP, EP_SIZE, DP_ATTENTION) of an InferenceX single-node run (``pre`` 'decode_': of a disagg row's decode
    worker) as the row's layout columns state it, read as ``validate tpot`` reads them (simulator/validate/layouts.py:
    the squared TP and DP columns)."""
    tp, dp = int(float(row[f"{pre}tp_size"] or 1)), int(float(row[f"{pre}attention_dp_size"] or 1))
    ep = int(float(row[f"{pre}moe_ep_size"] or 1))
    moe_tp = int(float(row[f"{pre}moe_tp_size"] or 1))
    if squared_tp(row, pre, tp, ep, moe_tp):
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
    names = tuple(sorted(set(MOE_VAR.findall(text)) | {VLLM_SWITCH, *VLLM_FP8_OFF}))
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
        if any(n in r.uncertain for n in VLLM_FP8_OFF):
            return None, f"{note}: {' or '.join(VLLM_FP8_OFF)} decided by a line that calls a program"
        if all(r.variables.get(n, "").lower() in ("0", "false") for n in VLLM_FP8_OFF):
            values |= {"triton"}
    if any(f in r.uncertain for f in flags):
        return None, f"{note}: the backend flag is decided by a line that calls a program"
    if len(values) > 1:
        return None, f"{note}: states {sorted(values)}"
    return (values.pop() if values else None), note


def launch_env(key: dict, e: dict, isl: int, osl: int) -> tuple:
    """What benchmark-multinode-tmpl.yml gives a multi-node launcher (the parts its clone logic can read)."""
    env = {"MODEL": str(key.get("model", "")), "MODEL_PREFIX": str(key.get("model-prefix", "")),
           "PRECISION": str(key.get("precision", "")), "FRAMEWORK": str(key.get("framework", "")),
           "IMAGE": str(key.get("image", "")), "ISL": str(isl), "OSL": str(osl), "IS_MULTINODE": "true",
           "SPEC_DECODING": str(e.get("spec-decoding", "none")), "CONFIG_FILE": recipes.config_file(e) or "",
           "EXP_NAME": f"{key.get('model-prefix', '')}_{SEQ.get((isl, osl), f'{isl}_{osl}')}", "USER": "runner",
           "GITHUB_WORKSPACE": "/workspace"}
    return tuple(sorted(env.items()))


def _recipe(repo: str, srt: str, rev: str, k: str, e: dict, isl: int, osl: int) -> tuple[str | None, str]:
    """(the recipe path in the stored srt-slurm repository this entry ran, or None, note)."""
    path = recipes.config_file(e)
    if path is None:
        return None, f"{k}@{rev[:9]}: launched by a benchmarks/ script, no recipe (its settings are in the Dynamo " \
                     "repository's sweep scripts or the cluster's config folder, not stored here)"
    source, note = recipes.recipe_source(repo, rev, k, launch_env(yaml_at(repo, rev, CFG)[k], e, isl, osl))
    if source is None:
        return None, note
    if not any(s in source[0] for s in recipes.STORED):
        return None, f"{k}@{rev[:9]}: recipe repository {source[0]} not stored"
    return path, f"{k}@{rev[:9]}:{source[1]}:"


def derive_disagg(row: dict, repo: str, srt: str | None, log: list) -> tuple[str, str, str]:
    """:func:`derive` for a disagg row: the multi-node (Dynamo) entries it matches, the recipe each ran
    (benchmarks/srt_recipes.py), the MoE backend the recipe gives the decode workers. Where the matched recipes
    disagree, those of the row's own decode layout decide."""
    if srt is None:
        return "unmatched", "", "disagg row (no srt-slurm git dir given)"
    isl, osl = int(float(row["isl"])), int(float(row["osl"]))

    def ran(rev, k, e):
        path, _ = _recipe(repo, srt, rev, k, e, isl, osl)
        return recipes.ran(srt, path, isl, osl) if path and recipes.versions(srt, path) else None

    hits = [(rev, k, e) for rev, k, e in sweep_hits(row, repo, log, ran) if yaml_at(repo, rev, CFG)[k].get("disagg")]
    if not hits:
        return "unmatched", "", "no multi-node sweep entry (no stamp, no changelog commit at its time, or no recipe " \
                                "of a swept key benchmarks its concurrency)"
    runs = []
    for rev, k, e in hits:
        path, where = _recipe(repo, srt, rev, k, e, isl, osl)
        if path is None:
            runs.append((frozenset(), None, "not-read", where))
            continue
        status, value, shapes, note = recipes.decode_settings(srt, path, row["backend"])
        runs.append((shapes, value, status, f"{where}{note}"))
    if len({(v, s) for _, v, s, _ in runs}) > 1:
        own = [r for r in runs if any(layout == row_layout(row, "decode_") for layout, _ in r[0])]
        runs = own or runs
    values, notes = {(v, s) for _, v, s, _ in runs}, "; ".join(sorted({n for *_, n in runs}))
    mtp = sorted({m for shapes, *_ in runs for _, m in shapes})
    notes += f" [MTP {mtp}]" if any(mtp) else ""
    if len(values) > 1 or any(s != "read" for _, s in values):
        return "ambiguous", "", notes
    value = values.pop()[0]
    if value is None:
        return "not-stated", "", notes
    if value not in listed(row["backend"]):
        return "unlisted", value, notes
    return "stated", value, notes


def derive(row: dict, repo: str, log: list, srt: str | None = None) -> tuple[str, str, str]:
    """(status, value, note) of a row: status 'stated' (value = the setting), 'not-stated' (the matched scripts set
    none: the engine's default ran), 'ambiguous', 'unlisted' (a value the engine file does not list) or 'unmatched'.
    Every single-node entry the row matches is read; where their scripts disagree, the entries of the row's own
    layout (:func:`row_layout`) decide."""
    if row.get("system") not in GPU:
        return "unmatched", "", "GPU not read (b300_sxm and gb300 are held out)"
    if (row.get("mode") or "") != "agg":
        return derive_disagg(row, repo, srt, log)
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
    args = [a for a in argv[1:] if not a.startswith("--")]
    aic, repo, srt = args[0], args[1], (args[2] if len(args) > 2 else None)
    log = commits(repo)
    source = read_source(aic)
    found, tally, reasons = {}, collections.Counter(), collections.Counter()
    for row in source:
        status, value, note = derive(row, repo, log, srt)
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
