"""The public speculative-decoding measurement corpus (``measured/sd/corpus.csv``) and its strict reader.

One row is one measured point of a public source: an engine serving (or stepping) a target with and without a
drafter at one batch / concurrency / request rate. The columns, their units and how the rows were read are described
in ``measured/sd/README.md``; each ``source_key`` is a section of ``docs/sources/sd_corpus.md``.

``speedup`` is always "SD over plain decoding" as a throughput-like ratio: ``sd / baseline`` for
``output_throughput``, ``baseline / sd`` for ``tpot``, ``latency``, ``runtime`` and ``step_time``. Where a row states
both values and a speedup, they must agree within 1 %. Nothing here prices anything: the corpus is data.

``author`` names who measured a row (one person, team or harness): rows of one author are one fold of every
leave-one-out in :mod:`simulator.validate` (two sources of one author are never split between training and held out).
``set_apart`` labels rows that are kept but neither fitted nor counted in the targets, with the reason
(:data:`SET_APART`); the reader checks that a label says what the row shows (a row without an accept length is
``no-al``, a stated speedup above the row's AL is ``speedup-above-al``, a contradicting source is so on every row).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import ConfigError
from ..specs.catalog import bundled_files, measured_dir
from ..specs.csvfile import read_strict_csv
from ..specs.schema import grouped

ENGINES = ("sglang", "vllm", "trtllm", "other")
DRAFTER_KINDS = ("eagle", "eagle3", "mtp", "model", "ngram", "other")
CONCURRENCY_KINDS = ("batch", "concurrency", "request_rate")
METRICS = ("output_throughput", "tpot", "latency", "runtime", "step_time", "speedup_only")
LEVELS = ("serving", "step")
OVERLAP = ("on", "off", "unknown")
THROUGHPUT_METRICS = ("output_throughput",)  # speedup = sd / baseline; every other timed metric: baseline / sd
SPEEDUP_TOLERANCE = 0.01  # a stated speedup may differ from the stated values' ratio by 1 % (rounding in the source)
# Why a row is set apart (kept, reported, never fitted, not in the targets); measured/sd/README.md, "Rows set apart".
SET_APART = {
    "no-al": "no accept length measured at this point (a borrowed or default AL is one more unknown)",
    "no-isl": "a served workload whose input length the source does not state",
    "contradicting-source": "the source's own numbers (or its versions) contradict each other",
    "duplicate-run": "the same SD run as another row, against another baseline",
    "speedup-above-al": "the stated speedup exceeds the row's AL: not a ratio of this run's decoding",
}
# The units each metric's values may carry (the first word of ``unit``; the rest may qualify it, "tok/s per rank"): a
# throughput in tokens per second, a time in seconds. A rate labelled as a time would invert the speedup.
_TIME_UNITS = ("ms", "s", "us", "µs")
METRIC_UNITS = {"output_throughput": ("tok/s", "tokens/s", "tok/s/user", "tok/s/gpu"), "tpot": _TIME_UNITS,
                "latency": _TIME_UNITS, "runtime": _TIME_UNITS, "step_time": _TIME_UNITS}

COLUMNS = ("id", "source_key", "author", "url", "engine", "engine_version", "gpu", "gpu_count", "tp", "ep", "dp",
           "dtype", "target", "target_catalog", "drafter_kind", "drafter", "draft_steps", "topk", "draft_tokens",
           "accept_length", "batch", "concurrency_kind", "metric", "level", "unit", "baseline_value", "sd_value",
           "speedup", "dataset", "isl", "osl", "temperature", "overlap_scheduler", "baseline_overlap",
           "two_batch_overlap", "spec_version", "set_apart", "notes")
REQUIRED = ("id", "source_key", "author", "url", "engine", "gpu", "gpu_count", "target", "drafter_kind", "metric",
            "level")
ENUMS = {"engine": ENGINES, "drafter_kind": DRAFTER_KINDS, "concurrency_kind": CONCURRENCY_KINDS,
         "metric": METRICS, "level": LEVELS, "overlap_scheduler": OVERLAP, "baseline_overlap": OVERLAP,
         "two_batch_overlap": OVERLAP}
INTS = ("gpu_count", "tp", "ep", "dp", "draft_steps", "topk", "draft_tokens", "isl", "osl")
FLOATS = ("accept_length", "batch", "baseline_value", "sd_value", "speedup")
NON_NEGATIVE = ("temperature",)  # T = 0 is greedy decoding: zero is a value here, not a missing one


@dataclass(frozen=True)
class SDRow:
    """One measured point. Numbers not stated by the source are ``None`` (text: ``""``)."""

    id: str
    source_key: str
    author: str  # who measured it (person, team or harness): one fold of every leave-one-out
    url: str
    engine: str
    engine_version: str
    gpu: str
    gpu_count: int
    tp: int | None
    ep: int | None
    dp: int | None
    dtype: str
    target: str
    target_catalog: str
    drafter_kind: str
    drafter: str
    draft_steps: int | None
    topk: int | None
    draft_tokens: int | None
    accept_length: float | None
    batch: float | None
    concurrency_kind: str
    metric: str
    level: str
    unit: str
    baseline_value: float | None
    sd_value: float | None
    speedup: float | None
    dataset: str
    isl: int | None
    osl: int | None
    temperature: float | None
    overlap_scheduler: str
    baseline_overlap: str  # the plain-decoding run's mode ("" = not stated: the engine version's default)
    two_batch_overlap: str  # both arms' two-batch overlap as deployed ("" or unknown: the pricing path's rule)
    spec_version: str
    set_apart: tuple[str, ...]  # SET_APART codes ("" in the file: () = fitted and in the targets)
    notes: str

    @property
    def apart(self) -> bool:
        """Kept and reported, never fitted, not in the targets (:data:`SET_APART`)."""
        return bool(self.set_apart)

    @property
    def ratio(self) -> float | None:
        """The speedup the stated baseline and SD values imply (sd/baseline for throughput, baseline/sd for
        times); ``None`` when the row states only a speedup."""
        if self.baseline_value is None or self.sd_value is None:
            return None
        if self.metric in THROUGHPUT_METRICS:
            return self.sd_value / self.baseline_value
        return self.baseline_value / self.sd_value


def measured_speedup(row: SDRow) -> float:
    """The measured speedup of one row: the stated ``speedup``, else the ratio of the stated values."""
    if row.speedup is not None:
        return row.speedup
    r = row.ratio
    assert r is not None, "read_corpus guarantees a speedup or both values"
    return r


def by_source(rows: Iterable[SDRow]) -> dict[str, tuple[SDRow, ...]]:
    """The rows grouped by ``source_key``, in order of first appearance, each group in file order."""
    return grouped(rows, "source_key")


def by_author(rows: Iterable[SDRow]) -> dict[str, tuple[SDRow, ...]]:
    """The rows grouped by ``author`` (one fold each), in order of first appearance, each group in file order."""
    return grouped(rows, "author")


def bundled_corpus_path() -> Path:
    """``measured/sd/corpus.csv`` as bundled (the data package ``simulator._data.measured`` in a wheel)."""
    return measured_dir("sd") / "corpus.csv"


def read_corpus(path: str | Path | None = None) -> tuple[SDRow, ...]:
    """Read and check a corpus CSV (default: the bundled one). Any problem raises one :class:`ConfigError` line
    naming the file, the row id, the field, the value and the fix."""
    p = Path(path) if path is not None else bundled_corpus_path()
    where = str(p)
    rows: list[SDRow] = []
    seen: dict[str, int] = {}
    for line, raw in read_strict_csv(p, COLUMNS, "measured/sd/README.md"):
        row = _row(where, line, raw)
        if row.id in seen:
            raise ConfigError(f"{where} row {row.id!r}", "id",
                              f"duplicates the id of line {seen[row.id]} (value {row.id!r})",
                              "give every row a unique id")
        seen[row.id] = line
        rows.append(row)
    _check_sources(where, rows)
    return tuple(rows)


def _check_sources(where: str, rows: list[SDRow]) -> None:
    """Labels that hold for a whole source: a contradicting source is set apart on every row; one source, one author."""
    for key, group in by_source(rows).items():
        marked = [r for r in group if "contradicting-source" in r.set_apart]
        if marked and len(marked) < len(group):
            r = next(r for r in group if "contradicting-source" not in r.set_apart)
            raise ConfigError(f"{where} row {r.id!r}", "set_apart",
                              f"lacks 'contradicting-source' while row {marked[0].id!r} of source {key!r} has it "
                              f"(value {';'.join(r.set_apart)!r})",
                              "a source whose numbers contradict each other is set apart on every row")
        authors = sorted({r.author for r in group})
        if len(authors) > 1:
            r = next(r for r in group if r.author != group[0].author)
            raise ConfigError(f"{where} row {r.id!r}", "author",
                              f"value {r.author!r} differs from {group[0].author!r} of the same source {key!r}",
                              "give every row of a source the author who measured it (one source, one author)")


def _row(where: str, line: int, raw: dict[str, str]) -> SDRow:
    rid = raw["id"]
    loc = f"{where} row {rid!r}" if rid else f"{where} line {line}"
    for c in REQUIRED:
        if not raw[c]:
            raise ConfigError(loc, c, "is empty (value '')", "every row states " + ", ".join(REQUIRED))
    for c, allowed in ENUMS.items():
        if raw[c] and raw[c] not in allowed:
            raise ConfigError(loc, c, f"value {raw[c]!r} is not one of {', '.join(allowed)}",
                              f"use one of {', '.join(allowed)}")
    values: dict[str, object] = dict(raw)
    for c in INTS:
        values[c] = cell_number(loc, c, raw[c], integer=True)
    for c in FLOATS:
        values[c] = cell_number(loc, c, raw[c], integer=False)
    for c in NON_NEGATIVE:
        values[c] = cell_number(loc, c, raw[c], integer=False, allow_zero=True)
    values["set_apart"] = _codes(loc, raw["set_apart"])
    tp, ep, dp, n = values["tp"], values["ep"], values["dp"], values["gpu_count"]
    for c, v in (("tp", tp), ("ep", ep), ("dp", dp)):
        if v is not None and v > n:
            raise ConfigError(loc, c, f"value {v} exceeds gpu_count {n}", f"give a {c} <= gpu_count")
    if values["accept_length"] is not None and values["accept_length"] < 1:
        raise ConfigError(loc, "accept_length", f"value {raw['accept_length']!r} is below 1",
                          "give the mean accepted tokens per round, bonus token included (>= 1)")
    longest = values["draft_steps"] if values["draft_steps"] is not None else values["draft_tokens"]
    if values["accept_length"] is not None and longest is not None and values["accept_length"] > longest + 1:
        what = "draft_steps" if values["draft_steps"] is not None else "draft_tokens"
        raise ConfigError(loc, "accept_length", f"value {raw['accept_length']!r} exceeds {what} + 1 = {longest + 1} "
                          "(a round accepts at most one token per draft step, plus the bonus token)",
                          f"check accept_length and {what} (AL counts the bonus token; steps are the tree's depth)")
    if raw["target_catalog"] and raw["target_catalog"] not in bundled_files("models"):
        raise ConfigError(loc, "target_catalog", f"value {raw['target_catalog']!r} is not a bundled model",
                          "give a name of models/*.yaml (`python -m simulator list models`) or leave it empty")
    row = SDRow(**{f.name: values[f.name] for f in fields(SDRow)})
    _check_values(loc, row)
    return row


def _codes(loc: str, text: str) -> tuple[str, ...]:
    codes = tuple(c.strip() for c in text.split(";")) if text.strip() else ()
    bad = [c for c in codes if c not in SET_APART]
    if bad or len(set(codes)) != len(codes):
        raise ConfigError(loc, "set_apart", f"value {text!r} is not a ';'-separated list of distinct codes",
                          f"use codes among {', '.join(SET_APART)} (empty: fitted and in the targets)")
    return codes


def cell_number(loc: str, col: str, text: str, *, integer: bool, allow_zero: bool = False):
    """A CSV cell as a number (None when empty): positive (or non-negative with ``allow_zero``), finite, whole where
    ``integer``; anything else is one :class:`ConfigError` line naming ``loc``, the column and the value."""
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        raise ConfigError(loc, col, f"value {text!r} is not a number", "give a plain decimal number") from None
    bound = "non-negative" if allow_zero else "positive"
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise ConfigError(loc, col, f"value {text!r} is not {bound}",
                          f"give a {bound} number, or leave the cell empty when the source does not state it")
    if integer:
        if v != int(v):
            raise ConfigError(loc, col, f"value {text!r} is not a whole number", "give a whole number")
        return int(v)
    return v


def _check_values(loc: str, row: SDRow) -> None:
    _check_numbers(loc, row)
    _check_apart(loc, row)


def _check_apart(loc: str, row: SDRow) -> None:
    """A ``set_apart`` label must say what the row shows, and the row must carry the labels its numbers imply."""
    codes, shown = row.set_apart, ";".join(row.set_apart)
    if row.accept_length is None and "no-al" not in codes:
        raise ConfigError(loc, "set_apart", f"lacks 'no-al' for a row without accept_length (value {shown!r})",
                          "add 'no-al': a row without an AL measured at this point is kept but not fitted")
    if row.accept_length is not None and "no-al" in codes:
        raise ConfigError(loc, "set_apart", f"says 'no-al' but accept_length is {row.accept_length:g}",
                          "remove 'no-al', or leave accept_length empty when the source does not state it")
    if row.isl is not None and "no-isl" in codes:
        raise ConfigError(loc, "set_apart", f"says 'no-isl' but isl is {row.isl}",
                          "remove 'no-isl', or leave isl empty when the source does not state it")
    above = row.accept_length is not None and measured_speedup(row) > row.accept_length
    if above != ("speedup-above-al" in codes):
        raise ConfigError(loc, "set_apart", f"value {shown!r} " + (
            f"lacks 'speedup-above-al' for a measured speedup {measured_speedup(row):.3g} above its AL "
            f"{row.accept_length:g}" if above else "says 'speedup-above-al' but the speedup is not above the AL"),
            "label a row whose stated speedup exceeds its AL 'speedup-above-al' (and only such a row)")


def _check_numbers(loc: str, row: SDRow) -> None:
    have = (row.baseline_value is not None, row.sd_value is not None)
    if row.metric == "speedup_only":
        if any(have):
            raise ConfigError(loc, "metric", "is 'speedup_only' but the row states baseline/sd values",
                              "name the metric the values measure (output_throughput, tpot, latency, step_time)")
        if row.speedup is None:
            raise ConfigError(loc, "speedup", "is empty (value '') for a speedup_only row",
                              "give the speedup the source states")
        return
    if have[0] != have[1]:
        missing = "sd_value" if have[0] else "baseline_value"
        raise ConfigError(loc, missing, "is empty (value '') while its pair is given",
                          "give both baseline_value and sd_value, or only speedup with metric speedup_only")
    if not any(have):
        if row.speedup is None:
            raise ConfigError(loc, "speedup", "is empty (value '') and so are baseline_value and sd_value",
                              "give both values, or the stated speedup")
        return
    if not row.unit:
        raise ConfigError(loc, "unit", "is empty (value '') while baseline/sd values are given",
                          "give the values' unit (tok/s, ms, s)")
    allowed = METRIC_UNITS.get(row.metric, ())
    if allowed and row.unit.split()[0] not in allowed:
        kind = "a time" if row.metric != "output_throughput" else "a throughput"
        raise ConfigError(loc, "unit", f"value {row.unit!r} is not {kind}, which metric {row.metric!r} measures",
                          f"give the values in {' or '.join(allowed[:2])}, or name the metric the values measure "
                          f"({'output_throughput' if kind == 'a time' else 'tpot, latency, runtime or step_time'})")
    ratio = row.ratio
    if row.speedup is not None and abs(row.speedup / ratio - 1.0) > SPEEDUP_TOLERANCE:
        how = "sd/baseline" if row.metric in THROUGHPUT_METRICS else "baseline/sd"
        raise ConfigError(loc, "speedup", f"value {row.speedup:g} disagrees with {how} = {ratio:.4g} by more "
                                          f"than {SPEEDUP_TOLERANCE:.0%}",
                          f"fix the values or the speedup ({row.metric}: speedup = {how})")
