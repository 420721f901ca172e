"""One memo for values derived from immutable specs (a ModelSpec, a target model): keyed by the object's identity
and a hashable key, the object kept beside its value so that a recycled id never answers for another object;
bounded (cleared when full), since what-if specs are new objects each time."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["IdentityMemo"]


class IdentityMemo:
    """``memo.get(obj, key, make)``: ``make()`` once per (obj, key) while ``obj`` is the same object;
    ``memo.get_for((a, b, ...), key, make)`` the same for several objects (each must be the same object)."""

    def __init__(self, size: int = 1024):
        self._values: dict = {}
        self._size = size

    def get(self, obj: Any, key: Hashable, make: Callable[[], Any]) -> Any:
        return self.get_for((obj,), key, make)

    def get_for(self, objs: tuple, key: Hashable, make: Callable[[], Any]) -> Any:
        slot = (tuple(map(id, objs)), key)
        hit = self._values.get(slot)
        if hit is not None and all(a is b for a, b in zip(hit[0], objs, strict=True)):
            return hit[1]
        value = make()
        if len(self._values) >= self._size:
            self._values.clear()
        self._values[slot] = (objs, value)
        return value
