"""Provenance tool (not imported by the package): which rows of aiconfigurator-core's silicon_sample.csv were measured
with speculative decoding (MTP), read from the InferenceX benchmark sweep that produced them. Writes the column
``speculative_num_draft_tokens`` of ``measured/silicon/silicon_sample.csv`` (README.md, "Speculative rows").

A row is matched to the InferenceX sweep entries that can have measured it (benchmarks/inferencex.py: the perf-changelog
commit at its ``measured=`` time, the swept keys' search-space entries of its GPU, framework, model, precision, image,
isl/osl, concurrency and tp/ep). It is marked speculative when every entry it matches is a single-node ``*-mtp`` entry
(``spec-decoding: mtp``). Depth: TRT-LLM ``*-trt-mtp`` launch scripts (benchmarks/dsr1_fp{4,8}_{b,h}200_trt_mtp*.sh) set
``num_nextn_predict_layers`` MTP=3, or MTP=1 with DP attention (read from the row's attention_dp_size column where the
search space lists both); SGLang ``*-mtp`` scripts set ``SPECULATIVE_NUM_STEPS`` (read from the script at that commit).
Rows without a stamp that repeat a marked row (same deployment columns, same TPOT to 0.01 ms) are copies of it
(:func:`copies`). Rows that match STP and MTP entries alike, disagg (Dynamo) rows and rows with no sweep commit are left
unmarked.

Usage: python benchmarks/derive_speculative.py AIC_SILICON_CSV INFERENCEX_GIT_DIR [--write]
"""

from __future__ import annotations

import re
import sys

from inferencex import CFG, commits, copies, git, read_source, sweep_hits, write_column, yaml_at

COLUMN = "speculative_num_draft_tokens"


def draft_tokens(row: dict, repo: str, log: list) -> tuple[int, str]:
    """(MTP draft tokens, source) of a row; (0, "") when not shown to be speculative."""
    hits = sweep_hits(row, repo, log)
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
    v = yaml_at(repo, rev, CFG).get(key) or {}
    name = f"{v.get('model-prefix')}_{v.get('precision')}_{str(v.get('runner', '')).split('-')[0]}"
    suffix = {"sglang": "", "vllm": "_vllm"}.get(str(v.get("framework")), "?")
    for path in (f"benchmarks/single_node/{name}{suffix}_mtp.sh", f"benchmarks/{name}{suffix}_mtp.sh"):
        text = git(repo, "show", f"{rev}:{path}")
        m = re.search(r"SPECULATIVE_NUM_STEPS=(\d+)|num_speculative_tokens\W+(\d+)", text)
        if m:
            return int(m.group(1) or m.group(2))
    return None


def main(argv: list[str]) -> int:
    aic, repo = argv[1], argv[2]
    log = commits(repo)
    source = read_source(aic)
    found = {}
    for row in source:
        n, src = draft_tokens(row, repo, log)
        if n:
            found[row["id"]] = n
            print(f"{row['id']},{n},{src}")
    for row, n, twin in copies(source, found):
        found[row["id"]] = n
        print(f"{row['id']},{n},copy of {twin}")
    print(f"{len(found)} speculative rows", file=sys.stderr)
    if "--write" in argv:
        write_column(source, COLUMN, {k: str(v) for k, v in found.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
