"""What to price and the one way to price it (docs/MODEL.md §5.0).

- :class:`Scenario` (:mod:`.scenario`): model, GPU, deployment, mechanisms, drafter, acceptance, context, routing
  statistics and draft shape; one way to change a field (:meth:`Scenario.edit`).
- :func:`price` / :func:`price_pass` (:mod:`.price`): the scenario over batch × draft length (or its tree), and one
  forward pass of it; the only callers of the round functions. :func:`class_times`: one pass per op class in a mode.
- :class:`Request` and :func:`resolve` (:mod:`.resolve`): what a user asks for (every knob optional) → a scenario,
  through the one deployment rule (:mod:`.deploy`).
"""

from .deploy import Layout, default_deployment, fitting_batches, resolved_line
from .price import REFERENCE, Case, class_times, price, price_pass
from .resolve import (
    DEFAULT_DRAFTER,
    DEFAULT_HARDWARE,
    Request,
    default_targets,
    overlap_input,
    request,
    resolve,
    resolve_acceptance,
    resolve_hardware,
    resolve_models,
)
from .scenario import DEPLOYMENT_FIELDS, MECHANISM_FIELDS, NO_EDIT, HardwareEdit, Scenario, bound, scale_fixed

__all__ = ["DEFAULT_DRAFTER", "DEFAULT_HARDWARE", "DEPLOYMENT_FIELDS", "MECHANISM_FIELDS", "NO_EDIT", "REFERENCE",
           "Case", "HardwareEdit", "Layout", "Request", "Scenario", "bound", "class_times", "default_deployment",
           "default_targets", "fitting_batches", "overlap_input", "price", "price_pass", "request", "resolve",
           "resolve_acceptance", "resolve_hardware", "resolve_models", "resolved_line", "scale_fixed"]
