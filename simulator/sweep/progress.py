"""Progress of a long run, counted in priced points, with an estimate of the time left (one home for ``sweep``
and the study runner). Messages go to a callback (the CLI prints them on stderr; ``--quiet`` passes none)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

EVERY_S = 0.5  # at most one message per this many seconds (the first and the last are always sent)


def _secs(s: float) -> str:
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


@dataclass
class Meter:
    """``total`` points expected; :meth:`add` counts priced points, :meth:`drop` counts points that will not be
    priced (a model that does not fit) as settled, so the estimate stays right and the total never shrinks; the
    message says how many were not priced. ``clock`` is injectable for tests."""

    label: str
    total: int
    callback: Callable[[str], None] | None = None
    unit: str = "points"  # what is counted
    every: float = EVERY_S
    clock: Callable[[], float] = time.perf_counter
    done: int = 0
    skipped: int = 0
    start: float = field(default=0.0)
    _last: float | None = None
    _ended: bool = False

    def __post_init__(self):
        self.start = self.clock()

    def message(self, what: str = "") -> str:
        """A running line counts settled points of the total; the last one counts what was priced (the number the
        run's summary states) and what was not."""
        el = self.clock() - self.start
        settled = self.done + self.skipped
        if self.total and settled >= self.total:
            not_priced = f", {self.skipped:,} not priced" if self.skipped else ""
            return f"{self.label}: done, {self.done:,} {self.unit} priced{not_priced}, {_secs(el)}"
        pct = 100.0 * settled / self.total if self.total else 100.0
        eta = el * (self.total - settled) / settled if settled else float("nan")
        left = f", ~{_secs(eta)} left" if self.done and settled < self.total else ""
        tail = f" ({what})" if what else ""
        not_priced = f", {self.skipped:,} not priced" if self.skipped else ""
        return (f"{self.label}: {settled:,}/{self.total:,} {self.unit} ({pct:.0f}%), {_secs(el)}{left}{not_priced}"
                f"{tail}")

    def add(self, n: int, what: str = "") -> None:
        self.done += int(n)
        self._say(what)

    def drop(self, n: int) -> None:
        n = max(0, min(int(n), self.total - self.done - self.skipped))
        self.skipped += n
        if n and self.done + self.skipped >= self.total:
            self._say("")  # the points left were dropped: the run is complete

    def _say(self, what: str) -> None:
        if self.callback is None:
            return
        now = self.clock()
        final = self.done + self.skipped >= self.total
        if final and self._ended:
            return
        if self._last is None or final or now - self._last >= self.every:
            self._ended = final
            self._last = now
            self.callback(self.message(what))


__all__ = ["EVERY_S", "Meter"]
