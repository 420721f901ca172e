"""Draft trees: expected accepted length and round time when the verify pass scores a tree (docs/MODEL.md §4,
"Draft trees").

A tree is a parent list (``parents[v]`` = parent of node v, −1 at the root; :func:`simulator.overlap.check_parents`).
The root is the request's last token (the chain's position 0); every other node is a drafted token at depth
d ≥ 1. Children of a node are numbered by rank r = 0, 1, ... in parent-list order (rank 0 = the drafter's top-1).

Acceptance (engines' greedy tree verification, EAGLE-2/SpecInfer style, as they report it, bonus token included):
with a_d the probability that the top-1 child at depth d is accepted once its parent is (``Acceptance`` α or a_d per
position), each further sibling is an independent try at the same a_d on what the higher ranks missed, so the child
of rank r is the accepted one with probability a_d · (1 − a_d)^r (the events are disjoint). A node v is on the
accepted path with probability P(v) = Π over the edges from the root to v of those terms, and

    AL(tree) = 1 + Σ_{v ≠ root} P(v)

For a full tree (b_1, b_2, ...) this is AL = 1 + Σ_d Π_{j≤d} [1 − (1 − a_j)^{b_j}]; for a chain (all b_d = 1) it is
1 + Σ_{i=1..γ} Π_{j≤i} a_j, i.e. (1 − α^(γ+1)) / (1 − α) for one α. Adding a leaf adds a term ≥ 0 and changes no
other P(v) (the new child takes the last rank), so AL never falls.

Round time: one drafter pass per depth level, each over all nodes of the level it expands (n_{d−1} tokens per
request, n_0 = 1 the root), then one verify pass over all N nodes with the tree's unique experts
(``OverlapInput(tree=parents)``, :mod:`simulator.overlap.tree`):

    G(B, tree) = Σ_{d=1..D} T_draft(B, n_{d−1}) + T_ext(B, D + 1) + T(B, N) + T_reject + T_gdn(B, N − 1) + T_kern
    T_round(B, tree) = G + E_round

(every pass at the engine's captured CUDA-graph batch; T_gdn: :mod:`simulator.specdec.overheads`; T_ext, T_kern and
the exposed host time E: :mod:`simulator.specdec.engine_round` with D draft steps, N − 1 sampled positions and the
tree-building kernels of a tree wider than 1)

A chain of γ drafts (a 1-wide tree, N = γ + 1) is priced as the chain itself: exactly
:func:`simulator.specdec.speculative`'s round.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from ..cost.deployment import Deployment, Mechanisms
from ..cost.ops import BATCH, CONTEXT
from ..cost.routing import OverlapInput, model_overlap
from ..errors import ParameterError
from ..overlap.tree import check_parents
from ..params import declare
from ..specs.hardware import HardwareProfile
from ..specs.model import ModelSpec
from .acceptance import Acceptance
from .drafters import Drafter, draft_step_time, parse_drafter
from .engine_round import round_terms
from .overheads import gdn_checkpoint_time, padded_step
from .rounds import (
    SpecResult,
    StepCache,
    acceptance_band_of,
    assemble,
    draft_vocab,
    extend_time,
    fusion_time,
    rejection_time,
)

__all__ = ["TreeResult", "chain_parents", "is_chain", "level_sizes", "node_depths", "speculative_tree",
           "tree_accept_length", "tree_label", "tree_survival"]


def chain_parents(gamma: int) -> tuple:
    """The 1-wide tree of a chain of ``gamma`` drafts: γ + 1 nodes."""
    return tuple(range(-1, int(gamma)))


def node_depths(parents) -> np.ndarray:
    """Depth of every node (root 0)."""
    return _depths(check_parents(parents, "node_depths")).copy()


@functools.lru_cache(maxsize=256)
def _depths(par: tuple) -> np.ndarray:
    depth = np.full(len(par), -1)
    for v in range(len(par)):
        path, u = [], v
        while u != -1 and depth[u] < 0:
            path.append(u)
            u = par[u]
        base = -1 if u == -1 else depth[u]
        for i, w in enumerate(reversed(path)):
            depth[w] = base + i + 1
    return depth


def level_sizes(parents) -> np.ndarray:
    """Nodes per depth level, n_0 = 1 (the root), n_1, ..., n_D."""
    return np.bincount(node_depths(parents))


def is_chain(parents) -> bool:
    return bool(np.all(level_sizes(parents) == 1))


def _per_depth(acceptance: Acceptance, depth_max: int) -> np.ndarray:
    if acceptance.alpha is not None:
        return np.full(depth_max, float(acceptance.alpha))
    p = np.asarray(acceptance.per_position, dtype=float)
    if p.size < depth_max:
        raise ParameterError(f"per-position acceptance gives {p.size} positions but the tree is {depth_max} deep; give "
                             f"one probability per depth level", owner="tree_accept_length", param="acceptance")
    return p[:depth_max]


def tree_accept_length(parents, acceptance: Acceptance) -> float:
    """AL(tree) = 1 + Σ_{v≠root} P(v) (module docstring): expected tokens per round, bonus included."""
    return float(tree_survival(parents, acceptance).sum())


def tree_survival(parents, acceptance: Acceptance) -> np.ndarray:
    """P(a round yields ≥ k tokens), k = 1 … depth + 1: 1, then Σ P(v) over the nodes v at depth k − 1 (the accepted
    path is one root-to-node path, so the nodes of a depth are exclusive). Sums to AL(tree)."""
    try:
        key = tuple(int(p) for p in parents)
    except (TypeError, ValueError):
        key = check_parents(parents, "tree_accept_length")  # raises its one-line error
    par, depth, rank, levels = _shape(key)
    a = _per_depth(acceptance, int(depth.max()))
    ad = np.concatenate([[1.0], a])[depth]
    reach = np.ones(len(par))
    for nodes in levels:  # level by level, parents before children: P(v) = P(parent) · a · (1 − a)^(sibling rank)
        reach[nodes] = reach[par[nodes]] * ad[nodes] * (1.0 - ad[nodes]) ** rank[nodes]
    return np.bincount(depth, weights=reach, minlength=int(depth.max()) + 1)


@functools.lru_cache(maxsize=512)
def _shape(parents: tuple) -> tuple:
    """(parents, depth, sibling rank in parent-list order, the nodes of each depth ≥ 1) of a checked tree, once per
    tree (a bisection over the acceptance asks for the same tree many times)."""
    par = np.asarray(check_parents(parents, "tree_accept_length"), dtype=int)
    depth = node_depths(par)
    rank = np.zeros(len(par), dtype=int)
    seen: dict[int, int] = {}
    for v, p in enumerate(par.tolist()):
        if p >= 0:
            rank[v] = seen.get(p, 0)
            seen[p] = rank[v] + 1
    out = (par, depth, rank, *(np.flatnonzero(depth == d) for d in range(1, int(depth.max()) + 1)))
    for x in out:
        x.setflags(write=False)  # shared by every caller
    return out[0], out[1], out[2], out[3:]


def tree_label(parents) -> str:
    """'chain γ' for 1-wide trees; a full tree as its branching is typed for ``--tree``, 'tree 2,2,2 (15 nodes)';
    any other tree by its level sizes, 'tree levels 2/3/1 (7 nodes)'."""
    return _label(check_parents(parents, "tree_label"))


@functools.lru_cache(maxsize=256)
def _label(parents: tuple) -> str:
    from ..overlap import full_tree

    n = level_sizes(parents)
    if np.all(n == 1):
        return f"chain {len(n) - 1}"
    ways = [int(n[i] // n[i - 1]) for i in range(1, len(n))]
    if all(n[i] == ways[i - 1] * n[i - 1] for i in range(1, len(n))) and tuple(full_tree(ways)) == tuple(parents):
        return "tree " + ",".join(map(str, ways)) + f" ({int(n.sum())} nodes)"
    return "tree levels " + "/".join(str(int(x)) for x in n[1:]) + f" ({int(n.sum())} nodes)"


@dataclass(frozen=True)
class TreeResult:
    """One draft tree over the batch grid; times in seconds."""

    parents: tuple
    batch: np.ndarray  # (nb,)
    accept_length: float
    t_decode: np.ndarray  # (nb,)
    t_draft: np.ndarray  # (nb,) Σ_d T_draft(B, n_{d-1})
    t_verify: np.ndarray  # (nb,) T(B, N)
    t_reject: float
    t_round: np.ndarray  # (nb,)
    speedup: np.ndarray  # (nb,)
    decode: object = None  # StepResult of T(B, 1)
    verify: object = None  # StepResult of T(B, N)
    drafter_dep: Deployment | None = None
    t_overhead: np.ndarray | None = None  # (nb,) engine round overheads beside T_reject (specdec.overheads)
    engine: dict | None = None  # the engine terms and bands, one-row SpecResult fields (rounds.assemble)

    @property
    def nodes(self) -> int:
        return len(self.parents)

    @property
    def label(self) -> str:
        return tree_label(self.parents)

    def as_spec_result(self) -> SpecResult:
        """The tree as a one-row :class:`SpecResult` (draft length = drafted nodes N − 1; the per-round draft time
        Σ_d T_draft(B, n_{d−1}) is spread as N − 1 equal steps so that ``t_draft`` is the tree's)."""
        g = np.array([self.nodes - 1])
        d, v = self.decode, self.verify
        al = np.array([self.accept_length])
        return SpecResult(
            batch=self.batch, gammas=g, accept_length=al, alpha=np.array([np.nan]), t_decode=self.t_decode,
            t_verify=self.t_verify[None, :], t_draft_step=self.t_draft / max(1, int(g[0])),
            t_reject=np.array([self.t_reject]), t_round=self.t_round[None, :], speedup=self.speedup[None, :],
            unique_decode=np.asarray(d.unique_experts_total, float),
            unique_verify=np.asarray(v.unique_experts_total, float)[None, :],
            unique_decode_rank=np.asarray(d.unique_experts, float),
            unique_verify_rank=np.asarray(v.unique_experts, float)[None, :],
            bound_decode=d.bound, bound_verify=np.asarray(v.bound)[None, :], drafter_dep=self.drafter_dep,
            t_overhead=None if self.t_overhead is None else np.asarray(self.t_overhead)[None, :],
            **{k: v for k, v in (self.engine or {}).items() if k not in ("t_round", "speedup")})


@declare(batch=BATCH, context=CONTEXT)
def speculative_tree(target: ModelSpec, hw: HardwareProfile, dep: Deployment, batch, parents,
                     acceptance: Acceptance, drafter: Drafter | str = "eagle", context: int = 0,
                     mech: Mechanisms | None = None, overlap: OverlapInput | None = None,
                     cache: StepCache | None = None,
                     acceptance_band: tuple[Acceptance, Acceptance] | None = None) -> TreeResult:
    """Round time and speedup of one draft tree (module docstring); a 1-wide tree is priced as the chain."""
    par = check_parents(parents, "speculative_tree")
    mech = mech or Mechanisms()
    cache = cache or StepCache()
    drafter = parse_drafter(drafter)
    b = np.atleast_1d(np.asarray(batch, dtype=float))
    sizes = level_sizes(par)
    n = int(sizes.sum())
    dec_res = padded_step(cache, target, hw, dep, b, 1, context, mech, overlap)
    dec = dec_res.time
    chain = bool(np.all(sizes == 1)) or not target.ffn.is_moe  # a chain keeps the chain's statistics (no tree fit)
    vov = overlap if chain else replace(model_overlap(target, overlap), tree=par)
    ver_res = padded_step(cache, target, hw, dep, b, n, context, mech, vov, n > 1)  # an SD round's pass
    ver = ver_res.time
    t_draft = np.zeros_like(b)
    ddep = None
    for k in sizes[:-1]:  # the levels that are expanded: n_0 .. n_{D-1} (drafters priced by specdec.drafters)
        step, ddep = draft_step_time(drafter, target, hw, dep, b, int(k), context, mech, overlap, cache,
                                     dec if k == 1 else None)
        t_draft = t_draft + step
    depth = len(sizes) - 1
    t_rej = rejection_time(hw, mech) if depth >= 1 else 0.0
    t_over = gdn_checkpoint_time(target, hw, dep, b, n - 1, mech)  # engine round overheads (specdec.overheads)
    if depth:  # EAGLE-3's fc over the B · N verified nodes, once per round (drafting time; rounds.fusion_time)
        t_draft = t_draft + fusion_time(drafter, target, hw, ddep, b, [n - 1], mech)[0]
    t_ext = extend_time(drafter, target, hw, dep, b, [depth + 1], context, mech, overlap, cache,
                        _one_token(drafter, target, hw, dep, b, context, mech, overlap, cache, dec))[0]
    gpu = dec if depth == 0 else t_draft + t_ext + ver + t_rej + t_over
    al = tree_accept_length(par, acceptance)
    terms = round_terms(hw, dep, mech, b, [depth], [al], gpu[None, :], dec, draft_vocab(drafter, target),
                        target.vocab_size, drafter.kind, tree=not np.all(sizes == 1), positions=[n - 1],
                        hybrid=target.attention.linear is not None)
    bands = [[tree_accept_length(par, x)] for x in acceptance_band_of(acceptance, acceptance_band, drafter.kind,
                                                                       target.ffn.is_moe, target.name)]
    out = assemble([depth], gpu[None, :], dec, terms, np.array([al]), bands)
    return TreeResult(parents=par, batch=b, accept_length=al, t_decode=dec, t_draft=t_draft, t_verify=ver,
                      t_reject=t_rej, t_round=out["t_round"][0], speedup=out["speedup"][0], decode=dec_res,
                      verify=ver_res, t_overhead=t_over, drafter_dep=ddep, engine={**out, "t_extend": t_ext[None, :]})


def _one_token(drafter, target, hw, dep, b, context, mech, overlap, cache, dec) -> np.ndarray:
    """T_draft(B, 1): the one-token draft pass that the draft-extend pass replaces."""
    return draft_step_time(drafter, target, hw, dep, b, 1, context, mech, overlap, cache, dec)[0]
