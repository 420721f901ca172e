"""Public acceptance logs per target (``measured/acceptance/logs.csv``) and their strict reader.

Each row is one published acceptance measurement of a drafter family (``eagle``: EAGLE, EAGLE-3 and their variants;
``mtp``: multi-token-prediction modules) on a named target: either an engine's per-position log (``kind = rates``:
u_1..u_K with u_i = P(the first i drafts are all accepted), as vLLM logs ``Per-position acceptance rate``) or a mean
acceptance length at one draft length (``kind = al``: AL(K), bonus token included, as engines report it; an AL(K)
curve is one row per K). These are exactly the two forms :class:`simulator.specdec.acceptance.Published` reads
(``rates`` / ``al`` at ``at``): :meth:`AcceptanceLog.published` gives its keyword arguments, so a per-target default
can be built from these rows without copying numbers (docs/MODEL.md §4.1; the layout and every source are described
in ``measured/acceptance/README.md``). Nothing here prices anything, and nothing is fitted to a row.

A bad cell is one :class:`~simulator.errors.ConfigError` line naming the file, the row, the field, the value and the
fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .catalog import bundled_files, load_model, measured_dir
from .csvfile import read_strict_csv
from .schema import grouped

__all__ = ["COLUMNS", "FAMILIES", "KINDS", "AcceptanceLog", "bundled_logs_path", "by_target", "catalog_coverage",
           "read_acceptance_logs"]

COLUMNS = ("log", "family", "target", "target_catalog", "target_kind", "drafter", "engine", "gpu", "dataset",
           "sampling", "concurrency", "kind", "draft_len", "values", "url", "where", "notes")
REQUIRED = ("log", "family", "target", "target_kind", "drafter", "kind", "draft_len", "values", "url", "where")
FAMILIES = ("eagle", "mtp")  # specdec.acceptance.FAMILY's families that have public logs (n-gram has none by design)
KINDS = ("rates", "al")
TARGET_KINDS = ("moe", "dense")


@dataclass(frozen=True)
class AcceptanceLog:
    """One published acceptance measurement (module docstring). ``rates`` is empty for an AL row, ``al`` None for a
    per-position log."""

    log: str
    family: str
    target: str
    target_catalog: str
    target_kind: str
    drafter: str
    engine: str
    gpu: str
    dataset: str
    sampling: str
    concurrency: str
    kind: str
    draft_len: int
    rates: tuple[float, ...]
    al: float | None
    url: str
    where: str
    notes: str

    @property
    def key(self) -> str:
        """The citation label, unique in the file: the log's name, with the draft length for an AL(K) row."""
        return self.log if self.kind == "rates" else f"{self.log}, AL at K = {self.draft_len}"

    def published(self) -> dict:
        """Keyword arguments of :class:`simulator.specdec.acceptance.Published` for this row."""
        if self.kind == "rates":
            return {"key": self.key, "rates": self.rates}
        return {"key": self.key, "al": self.al, "at": self.draft_len}

    def accept_length(self) -> float:
        """The mean acceptance length this row states or implies at its draft length (1 + Σ u_i for a log)."""
        return 1.0 + sum(self.rates) if self.kind == "rates" else float(self.al)


def bundled_logs_path() -> Path:
    """``measured/acceptance/logs.csv`` as bundled (the data package ``simulator._data.measured`` in a wheel)."""
    return measured_dir("acceptance") / "logs.csv"


def read_acceptance_logs(path: str | Path | None = None) -> tuple[AcceptanceLog, ...]:
    """Read and check an acceptance-log CSV (default: the bundled one)."""
    p = Path(path) if path is not None else bundled_logs_path()
    where = str(p)
    out, seen = [], {}
    for line, raw in read_strict_csv(p, COLUMNS, "measured/acceptance/README.md"):
        row = _row(f"{where} line {line}", raw)
        if row.key in seen:
            raise ConfigError(f"{where} line {line}", "log", f"repeats {row.key!r} of line {seen[row.key]}",
                              "give every log a distinct name (and an AL(K) curve one row per K)")
        seen[row.key] = line
        out.append(row)
    return tuple(out)


def _row(loc: str, raw: dict[str, str]) -> AcceptanceLog:
    for c in REQUIRED:
        if not raw[c]:
            raise ConfigError(loc, c, "is empty (value '')", "every row states " + ", ".join(REQUIRED))
    for c, allowed in (("family", FAMILIES), ("kind", KINDS), ("target_kind", TARGET_KINDS)):
        if raw[c] not in allowed:
            raise ConfigError(loc, c, f"value {raw[c]!r} is not one of {', '.join(allowed)}",
                              f"use one of {', '.join(allowed)}")
    k = _number(loc, "draft_len", raw["draft_len"])
    if k != int(k) or not 1 <= k <= 64:
        raise ConfigError(loc, "draft_len", f"value {raw['draft_len']!r} is not a whole number in 1..64",
                          "give the draft length (drafted tokens per round) the row was measured at")
    k = int(k)
    cat = raw["target_catalog"]
    if cat:
        if cat not in bundled_files("models"):
            raise ConfigError(loc, "target_catalog", f"value {cat!r} is not a bundled model",
                              "give a name of models/*.yaml (`python -m simulator list models`) or leave it empty")
        moe = load_model(cat).ffn.is_moe
        if (raw["target_kind"] == "moe") != moe:
            raise ConfigError(loc, "target_kind", f"value {raw['target_kind']!r} contradicts {cat!r} "
                                                  f"({'MoE' if moe else 'dense'})", "state the catalog model's kind")
    rates, al = (), None
    if raw["kind"] == "rates":
        rates = tuple(_number(loc, "values", x.strip()) for x in raw["values"].split(";"))
        if len(rates) != k:
            raise ConfigError(loc, "values", f"value {raw['values']!r} has {len(rates)} rates for draft_len {k}",
                              "give one rate per drafted position, ';'-separated")
        if any(not 0 < u <= 1 for u in rates) or any(b > a for a, b in zip(rates, rates[1:], strict=False)):
            raise ConfigError(loc, "values", f"value {raw['values']!r} is not a non-increasing list in (0, 1]",
                              "give u_i = P(the first i drafts accepted), as vLLM's per-position acceptance logs")
    else:
        al = _number(loc, "values", raw["values"])
        if not 1 <= al <= k + 1:
            raise ConfigError(loc, "values", f"value {raw['values']!r} is outside [1, {k + 1}] for draft_len {k}",
                              "give the mean acceptance length, bonus token included, at the row's draft length")
    return AcceptanceLog(raw["log"], raw["family"], raw["target"], cat, raw["target_kind"], raw["drafter"],
                         raw["engine"], raw["gpu"], raw["dataset"], raw["sampling"], raw["concurrency"], raw["kind"],
                         k, rates, al, raw["url"], raw["where"], raw["notes"])


def _number(loc: str, col: str, text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(loc, col, f"value {text!r} is not a number", "give a plain decimal number") from None
    if not math.isfinite(v):
        raise ConfigError(loc, col, f"value {text!r} is not finite", "give a plain decimal number")
    return v


def by_target(logs: Iterable[AcceptanceLog]) -> dict[str, tuple[AcceptanceLog, ...]]:
    """The rows of each catalog target (``target_catalog``; rows of targets outside the catalog under ``""``)."""
    return grouped(logs, "target_catalog")


def catalog_coverage(logs: Iterable[AcceptanceLog]) -> dict[str, tuple[str, ...]]:
    """Every bundled target model (``role: target``) -> the drafter families with a public log of it (``()``: none,
    the pricing path's family default stands in)."""
    fams = {t: tuple(sorted({r.family for r in rs})) for t, rs in by_target(logs).items() if t}
    return {name: fams.get(name, ()) for name in bundled_files("models") if load_model(name).role == "target"}
