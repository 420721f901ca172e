"""Order-independent attribution: exact Shapley values of the switchable mechanisms (docs/MODEL.md §5.3).

The players are the fields of :class:`~simulator.cost.deployment.Mechanisms` on which the base (a prior reading)
and the target (``refined``) differ, in declaration order, so a mechanism added to ``Mechanisms`` joins the
attribution without a change here. A coalition S prices the base with the fields of S switched to the target's
setting; v(∅) is the base, v(all) the target. With m players every one of the 2^m coalitions is priced once and

    φ_i = Σ_{S ⊆ N∖{i}} |S|! (m − |S| − 1)! / m! · (v(S ∪ {i}) − v(S)),     Σ_i φ_i = v(N) − v(∅)

(efficiency), a player that changes nothing gets 0 (dummy), and two interchangeable players get the same share
(symmetry). ``first``/``last`` are the walk's two extreme orders: the player switched first (v({i}) − v(∅)) and
last (v(N) − v(N∖{i})).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import combinations
from math import factorial

from ..cost.deployment import Mechanisms

MAX_PLAYERS = 10  # 2^10 coalitions priced; beyond that exact Shapley values would be slow


def players(base: Mechanisms, target: Mechanisms) -> tuple[str, ...]:
    """The mechanisms on which ``base`` and ``target`` differ, in ``Mechanisms`` declaration order."""
    return tuple(f.name for f in fields(Mechanisms) if getattr(base, f.name) != getattr(target, f.name))


def coalitions(names: Sequence[str]) -> list[frozenset]:
    """Every subset of ``names``, smallest first (∅ first, the full set last)."""
    return [frozenset(c) for r in range(len(names) + 1) for c in combinations(names, r)]


def coalition_mechanisms(base: Mechanisms, target: Mechanisms, subset) -> Mechanisms:
    """``base`` with the mechanisms in ``subset`` switched to ``target``'s setting."""
    return base.with_(**{name: getattr(target, name) for name in subset})


def shapley_values(names: Sequence[str], value: Mapping[frozenset, float] | Callable[[frozenset], float]
                   ) -> dict[str, float]:
    """Exact Shapley values of ``names`` for the coalition game ``value`` (a mapping or a function of a
    frozenset)."""
    v = value.__getitem__ if isinstance(value, Mapping) else value
    m = len(names)
    weight = [factorial(s) * factorial(m - s - 1) / factorial(m) for s in range(m)]
    out = {}
    for i in names:
        rest = [n for n in names if n != i]
        out[i] = float(sum(weight[len(s)] * (v(s | {i}) - v(s)) for s in coalitions(rest)))
    return out


@dataclass(frozen=True)
class Shapley:
    """Shapley attribution of one quantity from the base to the target (``total = target − base``)."""

    quantity: str  # "decode_verify_ratio" or "speedup"
    base: float
    total: float
    contributions: dict  # player -> φ
    first: dict  # player -> marginal when switched first
    last: dict  # player -> marginal when switched last

    def as_dict(self) -> dict:
        """The JSON object of ``explain --json`` (docs/MODEL.md §5.3)."""
        return {"method": "shapley", "quantity": self.quantity, "total": self.total,
                "contributions": dict(self.contributions)}


def attribute(quantity: str, names: Sequence[str], value: Mapping[frozenset, float]) -> Shapley:
    """Shapley values plus the first/last marginals of every player, from the 2^m coalition values."""
    full, empty = frozenset(names), frozenset()
    return Shapley(quantity, float(value[empty]), float(value[full] - value[empty]), shapley_values(names, value),
                   {n: float(value[frozenset({n})] - value[empty]) for n in names},
                   {n: float(value[full] - value[full - {n}]) for n in names})
