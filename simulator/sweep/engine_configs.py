"""What each serving engine loads to vary the draft length with the batch, and the writers (docs/MODEL.md §5.3b).

One home for the engines' config formats: field names, types, lookup rules and caps, each with the file and the
release or PR it was read in, so the engine catalog (``engines/*.yaml``) can take them over. Pure data and pure
functions over a schedule's inclusive ``(start, end, K)`` ranges (contiguous from batch 1; K = 0: no speculation).

- **vLLM** (vllm-project/vllm ``vllm/config/speculative.py`` ``SpeculativeConfig``; ``vllm/v1/spec_decode/dynamic/
  utils.py`` ``validate_and_normalize_dynamic_sd_schedule`` and ``build_dynamic_sd_schedule_lookup``; read for issue
  17, docs/sources/published.md): ``num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None`` of
  inclusive ``[range_start, range_end, K]``, sorted, non-overlapping, the first from 1, K >= 0; gaps and the tail
  inherit the previous K; K is clamped to ``num_speculative_tokens`` (> 0). Disabled under data parallelism
  (``test_dynamic_sd_is_disabled_with_data_parallel``). ``method`` and ``model`` (the draft checkpoint) beside it.
- **TensorRT-LLM** (NVIDIA/TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py`` ``DecodingBaseConfig`` and its
  ``Eagle3DecodingConfig`` / ``EagleDecodingConfig`` / ``MTPDecodingConfig`` / ``NGramDecodingConfig`` /
  ``DraftTargetDecodingConfig``; ``tensorrt_llm/_torch/speculative/utils.py`` ``get_draft_len_for_batch_size``;
  ``draft_len_schedule`` from PR #10860): ``speculative_config`` in the YAML that ``extra_llm_api_options`` (or
  ``--config``) takes: ``decoding_type`` (``Eagle``, ``Eagle3``, ``MTP``, ``NGram``, ``Draft_Target``),
  ``max_draft_len`` (> 0 for every one of them), ``speculative_model`` (EAGLE heads and draft models; alias
  ``speculative_model_dir``) and ``draft_len_schedule: dict[int, int]``: keys are *inclusive upper* batch bounds
  (the K of the first key >= the batch, ``bisect_left``), K = 0 above the last key; keys >= 1, K >= 0, every K <=
  ``max_draft_len`` and the smallest key's K == ``max_draft_len``; mutually exclusive with ``max_concurrency``.
- **SGLang** (sgl-project/sglang ``python/sglang/srt/server_args.py`` ``speculative_*`` flags;
  ``python/sglang/srt/speculative/adaptive_spec_params.py`` and ``adaptive_step_router.py``, the adaptive mode of PRs
  #21599 / #24055): launch flags ``--speculative-algorithm`` (EAGLE, EAGLE3, NEXTN for MTP heads, STANDALONE, NGRAM),
  ``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens`` (steps + 1 for a
  chain), ``--speculative-draft-model-path``; ``--speculative-adaptive --speculative-adaptive-config FILE``: a JSON
  object whose integer-string keys are *lower* batch bounds, each ``{"candidate_steps": [int >= 0, ...]}`` (0 turns
  drafting off); a batch is first padded to the server's CUDA-graph batch, then takes the largest key <= it (the
  smallest key below all keys). With one candidate per key the EMA controller never moves, so the per-batch steps
  are the table's. Adaptive runs only for EAGLE/EAGLE3 (NEXTN is rewritten to EAGLE by ``server_args``), topk 1, no
  attention DP, no two-batch overlap (``adaptive_unsupported_reason``).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass

from ..errors import ParameterError

__all__ = ["DEEPEP_ENGINES", "DRAFT_MODEL_PLACEHOLDER", "ENGINE_FORMATS", "FormatRules", "SGLANG_ALGORITHM",
           "TRTLLM_DECODING_TYPE", "VLLM_METHOD", "layout_supported", "parallel_args", "range_starts",
           "sglang_adaptive", "sglang_flags", "sglang_lookup", "trtllm_config", "trtllm_lookup", "trtllm_yaml",
           "vllm_config", "vllm_lookup"]

# Written where the draft checkpoint is not known (no --draft-model): the file says so, the CLI prints the fix.
DRAFT_MODEL_PLACEHOLDER = "REPLACE-WITH-DRAFT-CHECKPOINT"


@dataclass(frozen=True)
class FormatRules:
    """What an engine's per-batch draft-length table can say (module docstring)."""

    engine: str
    source: str
    first_is_max: bool = False  # TRT-LLM: the smallest key's K is max_draft_len, every K <= it
    padded_lookup: bool = False  # SGLang: the batch is padded to its CUDA-graph size before the key is looked up
    dp_allowed: bool = True  # vLLM and SGLang's adaptive mode: no per-batch table under attention DP
    needs_k_at_one: bool = False  # TRT-LLM: max_draft_len > 0, so K(1) > 0


ENGINE_FORMATS = {
    "vllm": FormatRules("vllm", "vllm-project/vllm vllm/config/speculative.py (SpeculativeConfig), "
                        "vllm/v1/spec_decode/dynamic/utils.py", dp_allowed=False),
    "trtllm": FormatRules("trtllm", "NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py (DecodingBaseConfig."
                          "draft_len_schedule, PR #10860), tensorrt_llm/_torch/speculative/utils.py "
                          "(get_draft_len_for_batch_size)", first_is_max=True, needs_k_at_one=True),
    "sglang": FormatRules("sglang", "sgl-project/sglang python/sglang/srt/speculative/adaptive_spec_params.py, "
                          "adaptive_step_router.py (PRs #21599, #24055), server_args.py", padded_lookup=True,
                          dp_allowed=False),
}

# vLLM's SpeculativeConfig.method per drafter kind (vllm/config/speculative.py SpeculativeMethod); none for ratio:C
VLLM_METHOD = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram", "model": "draft_model"}
# TRT-LLM decoding_type per drafter kind (llm_args.py: EagleDecodingConfig "Eagle", Eagle3DecodingConfig "Eagle3",
# MTPDecodingConfig "MTP", NGramDecodingConfig "NGram", DraftTargetDecodingConfig "Draft_Target")
TRTLLM_DECODING_TYPE = {"eagle": "Eagle", "eagle3": "Eagle3", "mtp": "MTP", "ngram": "NGram",
                        "model": "Draft_Target"}
# SGLang --speculative-algorithm per drafter kind (server_args.py; MTP heads run as NEXTN)
SGLANG_ALGORITHM = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "ngram": "NGRAM", "model": "STANDALONE"}
SGLANG_ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")  # adaptive_unsupported_reason (NEXTN runs as EAGLE)
NEEDS_CHECKPOINT = ("eagle", "eagle3", "model")  # drafters that load a separate checkpoint (MTP heads ship inside)


def _method(table: dict, kind: str, engine: str) -> str:
    if kind not in table:
        raise ParameterError(f"the drafter {kind!r} has no {engine} speculative method (a fixed cost ratio is a "
                             f"what-if drafter); use --drafter eagle, eagle3, mtp, ngram or model:NAME",
                             owner=f"{engine} format", param="drafter")
    return table[kind]


def _kmax(ranges) -> int:
    return max(int(k) for _, _, k in ranges)


def _checked(ranges) -> list[tuple[int, int, int]]:
    out = [(int(lo), int(hi), int(k)) for lo, hi, k in ranges]
    if not out or out[0][0] != 1 or any(b[0] != a[1] + 1 for a, b in zip(out, out[1:], strict=False)):
        raise ParameterError("a draft-length table needs contiguous ranges from batch 1", owner="engine format",
                             param="ranges")
    if _kmax(out) <= 0:
        raise ParameterError("speculative decoding pays at no batch: serve without a speculative config",
                             owner="engine format", param="ranges")
    return out


# --- vLLM -------------------------------------------------------------------------------------------------------
def vllm_config(ranges, drafter_kind: str, draft_model: str | None = None) -> dict:
    """``SpeculativeConfig`` fields: method, model (checkpoint drafters), num_speculative_tokens (the largest K, so
    none is clamped) and num_speculative_tokens_per_batch_size ([start, end, K] from 1, consecutive equal K merged)."""
    r = _checked(ranges)
    cfg: dict = {}
    if drafter_kind in VLLM_METHOD:
        cfg["method"] = VLLM_METHOD[drafter_kind]
    if drafter_kind in NEEDS_CHECKPOINT:
        cfg["model"] = draft_model or DRAFT_MODEL_PLACEHOLDER
    cfg["num_speculative_tokens"] = _kmax(r)
    if len(r) > 1:  # one K everywhere is num_speculative_tokens alone (no table, no dynamic-SD cost)
        cfg["num_speculative_tokens_per_batch_size"] = [[lo, hi, k] for lo, hi, k in r]
    return cfg


def vllm_lookup(cfg: dict, batch: int) -> int:
    """The K vLLM runs at ``batch`` (build_dynamic_sd_schedule_lookup: the range holding it, else the previous
    range's K; clamped to num_speculative_tokens)."""
    k = cfg["num_speculative_tokens"]
    for lo, hi, kk in cfg.get("num_speculative_tokens_per_batch_size") or ():
        if lo <= batch:
            k = kk
        if lo <= batch <= hi:
            break
    return min(int(k), int(cfg["num_speculative_tokens"]))


# --- TensorRT-LLM -----------------------------------------------------------------------------------------------
def trtllm_config(ranges, drafter_kind: str, draft_model: str | None = None) -> dict:
    """``speculative_config``: decoding_type, max_draft_len (the first range's K, the largest), speculative_model
    (checkpoint drafters) and draft_len_schedule {range end: K} (a trailing K = 0 range is implicit)."""
    r = _checked(ranges)
    if r[0][2] != _kmax(r):
        raise ParameterError(f"TensorRT-LLM's draft_len_schedule needs the K of batch 1 to be the largest "
                             f"(max_draft_len); this table has {r[0][2]} at batch 1 and {_kmax(r)} later",
                             owner="trtllm format", param="ranges")
    cfg: dict = {"decoding_type": _method(TRTLLM_DECODING_TYPE, drafter_kind, "TensorRT-LLM"),
                 "max_draft_len": r[0][2]}
    if drafter_kind in NEEDS_CHECKPOINT:
        cfg["speculative_model"] = draft_model or DRAFT_MODEL_PLACEHOLDER
    while len(r) > 1 and r[-1][2] == 0:  # K = 0 above the last key is implicit
        r = r[:-1]
    if len(r) > 1:  # one K everywhere is max_draft_len alone
        cfg["draft_len_schedule"] = {hi: k for _, hi, k in r}
    return cfg


def trtllm_lookup(cfg: dict, batch: int) -> int:
    """The K TensorRT-LLM runs at ``batch`` (get_draft_len_for_batch_size: the first key >= batch, else 0)."""
    if not cfg.get("draft_len_schedule"):
        return int(cfg["max_draft_len"])
    keys = sorted(cfg["draft_len_schedule"])
    i = bisect.bisect_left(keys, batch)
    return int(cfg["draft_len_schedule"][keys[i]]) if i < len(keys) else 0


def trtllm_yaml(cfg: dict, notes=()) -> str:
    """The YAML ``extra_llm_api_options`` takes (``speculative_config:`` block), notes as comments."""
    lines = [f"# {n}" for n in notes] + ["speculative_config:"]
    for key, value in cfg.items():
        if isinstance(value, dict):
            lines.append(f"  {key}:")
            lines += [f"    {k}: {v}" for k, v in value.items()]
        else:
            lines.append(f"  {key}: {value}")
    return "\n".join(lines) + "\n"


# --- SGLang -----------------------------------------------------------------------------------------------------
def range_starts(rules: FormatRules, capture: tuple[int, ...], n: int):
    """Whether a range may start at each batch 1..n: everywhere, except for a padded lookup (SGLang), where a key
    counts from the padded batch, so a range starts at 1 or right after a captured size (or anywhere above the
    largest captured size, which runs eagerly unpadded)."""
    import numpy as np

    ok = np.ones(n, dtype=bool)
    if rules.padded_lookup and capture:
        b = np.arange(1, n + 1)
        ok = (b == 1) | np.isin(b - 1, np.asarray(capture)) | (b > max(capture))
    return ok


def sglang_adaptive(ranges) -> dict:
    """The adaptive config: one key per range start with the range's K as the only candidate step."""
    return {str(lo): {"candidate_steps": [k]} for lo, _, k in _checked(ranges)}


def sglang_lookup(cfg: dict, batch: int, capture: tuple[int, ...] = ()) -> int:
    """The steps SGLang runs at ``batch`` with a one-candidate config (AdaptiveStepRouter.batch_size_key_for_batch:
    pad to the CUDA-graph batch, then the largest key <= it, the smallest key below all)."""
    if capture:
        i = bisect.bisect_left(sorted(capture), batch)
        batch = sorted(capture)[i] if i < len(capture) else batch
    keys = sorted(int(k) for k in cfg if k.isdigit())
    key = keys[max(0, bisect.bisect_right(keys, batch) - 1)]
    return int(cfg[str(key)]["candidate_steps"][0])


def sglang_flags(ranges, drafter_kind: str, draft_model: str | None = None, config_path: str | None = None,
                 dp: int = 1) -> list[str]:
    """Launch flags: algorithm, steps (the table's largest K), topk 1, draft tokens = steps + 1, the draft
    checkpoint, and the adaptive mode with its config file (refused where SGLang's adaptive mode does not run)."""
    r = _checked(ranges)
    algo = _method(SGLANG_ALGORITHM, drafter_kind, "SGLang")
    adaptive = config_path is not None and len({k for *_, k in r}) > 1
    if adaptive and algo not in SGLANG_ADAPTIVE_ALGORITHMS:
        raise ParameterError(f"SGLang's adaptive speculative mode runs EAGLE/EAGLE3 (and NEXTN) only, not {algo} "
                             f"(adaptive_unsupported_reason); use --drafter eagle, eagle3 or mtp, or --format json",
                             owner="sglang format", param="drafter")
    if adaptive and dp > 1:
        raise ParameterError(f"SGLang's adaptive speculative mode does not run with attention DP (dp = {dp}; "
                             f"adaptive_unsupported_reason); give a layout with --dp 1 or use --format json",
                             owner="sglang format", param="dp")
    k = _kmax(r)
    flags = ["--speculative-algorithm", algo, "--speculative-num-steps", str(k), "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", str(k + 1)]
    if drafter_kind in NEEDS_CHECKPOINT:
        flags += ["--speculative-draft-model-path", draft_model or DRAFT_MODEL_PLACEHOLDER]
    if adaptive:
        flags += ["--speculative-adaptive", "--speculative-adaptive-config", config_path]
    return flags


# --- parallel layout flags (for `plan`'s launch config) -------------------------------------------------------------
# vLLM (vllm/engine/arg_utils.py EngineArgs): --tensor-parallel-size, --data-parallel-size, --enable-expert-parallel
# (experts over tp x dp ranks), --all2all-backend (deepep_low_latency, deepep_high_throughput). SGLang
# (python/sglang/srt/server_args.py): --tp-size is every GPU of the replica, --dp-size with --enable-dp-attention
# splits attention into dp groups of tp/dp, --ep-size, --moe-a2a-backend deepep with --deepep-mode low_latency|normal.
# TensorRT-LLM (tensorrt_llm/llmapi/llm_args.py _ParallelConfig / LLM args): tensor_parallel_size is every GPU,
# moe_expert_parallel_size, enable_attention_dp (attention data parallel over every rank: dp = gpus, tp = 1).
DEEPEP_ENGINES = ("sglang", "vllm")  # engines whose MoE all-to-all runs DeepEP (TRT-LLM has its own alltoall)


def layout_supported(engine: str, tp: int, dp: int, all_to_all: str = "auto") -> bool:
    """Whether ``engine`` launches attention TP ``tp`` × DP ``dp`` (TensorRT-LLM: attention DP over every rank or
    none) with that all-to-all."""
    if engine == "trtllm" and dp > 1 and tp > 1:
        return False
    return not (all_to_all.startswith("deepep") and engine not in DEEPEP_ENGINES)


def parallel_args(engine: str, tp: int, dp: int, ep: int, all_to_all: str = "auto") -> list[str]:
    """The engine's flags (vLLM, SGLang) or LLM-API fields as ``key: value`` (TensorRT-LLM) for the layout."""
    gpus = tp * dp
    deepep = all_to_all.startswith("deepep")
    if engine == "vllm":
        out = ["--tensor-parallel-size", str(tp)] + (["--data-parallel-size", str(dp)] if dp > 1 else [])
        out += ["--enable-expert-parallel"] if ep > 1 else []
        mode = "deepep_low_latency" if "low" in all_to_all else "deepep_high_throughput"
        return out + (["--all2all-backend", mode] if deepep else [])
    if engine == "sglang":
        out = ["--tp-size", str(gpus)] + (["--dp-size", str(dp), "--enable-dp-attention"] if dp > 1 else [])
        out += ["--ep-size", str(ep)] if ep > 1 else []
        mode = "low_latency" if "low" in all_to_all else "normal"
        return out + (["--moe-a2a-backend", "deepep", "--deepep-mode", mode] if deepep else [])
    return [f"tensor_parallel_size: {gpus}", f"moe_expert_parallel_size: {ep}",
            f"enable_attention_dp: {'true' if dp > 1 else 'false'}"]


GENERATED_BY = "python -m simulator schedule"  # the JSON format's "generated_by" (a later run may replace the file)


def is_schedule_file(path) -> bool:
    """Whether ``path`` holds a schedule this command writes: the JSON format (its ``generated_by``), the
    TensorRT-LLM YAML (its first comment names :data:`GENERATED_BY`), or vLLM's fields or SGLang's adaptive table and
    nothing else (:func:`render`: those engines refuse other keys, so the file carries no mark)."""
    from pathlib import Path

    p = Path(path)
    if p.stat().st_size > 1 << 24:
        return False
    text = p.read_text(encoding="utf-8")
    if text.startswith(f"# written by {GENERATED_BY}"):
        return True
    doc = json.loads(text)
    if not isinstance(doc, dict) or not doc:
        return False
    if doc.get("generated_by") == GENERATED_BY:
        return True
    if set(doc) <= {"method", "model", "num_speculative_tokens", "num_speculative_tokens_per_batch_size"}:
        return True
    return all(k.isdigit() and isinstance(v, dict) and set(v) == {"candidate_steps"} for k, v in doc.items())
