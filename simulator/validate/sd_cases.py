"""Public SD cases (the study analysis ``sd_validation``, experiments/sd-validation.yaml; :func:`report` gives its
table and the numbers its prose reads): predicted speculative-decoding speedups against speedups measured by engines in
public reports (docs/sources/published.md, "Measured SD speedups"). Each case states its engine, GPU, model,
parallelism, drafter, draft length, acceptance length and batch; the measured speedup is an outcome, compared only
(nothing is fitted to it). Every case is priced through the one pricing path (:func:`simulator.sweep.price`) under
the refined model and every reading of the prior (``PRIOR_READINGS``).

``structure`` says how faithfully a chain prices the case: ``chain`` (top-1 drafting, γ + 1 tokens verified),
``tree-chain-verify`` (a tree whose verify pass holds γ + 1 tokens, like the chain, but whose draft steps expand
top-k candidates: the chain under-prices its drafting), ``tree-as-chain`` (a wider tree, whose shape the engine
picks by draft scores, priced as the chain of its depth: an approximation, reported apart).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cost.deployment import PRESETS, PRIOR_READINGS
from ..params import Interval, Param, param_field
from ..pricing import Layout, Request, price
from ..render.outcome import Part, table
from ..specdec import Acceptance
from ..specs.catalog import ENGINES, load_hardware, load_model
from ..specs.dtypes import FORMATS
from ..specs.settings import choice, loadable, positive
from ..sweep import Variant
from ..sweep.runner import deploy, in_mode
from ..sweep.shapley import players

STRUCTURES = ("chain", "tree-chain-verify", "tree-as-chain")
EXACT = STRUCTURES[:2]


@dataclass(frozen=True)
class Measured:
    name: str
    model: str = loadable("model")
    hardware: str = loadable("hardware")
    engine: str = choice(ENGINES)
    dtype: str = choice(FORMATS)
    tp: int = positive()  # GPUs, attention tensor parallel
    draft_len: int = positive()
    accept_length: float = param_field(Param(Interval(float, 1.0, 65.0)))  # measured mean AL at draft_len
    batch: int = positive()
    measured: float = param_field(Param(Interval(float, 0.0, None, closed="neither")))  # compared only
    source: str = ""
    ep: int = positive(1)
    drafter: str = loadable("drafter", "eagle")
    context: int = positive(1024)
    structure: str = choice(STRUCTURES, "chain")
    note: str = ""


@dataclass(frozen=True)
class Settings:
    cases: tuple[Measured, ...]


def predict(c: Measured) -> dict[str, float]:
    """Predicted speedup of one case under the refined model and every reading of the prior (and, under
    ``"deployment"``, the resolved deployment's label and GPU count)."""
    model, hw = load_model(c.model), load_hardware(c.hardware)
    req = Request(layout=Layout(dtype=c.dtype, tp=c.tp, ep=c.ep, gpus=c.tp, options=(("engine", c.engine),)),
                  drafter=c.drafter, acceptance=Acceptance.from_accept_length(c.accept_length, c.draft_len),
                  context=c.context)
    sc, _, _ = deploy(model, hw, req, [c.batch], c.draft_len)
    dep = sc.deployment
    out = {"deployment": f"{dep.label} ({dep.gpus} GPU{'s' if dep.gpus > 1 else ''})"}
    for mode in ("refined", *PRIOR_READINGS):
        out[mode] = float(price(in_mode(sc, mode, req), [c.batch], [c.draft_len]).result.speedup[0, 0])
    prior = PRESETS["prior"]
    for name in players(prior, PRESETS["refined"]):  # the refined model with one mechanism at the prior's setting
        v = Variant(name=f"no {name}", mechanisms=((name, getattr(prior, name)),))
        out[f"without {name}"] = float(price(in_mode(sc, "refined", req, v), [c.batch],
                                             [c.draft_len]).result.speedup[0, 0])
    return out


def report(s: Settings) -> Part:
    rows, pred = [], {}
    for c in s.cases:
        p = pred[c.name] = predict(c)
        rows.append((c.name, c.structure, f"{c.model} on {c.hardware}, {p['deployment']}",
                     f"{c.drafter} γ={c.draft_len} AL {c.accept_length:g}", c.batch, c.measured, p["refined"],
                     p["refined"] / c.measured - 1, p["prior"], p["prior"] / c.measured - 1,
                     min(p[r] for r in PRIOR_READINGS), max(p[r] for r in PRIOR_READINGS), c.source))
    t = table("sd_validation", "Predicted vs measured speedup of speculative decoding, per public case", "case; "
              "structure; target; drafter; batch|d; measured|.2f; refined|.2f; refined error|+.0%; prior|.2f; prior "
              "error|+.0%; prior min|.2f; prior max|.2f; source", rows)
    return Part(tables=(t,), values=values(s.cases, pred))


def values(cases, pred) -> dict:
    """The named numbers of the SD-validation prose (experiments/sd-validation.yaml)."""
    def mape(group, mode: str) -> float:
        return sum(abs(pred[c.name][mode] / c.measured - 1) for c in group) / len(group) if group else float("nan")

    def verdict(c) -> dict:
        return {"name": c.name, "measured": c.measured, "r": pred[c.name]["refined"]}

    exact = [c for c in cases if c.structure in EXACT]
    losses = [c for c in cases if c.measured < 1]
    over = sorted(pred[c.name]["refined"] / c.measured for c in cases if pred[c.name]["refined"] > c.measured)
    moved = [{"n": k[len("without "):], "d": sum(abs(pred[c.name]["refined"] / c.measured - 1)
                                                 - abs(pred[c.name][k] / c.measured - 1) for c in cases) / len(cases)}
             for k in pred[cases[0].name] if k.startswith("without ")] if cases else []
    return dict(n=len(cases), nexact=len(exact), mape_exact_r=mape(exact, "refined"), mape_exact_p=mape(exact, "prior"),
                mape_all_r=mape(cases, "refined"), mape_all_p=mape(cases, "prior"), readings=PRIOR_READINGS,
                losses=[verdict(c) for c in losses], nloss=len(losses),
                wins=[verdict(c) for c in cases if c.measured >= 1],
                caught=sum(pred[c.name]["refined"] < 1 for c in losses),
                prior_caught=sum(pred[c.name]["prior"] < 1 for c in losses),
                every=sum(max(pred[c.name][r] for r in PRIOR_READINGS) < 1 for c in losses),
                nover=len(over), median=over[len(over) // 2] if over else 0.0, over_most=len(over) * 2 > len(cases),
                moved=moved)
