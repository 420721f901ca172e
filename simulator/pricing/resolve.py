"""From what a user asks for to a :class:`~.scenario.Scenario`: the one resolver of every command and study.

A :class:`Request` holds the knobs a user may set, all optional: the layout overrides (formats, gpus/tp/dp/ep, and
every other :class:`~simulator.cost.deployment.Deployment` field: engine, placement, redundant experts, all-to-all,
CUDA graphs), mechanism settings forced on top of each mode's preset, the drafter, the acceptance, the context, the
routing statistics (lag overlaps and/or popularity) and a draft tree. :func:`resolve` applies the deployment rule
(:mod:`.deploy`) to a model and GPU and returns the scenario; the CLI builds a request from flags generated from
the same declarations (``simulator.cli._scenario``), so every command accepts the same knobs with the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..cost.deployment import preset
from ..cost.ops import CONTEXT, DEFAULT_CONTEXT
from ..cost.routing import OverlapInput, model_overlap
from ..errors import ParameterError
from ..overlap.feasible import check_model_statistics, check_overlap_flags
from ..overlap.tree import check_parents
from ..specdec import Acceptance, Drafter, parse_drafter
from ..specs.catalog import bundled_files, load_hardware, load_model
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .deploy import Layout, default_deployment
from .scenario import DEPLOYMENT_FIELDS, MECHANISM_FIELDS, Scenario

__all__ = ["DEFAULT_DRAFTER", "DEFAULT_HARDWARE", "Request", "default_targets", "request", "overlap_input", "resolve",
           "resolve_acceptance", "resolve_hardware", "resolve_models", "scenario_for"]

DEFAULT_HARDWARE = ("h100-sxm",)
DEFAULT_DRAFTER = "eagle"


@dataclass(frozen=True)
class Request:
    """The user's knobs (module docstring); the defaults ask for nothing (the rule and the library decide).
    ``mechanisms``: (name, setting) pairs forced in every mode priced; ``lags``/``popularity``: routing statistics
    replacing the model's own (a popularity alone keeps the model's lags, lags alone keep its popularity)."""

    layout: Layout = Layout()
    mechanisms: tuple[tuple[str, str], ...] = ()
    drafter: str | Drafter = DEFAULT_DRAFTER
    acceptance: Acceptance | None = None
    context: int = DEFAULT_CONTEXT
    lags: tuple[float, ...] | None = None
    popularity: str | None = None
    tree: tuple[int, ...] | None = None

    def __post_init__(self):
        CONTEXT.check(self.context, "context", "Request")
        bad = [k for k, _ in self.mechanisms if k not in MECHANISM_FIELDS]
        if bad:
            raise ParameterError(f"Request: unknown mechanism {bad[0]!r}; use one of {', '.join(MECHANISM_FIELDS)}",
                                 owner="Request", param="mechanisms")
        if self.tree is not None:
            object.__setattr__(self, "tree", check_parents(self.tree, "Request"))

    def edit(self, **knobs) -> Request:
        """A copy with ``knobs`` changed: request fields, layout fields, any Deployment field (a layout option) or
        Mechanisms field (forced) by name (:func:`request`)."""
        return request(self, **knobs)


LAYOUT_KNOBS = ("dtype", "kv_dtype", "tp", "ep", "gpus", "dp")
REQUEST_KNOBS = ("drafter", "acceptance", "context", "lags", "popularity", "tree")


def request(base: Request | None = None, **knobs) -> Request:
    """A :class:`Request` from keyword knobs, each declared once where it lives: a request field (``drafter``,
    ``acceptance`` (α, per-position rates or an Acceptance), ``context``, ``lags`` (alias ``overlap``),
    ``popularity``, ``tree``), a layout field (``dtype``, ``kv_dtype``, ``tp``, ``ep``, ``gpus``, ``dp``), any other
    :class:`~simulator.cost.deployment.Deployment` field (``engine``, ``placement``, ``redundant_experts``,
    ``all_to_all``, ``cuda_graphs``) or a :class:`~simulator.cost.deployment.Mechanisms` field (forced in every
    mode). None values are ignored (the flag was not given); an unknown name is one error naming it."""
    req = base or Request()
    knobs = {("lags" if k == "overlap" else k): v for k, v in knobs.items() if v is not None}
    lay, opts, mech, own = {}, dict(req.layout.options), dict(req.mechanisms), {}
    for k, v in knobs.items():
        if k in LAYOUT_KNOBS:
            lay[k] = v
        elif k in REQUEST_KNOBS:
            own[k] = v
        elif k in MECHANISM_FIELDS:
            mech[k] = v
        elif k in DEPLOYMENT_FIELDS and k != "moe_tp":
            opts[k] = v
        else:
            raise ParameterError(f"unknown knob {k!r}; use one of {', '.join(REQUEST_KNOBS + LAYOUT_KNOBS)}, a "
                                 f"Deployment field ({', '.join(DEPLOYMENT_FIELDS)}) or a Mechanisms field "
                                 f"({', '.join(MECHANISM_FIELDS)})", owner="request", param=k)
    if "acceptance" in own:
        own["acceptance"] = resolve_acceptance(own["acceptance"])
    if "lags" in own:
        own["lags"] = tuple(float(x) for x in own["lags"])
    layout = replace(req.layout, **lay, options=tuple(opts.items())) if lay or opts else req.layout
    return replace(req, layout=layout, mechanisms=tuple(mech.items()), **own)


def resolve_models(models) -> list[ModelSpec] | None:
    """Model specs from names, paths or specs (None stays None: the caller's default); infeasible routing
    statistics fail here, naming the file and field."""
    if models is None:
        return None
    out = []
    for m in [models] if isinstance(models, (str, ModelSpec)) else models:
        spec = m if isinstance(m, ModelSpec) else load_model(str(m), role="target")
        check_model_statistics(spec)
        out.append(spec)
    return out


def resolve_hardware(hardware) -> list[HardwareProfile]:
    if hardware is None:
        hardware = DEFAULT_HARDWARE
    items = [hardware] if isinstance(hardware, (str, HardwareProfile)) else list(hardware)
    return [h if isinstance(h, HardwareProfile) else load_hardware(str(h)) for h in items]


def default_targets() -> list[ModelSpec]:
    """Every bundled MoE model whose role is target (the default study filters them by fit per GPU)."""
    specs = [load_model(n) for n in bundled_files("models")]
    return [m for m in specs if m.role == "target" and m.ffn.is_moe]


def resolve_acceptance(acceptance) -> Acceptance | None:
    """An :class:`Acceptance` from α, per-position rates or an Acceptance (None: the drafter's default)."""
    if acceptance is None or isinstance(acceptance, Acceptance):
        return acceptance
    if isinstance(acceptance, (int, float)):
        return Acceptance.from_alpha(float(acceptance))
    return Acceptance.from_positions(acceptance)


def overlap_input(model: ModelSpec, lags=None, popularity: str | None = None) -> OverlapInput | None:
    """Routing statistics replacing the model's own: ``lags`` o(1..D) and/or a ``popularity``; what is not given
    is the model's (None when neither is given: the model's own statistics)."""
    if lags is None and popularity is None:
        return None
    base = model_overlap(model)
    out = OverlapInput(tuple(float(x) for x in lags) if lags is not None else base.lags,
                       popularity if popularity is not None else base.popularity)
    if model.ffn.is_moe:
        check_overlap_flags(model.ffn.experts, model.ffn.top_k, out.lags, out.popularity)
    return out


def resolve(model, hardware="h100-sxm", req: Request | None = None, *, mode: str = "refined", name: str = "",
            **knobs) -> Scenario:
    """The scenario of ``model`` on ``hardware`` (names, paths or specs) that ``req`` (and/or keyword ``knobs``,
    :func:`request`) asks for under the mechanism preset ``mode`` (with the forced mechanisms), deployed by the rule
    of :mod:`.deploy`."""
    (m,) = resolve_models([model])
    (hw,) = resolve_hardware([hardware])
    return replace(scenario_for(m, hw, request(req, **knobs), mode), name=name)


def scenario_for(model: ModelSpec, hw: HardwareProfile, req: Request, mode: str = "refined") -> Scenario:
    """The scenario of a loaded ``model`` on a loaded ``hw`` that ``req`` asks for under the preset ``mode`` (with
    the request's forced mechanisms), deployed by the one rule (which sees every deployment knob of the request)."""
    dep = default_deployment(model, hw, req.layout)
    drafter = parse_drafter(req.drafter)
    if dict(req.mechanisms).get("two_batch_overlap") == "on" and (dep.dp <= 1 or not model.ffn.is_moe):
        raise ParameterError(f"--two-batch-overlap: 'on' overlaps one micro-batch's MoE dispatch/combine with the "
                             f"other's compute, and {model.name} on {dep.label} has none "
                             f"({'a dense model' if not model.ffn.is_moe else 'attention TP, dp 1'}): use --dp > 1 "
                             "(attention data parallelism) or leave --two-batch-overlap out", owner="Request",
                             param="mechanisms")
    if drafter.kind == "mtp" and not model.mtp_layers:  # engines draft MTP with the checkpoint's own module only
        raise ParameterError(f"--drafter: 'mtp' needs a target with an MTP module (mtp_layers > 0 in its model YAML); "
                             f"{model.name} has none: use eagle, eagle3 or model:NAME", owner="Request",
                             param="drafter")
    return Scenario(model, hw, dep, preset(mode).with_(**dict(req.mechanisms)), mode, drafter,
                    resolve_acceptance(req.acceptance), int(req.context),
                    overlap_input(model, req.lags, req.popularity), req.tree)
