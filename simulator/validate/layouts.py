"""Readings of aiconfigurator's layout columns that cannot be taken literally (`validate tpot`, docs/MODEL.md §7): the
squared TP and DP columns of the 2026 collections and the wide-EP layout of DeepSeek-R1 on GB200 NVL72. Each reading
cites the rows' own evidence (ids, twin rows with the same measured TPOT)."""

from __future__ import annotations


def squared_tp(row: dict, pre: str, tp: int, ep: int, moe_tp: int) -> bool:
    """Whether a MoE row's ``tp_size`` is the product ``moe_tp_size × moe_ep_size`` of an ``m``-GPU deployment with
    attention TP ``m`` and expert parallelism ``m`` (``tp_size = m²``, ``moe_tp_size = moe_ep_size = m > 1``,
    ``attention_dp_size`` stated as 1). aiconfigurator's silicon rows of this form carry ids saying ``tp{m}_ep{m}``
    (the 2026-04-06 collection) or share their measured TPOT, to the last digit, with a row of columns ``tp_size m,
    moe_tp_size 1, moe_ep_size m`` (``qwen3_5_b200_sglang_fp8_agg_8192x1024_c64_cfg615`` and
    ``2026_03_25_qwen3_5_397b_b200_sxm_sglang_fp8_agg_8192x1024_c64_tp4_0_ep4_0_337``: 33.1706 ms each); read as
    ``m²`` GPUs of attention TP they would put DeepSeek's attention over 8 nodes. Read as tp ``m``, ep ``m``,
    moe_tp 1. Rows whose attention DP column is empty (older rows with ids saying
    ``tp4_epnone``: tp 4 = moe_tp 2 × ep 2 on 4 GPUs) keep the plain reading."""
    return ((row.get(f"{pre}attention_dp_size") or "").strip() == "1" and ep == moe_tp > 1 and tp == ep * moe_tp)


def squared_dp(tp: int, dp: int, ep: int, moe_tp: int) -> bool:
    """Whether a MoE row's ``attention_dp_size`` is the product ``moe_tp_size × moe_ep_size`` of an ``m``-GPU
    deployment with attention DP ``m`` and expert parallelism ``m`` (``tp_size`` 1, ``attention_dp_size = m²``,
    ``moe_tp_size = moe_ep_size = m > 1``), its ``batch_size`` then the concurrency over ``m²``: the TP analogue of
    :func:`squared_tp`. aiconfigurator's 45 rows of this form (TRT-LLM, B200/H200, DeepSeek-R1/V3, gpt-oss) carry ids
    saying ``tp{m}_ep{m}`` where they state one, and 23 share their measured TPOT, to the last digit, with a row of
    columns ``tp_size 1, attention_dp_size m, moe_tp_size 1, moe_ep_size m, batch_size m·batch_size``
    (``2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp8_ep8_965`` and
    ``2026_03_25_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c256_tp8_0_ep8_0_1084``: 23.9119 ms each); InferenceX's
    sweeps that measured them run single 8-GPU nodes (``tp: 8, ep: 8, dp-attn: true``). Read as dp ``m``, ep ``m``,
    moe_tp 1, ``m × batch_size`` requests per rank."""
    return tp == 1 and ep == moe_tp > 1 and dp == ep * moe_tp


def wide_ep(model, gpus: int, batch: int) -> tuple[int, int, int, int, int, int]:
    """The layout of a MoE row whose ``tp_size`` cannot be attention TP (it does not divide the heads) and whose
    attention DP is 1: ``tp_size`` counts the GPUs of a wide-EP deployment with attention data parallelism (the
    TRT-LLM wide-EP and SGLang DP-attention recipes for DeepSeek-R1 on GB200 NVL72 at 12–72 GPUs; their stated
    ``moe_tp_size`` cannot divide the expert width either). Read as tp 1, dp = ep = ``tp_size``, moe_tp 1; the
    engines' expert-parallel load balancers fill the EP ranks equally with redundant expert slots (TRT-LLM
    ``num_slots``, SGLang ``ep_num_redundant_experts`` must make slots a multiple of ep), at least
    ``(-experts) mod ep`` of them; the row's batch (all requests, attention DP 1) is spread over the dp ranks.
    Only within one scale-up domain (where those recipes run): beyond it the columns are ambiguous and the row stays
    refused (``tp_size`` 64 = moe_tp 8 × moe_ep 8 is :func:`squared_tp`'s reading, applied first).
    Returns (tp, dp, ep, moe_tp, redundant_experts, batch per rank)."""
    redundant = -model.ffn.experts % gpus
    return 1, gpus, gpus, 1, redundant, max(1, -(-batch // gpus))


__all__ = ["squared_dp", "squared_tp", "wide_ep"]
