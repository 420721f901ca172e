"""Provenance helpers (not imported by the package), shared by benchmarks/derive_speculative.py and
benchmarks/derive_launch.py: which InferenceX sweep (github.com/SemiAnalysisAI/InferenceX) measured a row of
aiconfigurator-core's silicon_sample.csv, and writing one derived column into measured/silicon/silicon_sample.csv.

Rule: a sweep runs when a commit appends an entry to ``perf-changelog.yaml`` (.github/workflows/run-sweep.yml runs
utils/process_changelog.py on push), over the ``config-keys`` that entry names, with the search space of
``.github/configs/nvidia-master.yaml`` at that commit. A row of aiconfigurator's file states ``measured=`` (the
triggering commit's time: 2026-02-05T19:55:05Z for commit 5d517074c at 19:55:01Z) and ``image=``/``backend_version``.
A row is matched to the sweeps of the commits at its time (within 2 minutes; a date-only stamp: every such commit of
that UTC day), to the swept keys' entries of its GPU, framework, model, precision, image (the row's ``image=``
exactly where it states one), isl/osl, concurrency and (where its id states it) tp/ep (:func:`sweep_hits`).
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import re
import subprocess
from pathlib import Path

import yaml

CFG, CHANGELOG = ".github/configs/nvidia-master.yaml", "perf-changelog.yaml"
GPU = {"b200_sxm": "b200", "h200_sxm": "h200", "h100_sxm": "h100", "gb200": "gb200"}  # held-out GPUs absent
PRECISION = {"nvfp4": "fp4", "mxfp4": "fp4", "fp8": "fp8", "fp8_block": "fp8"}
FRAMEWORK = {"trtllm": "trt", "sglang": "sglang", "vllm": "vllm"}  # row backend -> the key's framework suffix
HERE = Path(__file__).resolve().parents[1] / "measured" / "silicon"


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=False).stdout


@functools.lru_cache(None)
def yaml_at(repo: str, rev: str, path: str):
    try:
        return yaml.safe_load(git(repo, "show", f"{rev}:{path}")) or []
    except yaml.YAMLError:
        return []


@functools.lru_cache(None)
def swept(repo: str, rev: str) -> frozenset[str]:
    """Config keys of the perf-changelog entries a commit added (what its sweep ran)."""
    old = {yaml.safe_dump(e) for e in yaml_at(repo, rev + "^", CHANGELOG) or []}
    keys: set[str] = set()
    for e in yaml_at(repo, rev, CHANGELOG) or []:
        if isinstance(e, dict) and yaml.safe_dump(e) not in old:
            keys.update(e.get("config-keys") or [])
    return frozenset(keys)


def commits(repo: str) -> list[tuple[dt.datetime, str]]:
    """(UTC commit time, hash) of every commit that changed the changelog and ran its sweep, oldest first: run-sweep.yml
    skips a push whose head commit message contains ``[skip-sweep]`` (9c0fcc9af, the changelog's first commit, is
    one)."""
    out = []
    for line in git(repo, "log", "--format=%H %cI %s%x1f%b%x1e", "--", CHANGELOG).split("\x1e"):
        if not line.strip():
            continue
        h, t, message = line.strip().split(" ", 2)
        if "[skip-sweep]" not in message:
            out.append((dt.datetime.fromisoformat(t).astimezone(dt.timezone.utc), h))
    return sorted(out)


def field(row: dict, key: str) -> str:
    """``key=value`` of a row's ``silicon_data_source`` ('' when absent)."""
    m = re.search(rf"{key}=([^;]*)", row.get("silicon_data_source") or "")
    return m.group(1).strip() if m else ""


def same_image(key_image, row: dict, version: str) -> bool:
    """The key ran the row's container: the row's ``image=`` where it states one (registry spelling ``nvcr.io#`` and
    ``nvcr.io/`` alike; ``lmsysorg/sglang:v0.5.9-cu130`` and ``...-cu130-amd64`` are different keys' images), else its
    version in the key's image tag (``:1.2.0rc6.post3``, ``:v0.5.9``)."""
    image, stated = str(key_image or "").replace("#", "/"), field(row, "image").replace("#", "/")
    if stated:
        return image == stated
    return f":{version}" in image or f":v{version}" in image


def same_model(key: dict, row: dict) -> bool:
    """The key's checkpoint (deepseek-ai/DeepSeek-R1-0528) is of the row's model (DeepSeek-R1), or the row's id names
    the key's model prefix: aiconfigurator's database rows (``db-dump``) are named ``{model-prefix}_{gpu}_...``
    (``dsr1_b200_trtllm_fp4_agg_...``), and they label every InferenceX ``dsr1`` run (DeepSeek-R1-0528) DeepSeek-V3
    (400 rows of the GPUs read here; no config in the main history of InferenceX names a DeepSeek-V3 checkpoint)."""
    name = row["model_path"].split("/")[-1].lower()
    if str(key.get("model", "")).split("/")[-1].lower().startswith(name):
        return True
    return bool(key.get("model-prefix")) and row["id"].startswith(f"{key['model-prefix']}_")


def id_layout(row: dict) -> tuple[int | None, int | None]:
    """(tp, ep) where the row's id states them (``_tp8_0_ep1_0``, ``_tp4_ep_none``), else (None, None)."""
    m = re.search(r"_tp(\d+)(?:_0)?_ep(\d+|none)", row["id"])
    return (int(m.group(1)), 1 if m.group(2) == "none" else int(m.group(2))) if m else (None, None)


def entries(repo: str, rev: str, row: dict, version: str, ran=None) -> list[tuple[str, dict]]:
    """(key, search-space entry) of the swept keys that match the row. ``ran(rev, key, entry)``: for a multi-node
    entry, the concurrencies its launch benchmarked where they are not its ``conc-list`` (a recipe's own list,
    benchmarks/srt_recipes.py), or None to read the ``conc-list``."""
    cfg = yaml_at(repo, rev, CFG)
    tp, ep = id_layout(row)
    conc = int(field(row, "silicon_concurrency") or 0)
    hits = []
    for key in sorted(swept(repo, rev)):
        v = cfg.get(key) if isinstance(cfg, dict) else None
        if not isinstance(v, dict) or v.get("precision") != PRECISION.get(row["moe_quant_mode"]):
            continue
        if not same_model(v, row):
            continue
        if not str(v.get("runner", "")).startswith(GPU[row["system"]]) or not same_image(v.get("image"), row, version):
            continue
        if not str(v.get("framework", "")).endswith(FRAMEWORK.get(row["backend"], "?")):
            continue
        for s in v.get("seq-len-configs", []):
            if (s.get("isl"), s.get("osl")) != (int(float(row["isl"])), int(float(row["osl"]))):
                continue
            for e in s.get("search-space", []):
                own = ran(rev, key, e) if ran is not None and v.get("multinode") else None
                if own is not None:
                    if conc in own:
                        hits.append((key, e))
                elif "conc-start" in e and e["conc-start"] <= conc <= e["conc-end"]:
                    if tp is None or (e.get("tp"), e.get("ep", 1)) == (tp, ep):
                        hits.append((key, e))
                elif conc in (e.get("conc-list") or []):
                    hits.append((key, e))
    return hits


def sweep_hits(row: dict, repo: str, log: list[tuple[dt.datetime, str]], ran=None) -> list[tuple[str, str, dict]]:
    """(commit, key, search-space entry) of every sweep that can have measured the row; [] when the row has no stamp,
    is of a GPU not read here (the held-out b300/gb300 among them) or matches no swept key. ``log``: :func:`commits`;
    ``ran``: as for :func:`entries`."""
    stamp, system = field(row, "measured"), row.get("system", "")
    if not stamp or system not in GPU:
        return []
    version = row.get("backend_version") or field(row, "image").split(":")[-1]
    t = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    t = t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
    dated = "T" not in stamp or "T00:00:00" in stamp
    revs = [h for ct, h in log if (ct.date() == t.date() if dated else abs((ct - t).total_seconds()) <= 120)]
    return [(rev, k, e) for rev in revs for k, e in entries(repo, rev, row, version, ran)]


DEPLOYMENT = ("model_path", "system", "backend", "backend_version", "precision", "mode", "isl", "osl", "batch_size",
              "tp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size")


def copies(source: list[dict], found: dict) -> list[tuple[dict, object, str]]:
    """(row, the marked row's value, its id) of the rows with no ``measured=`` stamp (aiconfigurator's gap-analysis
    files) that repeat a row marked in ``found`` ({id: value}): same deployment columns and the same TPOT to the 0.01
    ms they state (6.33 against 6.329993). The same measurement copied into another file; stamped STP rows repeat
    each other the same way (one tp 8 Qwen3.5 point sits in four files)."""
    marked = {}
    for row in source:
        if row["id"] in found:
            marked.setdefault(tuple(row[c] for c in DEPLOYMENT), []).append(row)
    out = []
    for row in source:
        if row["id"] in found or field(row, "measured"):
            continue
        for twin in marked.get(tuple(row[c] for c in DEPLOYMENT), []):
            if abs(float(row["silicon_tpot_ms"]) - float(twin["silicon_tpot_ms"])) <= 0.006:
                out.append((row, found[twin["id"]], twin["id"]))
                break
    return out


def read_source(path: str) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_column(source: list[dict], column: str, values: dict[str, str]) -> None:
    """Write ``column`` of measured/silicon/silicon_sample.csv: ``values[id]`` for the rows it names, '' elsewhere;
    the column is added at the end when absent, replaced in place when present. ``source``: the wheel's rows, whose
    order the bundled file keeps (checked)."""
    target = HERE / "silicon_sample.csv"
    with target.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0] if column in rows[0] else [*rows[0], column]
    at = header.index(column)
    if [r[0] for r in rows[1:]] != [r["id"] for r in source]:
        raise SystemExit("the rows of the two files differ in order")
    body = []
    for r in rows[1:]:
        r = r + [""] * (len(header) - len(r))
        r[at] = values.get(r[0], "")
        body.append(r)
    with target.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *body])
