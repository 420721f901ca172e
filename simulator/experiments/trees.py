"""``tree_unions`` analysis: unions of experts over draft trees predicted from one public routing statistic, with and
without an assumed per-request working set (the persistent component, docs/MODEL.md §2.15), against published
measurements. The measured unions are outcomes: nothing is fitted to them; the floors and hot shares of the working
set are a stated grid of assumptions, and the findings say which of them bracket each measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..overlap import OverlapStats, Persistent, full_tree, predict_tree
from ..specs.catalog import load_routing_profile
from .outcome import Part, Table
from .schema import fraction, positive


@dataclass(frozen=True)
class Tree:
    branching: int = positive()  # a full tree: the root, then `depth` levels of `branching` children per node
    depth: int = positive()
    measured: float = positive()  # the published union (an outcome, compared only)


@dataclass(frozen=True)
class Settings:
    experts: int = positive()
    top_k: int = positive()
    lag1: float = fraction()  # adjacent-token overlap, the only statistic given (uniform popularity assumed)
    trees: tuple[Tree, ...] = ()
    floors: tuple[float, ...] = ()  # assumed long-lag overlaps f of the persistent component
    hot_shares: tuple[float, ...] = (1.0,)  # hot share h as a fraction of the pure working set's (1: cold unused)
    reference_profile: str = "cohere-128x8"  # adds the floor lag1 · o(L)/o(1) of this profile (its long-lag ratio)
    source: str = ""
    measured_source: str = ""


METHOD = "ipf"  # this study compares the pairwise maximum-entropy model (its prose says so); the latent tree default
# (docs/MODEL.md §2.16) is compared with the same measurements in benchmarks/results/overlap_trees.md


def _union(stats: OverlapStats, parents: tuple, pers: Persistent | None) -> float:
    return float(predict_tree(stats, parents, method=METHOD, persistent=pers).unique_experts)


def run(study, priced, ctx, s: Settings) -> Part:
    e, k = s.experts, s.top_k
    stats = OverlapStats.from_overlaps(e, k, (s.lag1,))
    ref = load_routing_profile(s.reference_profile)
    central = round(s.lag1 * ref.lags[-1] / ref.lags[0], 3)
    floors = tuple(sorted(set(s.floors) | {central}))
    pure_h = {f: float(Persistent(f).components(stats.popularity, k)[0][0]) for f in floors}
    trees = [(t, full_tree((t.branching,) * t.depth)) for t in s.trees]
    rows, pred = [], {}
    for t, parents in trees:
        n = len(parents)
        base = predict_tree(stats, parents, method=METHOD)
        pred[("lag1", n)] = float(base.unique_experts)
        for share in s.hot_shares:
            for f in floors:
                pred[(share, n, f)] = _union(stats, parents, Persistent(f, share * pure_h[f]))
            rows.append((n, t.measured, float(base.independent), pred[("lag1", n)], share,
                         *(pred[(share, n, f)] for f in floors)))
    cols = ("nodes", "measured", "independent", "lag 1 only", "hot share ×") + tuple(f"f={f:g}" for f in floors)
    table = Table("tree_unions", f"Unique experts per tree ({e} experts, top-{k}, B = 1)", cols, tuple(rows),
                  ("{:d}", "{:g}", "{:.1f}", "{:.1f}", "{:g}") + ("{:.1f}",) * len(floors),
                  note="hot share ×1: the pure working set (hot share h = Σπ²/(k·f), cold experts unused); ×x: x "
                       "times that share (cold experts keep part of their popularity). f: the assumed long-lag "
                       "overlap (floor) of the persistent component.")
    return Part(key_numbers=_key_numbers(s, trees, pred), tables=(table,),
                findings=tuple(_findings(s, trees, pred, floors, central, ref.name)),
                settings=(f"{e} experts, top-{k}, uniform popularity (assumed), adjacent-token overlap {s.lag1:g} "
                          f"({s.source}); no longer lags given", f"measured unions: {s.measured_source}",
                          f"floors f: {', '.join(f'{f:g}' for f in floors)} ({central:g} = {s.lag1:g} × o(L)/o(1) "
                          f"of {ref.name}); hot shares × {', '.join(f'{x:g}' for x in s.hot_shares)}"))


def _key_numbers(s, trees, pred) -> tuple:
    out = []
    for t, parents in trees:
        n = len(parents)
        vals = [v for key, v in pred.items() if key[0] != "lag1" and key[1] == n]
        out.append((f"{n}-node tree: measured / lag 1 only / with working set",
                    f"{t.measured:g} / {pred[('lag1', n)]:.1f} / {min(vals):.1f}–{max(vals):.1f}"))
    return tuple(out)


def _bracket(pred, share, n, floors, measured) -> str:
    """Which adjacent floors bracket the measured value under one hot share (the union falls as f rises)."""
    vals = [pred[(share, n, f)] for f in floors]
    for i in range(len(floors) - 1):
        if min(vals[i], vals[i + 1]) <= measured <= max(vals[i], vals[i + 1]):
            return f"between f = {floors[i]:g} and {floors[i + 1]:g}"
    return "above every floor's prediction" if measured > max(vals) else "below every floor's prediction"


def _growth(s, pred, floors, sizes, meas) -> str:
    """Whether some hot share's growth from the smallest to the largest tree spans the measured growth."""
    want = meas[sizes[-1]] - meas[sizes[0]]
    span = {sh: [pred[(sh, sizes[-1], f)] - pred[(sh, sizes[0], f)] for f in floors] for sh in s.hot_shares}
    fits = [sh for sh, g in span.items() if min(g) <= want <= max(g)]
    if fits:
        return f"hot share ×{fits[0]:g} reproduces the measured growth ({want:+g}) but not the level"
    near = min(span, key=lambda sh: min(abs(g - want) for g in span[sh]))
    return (f"no tested share reproduces the measured growth ({want:+g}; closest ×{near:g}: {min(span[near]):+.1f} to "
            f"{max(span[near]):+.1f}), so no tested working set matches both trees")


def _findings(s, trees, pred, floors, central, ref_name) -> list:
    sizes = [len(p) for _, p in trees]
    meas = {len(p): t.measured for t, p in trees}
    lag1 = ", ".join(f"{pred[('lag1', n)]:.1f}" for n in sizes)
    over = all(pred[("lag1", n)] > meas[n] for n in sizes)
    out = [f"With the adjacent-token overlap alone the maximum-entropy union is {lag1} for {', '.join(map(str, sizes))}"
           f" nodes against the measured {', '.join(f'{meas[n]:g}' for n in sizes)}: "
           + ("it overcounts every tree, as a pairwise model without long-range correlation must (beyond the last "
              "given lag it treats tokens as independent given the window)." if over else
              "it does not overcount every tree.") + " With lag 1 only the union depends on the node count, not the "
           "shape (the Markov chain on a tree), so the unpublished tree shapes do not matter here."]
    for share in s.hot_shares:
        parts = []
        for n in sizes:
            vals = [pred[(share, n, f)] for f in floors]
            inside = min(vals) <= meas[n] <= max(vals)
            parts.append(f"{n} nodes {min(vals):.1f}–{max(vals):.1f} (measured {meas[n]:g} "
                         f"{'inside, ' + _bracket(pred, share, n, floors, meas[n]) if inside else 'outside'})")
        grow = [pred[(share, sizes[-1], f)] - pred[(share, sizes[0], f)] for f in floors]
        out.append(f"Working set with {share:g}× the pure hot share, over f = {floors[0]:g}–{floors[-1]:g}: "
                   + "; ".join(parts) + f"; growth from {sizes[0]} to {sizes[-1]} nodes {min(grow):+.1f} to "
                   f"{max(grow):+.1f} (measured {meas[sizes[-1]] - meas[sizes[0]]:+g}).")
    if len(s.hot_shares) > 1:
        across = []
        for n in sizes:
            ok = [f for f in floors if min(pred[(sh, n, f)] for sh in s.hot_shares) <= meas[n]
                  <= max(pred[(sh, n, f)] for sh in s.hot_shares)]
            at = f" (f = {', '.join(f'{f:g}' for f in ok)})" if ok else ""
            across.append(f"{n} nodes at {len(ok)} of {len(floors)} floors{at}")
        out.append("Between the hot shares (the measurement lies between the predictions of the smallest and largest "
                   "share at the same floor): " + "; ".join(across) + ".")
    both = [sh for sh in s.hot_shares
            if all(min(pred[(sh, n, f)] for f in floors) <= meas[n] <= max(pred[(sh, n, f)] for f in floors)
                   for n in sizes)]
    cen = "; ".join(f"h×{sh:g}: " + " / ".join(f"{pred[(sh, n, central)]:.1f}" for n in sizes) for sh in s.hot_shares)
    out.append(f"Central assumption f = {central:g} ({s.lag1:g} × the long-lag ratio of {ref_name}): {cen} for "
               f"{' / '.join(map(str, sizes))} nodes. How sure: the floor and hot share are not published for this "
               "model, so the prediction is a range, not a number; "
               + (f"the floors bracket every measurement under hot share {', '.join(f'×{b:g}' for b in both)}. "
                  if both else f"no single hot share brackets every measurement, and "
                  f"{_growth(s, pred, floors, sizes, meas)}. ")
               + "A routing trace of the model (`overlap fit`, `fit_persistent`) would fix both parameters; none is "
               "chosen here, since choosing one would fit the outcome.")
    return out
