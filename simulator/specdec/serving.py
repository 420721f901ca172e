"""Serving-level speedup: a closed loop of C requests in aggregated serving, with and without speculative decoding
(docs/MODEL.md §4.7, "Serving-level speedup"). Pure equations over step times; pricing is in
:mod:`simulator.sweep.serving`.

Steady state (mean field): the engine runs N = min(C, cap) of the C requests at once (``cap``: its most running
requests, e.g. a KV-capacity or scheduler limit; none by default), the others wait in its queue; every request is
one prefill of ISL tokens (in n_p = ⌈ISL / chunk⌉ chunks of
c = ⌈ISL / n_p⌉ tokens, one chunk per iteration) followed by R decode iterations: R = OSL without SD, and with it the
expected number of rounds that yield OSL tokens, R = E[N(OSL)] (:func:`expected_rounds`: a round yields X tokens,
P(X ≥ k) from the acceptance, and the last round's tokens beyond OSL are discarded), so a request's tokens per round
are AL_served = OSL / R ≤ AL(γ) (→ AL(γ) as OSL grows; 1 at OSL = 1: a one-token answer gains nothing from
drafting). A request holds its slot for n_p + R iterations, so of the C slots

    B = N · R / (R + n_p)           decode rows per iteration (the effective decode batch; as N / (1 + n_p / R))
    f = N · n_p / (R + n_p)         prefill chunks per iteration (B + f = N);  f · c ≈ N · ISL / (R + n_p) tokens

and one iteration costs

    T_iter = T_round(B, γ) + f · ΔT_chunk

with ΔT_chunk a chunk's cost in an iteration: prefill "separate", its own pass, T(1, c) (decode waits); prefill
"mixed" (chunked into the decode iteration), the extra time of the iteration's pass of n tokens carrying it,
T(n + c) − T(n) + T_attn(c): its projections, experts, norms and collectives as c more rows of a pass whose weights
are read once for both (n = B for a plain step, B · (γ + 1) for an SD round's verify), and its own attention
(priced by the caller, :func:`simulator.sweep.serving.chunk_costs`).

Throughput (output tokens/s) = B · AL / T_iter (AL: AL_served with SD); TPOT (mean time between output tokens of a
request while it decodes) = T_iter / AL. The serving-level speedups are the SD arm over the plain arm at the same
C, ISL, OSL:

    S_tpot = AL · T_iter,0 / T_iter,SD,      S_thr = S_tpot · B_SD / B_0      (B_SD ≤ B_0 since R_SD ≤ R_0)

A request's end-to-end latency (queueing and prefill iterations included) is C / N · (R + n_p) · T_iter =
C · OSL / throughput (Little's law in the closed loop), so its speedup is S_thr.

Exact consequences (tested): ISL = 0 gives n_p = f = 0, B = C and both speedups equal AL_served · T(C, 1) /
T_round(C, γ) (the step-level speedup times AL_served / AL); OSL → ∞ gives the step-level speedup (f → 0, B → C);
γ = 0 gives 1; S_thr ≤ S_tpot; "mixed" never costs more per iteration than "separate".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..params import Interval, Options, Param, declare
from ..specs.engine import PREFILL_MODES

__all__ = ["CHUNK", "CONCURRENCY", "DEFAULT_CHUNK", "LENGTHS", "PREFILL", "RUNNING_CAP", "Occupancy", "ServingPoint",
           "expected_rounds", "iteration_time", "occupancy", "served_accept_length", "serving_point"]

# Tokens a prefill chunk may hold per iteration: vLLM's default max_num_batched_tokens for the OpenAI server on GPUs
# with >= 70 GiB (vllm/engine/arg_utils.py, "For GPUs like H100 and MI300x"); TRT-LLM's max_num_tokens default and
# SGLang's chunked_prefill_size on 80-141 GB GPUs are 8192 too (assumed from their server-argument defaults).
DEFAULT_CHUNK = 8192
CHUNK = Param(Interval(int, 1, None), unit="prefill tokens per chunk")
CONCURRENCY = Param(Interval(float, 1.0, None), unit="concurrent requests", many=True)
LENGTHS = Param(Interval(float, 0.0, None), unit="tokens per request", many=True)
RUNNING_CAP = Param(Interval(float, 1.0, None), None, unit="running requests")
PREFILL = Param(Options(PREFILL_MODES), unit="how prefill meets decode")


EXACT_ROUNDS = 2048  # tokens up to which E[N(n)] is computed exactly; beyond, it grows by 1 / AL per token


def expected_rounds(survival, tokens: float) -> float:
    """E[N(n)]: the expected number of rounds until a request has ``tokens`` = n output tokens, when a round yields
    X tokens with ``survival`` = (P(X ≥ 1), P(X ≥ 2), …) (P(X ≥ 1) = 1; the bonus token) and the last round's tokens
    beyond n are discarded: E[N(m)] = 1 + Σ_x P(X = x) · E[N(m − x)], E[N(m ≤ 0)] = 0, exactly for n ≤
    :data:`EXACT_ROUNDS`, then + (n − EXACT_ROUNDS) / AL (the renewal slope; the offset has converged). 1 for n ≤ 1,
    n / AL for a round that always yields AL tokens when AL divides n."""
    s = np.asarray(survival, dtype=float)
    if s.ndim != 1 or not s.size or abs(s[0] - 1.0) > 1e-9 or np.any(np.diff(s) > 1e-12) or np.any(s < 0):
        raise ParameterError(f"survival must start at P(X >= 1) = 1 and not increase; got {s.tolist()}")
    n = float(tokens)
    if not (math.isfinite(n) and n > 0):
        raise ParameterError(f"tokens must be a finite number > 0; got {tokens!r}")
    return _rounds(tuple(float(x) for x in s), min(int(math.ceil(n)), EXACT_ROUNDS)) + \
        max(n - EXACT_ROUNDS, 0.0) / float(s.sum())


def served_accept_length(survival, osl: float) -> float:
    """AL_served = OSL / E[N(OSL)]: the tokens per round a request of ``osl`` output tokens gets when its last round
    is cut at OSL (module docstring; ≤ AL of a round, 1 for a round that drafts nothing)."""
    return float(osl) / expected_rounds(survival, osl)


@functools.lru_cache(maxsize=1024)
def _rounds(survival: tuple, m: int) -> float:
    """E[N(m)] by the recurrence, in plain floats (a few thousand steps of at most a draft length's terms)."""
    pmf = [a - b for a, b in zip(survival, (*survival[1:], 0.0), strict=True)]  # P(X = x), x = 1 … len
    e = [0.0] * (m + 1)
    for k in range(1, m + 1):
        e[k] = 1.0 + sum(q * e[k - x] for x, q in enumerate(pmf, 1) if x <= k)
    return e[m]


@dataclass(frozen=True)
class Occupancy:
    """How C closed-loop slots split between decoding and prefilling in steady state (arrays, broadcast)."""

    concurrency: np.ndarray  # C
    running: np.ndarray  # N = min(C, cap): requests the engine runs at once (the others wait in its queue)
    rounds: np.ndarray  # R = OSL / AL decode iterations per request
    chunks_per_request: np.ndarray  # n_p = ceil(ISL / chunk)
    chunk_tokens: np.ndarray  # c = ceil(ISL / n_p) (0 when ISL = 0)
    decode_batch: np.ndarray  # B = N · R / (R + n_p)
    chunks: np.ndarray  # f = N · n_p / (R + n_p) prefill chunks per iteration

    @property
    def prefill_tokens(self) -> np.ndarray:
        """Prefill tokens per iteration, f · c (≈ C · ISL / (R + n_p))."""
        return self.chunks * self.chunk_tokens


@declare(concurrency=CONCURRENCY, isl=LENGTHS, osl=LENGTHS, chunk=CHUNK, cap=RUNNING_CAP)
def occupancy(concurrency, isl, osl, accept_length, chunk: int = DEFAULT_CHUNK, cap: float | None = None) -> Occupancy:
    """Steady-state split of C slots (module docstring). ``osl`` must be > 0 (a request decodes at least once);
    ``accept_length`` ≥ 1 (tokens per decode iteration; 1 without SD); ``cap``: the most requests the engine runs at
    once (None: no cap), the rest wait in its queue."""
    c, i, o, al = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (concurrency, isl, osl, accept_length)))
    n = c if cap is None else np.minimum(c, float(cap))
    if np.any(o <= 0):
        raise ParameterError(f"osl must be > 0 (a served request decodes at least one token); got {o.min():g}")
    if np.any(al < 1):
        raise ParameterError(f"accept_length must be >= 1 (tokens per decode iteration); got {al.min():g}")
    n_p = np.ceil(i / chunk)
    c_tok = np.where(n_p > 0, np.ceil(i / np.maximum(n_p, 1)), 0.0)
    r = o / al
    share = n_p / r  # prefill chunks per decode round of a request: B = n / (1 + share) (exactly n without prompt)
    return Occupancy(c, n, r, n_p, c_tok, n / (1.0 + share), n * share / (1.0 + share))


@declare(prefill=PREFILL)
def iteration_time(t_step, occ: Occupancy, t_chunk, prefill: str = "mixed") -> np.ndarray:
    """T_iter = T_round(B, γ) + f · ΔT_chunk; ``t_step`` is the decode or round time at the occupancy's decode batch,
    ``t_chunk`` = ΔT_chunk, a chunk's cost in an iteration of the ``prefill`` mode (module docstring; never
    negative: a chunk adds work)."""
    extra = np.maximum(np.asarray(t_chunk, dtype=float), 0.0)
    return np.asarray(t_step, dtype=float) + occ.chunks * np.where(occ.chunks > 0, extra, 0.0)


@dataclass(frozen=True)
class ServingPoint:
    """Both arms of one served workload and their speedups (arrays, broadcast over the inputs)."""

    base: Occupancy
    sd: Occupancy
    accept_length: np.ndarray
    t_iter_base: np.ndarray  # seconds per iteration without SD
    t_iter_sd: np.ndarray  # seconds per iteration (one round) with SD
    step_speedup: np.ndarray  # AL · T(C, 1) / T_round(C, γ), the decode-step ratio at batch C

    @property
    def throughput_base(self) -> np.ndarray:
        """Output tokens/s without SD, B_0 / T_iter,0."""
        return self.base.decode_batch / self.t_iter_base

    @property
    def throughput_sd(self) -> np.ndarray:
        return self.sd.decode_batch * self.accept_length / self.t_iter_sd

    @property
    def tpot_base(self) -> np.ndarray:
        return self.t_iter_base

    @property
    def tpot_sd(self) -> np.ndarray:
        return self.t_iter_sd / self.accept_length

    @property
    def speedup_throughput(self) -> np.ndarray:
        return self.throughput_sd / self.throughput_base

    @property
    def speedup_tpot(self) -> np.ndarray:
        return self.tpot_base / self.tpot_sd

    @property
    def latency_base(self) -> np.ndarray:
        """Mean end-to-end seconds per request without SD, queueing included: C / N · (R_0 + n_p) · T_iter,0
        = C · OSL / throughput."""
        return _latency(self.base, self.t_iter_base)

    @property
    def latency_sd(self) -> np.ndarray:
        return _latency(self.sd, self.t_iter_sd)

    def as_dict(self) -> dict:
        f = (lambda x: np.asarray(x, dtype=float).tolist())  # noqa: E731
        return {"concurrency": f(self.base.concurrency), "accept_length": f(self.accept_length),
                "decode_batch_base": f(self.base.decode_batch), "decode_batch_sd": f(self.sd.decode_batch),
                "prefill_tokens_per_iter_base": f(self.base.prefill_tokens),
                "prefill_tokens_per_iter_sd": f(self.sd.prefill_tokens),
                "t_iter_base_us": f(self.t_iter_base * 1e6), "t_iter_sd_us": f(self.t_iter_sd * 1e6),
                "throughput_base": f(self.throughput_base), "throughput_sd": f(self.throughput_sd),
                "tpot_base_ms": f(self.tpot_base * 1e3), "tpot_sd_ms": f(self.tpot_sd * 1e3),
                "speedup_throughput": f(self.speedup_throughput), "speedup_tpot": f(self.speedup_tpot),
                "step_speedup": f(self.step_speedup)}


def _latency(o: Occupancy, t_iter) -> np.ndarray:
    return o.concurrency / o.running * (o.rounds + o.chunks_per_request) * t_iter


def serving_point(base: Occupancy, sd: Occupancy, accept_length, t_decode_base, t_round_sd, t_chunk_base,
                  t_chunk_sd, step_speedup, prefill: str = "mixed") -> ServingPoint:
    """Both arms from their step times: ``t_decode_base`` = T(B_0, 1), ``t_round_sd`` = T_round(B_SD, γ),
    ``t_chunk_*`` = ΔT_chunk of each arm (a chunk's cost in its iterations, :func:`iteration_time`)."""
    t0 = iteration_time(t_decode_base, base, t_chunk_base, prefill)
    t1 = iteration_time(t_round_sd, sd, t_chunk_sd, prefill)
    return ServingPoint(base, sd, np.asarray(accept_length, dtype=float), t0, t1, np.asarray(step_speedup, float))
