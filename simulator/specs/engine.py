"""Engine specs: what a serving engine *executes*, per documented release (docs/MODEL.md §3.10).

A hardware profile says how fast a GPU runs each kernel (per engine: the engines' kernels differ and are calibrated
apart); an engine spec says which work the engine runs and how: its execution modes (overlap scheduler with and
without speculative decoding, blocking syncs per round), its serving defaults (prefill chunks mixed into decode
iterations or not, the running-request cap under SD), its CUDA-graph capture sizes, its decode schedule (two-batch
overlap), its op layout where engines differ, its kernel selection rule and the host-time bands of an SD round. One
YAML file per engine (``engines/<name>.yaml``, schema ``engine/v1``); every fact names its source.

A file states the sections once and then ``releases:``, oldest first, each naming a version and only what changes
from the sections above (a deep merge, release by release: a release inherits everything the releases before it
changed). The newest release is the default. :func:`simulator.specs.engine_file.read_engine` returns an
:class:`EngineSpec`; :meth:`EngineSpec.release` the :class:`EngineRelease` a deployment prices (a profile bound to it by
:func:`simulator.specs.hardware.bind`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

from ..errors import ParameterError
from .schema import Provenance

SCHEMA = "engine/v1"
VENDORS = ("nvidia", "amd")
TOP_KEYS = ("schema", "name", "display_name", "aliases", "description", "vendors", "sources", "calibration",
            "releases", *("execution", "serving", "graphs", "schedule", "ops", "kernels", "round"))
SECTIONS = ("execution", "serving", "graphs", "schedule", "ops", "kernels", "round")
PREFILL_MODES = ("mixed", "separate")  # serving.prefill: prefill chunks ride in decode iterations, or run on their own
TBO_AUTO = ("scale-out", "never")  # schedule.two_batch_overlap.auto: when `--two-batch-overlap auto` splits a batch
IN_PROJ = ("split", "merged")  # ops.linear_attention_in_proj.layout (docs/MODEL.md §3.2)
DRAFTER_KINDS = ("eagle", "eagle3", "mtp", "ngram", "model", "ratio")


GRAPH_UNITS = ("tokens", "requests")  # what an engine's CUDA-graph capture sizes count (docs/MODEL.md §4.5)


@dataclass(frozen=True)
class GraphCapture:
    """An engine's CUDA-graph capture sizes (``graphs:`` of its file, :mod:`.engine`; docs/MODEL.md §4.5): a pass
    whose size is not captured replays the next captured size (padding), one above the largest runs eagerly.
    ``unit``: whether the sizes count tokens (vLLM) or requests (SGLang, TRT-LLM)."""

    sizes: tuple[int, ...]
    unit: str = "requests"
    source: str = ""
    sd_sizes: tuple[int, ...] = ()  # the list a server launched with speculative decoding captures (empty: sizes)
    # unit tokens: a pass of s tokens per request replays sizes rounded up to multiples of s (vLLM's FULL decode
    # graphs under SD, adjust_cudagraph_sizes_for_spec_decode); False: the sizes as listed, padded to the next one
    round_to_pass: bool = False
    # what a server given a per-batch draft-length table runs instead (``graphs.per_batch_table`` of the file;
    # None: the same capture as a static draft length), and the source it was read in
    table_round_to_pass: bool | None = None
    table_source: str = ""

    @property
    def cap(self) -> int:
        return self.sizes[-1]

    def for_round(self, speculative: bool) -> GraphCapture:
        """The capture list of a pass of an SD round (``sd_sizes`` where stated) or of plain decoding."""
        return replace(self, sizes=self.sd_sizes) if speculative and self.sd_sizes else self

    def for_table(self) -> GraphCapture:
        """The capture a server serving a per-batch draft-length table replays (docs/MODEL.md §4.5): the file's
        ``per_batch_table`` where it states one, else this capture (the engine captures as for a static length)."""
        if self.table_round_to_pass is None or self.table_round_to_pass == self.round_to_pass:
            return self
        return replace(self, round_to_pass=self.table_round_to_pass, source=self.table_source or self.source)


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
    """One engine's round parameters (seconds, ``sample_reads`` a count): the terms of docs/MODEL.md §4.6."""

    round_host: Band  # h_round: host work per SD round beside syncs, requests, tokens and draft steps
    sync: Band  # t_sync: one blocking GPU->CPU sync (copy + stream synchronize wake-up)
    per_request: Band  # h_req: host bookkeeping per request per round (and per decode step)
    per_token: Band  # h_tok: host bookkeeping per accepted token (output append, stop checks)
    draft_step_host: Band  # h_step: host work per draft step after the first (its metadata before the draft replay)
    decode_host: Band  # h_dec: host work per plain decode step beside syncs and requests
    sample_pass: Band  # τ_s: sampling / top-k / rejection kernels per drafted position at a 262,144 vocabulary
    sample_reads: Band  # r_s: full-vocabulary reads per drafted position beyond the step model's sampling op
    tree_build: Band  # τ_tree: tree-building kernels per round (build_tree / organize_draft_results)
    dp_sync: Band  # h_dp: host time per scheduler iteration and per other GPU of an attention-DP instance (the
    # iteration's all-gather of every rank's batch over the whole TP group, then a blocking read)
    draft_step_offset: Band  # o_step: an offset per draft step (no mechanism: what a draft step costs beyond the
    # terms above, never hidden by overlap; fitted on the SD corpus)

    def values(self, level: str) -> dict[str, float]:
        return {n: float(getattr(getattr(self, n), level)) for n in round_param_names()}

    def with_(self, **bands: Band) -> RoundParams:
        """These parameters with some bands replaced (e.g. by a fit)."""
        return replace(self, **bands)


@functools.cache
def round_param_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(RoundParams))  # (dataclasses.fields is slow: the corpus fit asks ~10^5 times)


@dataclass(frozen=True)
class Execution:
    """Overlap defaults (scheduling on the host beside the GPU: "on"/"off"), blocking GPU->CPU syncs per SD round
    (overlap off / on) and per decode step, KV slot kernels per round, and whether chains also run the
    tree-building kernels. ``sd_overlap_off``: drafter kinds whose SD rounds run without overlap whatever the
    default (vLLM keeps async scheduling off for n-gram); ``sd_overlap_hybrid``: the engine forces overlapped SD for
    chain drafting of linear-attention hybrids (SGLang's spec v2 for Qwen3.5/Qwen3-Next-style models);
    ``sd_overlap_tree``: whether tree rounds (top-k > 1) may run overlapped at all (SGLang's spec v2 drafts chains
    only: its trees run without overlap whatever the default)."""

    decode_overlap: str
    sd_overlap: str
    sd_overlap_off: tuple[str, ...]
    sd_overlap_hybrid: bool  # chain SD rounds of a linear-attention hybrid (Qwen3.5, Qwen3-Next) run overlapped
    sd_overlap_tree: bool  # tree rounds may run overlapped (False: trees always without overlap)
    syncs_sd: int
    syncs_sd_overlap: int
    syncs_decode: int
    kv_kernels: int
    chain_builds_tree: bool
    source: str


@dataclass(frozen=True)
class Serving:
    """How the engine serves by default: prefill chunks ``mixed`` into decode iterations or run ``separate``ly, and
    the most requests an SD server runs at once unless the user sets it (None: no limit beside memory)."""

    prefill: str
    sd_running_cap: float | None
    source: str


@dataclass(frozen=True)
class SharedExperts:
    """When the engine runs a layer's shared experts on a second stream beside its router and routed experts (the
    all-reduce after both), under attention TP: at most ``max_tokens`` tokens per rank (None: any), only in passes
    replayed from CUDA graphs (``graph_captured``), and never where it fuses the shared expert into the routed
    kernel instead (``fused_routed_experts``: the routed-expert counts it fuses for, with one shared expert and no
    expert parallelism)."""

    concurrent: bool = False
    max_tokens: float | None = None
    graph_captured: bool = False
    fused_routed_experts: tuple[int, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class Schedule:
    """How a decode step is scheduled: when ``--two-batch-overlap auto`` splits a batch in two overlapped
    micro-batches (``tbo_auto``: "scale-out" = a DeepEP dispatch under attention DP that spans more than one
    scale-up domain, as the engine's published recipes enable it; "never"), and the shared experts' stream."""

    tbo_auto: str
    tbo_source: str
    shared_experts: SharedExperts = SharedExperts()


@dataclass(frozen=True)
class OpLayout:
    """Where the engine lays an op out differently from the others: Qwen3-Next / Qwen3.5 gated-delta-net input
    projections as four GEMMs (``split``) or two (``merged``)."""

    linear_attention_in_proj: str
    source: str


@dataclass(frozen=True)
class KernelRule:
    """Where the engine runs a profile's alternative kernel of an op class: the weight formats and GPU
    architectures its own selection rule (a backend setting's default, read in its code) picks it for."""

    formats: tuple[str, ...]
    architectures: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class KernelChoice:
    """Which kernel an experts op runs (docs/MODEL.md §3.4, §3.10), per value of the engine's MoE backend setting
    (``backends``: its name -> rules; ``default``: the value a launch without the setting runs; ``selected``: the
    value priced). The profile's ``moe`` class (the throughput kernel the measured tables time) unless a rule of the
    selected backend names the op's format on the GPU's architecture, then the profile's ``moe_min_latency`` class of
    that format (where the profile states one). The engine's rule decides, never which of the fits is faster."""

    default: str = "default"
    backends: Mapping[str, tuple[KernelRule, ...]] = field(
        default_factory=lambda: MappingProxyType({"default": ()}))
    source: str = ""
    selected: str = ""  # "" = default

    @property
    def backend(self) -> str:
        return self.selected or self.default

    def alternative(self, variant: str, architecture: str) -> bool:
        return any(variant in r.formats and architecture in r.architectures for r in self.backends[self.backend])


@dataclass(frozen=True)
class EngineRelease:
    """Everything one engine executes at one documented release: what pricing reads of the engine (a profile bound
    to it carries it as ``engine_spec``). Compared by identity (the catalog makes one object per release)."""

    engine: str  # the catalog name (or a user file's own name)
    display_name: str
    version: str  # the release key (``--engine-version``)
    since: str
    vendors: tuple[str, ...]
    kernel_block: str  # whose kernel parameters a hardware profile prices it with (``engines.<block>``)
    calibration: Mapping[str, str]  # framework label of its measured tables, and per op class the kernel it runs
    execution: Execution
    serving: Serving
    graphs: GraphCapture | None
    schedule: Schedule
    ops: OpLayout
    kernels: KernelChoice
    round: RoundParams
    origin: str = field(default="", compare=False)

    __hash__ = object.__hash__
    __eq__ = object.__eq__

    @property
    def label(self) -> str:
        return f"{self.engine} {self.version}"

    def with_moe_backend(self, backend: str | None) -> EngineRelease:
        """This release launched with its MoE backend setting at ``backend`` (None: its default), one object per
        value (a bound profile's release stays comparable by identity)."""
        if backend is None or backend == self.kernels.backend:
            return self
        return _with_backend(self, backend)


@dataclass(frozen=True, eq=False)
class EngineSpec:
    """One engine file: its releases (oldest first; the last is the default), names, sources and provenance."""

    name: str
    display_name: str
    aliases: tuple[str, ...]
    description: str
    vendors: tuple[str, ...]
    releases: tuple[EngineRelease, ...]
    sources: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    provenance: Mapping[str, Provenance] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    origin: str = ""

    @property
    def versions(self) -> tuple[str, ...]:
        return tuple(r.version for r in self.releases)

    @property
    def default(self) -> EngineRelease:
        return self.releases[-1]

    def release(self, version: str | None = None) -> EngineRelease:
        """The release ``version`` (a key of :attr:`versions`; None: the newest)."""
        if version is None:
            return self.default
        for r in self.releases:
            if r.version == version:
                return r
        raise ParameterError(f"the 'engine_version' parameter must be one of {list(self.versions)} for "
                             f"{self.name}. Got {version!r} instead.", owner="Deployment", param="engine_version")

    def version_key(self, stated: str) -> str | None:
        """The release whose execution a version ``stated`` as text runs (e.g. "0.13.0", "v0.5.6.post2",
        "1.2.0rc5"): the newest release at or below it (the oldest for an older one); None when the text starts
        with no version number (a fork's commit, "main")."""
        m = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(stated))
        if m is None:
            return None
        ver = _numbers(m.group(1))
        older = [k for k in self.versions if _numbers(k) <= ver]
        return older[-1] if older else self.versions[0]


@functools.lru_cache(maxsize=256)
def _with_backend(release: EngineRelease, backend: str) -> EngineRelease:
    if backend not in release.kernels.backends:
        raise ParameterError(f"the 'moe_backend' parameter must be one of {sorted(release.kernels.backends)} for "
                             f"{release.label}. Got {backend!r} instead.", owner="Deployment", param="moe_backend")
    return replace(release, kernels=replace(release.kernels, selected=backend))


def _numbers(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))
