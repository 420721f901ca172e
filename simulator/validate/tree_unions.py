"""Expert unions over draft trees against published measurements (the study analysis ``tree_unions``,
experiments/moe-spec-trees.yaml; :func:`report` gives its table and the numbers its prose reads): unions predicted
from one public routing statistic, with and without an assumed per-request working set (the persistent component,
docs/MODEL.md §2.15). The measured unions are outcomes: nothing is fitted to them; the floors and hot shares of the
working set are a stated grid of assumptions, and the findings say which of them bracket each measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..overlap import OverlapStats, Persistent, full_tree, predict_tree
from ..render.outcome import Part, table
from ..specs.catalog import load_routing_profile
from ..specs.settings import fraction, positive


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


METHOD = "ipf"  # the working-set grid compares the pairwise maximum-entropy model (its prose says so); the tree
# default (docs/MODEL.md §2.16, method "auto") is reported beside it with the central long-lag assumption


def _union(stats: OverlapStats, parents: tuple, pers: Persistent | None) -> float:
    return float(predict_tree(stats, parents, method=METHOD, persistent=pers).unique_experts)


def report(s: Settings) -> Part:
    e, k = s.experts, s.top_k
    stats = OverlapStats.from_overlaps(e, k, (s.lag1,))
    ref = load_routing_profile(s.reference_profile)
    central = round(s.lag1 * ref.lags[-1] / ref.lags[0], 3)
    floors = tuple(sorted(set(s.floors) | {central}))
    pure_h = {f: float(Persistent(f).components(stats.popularity, k)[0][0]) for f in floors}
    trees = [(t, full_tree((t.branching,) * t.depth)) for t in s.trees]
    # the central long-lag assumption as lags: the reference profile's o(1..L) scaled to o(1) = lag1
    scaled = tuple(round(s.lag1 * x / ref.lags[0], 3) for x in ref.lags)
    long_stats = OverlapStats.from_overlaps(e, k, scaled)
    rows, pred = [], {}
    for t, parents in trees:
        n = len(parents)
        base = predict_tree(stats, parents, method=METHOD)
        pred[("lag1", n)] = float(base.unique_experts)
        pred[("default", n)] = float(predict_tree(long_stats, parents).unique_experts)
        for share in s.hot_shares:
            for f in floors:
                pred[(share, n, f)] = _union(stats, parents, Persistent(f, share * pure_h[f]))
            rows.append((n, t.measured, float(base.independent), pred[("lag1", n)], pred[("default", n)], share,
                         *(pred[(share, n, f)] for f in floors)))
    t = table("tree_unions", f"Unique experts per tree ({e} experts, top-{k}, B = 1)", "nodes|d; measured|g; "
              "independent|.1f; lag 1 only|.1f; tree default, central lags|.1f; hot share ×|g"
              + "".join(f"; f={f:g}|.1f" for f in floors), rows)
    return Part(tables=(t,), values=values(s, trees, pred, floors, central)
                | {"central": central, "ref": ref.name, "scaled": ", ".join(f"{x:g}" for x in scaled)})


def values(s, trees, pred, floors, central: float) -> dict:
    """The named numbers of the tree-union prose (experiments/moe-spec-trees.yaml)."""
    sizes = [len(p) for _, p in trees]
    meas = {len(p): t.measured for t, p in trees}
    n0, nn = sizes[0], sizes[-1]

    def spread(sh, n):
        return [pred[(sh, n, f)] for f in floors]

    def per_n(sh, n):
        v = spread(sh, n)
        pair = next(((a, b) for a, b, x, y in zip(floors, floors[1:], v, v[1:], strict=False)
                     if min(x, y) <= meas[n] <= max(x, y)), None)
        return dict(n=n, lo=min(v), hi=max(v), m=meas[n], inside=min(v) <= meas[n] <= max(v), between=pair,
                    above=meas[n] > max(v))

    want = meas[nn] - meas[n0]
    span = {sh: [pred[(sh, nn, f)] - pred[(sh, n0, f)] for f in floors] for sh in s.hot_shares}
    fits = [sh for sh, g in span.items() if min(g) <= want <= max(g)]
    near = min(span, key=lambda sh: min(abs(g - want) for g in span[sh]))
    return dict(
        sizes=sizes, f0=floors[0], fn=floors[-1], nf=len(floors), n0=n0, nn=nn, want=want, fits=fits,
        fit=fits[0] if fits else 0.0, near=near, near_lo=min(span[near]), near_hi=max(span[near]),
        trees=[{"n": n, "lag1": pred[("lag1", n)], "dflt": pred[("default", n)],
                "dflt_err": pred[("default", n)] / meas[n] - 1, "m": meas[n],
                "wlo": min(w := [v for key, v in pred.items() if key[0] not in ("lag1", "default") and key[1] == n]),
                "whi": max(w)} for n in sizes], floors=floors,
        over=all(pred[("lag1", n)] > meas[n] for n in sizes), many_shares=len(s.hot_shares) > 1,
        shares=[dict(sh=sh, per_n=[per_n(sh, n) for n in sizes], glo=min(span[sh]), ghi=max(span[sh]))
                for sh in s.hot_shares],
        across=[{"n": n, "ok": (ok := [f for f in floors if min(pred[(sh, n, f)] for sh in s.hot_shares) <= meas[n]
                                        <= max(pred[(sh, n, f)] for sh in s.hot_shares)]), "k": len(ok)}
                for n in sizes],
        both=[sh for sh in s.hot_shares if all(min(spread(sh, n)) <= meas[n] <= max(spread(sh, n)) for n in sizes)],
        cen=[{"sh": sh, "vals": [pred[(sh, n, central)] for n in sizes]} for sh in s.hot_shares])
