"""Provenance tool (not imported by the package): which rows of aiconfigurator-core's silicon_sample.csv were measured
with speculative decoding (MTP), read from the InferenceX benchmark sweep that produced them. Writes the column
``speculative_num_draft_tokens`` of ``measured/silicon/silicon_sample.csv`` (README.md, "Speculative rows").

Rule (InferenceX, github.com/SemiAnalysisAI/InferenceX): a sweep runs when a commit appends an entry to
``perf-changelog.yaml`` (.github/workflows/run-sweep.yml runs utils/process_changelog.py on push), over the
``config-keys`` that entry names, with the search space of ``.github/configs/nvidia-master.yaml`` at that commit. A row
of aiconfigurator's file states ``measured=`` (the triggering commit's time: 2026-02-05T19:55:05Z for commit
5d517074c at 19:55:01Z) and ``image=``/``backend_version``. A row is matched to the sweeps of the commits at its time
(within 2 minutes; a date-only stamp: every such commit of that UTC day), to the swept keys' entries of its GPU,
framework, model, precision, image (the row's ``image=`` exactly where it states one), isl/osl, concurrency and
(where its id states it) tp/ep. It is marked speculative when every entry it matches is a single-node ``*-mtp`` entry
(``spec-decoding: mtp``). Depth: TRT-LLM ``*-trt-mtp`` launch scripts (benchmarks/dsr1_fp{4,8}_{b,h}200_trt_mtp*.sh)
set ``num_nextn_predict_layers`` MTP=3, or MTP=1 with DP attention (read from the row's attention_dp_size column where
the search space lists both); SGLang ``*-mtp`` scripts set ``SPECULATIVE_NUM_STEPS`` (read from the script at that
commit). Rows without a stamp that repeat a marked row (same deployment columns, same TPOT to 0.01 ms) are copies of
it (:func:`copies`). Rows that match STP and MTP entries alike, disagg (Dynamo) rows and rows with no sweep commit are
left unmarked.

Usage: python benchmarks/derive_speculative.py AIC_SILICON_CSV INFERENCEX_GIT_DIR [--write]
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import re
import subprocess
import sys
from pathlib import Path

import yaml

CFG, CHANGELOG = ".github/configs/nvidia-master.yaml", "perf-changelog.yaml"
GPU = {"b200_sxm": "b200", "h200_sxm": "h200", "h100_sxm": "h100", "gb200": "gb200"}
PRECISION = {"nvfp4": "fp4", "mxfp4": "fp4", "fp8": "fp8", "fp8_block": "fp8"}
COLUMN = "speculative_num_draft_tokens"
HERE = Path(__file__).resolve().parents[1] / "measured" / "silicon"


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=False).stdout


@functools.lru_cache(None)
def _yaml(repo: str, rev: str, path: str):
    try:
        return yaml.safe_load(_git(repo, "show", f"{rev}:{path}")) or []
    except yaml.YAMLError:
        return []


@functools.lru_cache(None)
def _swept(repo: str, rev: str) -> frozenset[str]:
    """Config keys of the perf-changelog entries a commit added (what its sweep ran)."""
    old = {yaml.safe_dump(e) for e in _yaml(repo, rev + "^", CHANGELOG) or []}
    keys: set[str] = set()
    for e in _yaml(repo, rev, CHANGELOG) or []:
        if isinstance(e, dict) and yaml.safe_dump(e) not in old:
            keys.update(e.get("config-keys") or [])
    return frozenset(keys)


def _commits(repo: str) -> list[tuple[dt.datetime, str]]:
    out = []
    for line in _git(repo, "log", "--format=%H %cI", "--", CHANGELOG).splitlines():
        h, t = line.split()
        out.append((dt.datetime.fromisoformat(t).astimezone(dt.timezone.utc), h))
    return sorted(out)


def _field(row: dict, key: str) -> str:
    m = re.search(rf"{key}=([^;]*)", row.get("silicon_data_source") or "")
    return m.group(1).strip() if m else ""


def _same_image(key_image, row: dict, version: str) -> bool:
    """The key ran the row's container: the row's ``image=`` where it states one (registry spelling ``nvcr.io#`` and
    ``nvcr.io/`` alike; ``lmsysorg/sglang:v0.5.9-cu130`` and ``...-cu130-amd64`` are different keys' images), else its
    version in the key's image tag (``:1.2.0rc6.post3``, ``:v0.5.9``)."""
    image, stated = str(key_image or "").replace("#", "/"), _field(row, "image").replace("#", "/")
    if stated:
        return image == stated
    return f":{version}" in image or f":v{version}" in image


def _entries(repo: str, rev: str, row: dict, version: str) -> list[tuple[str, dict]]:
    """(key, search-space entry) of the swept keys that match the row."""
    cfg = _yaml(repo, rev, CFG)
    m = re.search(r"_tp(\d+)(?:_0)?_ep(\d+|none)", row["id"])
    tp, ep = (int(m.group(1)), 1 if m.group(2) == "none" else int(m.group(2))) if m else (None, None)
    conc = int(_field(row, "silicon_concurrency") or 0)
    hits = []
    for key in sorted(_swept(repo, rev)):
        v = cfg.get(key) if isinstance(cfg, dict) else None
        if not isinstance(v, dict) or v.get("precision") != PRECISION.get(row["moe_quant_mode"]):
            continue
        if not str(v.get("model", "")).split("/")[-1].lower().startswith(row["model_path"].split("/")[-1].lower()):
            continue  # the key's checkpoint (deepseek-ai/DeepSeek-R1-0528) is of the row's model (DeepSeek-R1)
        if not str(v.get("runner", "")).startswith(GPU[row["system"]]) or not _same_image(v.get("image"), row, version):
            continue
        if not str(v.get("framework", "")).endswith({"trtllm": "trt", "sglang": "sglang", "vllm": "vllm"}
                                                    .get(row["backend"], "?")):
            continue
        for s in v.get("seq-len-configs", []):
            if (s.get("isl"), s.get("osl")) != (int(float(row["isl"])), int(float(row["osl"]))):
                continue
            for e in s.get("search-space", []):
                if "conc-start" in e and e["conc-start"] <= conc <= e["conc-end"]:
                    if tp is None or (e.get("tp"), e.get("ep", 1)) == (tp, ep):
                        hits.append((key, e))
                elif conc in (e.get("conc-list") or []):
                    hits.append((key, e))
    return hits


def draft_tokens(row: dict, repo: str, commits: list[tuple[dt.datetime, str]]) -> tuple[int, str]:
    """(MTP draft tokens, source) of a row; (0, "") when not shown to be speculative."""
    stamp, system = _field(row, "measured"), row.get("system", "")
    if not stamp or system not in GPU:
        return 0, ""
    version = row.get("backend_version") or _field(row, "image").split(":")[-1]
    t = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    t = t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
    dated = "T" not in stamp or "T00:00:00" in stamp
    revs = [h for ct, h in commits if (ct.date() == t.date() if dated else abs((ct - t).total_seconds()) <= 120)]
    hits = [(rev, k, e) for rev in revs for k, e in _entries(repo, rev, row, version)]
    if not hits or not all(k.endswith("-mtp") and e.get("spec-decoding") == "mtp" for _, k, e in hits):
        return 0, ""
    source = ",".join(sorted({f"{k}@{rev[:9]}" for rev, k, _ in hits}))
    if all(k.endswith("-trt-mtp") for _, k, _ in hits):
        dp = {bool(e.get("dp-attn")) for _, _, e in hits}
        if len(dp) > 1:
            dp = {int(float(row.get("attention_dp_size") or 1)) > 1}
        return (1 if dp.pop() else 3), source
    steps = {_script_steps(repo, rev, k) for rev, k, _ in hits}
    return (steps.pop(), source) if len(steps) == 1 and None not in steps else (0, "")


def _script_steps(repo: str, rev: str, key: str) -> int | None:
    """Draft depth of a single-node SGLang/vLLM ``*-mtp`` key: its launch script (runners/launch_b200-nb.sh runs
    benchmarks/single_node/{model-prefix}_{precision}_{runner}{framework suffix}_mtp.sh) sets
    ``SPECULATIVE_NUM_STEPS`` (SGLang's --speculative-num-steps) or vLLM's ``num_speculative_tokens``."""
    v = _yaml(repo, rev, CFG).get(key) or {}
    name = f"{v.get('model-prefix')}_{v.get('precision')}_{str(v.get('runner', '')).split('-')[0]}"
    suffix = {"sglang": "", "vllm": "_vllm"}.get(str(v.get("framework")), "?")
    for path in (f"benchmarks/single_node/{name}{suffix}_mtp.sh", f"benchmarks/{name}{suffix}_mtp.sh"):
        text = _git(repo, "show", f"{rev}:{path}")
        m = re.search(r"SPECULATIVE_NUM_STEPS=(\d+)|num_speculative_tokens\W+(\d+)", text)
        if m:
            return int(m.group(1) or m.group(2))
    return None


DEPLOYMENT = ("model_path", "system", "backend", "backend_version", "precision", "mode", "isl", "osl", "batch_size",
              "tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def copies(source: list[dict], found: dict[str, int]) -> list[tuple[dict, int, str]]:
    """Rows with no ``measured=`` stamp (aiconfigurator's gap-analysis files) that repeat a marked row: same deployment
    columns and the same TPOT to the 0.01 ms they state (6.33 against 6.329993). The same measurement copied into
    another file; stamped STP rows repeat each other the same way (one tp 8 Qwen3.5 point sits in four files)."""
    marked = {}
    for row in source:
        if row["id"] in found:
            marked.setdefault(tuple(row[c] for c in DEPLOYMENT), []).append(row)
    out = []
    for row in source:
        if row["id"] in found or _field(row, "measured"):
            continue
        for twin in marked.get(tuple(row[c] for c in DEPLOYMENT), []):
            if abs(float(row["silicon_tpot_ms"]) - float(twin["silicon_tpot_ms"])) <= 0.006:
                out.append((row, found[twin["id"]], twin["id"]))
                break
    return out


def main(argv: list[str]) -> int:
    aic, repo = argv[1], argv[2]
    commits = _commits(repo)
    with open(aic, newline="", encoding="utf-8") as f:
        source = list(csv.DictReader(f))
    found = {}
    for row in source:
        n, src = draft_tokens(row, repo, commits)
        if n:
            found[row["id"]] = n
            print(f"{row['id']},{n},{src}")
    for row, n, twin in copies(source, found):
        found[row["id"]] = n
        print(f"{row['id']},{n},copy of {twin}")
    print(f"{len(found)} speculative rows", file=sys.stderr)
    if "--write" in argv:
        target = HERE / "silicon_sample.csv"
        with target.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        header = rows[0] if COLUMN in rows[0] else [*rows[0], COLUMN]
        ids = [r["id"] for r in source]
        assert [r[0] for r in rows[1:]] == ids, "rows of the two files differ in order"
        body = [[*r[:len(rows[0]) - (COLUMN in rows[0])], str(found.get(r[0], "")) if found.get(r[0]) else ""]
                for r in rows[1:]]
        with target.open("w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows([header, *body])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
