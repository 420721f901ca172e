"""Predicted against measured speculative-decoding speedups over the public corpus (``measured/sd/corpus.csv``;
docs/SD_VALIDATION.md, docs/MODEL.md §7.2).

Each corpus row becomes a case (:func:`setup`): the target from ``target_catalog``, the GPU profile from ``gpu``, the
engine, the layout (tp / ep / dp / GPUs, the row's dtype or the checkpoint's), the drafter kind, the draft length
(``draft_steps``; a row with ``topk`` > 1 is a tree of ``draft_tokens`` nodes: :func:`tree_parents`), the acceptance
that reproduces the row's AL, the concurrency and ISL / OSL, and the execution modes the row states
(``overlap_scheduler`` for the SD run, ``baseline_overlap`` for the plain one; else the engine's defaults). It is
priced once on the one pricing path (:func:`simulator.sweep.serving.price_serving`, which calls
:func:`simulator.sweep.price`) at the row's level:
``serving`` rows are compared with the serving-level speedup (throughput for a throughput metric, TPOT for a TPOT or
latency metric), ``step`` rows with the step-level one. The priced parts that do not depend on the engine's host-time
parameters are kept (:class:`Priced`), so :mod:`.sd_fit` can re-evaluate the speedup under other parameters without
pricing again.

Rows that cannot be priced say why: ``unmapped`` (no catalog target, GPU or engine; no concurrency; no acceptance
length), ``refused`` (the layout does not fit or is not expressible).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from ..cost.deployment import version_key
from ..cost.ops import DEFAULT_CONTEXT
from ..errors import SimulatorError
from ..pricing import Layout, Request
from ..specdec import Acceptance, StepCache
from ..specdec.tree import tree_accept_length
from ..specs.catalog import ENGINES, bundled_files, load_hardware, load_model
from ..specs.dtypes import FORMATS
from ..sweep.runner import deploy, in_mode
from ..sweep.serving import ServingCase, plain_step, price_serving
from .sd_corpus import SDRow, measured_speedup

__all__ = ["ASSUMED", "COMPARE", "Priced", "Setup", "Skip", "al_batch_spread", "al_batch_spreads", "measured_of",
           "predict_row", "price_row", "release_options", "setup", "tree_parents"]

# What a row's metric is compared with at the serving level. A request's mean end-to-end latency in a closed loop of
# C requests is C · OSL / throughput (Little's law), so its speedup is the throughput speedup (docs/MODEL.md §4.7); the
# end-to-end runtime of a fixed set of requests is their output tokens / throughput, so its ratio is too.
COMPARE = {"output_throughput": "throughput", "speedup_only": "throughput", "tpot": "tpot", "latency": "throughput",
           "runtime": "throughput", "step_time": "step"}
DRAFTERS = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "ngram": "ngram"}
ASSUMED = "assumed"  # al_from of a row priced with the pricing path's default acceptance (no AL stated anywhere)
# Weight formats a row may name by another word: fp16 moves the same bytes at the same tensor-core rate as bf16.
DTYPE_ALIASES = {"fp16": "bf16", "float16": "bf16", "bfloat16": "bf16"}
# Engines whose draft-token count includes the tree's root (SGLang's speculative-num-draft-tokens; measured/sd/README)
ROOT_COUNTED = ("sglang",)


class Skip(Exception):
    """A row that cannot be priced: ``status`` (unmapped | refused) and the reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Setup:
    """How one corpus row is priced."""

    row: SDRow
    model: str
    hardware: str
    engine: str
    dtype: str
    drafter: str
    gamma: int  # draft steps per round (a tree's depth)
    parents: tuple[int, ...] | None  # a tree (topk > 1), else None (chain)
    accept_length: float | None  # None: not stated (the default acceptance is priced)
    al_from: str  # "row", the id of the row whose AL was used, or ASSUMED
    concurrency: int
    isl: int
    osl: int | None  # None: not stated (the step level at the default context is compared)
    level: str  # serving | step
    compare: str  # throughput | tpot | step
    al_spread: float = 0.0  # a borrowed AL's uncertainty, log (al_batch_spread); 0 for an AL measured at the row


def tree_parents(steps: int, topk: int, draft_tokens: int) -> tuple[int, ...]:
    """A tree of ``draft_tokens`` nodes (root included, SGLang's count) and depth ``min(steps, draft_tokens − 1)``:
    a chain of that depth plus the remaining nodes as siblings, level by level round-robin, at most ``topk`` children
    per node. The engine picks the real shape by draft scores per round; this one has its node count and depth."""
    n = max(int(draft_tokens), 2)
    depth = max(1, min(int(steps), n - 1))
    parents = [-1] + list(range(depth))  # chain: node i's parent is i - 1
    children = {i: (1 if i < depth else 0) for i in range(depth + 1)}
    level = 0
    while len(parents) < n:
        if children[level] < max(int(topk), 1):
            parents.append(level)
            children[level] += 1
            children[len(parents) - 1] = 0
        level = (level + 1) % depth if depth > 0 else 0
        if all(children[i] >= max(int(topk), 1) for i in range(depth)):
            break
    return tuple(parents)


def _alpha_for_tree(parents, al: float) -> Acceptance:
    """The per-token acceptance whose tree AL equals ``al`` (bisection; AL is increasing in α)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if tree_accept_length(parents, Acceptance.from_alpha(mid)) < al:
            lo = mid
        else:
            hi = mid
    return Acceptance.from_alpha((lo + hi) / 2)


def _dtype(text: str, native: str) -> str:
    """The row's weight format (its first word), the checkpoint's when not stated; ``fp8`` of a block-scaled
    checkpoint is its fp8_block."""
    word = text.split()[0].strip("(),;").lower() if text.strip() else ""
    if not word:
        return native
    if word == "fp8" and native == "fp8_block":
        return native
    word = DTYPE_ALIASES.get(word, word)
    if word not in FORMATS:
        raise Skip("unmapped", f"dtype {text!r} names no weight format ({', '.join(FORMATS)})")
    return word


def _config(r: SDRow) -> tuple:
    """A row's source, target, GPU, layout, drafter configuration and dataset: what a borrowed AL must share."""
    return (r.source_key, r.target_catalog, r.gpu, r.tp, r.drafter_kind, r.draft_steps, r.topk, r.draft_tokens,
            re.sub(r"\s*\(.*?\)", "", r.dataset).strip().lower())  # "HumanEval (75)" is "HumanEval"


def al_batch_spread(rows) -> float:
    """How much a configuration's AL moves with batch where the corpus measured it at several batches: the largest
    |log(AL_b / AL_b')| over rows of one :func:`_config` at different batches (0 when no configuration has two). A
    row that borrows its AL from another batch carries this as its acceptance uncertainty (AL · exp(∓ spread)): the
    stated assumption that an unmeasured batch's AL moves no more than any measured one's."""
    return max((x for x, _ in al_batch_spreads(rows)), default=0.0)


def al_batch_spreads(rows) -> list[tuple[float, tuple[str, ...]]]:
    """(|log AL| range, row ids) of every configuration the corpus measured at several batches, widest first."""
    groups: dict[tuple, list[SDRow]] = {}
    for r in rows:
        if r.accept_length is not None and r.batch is not None:
            groups.setdefault(_config(r), []).append(r)
    out = []
    for g in groups.values():
        if len({r.batch for r in g}) > 1:
            logs = np.log([r.accept_length for r in g])
            out.append((float(logs.max() - logs.min()), tuple(r.id for r in g)))
    return sorted(out, key=lambda x: -x[0])


def _accept_length(row: SDRow, rows) -> tuple[float | None, str]:
    """The row's AL, else the AL of the same source, target, GPU, layout, drafter configuration and dataset at the
    nearest batch (sources often report AL at one batch only), else (None, ASSUMED): the pricing path's default
    acceptance (such rows are reported apart, never fitted)."""
    if row.accept_length is not None:
        return row.accept_length, "row"
    same = [r for r in rows if r.accept_length is not None and _config(r) == _config(row)]
    if not same:
        if row.drafter_kind == "ngram":  # no default acceptance for a lookup drafter
            raise Skip("unmapped", "no accept_length (stated by neither the row nor the same configuration of its "
                                   "source; an n-gram drafter has no default acceptance)")
        return None, ASSUMED
    near = min(same, key=lambda r: abs((r.batch or 1) - (row.batch or 1)))
    return near.accept_length, near.id


def setup(row: SDRow, rows=()) -> Setup:
    """The case of one row (module docstring); raises :class:`Skip` for rows that cannot be priced."""
    if not row.target_catalog:
        raise Skip("unmapped", f"target {row.target!r} has no catalog model")
    if row.gpu not in bundled_files("hardware"):
        raise Skip("unmapped", f"GPU {row.gpu!r} has no hardware profile")
    if row.engine not in ENGINES:
        raise Skip("unmapped", f"engine {row.engine!r} is not priced ({', '.join(ENGINES)})")
    if row.drafter_kind not in DRAFTERS:
        raise Skip("unmapped", f"drafter kind {row.drafter_kind!r} has no catalog drafter")
    if row.concurrency_kind == "request_rate" or row.batch is None:
        raise Skip("unmapped", "no batch or concurrency (a request rate sets none)")
    if row.draft_steps is None and row.draft_tokens is None:
        raise Skip("unmapped", "neither draft_steps nor draft_tokens")
    al, al_from = _accept_length(row, rows)
    model = load_model(row.target_catalog)
    root = 1 if row.engine in ROOT_COUNTED else 0  # draft_tokens as the engine counts them
    steps = row.draft_steps if row.draft_steps is not None else row.draft_tokens - root
    tree = (row.topk is not None and row.topk > 1 and row.draft_tokens is not None
            and row.draft_tokens - root > steps)
    parents = tree_parents(steps, row.topk, row.draft_tokens + 1 - root) if tree else None
    lengths_stated = row.osl is not None
    level = row.level if lengths_stated or row.level == "step" else "step"
    compare = COMPARE[row.metric] if level == "serving" else "step"
    return Setup(row, row.target_catalog, row.gpu, row.engine, _dtype(row.dtype, model.native_dtype),
                 DRAFTERS[row.drafter_kind], int(steps), parents, None if al is None else float(al), al_from,
                 int(round(row.batch)),
                 int(row.isl or 0), row.osl, level, compare,
                 al_batch_spread(rows) if al is not None and al_from != "row" else 0.0)


@dataclass(frozen=True)
class Priced:
    """One priced row: the serving case (its step-level case inside) and what is compared."""

    setup: Setup
    serving: ServingCase
    measured: float

    @property
    def result(self):
        return self.serving.step.result

    def predicted(self, t_step=None, t_round=None) -> float:
        """The speedup compared with the row, from the priced step times over the case's batch grid, or from other
        ``t_step`` / ``t_round`` arrays (e.g. with fitted host times)."""
        s = self.serving
        r = self.result
        t_step = plain_step(r) if t_step is None else np.asarray(t_step, dtype=float)
        t_round = r.t_round[0] if t_round is None else np.asarray(t_round, dtype=float)
        i = s.at_concurrency
        step = float(s.round_accept_length * t_step[i] / t_round[i])  # one round's AL: the step level
        if self.setup.compare == "step":
            return step
        p = s.point_for(t_step, t_round, step)
        return float(p.speedup_throughput if self.setup.compare == "throughput" else p.speedup_tpot)

    def band_ratio(self) -> tuple[float, float] | None:
        """(low, high) / central of the pricing path's parameter / acceptance band at batch C, the model-error
        widening divided out (None where the path prices no band): what a prediction's band is before
        :mod:`.sd_band` adds the model's error."""
        r = self.result
        lo, hi = getattr(r, "speedup_low", None), getattr(r, "speedup_high", None)
        if lo is None or hi is None:
            return None
        i = self.serving.at_concurrency
        q_lo, q_hi = getattr(r, "model_error", (0.0, 0.0))
        central = float(r.speedup[0, i])
        return float(lo[0, i]) / np.exp(q_lo) / central, float(hi[0, i]) / np.exp(q_hi) / central


def measured_of(row: SDRow) -> float:
    return measured_speedup(row)


def _acceptance(s: Setup, al: float) -> Acceptance:
    """The acceptance whose AL at the row's draft length (or tree) is ``al`` (clipped to what it can reach)."""
    if s.parents is None:
        return Acceptance.from_accept_length(min(max(al, 1.0), s.gamma + 1), s.gamma)
    return _alpha_for_tree(s.parents, max(al, 1.0))


def release_options(engine: str, stated: str) -> tuple:
    """A layout's options naming ``engine`` and the release whose execution a version ``stated`` as text runs
    (:func:`~simulator.cost.deployment.version_key`; none named: the newest)."""
    version = version_key(engine, stated)
    return (("engine", engine),) + ((("engine_version", version),) if version else ())


def price_row(s: Setup, cache: StepCache | None = None, mode: str = "refined") -> Priced:
    """Price one set-up row (raises :class:`Skip` ``refused`` when the layout cannot run)."""
    r = s.row
    model, hw = load_model(s.model), load_hardware(s.hardware)
    acc = None if s.accept_length is None else _acceptance(s, s.accept_length)  # None: the path's default
    if acc is not None and s.al_spread > 0:  # a borrowed AL: its band (al_batch_spread) widens speedup_low/high
        acc = replace(acc, band=tuple(_acceptance(s, s.accept_length * np.exp(x)) for x in (-s.al_spread,
                                                                                             s.al_spread)))
    isl, osl = (0, 2 * DEFAULT_CONTEXT) if s.osl is None else (s.isl, s.osl)
    layout = Layout(dtype=s.dtype, tp=r.tp, ep=r.ep, dp=r.dp, gpus=r.gpu_count,
                    options=release_options(s.engine, r.engine_version))
    # memory is checked at the longest context a request reaches (the default context when no lengths are stated)
    req = Request(layout=layout, drafter=s.drafter, acceptance=acc,
                  context=DEFAULT_CONTEXT if s.osl is None else isl + osl)
    try:
        sc, ok, why = deploy(model, hw, req, [s.concurrency], s.gamma if s.parents is None else len(s.parents))
        sc = in_mode(sc if s.parents is None else sc.edit(tree=s.parents), mode, req)
        stated = {k: v for k, v in (("sd_overlap", r.overlap_scheduler), ("decode_overlap", r.baseline_overlap),
                                    ("two_batch_overlap", r.two_batch_overlap))
                  if v in ("on", "off")}  # the execution modes the row states (else the engine's defaults)
        sc = sc.edit(**stated) if stated else sc
    except SimulatorError as exc:
        raise Skip("refused", str(exc)) from None
    if not ok:
        raise Skip("refused", why)
    try:
        served = price_serving(sc, s.concurrency, isl, osl, s.gamma if s.parents is None else None, cache=cache)
    except SimulatorError as exc:
        raise Skip("refused", str(exc)) from None
    return Priced(s, served, measured_of(r))


def predict_row(row: SDRow, rows=(), cache: StepCache | None = None) -> Priced:
    return price_row(setup(row, rows), cache)
