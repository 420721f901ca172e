"""The maximum-entropy engines: laws of one expert's activations x ∈ {0,1}^n over n consecutive tokens, from
marginal constraints, vectorised over G distinct constraint sets (docs/MODEL.md §2.3–2.5). Pure numerics on arrays:
no routing statistics here (``overlap.constraints`` turns them into positions and targets, ``overlap.fit`` picks
the engine per fit method).

The exact finite-n maximum-entropy law (the I-projection of the uniform law onto the constraints), by IPF:
    ``chain_ipf``   on the junction tree (chain of w-token cliques): linear in n      — fit method ``ipf``
    ``table_ipf``   over the whole 2^n table, the reference (n <= 20)                 — fit method ``ipf_table``
Closed forms and the stationary counterpart:
    ``markov``      lag-1 constraints only: the stationary first-order Markov chain   — fit method ``markov``
    ``stationary``  the maximum-entropy-rate stationary chain (Newton on the dual, transfer matrices)
    ``junction``    the junction tree of the band constraint graph, and P(0…0) of the stationary chain over it
                    (``stationary`` + ``junction``                                    — fit method ``junction``)
Shared by the engines:
    ``tables``      bit layouts: table reshapes, marginals, pattern indices, window ↔ state maps
    ``convergence`` when IPF stops (stalled, sublinear) and facial reduction (largest support by linear programs)
"""

from .chain_ipf import MAX_CHAIN_WIDTH, ChainResult, chain_ipf, chain_table, clear_plans, extend_potentials
from .junction import JunctionTree, junction_table, junction_tree, log_prob_zero
from .markov import markov_p_zero, markov_table
from .stationary import StationaryFit, TransferMatrix, fit_stationary, window_features
from .table_ipf import MAX_TABLE_TOKENS, TableResult, table_ipf
from .tables import marginal

__all__ = [
    "MAX_CHAIN_WIDTH",
    "MAX_TABLE_TOKENS",
    "ChainResult",
    "JunctionTree",
    "StationaryFit",
    "TableResult",
    "TransferMatrix",
    "chain_ipf",
    "chain_table",
    "clear_plans",
    "extend_potentials",
    "fit_stationary",
    "junction_table",
    "junction_tree",
    "log_prob_zero",
    "marginal",
    "markov_p_zero",
    "markov_table",
    "table_ipf",
    "window_features",
]
