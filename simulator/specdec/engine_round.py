"""Speculative-decoding rounds as engines execute them: execution mode, round kernels and host time
(docs/MODEL.md §4.6).

Beside the passes (draft, verify) a round costs GPU kernels the step model does not price and host work that the
engine's execution mode may or may not hide:

    G(B, γ)      = γ · T_draft(B, 1) + T_fuse + T_ext + T(B, γ+1) + T_reject + T_gdn + T_kern      (GPU time)
    T_ext        = T_draft(B, γ+1) − T_draft(B, 1)     (draft_extend: one draft pass over the γ + 1 verified positions)
    T_kern       = γ · [τ_s · V_d / 262144 + r_s · (B/dp) · (V_d + V_t) · 4 B / (BW · η)]
                   + tree · τ_tree + n_kv · F_elementwise                                       (round_kernels)
    H(B, γ)      = h_round + [gpus > 1] · h_tp + n_sync · t_sync + (B/dp) · (h_req + AL(γ) · h_tok)
                   + (γ − 1)⁺ · h_step                                                              (host_time)
    T_round      = G + E(H, G),   E(H, G) = H (overlap off) or max(0, H − G) (overlap on)
    T_step       = T(B, 1) + E(H_dec, T(B, 1)),
    H_dec        = h_dec + [gpus > 1] · h_tp + n_sync,dec · t_sync + (B/dp) · (h_req + h_tok)
    Speedup      = AL(γ) · T_step / T_round                      (γ = 0: T_round = T_step, speedup exactly 1)

The mode (``Mechanisms.sd_overlap`` / ``decode_overlap``; None = the engine's default, :data:`ENGINE_MODES`) sets
E and the sync count. Parameters no spec sheet gives are :class:`Band` s (low, central, high) in
:data:`ROUND_PARAMS`, each with its source or ``assumed`` and the reason (one-sided evidence says so; its other end is
a physical ceiling); ``speedup_low``/``speedup_high`` price the round at both ends (and at the acceptance band's ends
when one is given), widened by the model's held-out error on the public SD corpus (:data:`MODEL_ERROR`,
:func:`model_error`; γ = 0 stays exactly 1). :data:`FITTED` holds the public SD corpus fit (central = all-source
fit, band = held-out spread) for the parameters rows move; :func:`round_params` applies it, then a profile's
``kernels.round`` block for the engine (``{NAME: {low: Q, central: Q, high: Q}}``,
:data:`simulator.specs.kernels.ROUND_KEYS`); or :meth:`RoundParams.with_`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

import numpy as np

from ..cost.deployment import PRESETS, Deployment, Mechanisms
from ..errors import ParameterError
from ..specs.hardware import HardwareProfile

__all__ = ["ENGINE_MODES", "FITTED", "FIT_COMMAND", "LEVELS", "MODEL_ERROR", "ROUND_PARAMS", "Band", "EngineMode",
           "RoundParams", "RoundTerms", "engine_mode", "exposed", "model_error", "overlap_modes", "round_params",
           "round_terms"]

LEVELS = ("low", "central", "high")
VOCAB_REF = 262144  # the vocabulary of the sampling measurement the per-pass sampling cost is quoted at
US, MS = 1e-6, 1e-3


@dataclass(frozen=True)
class Band:
    """A parameter known as a range: ``low <= central <= high`` with its source (or ``assumed: reason``)."""

    low: float
    central: float
    high: float
    source: str

    def __post_init__(self):
        if not (0 <= self.low <= self.central <= self.high):
            raise ValueError(f"band must satisfy 0 <= low <= central <= high; got {self}")

    def at(self, level: str) -> float:
        return float(getattr(self, level))


@dataclass(frozen=True)
class RoundParams:
    """One engine's round parameters (seconds, ``sample_reads`` a count): the terms of the module docstring."""

    round_host: Band  # h_round: host work per SD round beside syncs, requests, tokens and draft steps
    sync: Band  # t_sync: one blocking GPU->CPU sync (copy + stream synchronize wake-up)
    per_request: Band  # h_req: host bookkeeping per request per round (and per decode step)
    per_token: Band  # h_tok: host bookkeeping per accepted token (output append, stop checks)
    draft_step_host: Band  # h_step: host work per draft step after the first (its metadata before the draft replay)
    decode_host: Band  # h_dec: host work per plain decode step beside syncs and requests
    sample_pass: Band  # τ_s: sampling / top-k / rejection kernels per drafted position at a 262,144 vocabulary
    sample_reads: Band  # r_s: full-vocabulary reads per drafted position beyond the step model's sampling op
    tree_build: Band  # τ_tree: tree-building kernels per round (build_tree / organize_draft_results)
    tp_host: Band  # h_tp: host work per scheduler iteration (round or decode step) of an instance on several GPUs

    def values(self, level: str) -> dict[str, float]:
        return {n: float(getattr(getattr(self, n), level)) for n in _round_param_names()}

    def with_(self, **bands: Band) -> RoundParams:
        """These parameters with some bands replaced (e.g. by a fit)."""
        return replace(self, **bands)


@functools.cache
def _round_param_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(RoundParams))  # (dataclasses.fields is slow: the corpus fit asks ~10^5 times)


@dataclass(frozen=True)
class EngineMode:
    """An engine's execution mode at one version: overlap defaults, blocking syncs per round and per decode step,
    KV slot kernels per round, and whether chains also run the tree-building kernels."""

    version: str  # its key in cost.deployment.ENGINE_VERSIONS (the first release of this mode)
    since: str
    decode_overlap: str
    sd_overlap: str
    syncs_sd: int  # blocking GPU->CPU syncs per round with SD overlap off
    syncs_sd_overlap: int  # ... with it on
    syncs_decode: int
    kv_kernels: int
    chain_builds_tree: bool
    source: str


# Defaults per engine and version, oldest first; the last entry is the default (docs/MODEL.md §4.6).
ENGINE_MODES: dict[str, tuple[EngineMode, ...]] = {
    "sglang": (
        EngineMode("0.4", "0.4 (overlap scheduler on by default, sglang PR #2067; spec v1)", "on", "off", 4, 1, 1, 3,
                   True,
                   "sglang server_args.py _handle_speculative_decoding: 'if not envs.SGLANG_ENABLE_SPEC_V2.get(): "
                   "self.disable_overlap_schedule = True' (EAGLE, EAGLE3, STANDALONE); syncs in eagle_worker.py / "
                   "eagle_info.py verify: accept_length.tolist(), accept_length.cpu(), seq_lens.sum().item(), "
                   "out_cache_loc[evict_mask] free; chains call build_tree_kernel_efficient; KV: alloc_token_slots, "
                   "assign_req_to_token_pool, free. Spec v2 (SGLANG_ENABLE_SPEC_V2=1, topk = 1 only, sglang PR "
                   "#11398) turns overlap on: --sd-overlap on; one sync (verify_done, sglang issue #11762)"),
    ),
    "vllm": (
        EngineMode("0.13", "< 0.14 (async scheduling opt-in)", "off", "off", 1, 1, 1, 1, False,
                   "vllm PR #24799 (async scheduling with SD, opt-in); sync-free padded drafting PR #24539"),
        EngineMode("0.14", "0.14 (async scheduling on by default, also with EAGLE/MTP SD)", "on", "on", 1, 1, 1, 1,
                   False,
                   "vllm PR #31998 (default-on with EAGLE/MTP; off for other SD methods), released in v0.14 "
                   "(deepjavalibrary/djl issue #3833); draft models since PR #48341"),
    ),
    "trtllm": (
        EngineMode("1.0", "1.0 (PyTorch backend, one-model MTP / EAGLE-3)", "on", "on", 1, 1, 1, 1, False,
                   "TensorRT-LLM tech blog 2 (DeepSeek-R1 MTP: draft and verify in one CUDA graph, overlap scheduler "
                   "kept, 1.03x); sync counts assumed: one output copy per iteration"),
    ),
}


def engine_mode(engine: str, version: str | None = None) -> EngineMode:
    """The mode of ``engine`` at ``version`` (a key of ``cost.deployment.ENGINE_VERSIONS``; None: the newest)."""
    modes = ENGINE_MODES[engine]
    if version is None:
        return modes[-1]
    mode = next((m for m in modes if m.version == version), None)
    if mode is None:  # Deployment's validation refuses it first; a direct caller gets the same one line
        raise ParameterError(f"the 'engine_version' parameter of engine_mode must be one of "
                             f"{[m.version for m in modes]} for {engine}. Got {version!r} instead.",
                             owner="engine_mode", param="engine_version")
    return mode


def overlap_modes(mech: Mechanisms, engine: str, drafter_kind: str = "eagle",
                  version: str | None = None) -> tuple[str, str]:
    """(sd_overlap, decode_overlap) resolved: the mechanism's setting, else the default of the engine at
    ``version`` (None: the newest). vLLM keeps async scheduling off for SD methods other than EAGLE/MTP/draft
    models (n-gram: vllm PR #31998)."""
    m = engine_mode(engine, version)
    sd = mech.sd_overlap or ("off" if engine == "vllm" and drafter_kind == "ngram" else m.sd_overlap)
    return sd, mech.decode_overlap or m.decode_overlap


# One-sided evidence (docs/MODEL.md §4.6): spec v2 (overlap on) hides host work that spec v1 exposes, so the v1 -> v2
# saving is a LOWER bound on v1's exposed host time, not its value; the ceiling is physical: a round's host work runs
# in series inside the measured v1 round (overlap off), so it cannot exceed that whole round.
V1_ROUND = 12.12 * MS  # sglang PR #11398: Llama-3.1-8B EAGLE bs 1, spec v1 2.99 tokens at 246.80 tok/s per round
_SGL_AB = ("lower bound only: sglang PR #11398 (Llama-3.1-8B EAGLE, bs 1: 12.12 -> 11.01 ms per round, v1 -> v2) "
           "and PR #12128 (DeepSeek-R1 TP8, bs 1: 16.34 -> 14.38 ms) are the host time spec v2 hides, so spec v1 "
           "exposes at least 1.1-2.0 ms per round (less the sync, request and token terms at bs 1); no upper "
           "evidence: ceiling the whole v1 round, 12.12 ms (PR #11398), which the host work runs in series inside")
_REQ = ("assumed: no public measurement; a Python pass over a request's state (append, stop checks, "
        "metadata) costs several µs on a server CPU (engines.md: existence strong, magnitude none)")
_DEC = ("assumed: LMSYS 'SGLang v0.4' blog: the zero-overhead (overlap) scheduler gives ~1.1x on small models, "
        "i.e. host work ~10% of a 2-8 ms decode step")
_SYNC = "assumed: a small D2H copy plus stream-synchronize wake-up; no public per-sync measurement"
_SAMPLE_VLLM = ("vLLM RFC #45258 (engines.md, not re-read here): sampling over a 262k vocabulary is 2.1 ms of a "
                "4.9 ms drafter chain at concurrency 1; low 0 (fused in-graph sampling), high 2.1 ms / 3 draft "
                "steps (assumed K = 3)")
_SAMPLE_GRAPH = "assumed: draft top-k runs inside the draft CUDA graph (sglang fast_topk, TRT-LLM one-model graph)"
_READS = ("assumed: softmax / top-k / rejection read the logits 0-4 more times than the step model's one sampling "
          "read (0 for greedy argmax)")
_TP_SGL = ("sglang PRs #12128 / #11398: the host time spec v2 hides per round is 1.96 ms for DeepSeek-R1 on TP 8 and "
           "1.1 ms for Llama-3.1-8B on one GPU, so an iteration on several GPUs carries about 0.9 ms more host work "
           "(central; one-sided like those); in code, every rank runs the iteration's Python, syncs and launches in "
           "lockstep (scheduler.recv_requests: 'elif self.tp_size != 1: recv_reqs = broadcast_pyobj(...)' each "
           "iteration, collectives wait for the slowest rank). Plain decoding pays it too: LMSYS MTP blog "
           "(DeepSeek-V3, 16 H200) 51.0 -> 60.4 tok/s per rank with the overlap scheduler, ~6 ms of host work per "
           "33 ms step; the overlap scheduler hides it up to the GPU time. Low 0; ceiling the whole v1 round, 12.12 ms "
           "(PR #11398)")
_TP_NONE = ("not modelled: no public measurement separates a multi-GPU host term for this engine (its multi-GPU "
            "executor's broadcast is in round_host's band)")
_TREE = "assumed: build_tree_kernel_efficient + organize_draft_results, a few kernel floors to ~50 µs"
_STEP_SGL = ("one-sided: the draft graph replay is prepared on the host step by step. In code (sglang "
             "flashinfer_backend.FlashInferMultiStepDraftBackend.init_forward_metadata_replay_cuda_graph -> "
             "common_template): one blocking kv_indptr[:, :bs + 1].cpu() copy, then 'for i in "
             "range(self.speculative_num_steps - 1)' one FlashInfer plan (indices_updater_decode.update -> "
             "begin_forward) per draft step after the first; FlashInfer is SGLang's attention backend on Hopper "
             "whenever topk > 1 (server_args: fa3 only if is_no_spec_infer_or_topk_one), the FA3 multi-step backend "
             "(topk = 1) updates its metadata per step from the host too. No public per-step measurement: low 0, "
             "central 20 µs (assumed), ceiling the whole v1 round, 12.12 ms (PR #11398), which (γ - 1) h_step runs "
             "in series inside")

ROUND_PARAMS: dict[str, RoundParams] = {
    "sglang": RoundParams(
        round_host=Band(1.0 * MS, 1.45 * MS, V1_ROUND, _SGL_AB),
        sync=Band(5 * US, 10 * US, 20 * US, _SYNC),
        per_request=Band(5 * US, 10 * US, V1_ROUND, _REQ + "; lower bound only (several µs); ceiling: the whole "
                         "v1 round at bs 1, 12.12 ms (sglang PR #11398)"),
        per_token=Band(1 * US, 2 * US, 5 * US, _REQ),
        draft_step_host=Band(0.0, 20 * US, V1_ROUND, _STEP_SGL),
        decode_host=Band(0.2 * MS, 0.4 * MS, 0.8 * MS, _DEC),
        sample_pass=Band(0.0, 10 * US, 50 * US, _SAMPLE_GRAPH),
        sample_reads=Band(0.0, 1.0, 4.0, _READS),
        tree_build=Band(10 * US, 20 * US, 50 * US, _TREE),
        tp_host=Band(0.0, 0.9 * MS, V1_ROUND, _TP_SGL),
    ),
    "vllm": RoundParams(
        round_host=Band(0.5 * MS, 0.97 * MS, 1.96 * MS, "vllm PR #25872 (Llama-3.1-8B EAGLE-3 K = 4, L20, "
                        "concurrency 1: ITL 28.14 -> 27.17 ms with async scheduling); high: SGLang's MoE TP8 A/B "
                        "(sglang PR #12128); low assumed: half, as async overlaps only the drafting (PR #24799)"),
        sync=Band(5 * US, 10 * US, 20 * US, _SYNC),
        per_request=Band(5 * US, 10 * US, 20 * US, _REQ),
        per_token=Band(1 * US, 2 * US, 5 * US, _REQ),
        draft_step_host=Band(0.1 * MS, 0.3 * MS, 0.6 * MS, "vllm PR #20780: ~1.0 ms per extra draft step at bs 1 "
                             "on Llama-3.1-8B, less the head's GPU time (assumed 0.4-0.9 ms); piecewise graphs"),
        decode_host=Band(0.2 * MS, 0.4 * MS, 0.8 * MS, _DEC),
        sample_pass=Band(0.0, 0.35 * MS, 0.7 * MS, _SAMPLE_VLLM),
        sample_reads=Band(0.0, 1.0, 4.0, _READS),
        tree_build=Band(10 * US, 20 * US, 50 * US, _TREE),
        tp_host=Band(0.0, 0.0, 0.0, _TP_NONE),
    ),
    "trtllm": RoundParams(
        round_host=Band(0.2 * MS, 0.4 * MS, 0.6 * MS, "assumed: TensorRT-LLM tech blog 2's 1.03x overlap-scheduler "
                        "gain on a DeepSeek-R1 MTP round of about 7-20 ms"),
        sync=Band(5 * US, 10 * US, 20 * US, _SYNC),
        per_request=Band(5 * US, 10 * US, 20 * US, _REQ),
        per_token=Band(1 * US, 2 * US, 5 * US, _REQ),
        draft_step_host=Band(0.0, 20 * US, 50 * US, "assumed: the one-model path runs the drafting loop inside one "
                             "CUDA graph (tech blog 2)"),
        decode_host=Band(0.2 * MS, 0.4 * MS, 0.6 * MS, "assumed: the one-model round is one executor iteration, "
                         "like a decode step: the round's host band"),
        sample_pass=Band(0.0, 10 * US, 50 * US, _SAMPLE_GRAPH),
        sample_reads=Band(0.0, 1.0, 4.0, _READS),
        tree_build=Band(10 * US, 20 * US, 50 * US, _TREE),
        tp_host=Band(0.0, 0.0, 0.0, _TP_NONE),
    ),
}


# The values the pricing path uses where the public SD corpus moves a parameter (docs/MODEL.md §4.6, §7.2): central =
# the all-source fit within the ranges above (leave-one-source-out, simulator/validate/sd_fit.py), low-high = its
# held-out spread (min-max over the folds joined with the fit ± one-σ, clipped to the range). Written here from the
# output of FIT_COMMAND (its report's "Fitted round parameters" table); tests/validate/test_sd_fitted.py re-runs the
# fit and fails when this table no longer matches it. A parameter no row moves keeps its public band.
FIT_COMMAND = "python -m simulator validate sd --report docs/SD_VALIDATION.md"
_FIT = ("fit on the SD corpus (sglang: 26 rows, 5 sources; held-out mean |error| 20.4% over the 39 priced rows); "
        "band = held-out spread; regenerate: " + FIT_COMMAND)
FITTED: dict[str, dict[str, Band]] = {
    "sglang": {
        "round_host": Band(1.0 * MS, 1.0 * MS, 1.52704 * MS, _FIT + "; NOT pinned: at its public low bound (one-σ "
                           "0.53 ms), the v1 -> v2 A/B's 1.0 ms"),
        "per_request": Band(5 * US, 7.94287 * US, 0.0945661 * MS, _FIT + "; NOT pinned (one-σ 0.036 ms, above its "
                            "value): the rows want several µs per request"),
        "draft_step_host": Band(0.230849 * MS, 0.41245 * MS, 0.562232 * MS, _FIT + "; pinned (one-σ 0.15 ms): the "
                                "SGLang rows' 2-8 draft steps per round (chains and trees up to 64 nodes), "
                                "within a source"),
        "decode_host": Band(0.203293 * MS, 0.77149 * MS, 0.8 * MS, _FIT + "; NOT pinned (one-σ 0.57 ms, over a "
                            "quarter of its range): only the two no-overlap baselines move it"),
        "tp_host": Band(2.36445 * MS, 2.99325 * MS, 3.62204 * MS, _FIT + "; pinned (one-σ 0.63 ms): the rows on "
                        "2-16 GPUs (tp 2 / 4 / 8, DeepSeek-V3 on 16, its plain decoding with and without the overlap "
                        "scheduler) against the one-GPU rows"),
    },
}

# The model's demonstrated error on the public SD corpus (docs/MODEL.md §4.6, §7.2; simulator/validate/sd_band.py):
# per engine, (q_lo, q_hi) = the split-conformal 80% quantiles of the held-out log residual beyond the parameter /
# acceptance band, log(measured / band end) (0 inside), over every priced corpus row of the engine, each predicted
# by the fit on the other sources; an engine with fewer than sd_band.MIN_SOURCES sources uses the quantiles of all
# engines' rows pooled (POOLED). speedup_low / speedup_high = the parameter / acceptance band × exp(q_lo / q_hi)
# (γ ≥ 1; γ = 0 stays exactly 1). Leave-one-source-out, this band covers the measured value in the share of rows
# docs/SD_VALIDATION.md reports (each source's band from the other sources' residuals only). Written from the output
# of FIT_COMMAND; tests/validate/test_sd_fitted.py re-runs it and fails when this table no longer matches.
POOLED = "pooled"
MODEL_ERROR: dict[str, tuple[float, float]] = {
    "sglang": (0.0, 0.0608217),  # 31 rows, 5 sources: speedup × 1.00 … × 1.06 beyond the parameter band
    POOLED: (-0.0308117, 0.0912633),  # 39 rows, 7 sources (trtllm: 2 sources; vllm: no validated row)
}


def model_error(engine: str, mech: Mechanisms) -> tuple[float, float]:
    """(q_lo, q_hi) log-speedup widening of the band for ``engine`` (:data:`MODEL_ERROR`, :data:`POOLED` for an
    engine without its own), where the mechanisms are the model the corpus validated: the ``refined`` preset up to
    the execution modes (any other mechanism set is another model, whose error was not measured: (0, 0)), unless
    ``mech.model_error`` is off."""
    if mech.model_error != "on" or not _validated(mech):
        return 0.0, 0.0
    return MODEL_ERROR.get(engine, MODEL_ERROR[POOLED])


@functools.lru_cache(maxsize=256)
def _validated(mech: Mechanisms) -> bool:
    """Whether ``mech`` is the refined preset up to the execution modes (memoised: asked once per priced round)."""
    return replace(mech, sd_overlap=None, decode_overlap=None, model_error="on") == PRESETS["refined"]


def round_params(hw: HardwareProfile, engine: str) -> RoundParams:
    """The engine's round parameters as the pricing path uses them: :data:`ROUND_PARAMS` with the corpus fit's
    :data:`FITTED` bands, then the bands the profile states for that engine (``kernels.round`` of
    ``hw.for_engine(engine)``) replacing those (read on every call: a changed table is priced at once)."""
    base = ROUND_PARAMS[engine].with_(**FITTED.get(engine, {}))
    stated = hw.for_engine(engine).kernels.round
    if not stated:
        return base
    return base.with_(**{n: Band(*ends, f"profile {hw.name}: kernels.round.{n}") for n, ends in stated.items()})


def exposed(host, gpu, overlap: str) -> np.ndarray:
    """E(H, G): host work in series (off) or hidden up to the GPU time it overlaps (on)."""
    h = np.asarray(host, dtype=float)
    return np.maximum(0.0, h - np.asarray(gpu, dtype=float)) if overlap == "on" else h


@dataclass(frozen=True)
class RoundTerms:
    """The engine terms of one grid at the three levels; arrays (ng, nb), decode ones (nb,)."""

    sd_overlap: str
    decode_overlap: str
    kernels: dict  # level -> T_kern (ng, nb)
    host: dict  # level -> exposed round host time (ng, nb)
    host_decode: dict  # level -> exposed decode host time (nb,)
    work: dict  # level -> host work H (ng, nb), before hiding
    model_error: tuple[float, float] = (0.0, 0.0)  # (q_lo, q_hi): model_error(engine, mech)


def round_terms(hw: HardwareProfile, dep: Deployment, mech: Mechanisms, batch, gammas, accept_length, gpu_round,
                t_decode, v_draft: int, v_target: int, drafter_kind: str = "eagle", tree: bool = False,
                positions=None, params: RoundParams | None = None, levels=LEVELS) -> RoundTerms:
    """The round kernels and exposed host time (module docstring) at every level. ``gammas`` (ng,) are the draft
    steps per round, ``positions`` the drafted positions sampled per round (default: ``gammas``; a tree's nodes
    N − 1); ``gpu_round`` is the round's GPU time without T_kern, (ng, nb); ``accept_length`` (ng,) the central AL;
    rows with γ = 0 get 0. ``params``: other parameters than the engine's :data:`ROUND_PARAMS` (e.g. a fit's);
    ``levels``: the levels priced (a fit needs the central one only)."""
    engine = dep.engine
    b = np.atleast_1d(np.asarray(batch, dtype=float))[None, :]
    g = np.atleast_1d(np.asarray(gammas, dtype=float))[:, None]
    npos = g if positions is None else np.atleast_1d(np.asarray(positions, dtype=float))[:, None]
    al = np.atleast_1d(np.asarray(accept_length, dtype=float))[:, None]
    spec = g > 0
    rows = b / dep.dp  # requests per attention-DP rank: each rank's scheduler handles its own
    sd, dec = overlap_modes(mech, engine, drafter_kind, dep.engine_version)
    mode = engine_mode(engine, dep.engine_version)
    zero = np.zeros(np.broadcast_shapes(g.shape, b.shape))
    params = params or round_params(hw, engine)
    kern, host, host_dec, work = {}, {}, {}, {}
    gpu_round = np.asarray(gpu_round, dtype=float)
    for level in levels:
        p = params.values(level)
        k = zero
        if mech.round_kernels == "on":
            eta = hw.kernels.global_efficiency
            per_pos = (p["sample_pass"] * v_draft / VOCAB_REF
                       + p["sample_reads"] * rows * (v_draft + v_target) * 4.0 / (hw.hbm_bandwidth * eta))
            floor = hw.kernels.get("elementwise").fixed if mech.fixed_costs_on else 0.0
            per_round = (p["tree_build"] if (tree or mode.chain_builds_tree) else 0.0) + mode.kv_kernels * floor
            k = np.where(spec, npos * per_pos + per_round, 0.0)
        kern[level] = k
        if mech.host_time == "on":
            syncs = mode.syncs_sd_overlap if sd == "on" else mode.syncs_sd
            multi = p["tp_host"] if dep.gpus > 1 else 0.0  # one instance over several GPUs (its TP ranks)
            h = (p["round_host"] + multi + syncs * p["sync"] + rows * (p["per_request"] + al * p["per_token"])
                 + np.maximum(g - 1.0, 0.0) * p["draft_step_host"])
            h = np.where(spec, h, 0.0)
            hd = (p["decode_host"] + multi + mode.syncs_decode * p["sync"]
                  + rows[0] * (p["per_request"] + p["per_token"]))
            work[level] = h
            host[level] = np.where(spec, exposed(h, gpu_round + k, sd), 0.0)
            host_dec[level] = exposed(hd, t_decode, dec)
        else:
            work[level] = host[level] = zero
            host_dec[level] = np.zeros(b.shape[1])
    return RoundTerms(sd, dec, kern, host, host_dec, work, model_error(engine, mech))
