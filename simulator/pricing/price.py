"""The one pricing path: :func:`price` prices a :class:`~.scenario.Scenario` over batch × draft length (a chain) or
its draft tree, and :func:`price_pass` prices one forward pass T(B, s) of it. Every command, study, ``explain``
(walk and Shapley), ``schedule`` and ``validate`` goes through these two; they are the only callers of the round
functions (:func:`simulator.specdec.speculative`, :func:`simulator.specdec.tree.speculative_tree`) and of the step
model outside the cost and round layers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..cost.deployment import PRESETS, Deployment
from ..cost.ops import BATCH, TOKENS
from ..cost.routing import model_overlap
from ..cost.step import StepResult, check_memory
from ..errors import ParameterError
from ..specdec import Acceptance, Drafter, SpecResult, StepCache, speculative
from ..specdec.overheads import padded_step
from ..specdec.tree import speculative_tree
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .deploy import check_context
from .scenario import Scenario

__all__ = ["REFERENCE", "Case", "price", "price_pass"]

REFERENCE = ("qwen3-235b-a22b", "fp8_block", 8, 8)  # the study's headline deployment: FP8, attention TP8, MoE EP8


@dataclass(frozen=True)
class Case:
    """A priced scenario: its :class:`~simulator.specdec.SpecResult` over the (draft length, batch) grid (a tree:
    one row whose draft length is the tree's drafted nodes)."""

    scenario: Scenario
    result: SpecResult
    label: str = ""  # the variant column: the scenario's name, and the tree's label for a tree

    @property
    def model(self) -> ModelSpec:
        return self.scenario.model

    @property
    def hardware(self) -> HardwareProfile:
        return self.scenario.hw

    @property
    def deployment(self) -> Deployment:
        return self.scenario.deployment

    @property
    def engine_version(self) -> str:
        """The engine release the case was priced on (the one given, else the engine file's newest): the release
        its scenario bound."""
        return self.hardware.engine_spec.version

    @property
    def mode(self) -> str:
        return self.scenario.mode

    @property
    def drafter(self) -> Drafter:
        return self.scenario.drafter

    @property
    def acceptance(self) -> Acceptance:
        return self.scenario.accept

    @property
    def context(self) -> int:
        return int(self.scenario.context)

    @property
    def variant(self) -> str:
        return self.label

    @property
    def key(self) -> tuple:
        d = self.deployment
        return (self.model.name, self.hardware.name, d.dtype, d.tp, d.dp, d.ep, self.variant)

    @property
    def is_reference(self) -> bool:
        d = self.deployment
        return (self.model.name, d.dtype, d.tp, d.ep) == REFERENCE and d.dp == 1 and self.hardware.name == "h100-sxm"

    def best(self) -> tuple[np.ndarray, np.ndarray]:
        """(best draft length, best speedup) per batch."""
        return self.result.best()

    def at_gamma(self, gamma: int) -> int:
        """Row index of draft length ``gamma`` (ValueError naming the grid if it is not there)."""
        idx = np.flatnonzero(self.result.gammas == gamma)
        if not idx.size:
            raise ValueError(f"draft length {gamma} is not in the grid {self.result.gammas.tolist()}")
        return int(idx[0])

    def decode_verify(self, gamma: int, bi: int = 0) -> float:
        """T_decode / T_verify at draft length ``gamma`` and batch index ``bi``."""
        return float(1 / self.result.verify_decode_ratio[self.at_gamma(gamma), bi])


def price(sc: Scenario, batch, gammas=None, *, cache: StepCache | None = None) -> Case:
    """Speculative decoding of ``sc`` over ``batch``: a chain over the draft lengths ``gammas`` (γ = 0 is plain
    decoding), or, when the scenario has a draft tree, that tree (``gammas`` must then be None)."""
    b = np.asarray(batch, dtype=float)
    check_context(sc.model, sc.context, (len(sc.tree) if sc.tree is not None else
                                         int(np.max(gammas)) + 1 if gammas is not None and np.size(gammas) else 1))
    if sc.tree is None:
        if gammas is None:
            raise ParameterError("price: a chain needs its draft lengths (gammas); a tree scenario takes none",
                                 owner="price", param="gammas")
        res = speculative(sc.model, sc.hw, sc.deployment, b, np.asarray(gammas), sc.accept, sc.drafter, sc.context,
                          sc.mechanisms, sc.overlap, cache)
        return Case(sc, res, sc.name)
    if gammas is not None:
        raise ParameterError("price: a tree scenario is priced at its own node count; give gammas=None",
                             owner="price", param="gammas")
    tr = speculative_tree(sc.model, sc.hw, sc.deployment, b, sc.tree, sc.accept, sc.drafter, sc.context,
                          sc.mechanisms, sc.overlap, cache)
    return Case(sc, tr.as_spec_result(), f"{sc.name} {tr.label}".strip())


def price_pass(sc: Scenario, batch, tokens=None, *, cache: StepCache | None = None,
               check_fit: bool = True, speculative: bool = False) -> StepResult:
    """One target forward pass T(B, s) of ``sc`` as the engine runs it (at the captured CUDA-graph batch when
    ``graph_padding`` is on, as every pass of :func:`price`): ``tokens`` new tokens per request, or, for a tree
    scenario, its node count (unique experts from the tree fit). ``check_fit``: refuse batches whose weights + KV
    do not fit the GPUs. ``speculative``: the pass belongs to an SD round (the capture list an SD server uses, as
    :func:`price` pads its verify passes)."""
    BATCH.check(batch, "batch", "price_pass")
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    overlap = sc.overlap
    if sc.tree is not None:
        n = len(sc.tree)
        if tokens is not None and int(tokens) != n:
            raise ParameterError(f"price_pass: tokens = {tokens} disagrees with the {n}-node draft tree; give one",
                                 owner="price_pass", param="tokens")
        tokens = n
        overlap = replace(model_overlap(sc.model, overlap), tree=sc.tree)
    if tokens is None:
        raise ParameterError("price_pass needs the tokens per request (or a tree scenario)", owner="price_pass",
                             param="tokens")
    TOKENS.check(tokens, "tokens", "price_pass")
    check_context(sc.model, sc.context, float(tokens), owner="price_pass")
    if check_fit:
        check_memory(sc.model, sc.hw, sc.deployment, float(b.max()), float(tokens), sc.context)
    return padded_step(cache or StepCache(), sc.model, sc.hw, sc.deployment, b, float(tokens), sc.context,
                       sc.mechanisms, overlap, speculative)


def class_times(sc: Scenario, mode: str, batch, tokens: int) -> dict[str, float]:
    """Seconds on the critical path per op class (and ``"total"``) of one pass of ``sc`` under ``mode`` and its preset
    mechanisms, at the first batch of ``batch``, ``tokens`` per request; the memory fit is not checked (a view of
    what costs what, as the headline and curve-shape studies read it)."""
    st = price_pass(sc.edit(mode=mode, mechanisms=PRESETS[mode]), batch, tokens, check_fit=False)
    return {**{c: float(v[0]) for c, v in st.breakdown.items()}, "total": float(st.time[0])}
