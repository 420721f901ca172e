"""Reading an engine file (``engines/<name>.yaml``, schema ``engine/v1``; docs/MODEL.md §3.10) into the
:class:`~simulator.specs.engine.EngineSpec` it declares: the sections once, then ``releases:`` oldest first, each a
deep-merged delta (:func:`merge`). Every problem is one line naming the field, the value and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from ..params import Options, Param
from .dtypes import FORMATS
from .engine import (
    DRAFTER_KINDS,
    GRAPH_UNITS,
    IN_PROJ,
    PREFILL_MODES,
    SCHEMA,
    SECTIONS,
    TBO_AUTO,
    TOP_KEYS,
    VENDORS,
    Band,
    EngineRelease,
    EngineSpec,
    Execution,
    GraphCapture,
    KernelChoice,
    KernelRule,
    OpLayout,
    RoundParams,
    Schedule,
    Serving,
    SharedExperts,
    _numbers,
)
from .kernels import ARCHITECTURES, BAND_ENDS, ROUND_KEYS
from .schema import Provenance, Reader

__all__ = ["merge", "read_engine"]


def merge(base: Mapping, delta: Mapping) -> dict:
    """``base`` with ``delta`` laid over it: mappings merged key by key, any other value replaced."""
    out = dict(base)
    for k, v in delta.items():
        out[k] = merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def read_engine(obj: object, where: str) -> EngineSpec:
    """An engine file (module docstring) checked strictly: unknown keys, missing fields, units and sources."""
    r = Reader(where)
    top = r.mapping(obj, "", TOP_KEYS, ("schema", "name", "vendors", "sources", "releases", "execution", "serving",
                                        "schedule", "ops", "round"))
    r.string(top, "schema", "", options=(SCHEMA,))
    r.read_sources(top)
    name = r.string(top, "name", "")
    v = r.mapping(top["vendors"], "vendors", ("names", "source"), ("names", "source"))
    vendors = _names(r, v, "names", "vendors", VENDORS)
    r.source(v, "vendors")
    cal = r.mapping(top.get("calibration", {}), "calibration", ("framework", "kernel_block", "kernels"))
    calibration = _calibration(r, cal, name)
    rel = top["releases"]
    if not isinstance(rel, list) or not rel:
        raise r.fail("releases", f"must be a non-empty list of releases, got {rel!r}",
                     "write releases: [{version: '1.0', since: '...'}], oldest first")
    state = {s: top[s] for s in SECTIONS if s in top}
    releases, seen = [], set()
    for i, item in enumerate(rel):
        p = f"releases[{i}]"
        m = r.mapping(item, p, ("version", "since", *SECTIONS), ("version", "since"))
        version = str(m["version"]) if isinstance(m["version"], (str, int, float)) else m["version"]
        if not isinstance(version, str) or not re.fullmatch(r"\d+(\.\d+)*", version):
            raise r.fail(f"{p}.version", f"is {m['version']!r}, must be a release number such as '0.14'",
                         "quote it: version: '0.14'")
        if version in seen or (releases and _numbers(version) <= _numbers(releases[-1].version)):
            raise r.fail(f"{p}.version", f"is {version!r}, not above the release before it",
                         "list releases oldest first, each once")
        seen.add(version)
        state = merge(state, {s: m[s] for s in SECTIONS if s in m})
        releases.append(_release(r, state, name, top, vendors, calibration, version, r.string(m, "since", p), where))
    return EngineSpec(name=name, display_name=r.string(top, "display_name", "", default=name),
                      aliases=r.names(top, "aliases"), description=r.string(top, "description", "", default=""),
                      vendors=vendors, releases=tuple(releases), sources=MappingProxyType(dict(r.sources)),
                      provenance=MappingProxyType(dict(r.provenance)), origin=where)


def _names(r: Reader, obj: Mapping, key: str, path: str, options) -> tuple[str, ...]:
    items = obj.get(key, [])
    p = r.join(path, key)
    if not isinstance(items, list):
        raise r.fail(p, f"must be a list, got {items!r}", f"write e.g. [{options[0]}]")
    for i, x in enumerate(items):
        r._check(f"{p}[{i}]", x, Param(Options(tuple(options))))
    return tuple(items)


def _calibration(r: Reader, cal: Mapping, name: str) -> Mapping[str, str]:
    out = {"framework": r.string(cal, "framework", "calibration", default=""),
           "kernel_block": r.string(cal, "kernel_block", "calibration", default=name)}
    for op, k in r.mapping(cal.get("kernels", {}), "calibration.kernels", ("moe", "attention")).items():
        p = f"calibration.kernels.{op}"
        km = r.mapping(k, p, ("kernel", "source", "reason", "note"), ("kernel", "source"))
        r.source(km, p)
        out[op] = r.string(km, "kernel", p)
    return MappingProxyType(out)


def _onoff(r: Reader, obj: Mapping, key: str, path: str) -> str:
    v = obj.get(key)
    if not isinstance(v, bool):
        raise r.fail(r.join(path, key), f"must be true or false, got {v!r}", "write true (overlapped) or false")
    return "on" if v else "off"


def _release(r: Reader, s: dict, name: str, top: Mapping, vendors, calibration, version: str, since: str,
             where: str) -> EngineRelease:
    for sec in ("execution", "serving", "schedule", "ops", "round"):
        if sec not in s:
            raise r.fail(sec, "is missing", f"add the {sec} section (see engines/sglang.yaml)")
    e = r.mapping(s["execution"], "execution", ("decode_overlap", "sd_overlap", "sd_overlap_off", "sd_overlap_hybrid",
                                                "sd_overlap_tree", "syncs", "kv_kernels", "chain_builds_tree",
                                                "source", "reason", "note"),
                  ("decode_overlap", "sd_overlap", "syncs", "kv_kernels", "chain_builds_tree", "source"))
    sy = r.mapping(e["syncs"], "execution.syncs", ("sd", "sd_overlap", "decode"), ("sd", "sd_overlap", "decode"))
    execution = Execution(_onoff(r, e, "decode_overlap", "execution"), _onoff(r, e, "sd_overlap", "execution"),
                          _names(r, e, "sd_overlap_off", "execution", DRAFTER_KINDS),
                          r.boolean(e, "sd_overlap_hybrid", "execution", default=False),
                          r.boolean(e, "sd_overlap_tree", "execution", default=True),
                          *(r.integer(sy, k, "execution.syncs", low=0, high=64) for k in ("sd", "sd_overlap",
                                                                                           "decode")),
                          r.integer(e, "kv_kernels", "execution", low=0, high=64),
                          r.boolean(e, "chain_builds_tree", "execution"), r.source(e, "execution"))
    sv = r.mapping(s["serving"], "serving", ("prefill", "sd_running_cap", "source", "reason", "note"),
                   ("prefill", "source"))
    cap = sv.get("sd_running_cap")
    serving = Serving(r.string(sv, "prefill", "serving", options=PREFILL_MODES),
                      None if cap is None else float(r.integer(sv, "sd_running_cap", "serving", low=1)),
                      r.source(sv, "serving"))
    graphs = read_graphs(r, s["graphs"], "graphs") if "graphs" in s else None
    sc = r.mapping(s["schedule"], "schedule", ("two_batch_overlap", "shared_experts"), ("two_batch_overlap",))
    tbo = r.mapping(sc["two_batch_overlap"], "schedule.two_batch_overlap", ("auto", "source", "reason", "note"),
                    ("auto", "source"))
    schedule = Schedule(r.string(tbo, "auto", "schedule.two_batch_overlap", options=TBO_AUTO),
                        r.source(tbo, "schedule.two_batch_overlap"), _shared(r, sc.get("shared_experts")))
    ops = r.mapping(s["ops"], "ops", ("linear_attention_in_proj",), ("linear_attention_in_proj",))
    ip = r.mapping(ops["linear_attention_in_proj"], "ops.linear_attention_in_proj",
                   ("layout", "source", "reason", "note"), ("layout", "source"))
    op_layout = OpLayout(r.string(ip, "layout", "ops.linear_attention_in_proj", options=IN_PROJ),
                         r.source(ip, "ops.linear_attention_in_proj"))
    kernels = _kernel_choice(r, s.get("kernels", {}))
    return EngineRelease(name, r.string(top, "display_name", "", default=name), version, since, vendors,
                         calibration["kernel_block"], calibration, execution, serving, graphs, schedule, op_layout,
                         kernels, _round(r, s["round"]), where)


def _shared(r: Reader, obj: object) -> SharedExperts:
    """``shared_experts: {concurrent: true, max_tokens: N, graph_captured: bool, fused_routed_experts: [...],
    source: KEY}`` (absent: in series)."""
    if obj is None:
        return SharedExperts()
    p = "schedule.shared_experts"
    m = r.mapping(obj, p, ("concurrent", "max_tokens", "graph_captured", "fused_routed_experts", "source", "reason",
                           "note"), ("concurrent", "source"))
    fused = m.get("fused_routed_experts", [])
    if not isinstance(fused, list) or not all(isinstance(x, int) and x > 0 for x in fused):
        raise r.fail(f"{p}.fused_routed_experts", f"must be a list of expert counts, got {fused!r}", "write [256]")
    cap = r.integer(m, "max_tokens", p, low=1, default=None)
    return SharedExperts(r.boolean(m, "concurrent", p), None if cap is None else float(cap),
                         r.boolean(m, "graph_captured", p, default=False), tuple(fused), r.source(m, p))


def _kernel_choice(r: Reader, obj: object) -> KernelChoice:
    """``kernels: {moe_backend: {default: NAME, source: KEY, backends: {NAME: [{formats: [...], architectures:
    [...], source: KEY}, ...]}}}``: the engine's MoE backend setting, its default and what each value runs."""
    km = r.mapping(obj, "kernels", ("moe_backend",))
    if "moe_backend" not in km:
        return KernelChoice()
    mb = r.mapping(km["moe_backend"], "kernels.moe_backend", ("default", "backends", "source", "reason", "note"),
                   ("default", "backends", "source"))
    bp = "kernels.moe_backend.backends"
    backends = {}
    for name, rules in r.mapping(mb["backends"], bp, list(mb["backends"]) if isinstance(mb["backends"], Mapping)
                                 else ()).items():
        if not isinstance(rules, list):
            raise r.fail(f"{bp}.{name}", f"must be a list of rules, got {rules!r}",
                         "write [{formats: [fp8_block], architectures: [blackwell], source: KEY}] or []")
        out = []
        for i, rule in enumerate(rules):
            p = f"{bp}.{name}[{i}]"
            m = r.mapping(rule, p, ("formats", "architectures", "source", "reason", "note"),
                          ("formats", "architectures", "source"))
            out.append(KernelRule(_names(r, m, "formats", p, FORMATS),
                                  _names(r, m, "architectures", p, ARCHITECTURES), r.source(m, p)))
        backends[str(name)] = tuple(out)
    default = r.string(mb, "default", "kernels.moe_backend", options=tuple(backends))
    return KernelChoice(default, MappingProxyType(backends), r.source(mb, "kernels.moe_backend"))


def _round(r: Reader, obj: object) -> RoundParams:
    """``round: {NAME: {low, central, high, unit, source}}`` for every :data:`ROUND_KEYS` name."""
    m = r.mapping(obj, "round", ROUND_KEYS, ROUND_KEYS)
    bands = {}
    for n, dim in ROUND_KEYS.items():
        p = f"round.{n}"
        b = r.mapping(m[n], p, (*BAND_ENDS, "unit", "source", "reason", "note"), (*BAND_ENDS, "unit", "source"))
        q = {"unit": b["unit"], "source": b["source"], **({"reason": b["reason"]} if "reason" in b else {})}
        ends = [r.quantity({e: {"value": b[e], **q}}, e, p, dim) for e in BAND_ENDS]
        if not ends[0] <= ends[1] <= ends[2]:
            raise r.fail(p, f"has low {b['low']}, central {b['central']}, high {b['high']}",
                         "order them low <= central <= high")
        src = b["source"]
        text = r.sources.get(src, f"assumed: {b.get('reason', '')}")
        if "note" in b:
            text = f"{b['note']}; {text}"
        bands[n] = Band(*ends, text)
    return RoundParams(**bands)


def read_graphs(r: Reader, obj: object, path: str) -> GraphCapture:
    """``graphs: {sizes: [1, 2, 4, [8, 256, 8], ...], unit: tokens|requests, source: KEY (or assumed + reason)}``;
    a ``[start, stop, step]`` item is the inclusive range start, start + step, ..., stop. Optional ``sd_sizes``: the
    list a server launched with speculative decoding captures for its round's passes (SGLang's spec list)."""
    g = r.mapping(obj, path, ("sizes", "sd_sizes", "unit", "round_to_pass", "per_batch_table", "source", "note",
                              "reason"), ("sizes", "unit", "source"))
    unit = r.string(g, "unit", path, options=GRAPH_UNITS)
    source = r.source(g, path)
    sizes = _sizes(r, g["sizes"], r.join(path, "sizes"))
    sd = _sizes(r, g["sd_sizes"], r.join(path, "sd_sizes")) if "sd_sizes" in g else ()
    rounds = r.boolean(g, "round_to_pass", path, default=False)
    if rounds and unit != "tokens":
        raise r.fail(r.join(path, "round_to_pass"), f"rounds token counts, but unit is {unit!r}",
                     "remove round_to_pass or give unit: tokens")
    table, table_source = None, ""
    if "per_batch_table" in g:
        tp = r.join(path, "per_batch_table")
        t = r.mapping(g["per_batch_table"], tp, ("round_to_pass", "source", "note", "reason"),
                      ("round_to_pass", "source"))
        table = r.boolean(t, "round_to_pass", tp)
        if table and unit != "tokens":
            raise r.fail(r.join(tp, "round_to_pass"), f"rounds token counts, but unit is {unit!r}",
                         "remove round_to_pass or give unit: tokens")
        table_source = r.source(t, tp)
    note = g.get("note", "") if isinstance(g.get("note", ""), str) else ""
    if source == "assumed":
        note = (note + " " if note else "") + f"assumed: {g['reason']}"
    r.provenance[path] = Provenance(path, float(sizes[-1]), "count", float(sizes[-1]), "count", source,
                                    r.sources.get(source, "assumed"), note)
    return GraphCapture(sizes, unit, source, sd, rounds, table, table_source)


def _sizes(r: Reader, raw: object, sp: str) -> tuple[int, ...]:
    """A capture list: sizes >= 1 and inclusive ``[start, stop, step]`` ranges, increasing."""
    if not isinstance(raw, list) or not raw:
        raise r.fail(sp, "must be a non-empty list of sizes", "write e.g. [1, 2, 4, [8, 256, 8]]")
    sizes: list[int] = []
    for i, item in enumerate(raw):
        ok_int = isinstance(item, int) and not isinstance(item, bool) and item >= 1
        ok_rng = (isinstance(item, list) and len(item) == 3 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                    and x >= 1 for x in item) and item[0] <= item[1])
        if not (ok_int or ok_rng):
            raise r.fail(f"{sp}[{i}]", f"is {item!r}, must be a size >= 1 or an inclusive range [start, stop, step]",
                         "write e.g. 12 or [16, 256, 8]")
        sizes += [item] if ok_int else list(range(item[0], item[1] + 1, item[2]))
    if any(b <= a for a, b in zip(sizes, sizes[1:], strict=False)):
        raise r.fail(sp, f"must increase; got {sizes[:12]}...", "list the sizes in increasing order, each once")
    return tuple(sizes)
