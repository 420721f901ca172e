"""``explain``: walk from the prior model to the refined one, one mechanism at a time, and attribute the gap.

The walk is :data:`simulator.cost.deployment.WALK` (routing → kernel curves → fixed costs → L2). Step 0 is the
``prior`` preset; step i switches the i-th mechanism to its refined setting and keeps the earlier ones. After each
step: T_decode = T(B, 1), T_verify = T(B, γ+1), their ratio both ways, the round time and the speedup. If the walk
does not end exactly at the ``refined`` preset (a mechanism outside WALK), a last step switches the rest.

The walk depends on its order; beside it :mod:`.shapley` gives the order-independent Shapley values of the same
mechanisms (every coalition priced), for T_decode / T_verify and for the speedup, and the prior's range over its
readings (``PRIOR_READINGS``, docs/MODEL.md §3.6).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from ..cost.deployment import PRESETS, PRIOR_READINGS, WALK, Deployment, Mechanisms
from ..errors import ParameterError
from ..pricing import Request, Scenario, fitting_batches, price, resolve_hardware, resolve_models, resolved_line
from ..pricing.resolve import request as make_request
from ..pricing.resolve import scenario_for
from ..render.figures import save
from ..render.textable import WIDTH, Col, render
from ..specdec import StepCache
from ..specdec.tree import tree_label
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .shapley import Shapley, attribute, coalition_mechanisms, coalitions, players


@dataclass(frozen=True)
class WalkStep:
    name: str  # "prior", "+ routing=overlap", ...
    mechanisms: Mechanisms
    t_decode_us: float
    t_verify_us: float
    t_draft_us: float
    t_round_us: float
    verify_decode_ratio: float  # T_verify / T_decode
    decode_verify_ratio: float  # T_decode / T_verify (the study's "verify runs at x% of decode speed")
    unique_experts_decode: float
    unique_experts_verify: float
    accept_length: float
    speedup: float

    def as_dict(self) -> dict:
        d = asdict(self)
        d["mechanisms"] = asdict(self.mechanisms)
        return d


@dataclass(frozen=True)
class Attribution:
    model: str
    hardware: str
    deployment: Deployment
    batch: int
    draft_len: int
    drafter: str
    acceptance: str
    context: int
    steps: tuple[WalkStep, ...]
    shapley: tuple[Shapley, ...] = ()  # decode_verify_ratio, speedup
    prior_range: tuple[tuple[str, float, float], ...] = ()  # (reading, T_decode/T_verify, speedup)
    tree: str = ""  # the draft tree's label when a tree is explained (draft_len = its drafted nodes)
    # the refined model's execution mode and speedup band (docs/MODEL.md §4.6): sd_overlap, decode_overlap, low, high
    engine: tuple = ()

    @property
    def prior(self) -> WalkStep:
        return self.steps[0]

    @property
    def refined(self) -> WalkStep:
        return self.steps[-1]

    def as_dict(self) -> dict:
        """JSON form: ``attribution`` is the Shapley object of T_decode / T_verify, ``attributions`` lists it and
        the speedup's; ``walk_order`` gives each mechanism's marginal switched first and last."""
        skip = ("steps", "shapley", "prior_range")
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        d["deployment"] = {**asdict(self.deployment), "label": self.deployment.label}
        d["steps"] = [s.as_dict() for s in self.steps]
        if self.shapley:
            d["attribution"] = self.shapley[0].as_dict()
            d["attributions"] = [sh.as_dict() for sh in self.shapley]
            d["walk_order"] = {sh.quantity: {p: {"first": sh.first[p], "last": sh.last[p], "shapley": v}
                                             for p, v in sh.contributions.items()} for sh in self.shapley}
        d["prior_range"] = [{"reading": r, "decode_verify_ratio": q, "speedup": sp} for r, q, sp in self.prior_range]
        if self.engine:
            d["engine"] = dict(zip(("sd_overlap", "decode_overlap", "speedup_low", "speedup_high"), self.engine,
                                   strict=True))
        return d


def walk_mechanisms() -> list[tuple[str, Mechanisms]]:
    """(label, mechanisms) for each step of the walk, prior first, refined last."""
    mech = PRESETS["prior"]
    steps = [("prior", mech)]
    for field_name, value in WALK:
        mech = mech.with_(**{field_name: value})
        steps.append((f"+ {field_name}={value}", mech))
    if mech != PRESETS["refined"]:
        steps.append(("+ rest of refined", PRESETS["refined"]))
    return steps


def explain(model: str | ModelSpec, hardware: str | HardwareProfile = "h100-sxm", request: Request | None = None, *,
            batch: int = 1, draft_len: int = 3, **knobs) -> Attribution:
    """Attribute the prior → refined gap at one (batch, draft length) to the mechanisms of WALK.

    ``request`` (:class:`simulator.pricing.Request`): every knob of the scenario (layout, engine, placement,
    drafter, acceptance, context, routing statistics, a draft tree priced instead of the chain, ``draft_len`` then
    being its drafted nodes). Its ``mechanisms`` (name, setting) pairs are forced in every mechanism set priced
    (e.g. ``(("graph_padding", "off"),)``: the engine term is off in every walk step, coalition and prior reading,
    so its Shapley value is 0). Keyword ``knobs`` change the request (:func:`simulator.pricing.request`)."""
    req = make_request(request, **knobs)
    (m,) = resolve_models([model])
    (hw,) = resolve_hardware([hardware])
    return explain_scenario(scenario_for(m, hw, req), batch=batch, draft_len=draft_len, forced=req.mechanisms)


def explain_scenario(sc: Scenario, *, batch: int = 1, draft_len: int = 3,
                     forced: tuple[tuple[str, str], ...] = (), shapley: bool = True) -> Attribution:
    """:func:`explain` of a resolved scenario (its mechanisms are replaced along the walk; ``forced`` (name,
    setting) pairs are kept in every mechanism set priced); ``shapley=False``: the walk only (neither the 2^m
    coalitions nor the prior's readings are priced)."""
    if sc.tree is not None:
        draft_len = len(sc.tree) - 1
    if int(draft_len) < 1:
        raise ParameterError(f"the 'draft_len' parameter of explain must be >= 1 (γ = 0 is plain decoding). "
                             f"Got {draft_len} instead.")
    if int(batch) < 1:
        raise ParameterError(f"the 'batch' parameter of explain must be an integer >= 1. Got {batch} instead.")
    m, hw = sc.model, sc.hardware
    ok, why = fitting_batches(sc, [batch], int(draft_len) + 1)
    if not ok:
        raise ParameterError(f"the 'batch' parameter of explain is {batch}: {why}")
    cache, priced = StepCache(), {}
    forced = tuple(forced)

    def step(label: str, mech: Mechanisms) -> WalkStep:
        own = label[2:].split("=")[0] if label.startswith("+ ") else None  # the field this walk step switches
        changed = [f"{k}={v}" for k, v in forced if k == own and getattr(mech, k) != v]
        if label and changed:  # the walk's step is overridden by a forced setting: the label says so
            label = "+ " + ",".join(changed) + " (forced)"
        mech = mech.with_(**dict(forced))
        if mech not in priced:
            s = sc.edit(mechanisms=mech)
            priced[mech] = price(s, [batch], None if s.tree is not None else [int(draft_len)], cache=cache).result
        r = priced[mech]
        us = 1e6
        tv, td = float(r.t_verify[0, 0]), float(r.t_decode[0])
        return WalkStep(label, mech, td * us, tv * us, float(r.t_draft[0, 0]) * us, float(r.t_round[0, 0]) * us,
                        tv / td, td / tv, float(r.unique_decode[0]), float(r.unique_verify[0, 0]),
                        float(r.accept_length[0]), float(r.speedup[0, 0]))

    steps = tuple(step(label, mech) for label, mech in walk_mechanisms())
    base, target = PRESETS["prior"], PRESETS["refined"]
    names = players(base, target)
    game = {s: step("", coalition_mechanisms(base, target, s)) for s in coalitions(names)} if shapley else {}
    shap = tuple(attribute(q, names, {s: getattr(w, q) for s, w in game.items()})
                 for q in ("decode_verify_ratio", "speedup")) if shapley else ()
    readings = tuple((r, w.decode_verify_ratio, w.speedup)
                     for r, w in ((r, step(r, PRESETS[r])) for r in PRIOR_READINGS)) if shapley else ()
    r = priced[target.with_(**dict(forced))]
    engine = (r.sd_overlap, r.decode_overlap, float(r.speedup_low[0, 0]), float(r.speedup_high[0, 0]))
    return Attribution(m.name, hw.name, sc.deployment, int(batch), int(draft_len), sc.drafter.label,
                       sc.accept.label, int(sc.context), steps, shap, readings,
                       tree_label(sc.tree) if sc.tree is not None else "", engine)


def format_shapley(a: Attribution, *, width: int = WIDTH) -> str:
    """The Shapley values of T_decode / T_verify and of the speedup beside the walk's two extreme orders, and
    the prior's range over its readings."""
    if not a.shapley:
        return ""
    ratio, speed = a.shapley
    cols = (Col("mechanism", "<"), Col("dec/ver Shapley", short="dec/ver φ"), Col("dec/ver first", short="first"),
            Col("dec/ver last", short="last"), Col("speedup Shapley", short="speedup φ"),
            Col("speedup first", short="S first"), Col("speedup last", short="S last"))
    rows = [(p, f"{ratio.contributions[p]:+.3f}", f"{ratio.first[p]:+.3f}", f"{ratio.last[p]:+.3f}",
             f"{speed.contributions[p]:+.3f}", f"{speed.first[p]:+.3f}", f"{speed.last[p]:+.3f}")
            for p in ratio.contributions]
    rows.append(("total", f"{ratio.total:+.3f}", "", "", f"{speed.total:+.3f}", "", ""))
    lo = min(a.prior_range, key=lambda r: r[1])
    hi = max(a.prior_range, key=lambda r: r[1])
    notes = [f"prior range over its readings (docs/MODEL.md §3.6): T_dec/T_ver {lo[1]:.3f} ({lo[0]}) to "
             f"{hi[1]:.3f} ({hi[0]}), speedup " + ", ".join(f"{sp:.3f} ({r})" for r, _, sp in a.prior_range),
             "first/last: the mechanism's change when the walk switches it first or last"]
    return render(cols, rows, title="Shapley attribution (order-independent; sums to the total)", notes=notes,
                  width=width)


def format_attribution(a: Attribution, *, width: int = WIDTH, wide: bool = False) -> str:
    """The walk as a table fitted to ``width`` columns (``wide``: every column), headed by the resolved
    deployment."""
    shape = f"draft {a.tree}" if a.tree else f"draft length {a.draft_len}"
    head = (f"{a.model} on {a.hardware}, batch {a.batch}, {shape}, drafter {a.drafter}, "
            f"acceptance {a.acceptance} (AL {a.steps[0].accept_length:.2f})")
    cols = (Col("step", "<", wrap=True), Col("T_dec us", short="T_dec"), Col("T_ver us", short="T_ver"),
            Col("T_ver/T_dec", short="ver/dec"), Col("T_dec/T_ver", drop=2, short="dec/ver"),
            Col("uniq dec", drop=3, short="U dec"), Col("uniq ver", drop=3, short="U ver"),
            Col("T_round us", drop=1, short="T_round"), Col("speedup", short="S"), Col("d speedup", short="dS"))
    rows = []
    prev = None
    for s in a.steps:
        delta = "" if prev is None else f"{s.speedup - prev:+.3f}"
        rows.append((s.name, f"{s.t_decode_us:.1f}", f"{s.t_verify_us:.1f}", f"{s.verify_decode_ratio:.3f}",
                     f"{s.decode_verify_ratio:.3f}", f"{s.unique_experts_decode:.1f}",
                     f"{s.unique_experts_verify:.1f}", f"{s.t_round_us:.1f}", f"{s.speedup:.3f}", delta))
        prev = s.speedup
    gap = a.refined.speedup - a.prior.speedup
    notes = [f"prior -> refined: speedup {a.prior.speedup:.3f} -> {a.refined.speedup:.3f} ({gap:+.3f}); "
             f"verify runs at {a.prior.decode_verify_ratio:.0%} -> {a.refined.decode_verify_ratio:.0%} of "
             f"decode speed (unique experts per MoE layer are all-rank totals)",
             "units: T_dec, T_ver, T_round in µs; ver/dec, dec/ver time ratios; U: unique experts per MoE layer; "
             "S: speedup over plain decoding (x), dS its change"]
    if a.engine:
        sd, dec, lo, hi = a.engine
        notes.append(f"{a.deployment.engine} SD rounds overlapped {sd}, decode overlapped {dec} (docs/MODEL.md §4.6); "
                     f"refined speedup band over the public ranges of the engine terms and the acceptance "
                     f"{lo:.3f}-{hi:.3f}")
    table = render(cols, rows, title=head, notes=notes, width=width, wide=wide)
    shap = format_shapley(a, width=width)
    return resolved_line(a.deployment, a.context) + "\n" + table + ("\n\n" + shap if shap else "")


def plot_waterfall(a: Attribution, path) -> str:
    """Waterfall of the speedup (left) and of T_decode / T_verify (right) along the walk."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    labels = [s.name.replace("+ ", "+") for s in a.steps]
    for ax, key, ylabel in ((axes[0], "speedup", "speedup over plain decoding (x)"),
                            (axes[1], "decode_verify_ratio", "T_decode / T_verify")):
        vals = np.array([getattr(s, key) for s in a.steps])
        x = np.arange(len(vals) + 1)
        bottoms = np.concatenate([[0.0], vals[:-1], [0.0]])
        heights = np.concatenate([[vals[0]], np.diff(vals), [vals[-1]]])
        colors = ["#7f7f7f"] + ["#1b9e77" if h >= 0 else "#d95f02" for h in heights[1:-1]] + ["#386cb0"]
        ax.bar(x, heights, bottom=bottoms, color=colors, edgecolor="black", linewidth=0.5)
        for xi, top, h in zip(x, bottoms + heights, heights, strict=True):
            ax.annotate(f"{h:+.3f}" if 0 < xi < len(vals) else f"{top:.3f}", (xi, max(top, top - h)),
                        ha="center", va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(x)
        ax.set_xticklabels(labels + ["refined"], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_xlabel("mechanism switched to refined (cumulative, left to right)")
        top = float(max(bottoms.max(), (bottoms + heights).max()))
        ax.set_ylim(0.0, top * 1.12)
        ax.axhline(1.0, color="0.4", linestyle=":", linewidth=0.8)
        ax.grid(True, axis="y", alpha=0.3)
    import textwrap

    shape = f"draft {a.tree}" if a.tree else f"draft length {a.draft_len}"  # the tree, not its depth
    fig.suptitle(textwrap.fill(f"Prior -> refined attribution: {a.model} on {a.hardware} ({a.deployment.label}), "
                               f"B={a.batch}, {shape}, drafter {a.drafter}, {a.acceptance}", 110), fontsize=10)
    return save(fig, path)
