"""Provenance tool (not imported by the package): which rows of aiconfigurator-core's silicon_sample.csv were measured
with speculative decoding (MTP), read from the InferenceX benchmark sweep that produced them. Writes the column
``speculative_num_draft_tokens`` of ``measured/silicon/silicon_sample.csv`` (README.md, "Speculative rows").

Rule (InferenceX, github.com/SemiAnalysisAI/InferenceX): a sweep runs when a commit appends an entry to
``perf-changelog.yaml`` (.github/workflows/run-sweep.yml runs utils/process_changelog.py on push), over the
``config-keys`` that entry names, with the search space of ``.github/configs/nvidia-master.yaml`` at that commit. A row
of aiconfigurator's file states ``measured=`` (the triggering commit's time: 2026-02-05T19:55:05Z for commit
5d517074c at 19:55:01Z) and ``image=``/``backend_version``. A row is matched to the sweeps of the commits at its time
(within 2 minutes; a date-only stamp: every such commit of that UTC day), to the swept keys' entries of its GPU,
framework, model, precision, image, isl/osl, concurrency and (where its id states it) tp/ep. It is marked
speculative when every entry it matches is a single-node TRT-LLM ``*-trt-mtp`` entry (``spec-decoding: mtp``): those
launch scripts
(benchmarks/dsr1_fp{4,8}_{b,h}200_trt_mtp*.sh) set ``num_nextn_predict_layers`` MTP=3, or MTP=1 with DP attention
(read from the row's attention_dp_size column where the search space lists both). Rows that match STP and MTP
entries alike, disagg (Dynamo) rows and rows with no sweep commit are left unmarked.

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
        if not str(v.get("runner", "")).startswith(GPU[row["system"]]) or f":{version}" not in str(v.get("image")):
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
    if not hits or not all(k.endswith("-trt-mtp") and e.get("spec-decoding") == "mtp" for _, k, e in hits):
        return 0, ""
    dp = {bool(e.get("dp-attn")) for _, _, e in hits}
    if len(dp) > 1:
        dp = {int(float(row.get("attention_dp_size") or 1)) > 1}
    return (1 if dp.pop() else 3), ",".join(sorted({f"{k}@{rev[:9]}" for rev, k, _ in hits}))


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
