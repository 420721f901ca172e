"""Routing traces: reading them (``.npy``/``.npz``/``.jsonl``, SGLang's and vLLM's expert dumps: :mod:`.formats`,
:mod:`.engine_dumps`), their statistics and empirical unions (:mod:`.trace`), the seeded synthetic routers for chains
and trees (:mod:`.synth`, :mod:`.synth_tree`), the comparison of the overlap models with a trace
(:mod:`.evaluate`) and per-layer routing profiles written from a trace (:mod:`.layer_profile`). Built on the
overlap model (:mod:`simulator.overlap`), which never imports it.

    ``read_trace(path, num_experts=None, *, format="auto", seq_tokens=None) -> Trace`` (TRACE_FORMATS: auto, npy,
    npz, jsonl, sglang, vllm: SGLang / vLLM routing dumps), ``write_trace(trace, path)``,
    ``validate_routing(array, E)``, ``layer_stats(trace, layer, *, max_lag=4, window=0) -> OverlapStats``,
    ``empirical_unique(trace, layer, n_tokens, batch, *, samples=2000, seed=0) -> (mean, std)``,
    ``fit_persistent(trace, layer=0) -> Persistent``,
    ``evaluate_trace(trace, n_tokens, batch, *, window=3, layers=None, samples=2000, seed=0,
    predictors=PREDICTORS) -> TraceReport``  (PREDICTORS: pairs, pooled, latent, lag1, window, independent,
    uniform; ``TraceReport.best()``: the model that explains the trace),
    ``synth_trace(experts, top_k, sequences, tokens, *, layers=1, persistence=0.8, skew=None, context=0.0,
    hidden=32, seed=0) -> Trace``
"""

from .evaluate import PREDICTORS, TraceReport, evaluate_trace
from .formats import FORMATS as TRACE_FORMATS
from .formats import read_trace
from .synth import synth_trace
from .trace import Trace, empirical_unique, fit_persistent, layer_stats, validate_routing, write_trace

__all__ = ["PREDICTORS", "TRACE_FORMATS", "Trace", "TraceReport", "empirical_unique", "evaluate_trace",
           "fit_persistent", "layer_stats", "read_trace", "synth_trace", "validate_routing", "write_trace"]
