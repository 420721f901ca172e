"""`list` and `show`: the bundled catalog and one profile or spec with units, sources and derived quantities."""

from __future__ import annotations

import argparse

from ..render.textable import fill
from ..specs import catalog, derived
from ..specs.bundled import KINDS
from ._common import add_json_flag, print_json
from ._table import WIDTH, Col, add_wide_flag, render


def register(sub) -> None:
    p = sub.add_parser(
        "list", help="list bundled hardware profiles, models, engines, routing profiles and experiments",
        description="List the bundled hardware profiles, model specs, engines (what each executes, per release), "
                    "named routing profiles and experiments.",
        epilog="example: python -m simulator list models --json",
    )
    p.add_argument("kind", nargs="?", choices=("all", *KINDS), default="all")
    p.add_argument("--markdown", action="store_true",
                   help="engines only: the execution modes of every release as the Markdown table docs/MODEL.md §4.6 "
                        "embeds")
    add_json_flag(p)
    add_wide_flag(p)
    p.set_defaults(func=cmd_list)

    s = sub.add_parser(
        "show", help="show one hardware profile, model or engine with units, sources and derived quantities",
        description=("Show every field of a hardware profile, model spec or engine with its unit and source; for "
                     "models also the derived quantities (parameters, weight bytes per dtype, KV bytes per token); "
                     "for engines what each release executes. NAME is a bundled name (see `list`) or a path to a "
                     "YAML file."),
        epilog="examples: python -m simulator show hardware h100-sxm\n"
               "          python -m simulator show model qwen3-235b-a22b --json\n"
               "          python -m simulator show engine sglang",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("kind", choices=("hardware", "model", "engine"))
    s.add_argument("name", metavar="NAME|PATH")
    add_json_flag(s)
    add_wide_flag(s)
    s.set_defaults(func=cmd_show)


def _hw_row(h) -> dict:
    return {
        "name": h.name, "display_name": h.display_name, "vendor": h.vendor, "architecture": h.architecture,
        "what_if": h.what_if, "grounding": h.grounding, "hbm_capacity_bytes": h.hbm_capacity,
        "hbm_bandwidth_Bps": h.hbm_bandwidth,
        "l2_bytes": h.l2_size, "peak_flops": dict(h.peak_flops), "origin": h.origin,
    }


def _model_row(m) -> dict:
    c = derived.param_counts(m)
    f = m.ffn
    return {
        "name": m.name, "display_name": m.display_name, "role": m.role, "layers": m.layers,
        "experts": f.experts, "top_k": f.top_k, "shared_experts": f.shared_experts,
        "attention": m.attention.kind, "native_dtype": m.native_dtype,
        "total_params": float(c.total), "active_params": float(c.active),
        "has_overlap_profile": m.overlap is not None, "origin": m.origin,
    }


def _release_row(r) -> dict:
    ex, sv, g = r.execution, r.serving, r.graphs
    return {"version": r.version, "since": r.since, "decode_overlap": ex.decode_overlap, "sd_overlap": ex.sd_overlap,
            "sd_overlap_off": list(ex.sd_overlap_off), "sd_overlap_tree": ex.sd_overlap_tree,
            "sd_overlap_hybrid": ex.sd_overlap_hybrid, "syncs_sd": ex.syncs_sd, "syncs_sd_overlap": ex.syncs_sd_overlap,
            "syncs_decode": ex.syncs_decode, "kv_kernels": ex.kv_kernels, "chain_builds_tree": ex.chain_builds_tree,
            "execution_source": ex.source, "prefill": sv.prefill, "sd_running_cap": sv.sd_running_cap,
            "serving_source": sv.source, "graphs": f"{g.cap} {g.unit}" if g else "none",
            "tbo_auto": r.schedule.tbo_auto, "linear_attention_in_proj": r.ops.linear_attention_in_proj,
            "moe_backend": r.kernels.default,
            "moe_backends": {n: [{"formats": list(k.formats), "architectures": list(k.architectures),
                                  "source": k.source} for k in rules] for n, rules in r.kernels.backends.items()},
            "kernel_block": r.kernel_block,
            "round": {n: {"low": b.low, "central": b.central, "high": b.high, "source": b.source}
                      for n, b in vars(r.round).items()}}


def _engine_row(e) -> dict:
    return {"name": e.name, "display_name": e.display_name, "aliases": list(e.aliases), "vendors": list(e.vendors),
            "description": e.description, "releases": [_release_row(r) for r in e.releases], "origin": e.origin}


def _routing_row(r) -> dict:
    return {"name": r.name, "display_name": r.display_name, "experts": r.experts, "top_k": r.top_k,
            "lags": list(r.lags), "popularity": r.popularity, "source": r.source, "citation": r.citation,
            "note": r.note, "origin": r.origin}


def cmd_list(args) -> int:
    if args.markdown:
        if args.kind != "engines":
            from ..errors import ParameterError

            raise ParameterError(f"--markdown lists engines only; got kind {args.kind!r}: run `list engines "
                                 "--markdown`", owner="list", param="markdown")
        from ..render.engine_table import modes_markdown

        print(modes_markdown(catalog.list_engines()), end="")
        return 0
    out: dict[str, list] = {}
    if args.kind in ("all", "hardware"):
        out["hardware"] = [_hw_row(h) for h in catalog.list_hardware()]
    if args.kind in ("all", "models"):
        out["models"] = [_model_row(m) for m in catalog.list_models()]
    if args.kind in ("all", "engines"):
        out["engines"] = [_engine_row(e) for e in catalog.list_engines()]
    if args.kind in ("all", "routing"):
        out["routing"] = [_routing_row(r) for r in catalog.list_routing_profiles()]
    if args.kind in ("all", "experiments"):
        out["experiments"] = [{"name": n} for n in catalog.bundled_files("experiments")]
    if args.json:
        print_json(out)
        return 0
    if "hardware" in out:
        print(f"hardware ({len(out['hardware'])})")
        print(f"  {'name':<12} {'HBM GB':>7} {'TB/s':>6} {'L2 MB':>6} {'bf16 TF':>8} {'fp8 TF':>7} {'fp4 TF':>7}  "
              "grounding")
        for h in catalog.list_hardware():
            pk = h.peak_flops
            f = [f"{pk[d] / 1e12:.0f}" if d in pk else "-" for d in ("bf16", "fp8", "fp4")]
            kind = h.grounding
            print(f"  {h.name:<12} {h.hbm_capacity / 1e9:7.0f} {h.hbm_bandwidth / 1e12:6.2f} "
                  f"{h.l2_size / 1e6:6.0f} {f[0]:>8} {f[1]:>7} {f[2]:>7}  {kind}")
    if "models" in out:
        print(f"models ({len(out['models'])})")
        print(f"  {'name':<24} {'role':<8} {'total B':>8} {'active B':>8} {'E':>4} {'k':>3} {'S':>2}  attn  dtype")
        for r in out["models"]:
            print(f"  {r['name']:<24} {r['role']:<8} {r['total_params'] / 1e9:8.1f} {r['active_params'] / 1e9:8.2f}"
                  f" {r['experts']:>4} {r['top_k']:>3} {r['shared_experts']:>2}  {r['attention']:<4}  "
                  f"{r['native_dtype']}")
    if "engines" in out:
        print(f"engines ({len(out['engines'])}; the newest release is the default)")
        print(f"  {'name':<8} {'releases':<12} {'vendors':<12} {'overlap decode/SD':<18} {'prefill':<9} "
              f"{'SD cap':>6}  {'graphs':<14} TBO auto")
        for r in out["engines"]:
            d = r["releases"][-1]
            print(f"  {r['name']:<8} {', '.join(x['version'] for x in r['releases']):<12} "
                  f"{', '.join(r['vendors']):<12} {d['decode_overlap'] + '/' + d['sd_overlap']:<18} "
                  f"{d['prefill']:<9} {d['sd_running_cap'] or '-':>6}  {d['graphs']:<14} {d['tbo_auto']}")
    if "routing" in out:
        print(f"routing profiles ({len(out['routing'])})")
        for r in out["routing"]:
            lags = ", ".join(f"{x:g}" for x in r["lags"])
            _say(args.wide)(f"  {r['name']:<24} E={r['experts']} k={r['top_k']}  o(1..{len(r['lags'])}) = {lags}, "
                            f"{r['popularity']}  [{r['source']}] {r['citation']}")
    if "experiments" in out:
        print(f"experiments ({len(out['experiments'])})")
        for r in out["experiments"]:
            print(f"  {r['name']}")
    return 0


def _provenance_rows(obj) -> list[dict]:
    return [{"field": path, **p.as_dict()} for path, p in obj.provenance.items()]


def _say(wide: bool):
    """print, wrapping a line to the table width (continuations indented) unless ``wide``."""
    if wide:
        return print
    return lambda text: print("\n".join(fill(text, WIDTH, " " * (len(text) - len(text.lstrip()) + 4))))


def cmd_show(args) -> int:
    say = _say(args.wide)
    if args.kind == "hardware":
        h = catalog.load_hardware(args.name)
        data = {**_hw_row(h), "description": h.description, "fields": _provenance_rows(h),
                "kernels": _kernels_dict(h), "sources": dict(h.sources)}
        if args.json:
            print_json(data)
            return 0
        say(f"{h.display_name} ({h.name}) — {h.vendor} {h.architecture}, grounding {h.grounding}")
        if h.basis:
            say(f"  basis: {h.basis}")
        if h.description:
            say(f"  {h.description}")
        _print_fields(h, args.wide)
        k = h.kernels
        say(f"  kernels: global efficiency {k.global_efficiency:.2f}; fixed costs "
            + ", ".join(f"{n}/{v} {c.fixed * 1e6:.1f} us" for n, vs in k.classes.items() for v, c in vs.items()))
        _print_sources(h, args.wide)
        return 0
    if args.kind == "engine":
        return _show_engine(args, say)
    from ..overlap.feasible import check_model_statistics

    m = catalog.load_model(args.name)
    check_model_statistics(m)
    d = derived.derived_summary(m)
    data = {**_model_row(m), "description": m.description, "architecture": _model_fields(m), "derived": d,
            "sources": dict(m.sources), "fields": _provenance_rows(m)}
    if args.json:
        print_json(data)
        return 0
    say(f"{m.display_name} ({m.name}) — {m.role}")
    if m.description:
        say(f"  {m.description}")
    for sec, fields in _model_fields(m).items():
        if fields is None:
            continue
        items = ", ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, 0, False, "", ()))
        say(f"  {sec}: {items}")
    say(f"  derived: total {d['total_params'] / 1e9:.2f} B params, active {d['active_params'] / 1e9:.2f} B")
    if "official" in d:
        o = d["official"]
        say(f"  official: total {o['total_params'] / 1e9:.1f} B ({o['total_error']:+.1%}), "
              f"active {o['active_params'] / 1e9:.1f} B ({o['active_error']:+.1%})")
    wb = ", ".join(f"{k} {v / 1e9:.1f} GB" for k, v in d["weight_bytes"].items())
    say(f"  weight bytes: {wb}")
    if "expert_bytes" in d:
        say("  bytes per expert: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in d["expert_bytes"].items()))
    say("  KV bytes per token: " + ", ".join(f"{k} {v / 1e3:.1f} kB" for k, v in d["kv_bytes_per_token"].items()))
    _print_fields(m, args.wide)
    _print_sources(m, args.wide)
    return 0


def _show_engine(args, say) -> int:
    e = catalog.load_engine(args.name)
    data = {**_engine_row(e), "sources": dict(e.sources), "fields": _provenance_rows(e)}
    if args.json:
        print_json(data)
        return 0
    say(f"{e.display_name} ({e.name}) — runs on {', '.join(e.vendors)}; releases {', '.join(e.versions)} "
        f"(default {e.default.version})")
    if e.description:
        say(f"  {e.description}")
    for r in data["releases"]:
        say(f"  release {r['version']}: {r['since']}")
        say(f"    execution [{r['execution_source']}]: overlap decode {r['decode_overlap']}, SD rounds "
            f"{r['sd_overlap']}" + (f" (off with {', '.join(r['sd_overlap_off'])})" if r['sd_overlap_off'] else "")
            + f"; blocking syncs per round {r['syncs_sd']} (overlapped {r['syncs_sd_overlap']}), per decode step "
            f"{r['syncs_decode']}; KV kernels per round {r['kv_kernels']}; chains build a tree: "
            f"{'yes' if r['chain_builds_tree'] else 'no'}")
        say(f"    serving [{r['serving_source']}]: prefill {r['prefill']}, running requests under SD "
            f"{r['sd_running_cap'] or 'not capped'}; CUDA graphs up to {r['graphs']}; two-batch overlap auto: "
            f"{r['tbo_auto']}; gated-delta-net input projections {r['linear_attention_in_proj']}; kernels: the "
            f"profile's {r['kernel_block']} block; MoE backend {r['moe_backend']} (of " + ", ".join(
                n + (" [alternative kernel for " + "; ".join(f"{', '.join(k['formats'])} on "
                                                              f"{', '.join(k['architectures'])}" for k in rules) + "]"
                     if rules else "") for n, rules in r["moe_backends"].items()) + ")")
        say("    round host time and kernels (low / central / high): " + "; ".join(
            f"{n} {b['low']:.3g}/{b['central']:.3g}/{b['high']:.3g}" for n, b in r["round"].items()))
    _print_fields(e, args.wide)
    _print_sources(e, args.wide)
    return 0


def _model_fields(m) -> dict:
    from dataclasses import asdict

    a = asdict(m.attention)
    return {
        "architecture": {"layers": m.layers, "hidden_size": m.hidden_size, "vocab_size": m.vocab_size,
                         "tied_embeddings": m.tied_embeddings, "native_dtype": m.native_dtype,
                         "mtp_layers": m.mtp_layers},
        "attention": {k: (list(v) if isinstance(v, tuple) else v) for k, v in a.items()},
        "ffn": asdict(m.ffn),
        "routing_overlap": asdict(m.overlap) if m.overlap else None,
    }


def _kernels_dict(h) -> dict:
    k = h.kernels
    classes = {}
    for name, variants in k.classes.items():
        classes[name] = {v: {"fixed_us": c.fixed * 1e6, "params": dict(c.params),
                             "memory": c.memory.as_dict() if c.memory else None,
                             "compute": c.compute.as_dict() if c.compute else None}
                         for v, c in variants.items()}
    return {"global_efficiency": k.global_efficiency, "classes": classes,
            "collectives": {n: {"latency_us": c.latency * 1e6, "latency_per_gpu_us": c.latency_per_gpu * 1e6,
                                "efficiency": c.efficiency,
                                "large_latency_us": None if c.large_latency is None else c.large_latency * 1e6,
                                "large_efficiency": c.large_efficiency}
                            for n, c in k.collectives.items()},
            "step_us": {n: v * 1e6 for n, v in k.step.items()},
            "derived_from": None if not h.what_if else "see docs/MODEL.md, What-if profiles",
            "grounding": h.grounding, "basis": h.basis}


def _print_fields(obj, wide: bool = False) -> None:
    """The provenance table grouped by section (the path without its last part), notes wrapped."""
    if not obj.provenance:
        return
    print("  fields (value as given, unit, source; grouped by section):")
    groups: dict[str, list] = {}
    for path, p in obj.provenance.items():
        sec, _, name = path.rpartition(".")
        groups.setdefault(sec, []).append((name, p))
    cols = (Col("field", "<"), Col("value", "<"), Col("source", "<"), Col("note", "<", wrap=True))
    rows = {sec: [[name, f"{p.given:g} {p.unit if p.unit not in ('count', 'fraction') else ''}".strip(),
                   f"[{p.source}]", p.note or ""] for name, p in items] for sec, items in groups.items()}
    pads = [max(len(r[c]) for rs in rows.values() for r in rs) for c in range(3)]  # one width for every group
    for sec, rs in rows.items():
        print(f"    {sec or '(top)'}")
        rs = [[f"{r[c]:<{pads[c]}}" for c in range(3)] + [r[3]] for r in rs]
        print(render(cols, rs, width=WIDTH, wide=wide, indent="      ", header=False))


def _print_sources(obj, wide: bool = False) -> None:
    print("  sources:")
    for key, text in obj.sources.items():
        line = f"    [{key}] {text}"
        print(line if wide else "\n".join(fill(line, WIDTH, "        ")))
