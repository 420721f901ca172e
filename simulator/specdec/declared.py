"""What a YAML file declares about speculation (the study files, ``simulator.experiments.schema``): an acceptance
(:class:`AcceptanceSpec`: a per-token ``alpha`` or a mean acceptance length at a draft length, read by
:func:`read_acceptance` with its cross-field rules) and the names of drafters, models and GPUs that must load
(:func:`check_name`, the name loader of :class:`simulator.specs.settings.Hooks`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import SimulatorError
from ..params import Interval, Param, param_field
from ..specs.catalog import load_hardware, load_model
from ..specs.schema import Reader
from ..specs.settings import Hooks, read_settings
from .acceptance import ALPHA, Acceptance
from .drafters import parse_drafter
from .rounds import DRAFT_LENS, MAX_DRAFT_LEN

# A study speculates: its draft lengths are ≥ 1 (specdec's DRAFT_LENS also allows 0, no speculation).
DRAFT = Param(Interval(int, 1, MAX_DRAFT_LEN), unit=DRAFT_LENS.unit)


@dataclass(frozen=True)
class AcceptanceSpec:
    """Per-token acceptance ``alpha``, a mean acceptance length ``accept_length`` measured at ``draft_len``, or
    ``per_position`` acceptances a1, a2, ... (the CLI's ``--acceptance A1,A2,...``)."""

    alpha: float | None = param_field(Param(*ALPHA.constraints, None), None)
    accept_length: float | None = param_field(Param(Interval(float, 1.0, 65.0), None), None)
    draft_len: int = param_field(DRAFT, 3)
    source: str = ""
    per_position: tuple[float, ...] | None = None

    def build(self):
        """The Acceptance stated, or None: the library's default of the drafter's family for each target
        (``specdec.acceptance.default_acceptance``, resolved where the target is priced)."""
        if self.accept_length is not None:
            return Acceptance.from_accept_length(self.accept_length, self.draft_len)
        if self.per_position is not None:
            return Acceptance.from_positions(self.per_position)
        if self.alpha is None:
            return None
        return Acceptance.from_alpha(self.alpha)

    @property
    def label(self) -> str:
        if self.accept_length is not None:
            return f"AL {self.accept_length:g} at draft length {self.draft_len}"
        if self.per_position is not None:
            return "per-position " + ",".join(f"{x:g}" for x in self.per_position)
        if self.alpha is None:
            return "the default per-position acceptance of the drafter's family and target kind (docs/MODEL.md §4.1)"
        return f"alpha {self.alpha:g}"


def check_name(r: Reader, path: str, name: str, kind: str) -> str:
    """A bundled model/hardware name, drafter or YAML path that loads; errors name the study field."""
    try:
        if kind == "drafter":
            d = parse_drafter(name)
            if d.model:  # model:NAME or eagle3:NAME: the spec must load
                load_model(d.model)
        else:
            (load_model if kind == "model" else load_hardware)(name)
    except SimulatorError as exc:
        fix = ("use eagle, eagle3, eagle3:NAME, mtp, ngram, model:NAME or ratio:C" if kind == "drafter" else
               f"use a bundled {kind} name (python -m simulator list) or a YAML path")
        raise r.fail(path, f"{name!r} cannot be loaded ({exc})"[:300], fix) from None
    return name


def read_acceptance(r: Reader, obj: Any, path: str) -> AcceptanceSpec:
    """An :class:`AcceptanceSpec` by its declarations, plus the two rules across its fields."""
    a = read_settings(r, obj, path, AcceptanceSpec, hooks=Hooks(sequences=("per_position",)))
    if sum(x is not None for x in (a.alpha, a.accept_length, a.per_position)) != 1:
        raise r.fail(path, "needs exactly one of 'alpha', 'accept_length' or 'per_position'",
                     "write {alpha: 0.75}, {accept_length: 2.73, draft_len: 3} or {per_position: [0.8, 0.7]}")
    if a.per_position is not None and any(not 0.0 <= x <= 1.0 for x in a.per_position):
        raise r.fail(f"{path}.per_position", f"is {list(a.per_position)}", "give probabilities in [0, 1]")
    if a.accept_length is not None and a.accept_length > a.draft_len + 1:
        raise r.fail(f"{path}.accept_length", f"is {a.accept_length:g}, above draft_len + 1 = {a.draft_len + 1}",
                     "a round accepts at most draft_len + 1 tokens")
    return a
