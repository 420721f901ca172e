"""Named routing profiles: routing-overlap statistics measured on one model, shipped once (``routing/*.yaml``) and
referenced by name from the model specs they stand in for (``routing_overlap: {profile: cohere-128x8}``).

A profile states the expert count and top-k it was measured at; a model may only reference a profile of its own E
and k (the statistics depend on both). A model YAML may instead give its own statistics inline
(``routing_overlap: {source: KEY, lags: [...], popularity: ...}``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Interval, Param
from .schema import Reader

SCHEMA = "routing/v1"
TOP_KEYS = ("schema", "name", "display_name", "description", "sources", "experts", "top_k", "source", "lags",
            "popularity", "note", "by_layer")
# Lag overlaps o(1..D): the one declaration, used by the readers here and in model.py, by the cost engine's
# OverlapInput and (through it) by --overlap.
LAGS = Param(Interval(float, 0.0, 1.0), unit="fractions, e.g. 0.381 not 38.1", many=True)
POPULARITY_FORMS = "uniform, zipf:S or skew:X"
# Statistics by depth (``by_layer``): ``thirds`` = three entries for the early, middle and final thirds of the MoE
# layers (MoE layer j of M in entry ⌊3j/M⌋); ``per_layer`` = one entry per MoE layer, in order.
SPLITS = ("thirds", "per_layer")
BY_LAYER_KEYS = ("split", "layers", "note")


@dataclass(frozen=True)
class LayerStats:
    """The statistics of one depth segment (a third of the MoE layers, or one layer)."""

    lags: tuple[float, ...]
    popularity: str


@dataclass(frozen=True)
class ByLayer:
    """Routing statistics that vary with depth: ``split`` (SPLITS) and one :class:`LayerStats` per segment."""

    split: str
    layers: tuple[LayerStats, ...]

    def segments(self, moe_layers: int) -> tuple[int, ...]:
        """Index into ``layers`` of each of ``moe_layers`` MoE layers (in order)."""
        if self.split == "thirds":
            return tuple(j * 3 // moe_layers for j in range(moe_layers))
        return tuple(range(moe_layers))


@dataclass(frozen=True)
class RoutingProfile:
    """Lag overlaps and popularity measured on one model (``experts`` routed experts, ``top_k`` per token)."""

    name: str
    display_name: str
    description: str
    experts: int
    top_k: int
    lags: tuple[float, ...]
    popularity: str
    source: str  # key of the profile's sources table
    citation: str  # the text of that source
    note: str = ""
    origin: str = ""
    by_layer: ByLayer | None = None


def read_popularity(r: Reader, obj, path: str) -> str:
    pop = r.string(obj, "popularity", path, default="uniform")
    if not (pop == "uniform" or pop.startswith(("zipf:", "skew:"))):
        raise r.fail(r.join(path, "popularity"), f"is {pop!r}", f"use {POPULARITY_FORMS}")
    return pop


def read_lags(r: Reader, obj, path: str) -> tuple[float, ...]:
    return tuple(r.param(obj, "lags", path, LAGS, fix="write fractions (0.381), not percentages (38.1)"))


def read_by_layer(r: Reader, obj, path: str, popularity: str) -> ByLayer | None:
    """The optional ``by_layer`` block: ``split`` and ``layers`` (each ``{lags: [...], popularity: ...}``; the
    popularity defaults to the pooled one)."""
    if "by_layer" not in obj:
        return None
    p = r.join(path, "by_layer")
    b = r.mapping(obj["by_layer"], p, BY_LAYER_KEYS, ("split", "layers"))
    split = r.string(b, "split", p, options=SPLITS)
    items = b["layers"]
    want = "3 entries (early, middle, final)" if split == "thirds" else "one entry per MoE layer"
    if not isinstance(items, list) or not items or (split == "thirds" and len(items) != 3):
        got = len(items) if isinstance(items, list) else type(items).__name__
        raise r.fail(f"{p}.layers", f"has {got} entries but split {split!r} needs {want}",
                     "give one {lags: [...]} mapping per segment")
    out = []
    for i, item in enumerate(items):
        ip = f"{p}.layers[{i}]"
        m = r.mapping(item, ip, ("lags", "popularity"), ("lags",))
        out.append(LayerStats(read_lags(r, m, ip), read_popularity(r, m, ip) if "popularity" in m else popularity))
    return ByLayer(split, tuple(out))


def read_routing_profile(obj: object, where: str) -> RoutingProfile:
    r = Reader(where)
    top = r.mapping(obj, "", TOP_KEYS, ("schema", "name", "sources", "experts", "top_k", "source", "lags"))
    r.string(top, "schema", "", options=(SCHEMA,))
    r.read_sources(top)
    name = r.string(top, "name", "")
    experts = r.integer(top, "experts", "", low=1)
    top_k = r.integer(top, "top_k", "", low=1, high=experts)
    source = r.source(top, "")
    popularity = read_popularity(r, top, "")
    return RoutingProfile(name=name, display_name=r.string(top, "display_name", "", default=name),
                          description=r.string(top, "description", "", default=""), experts=experts, top_k=top_k,
                          lags=read_lags(r, top, ""), popularity=popularity, source=source,
                          citation=r.sources[source], note=r.string(top, "note", "", default=""), origin=where,
                          by_layer=read_by_layer(r, top, "", popularity))
