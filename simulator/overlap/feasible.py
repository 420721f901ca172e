"""Feasibility of routing-overlap statistics, checked when a model or a flag is read (not later, deep inside a
pricing run): the popularity spec is parsed for the model's E and k, the lags pass the necessary conditions of
:func:`.constraints.check_feasible`, and the maximum-entropy fit over D + 1 tokens (every lag used once) converges.

One function answers for a statistics set (:func:`statistics_problem`, cached: the same profile is checked once per
process); :func:`check_model_statistics` names the model file and field, :func:`check_overlap_flags` the parameter.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import ConfigError, InfeasibleError, SimulatorError
from ..params import parameter_error
from .constraints import check_feasible
from .fit import fit_window
from .stats import OverlapStats

_POP_FIX = "write uniform, zipf:S (S >= 0) or skew:X in the range given"
_FIX = "use measured overlaps (fractions, o(d) falling slowly with d) or leave the statistics out"


@lru_cache(maxsize=256)
def statistics_problem(experts: int, top_k: int, lags: tuple[float, ...], popularity: str) -> tuple[str, str]:
    """(which statistic, why no routing process has these statistics); ("", "") when they are feasible."""
    try:
        stats = OverlapStats.from_overlaps(experts=experts, top_k=top_k, overlaps=lags, popularity=popularity)
    except SimulatorError as exc:
        return "popularity", str(exc)
    try:
        if lags:
            check_feasible(stats, len(lags) + 1)
            fit_window(stats, n_tokens=len(lags) + 1)
    except InfeasibleError as exc:
        text = str(exc)
        if "did not converge" in text:
            return "lags", (f"no distribution of {len(lags) + 1} tokens over {experts} experts top-{top_k} matches "
                            f"them (the maximum-entropy fit cannot reach them; they are jointly infeasible)")
        return "lags", text.split("; check the overlaps")[0]
    except SimulatorError as exc:
        return "lags", str(exc)
    return "", ""


def check_model_statistics(model) -> None:
    """Raise a one-line ConfigError naming the model file and field when its overlap statistics are infeasible."""
    o = model.overlap
    if o is None or not model.ffn.is_moe:
        return
    where = model.origin or model.name
    entries = [("routing_overlap", o.lags, o.popularity)]
    if o.by_layer is not None:
        entries += [(f"routing_overlap.by_layer.layers[{i}]", s.lags, s.popularity)
                    for i, s in enumerate(o.by_layer.layers)]
    for path, lags, popularity in entries:
        which, problem = statistics_problem(model.ffn.experts, model.ffn.top_k, tuple(float(x) for x in lags),
                                            popularity)
        if problem:
            field = "routing_overlap.profile" if o.profile else f"{path}.{which}"
            named = f" (routing profile {o.profile!r})" if o.profile else ""
            shown = f"popularity {popularity!r}" if which == "popularity" else f"lags {list(lags)}"
            raise ConfigError(where, field, f"of {model.name}{named}: {shown} "
                              f"{'is' if which == 'popularity' else 'are'} infeasible: {problem}",
                              _POP_FIX if which == "popularity" else _FIX)


def check_overlap_flags(experts: int, top_k: int, lags, popularity: str, owner: str = "overlap_input") -> None:
    """The same check for statistics given as parameters (``lags``, ``popularity``; the CLI names its flags)."""
    lags = tuple(float(x) for x in lags)
    which, problem = statistics_problem(int(experts), int(top_k), lags, popularity)
    if which == "popularity":
        raise parameter_error(owner, "popularity", f"a popularity for {experts} experts top-{top_k} ({problem})",
                              popularity)
    if problem:
        raise parameter_error(owner, "lags", f"feasible for {experts} experts top-{top_k} with popularity "
                              f"{popularity} ({problem})", list(lags))
