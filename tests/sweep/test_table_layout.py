"""sweep.table.tidy_columns: every row is its case's value at its (batch, draft length) point, rows ordered case,
then batch, then draft length, whatever grids the cases have (chains and a tree's single size side by side)."""

import numpy as np

from simulator.overlap.tree import full_tree
from simulator.sweep import run_sweep
from simulator.sweep.table import COLUMN_NAMES


def test_rows_are_each_cases_points_in_order():
    r = run_sweep(models=["qwen3-30b-a3b", "mixtral-8x7b"], hardware=["h100-sxm"], batch=[1, 4, 32],
                  draft_len=[0, 2, 5], trees=[full_tree((2, 2))])
    cols, row = r.columns, 0
    assert set(cols) == set(COLUMN_NAMES)
    grids = {(len(c.result.gammas), len(c.result.batch)) for c in r.cases}
    assert len(grids) > 1  # chain cases (3 draft lengths) beside tree cases (one size)
    for c in r.cases:
        res = c.result
        for i, b in enumerate(res.batch):
            for j, g in enumerate(res.gammas):
                assert cols["model"][row] == c.model.name and cols["tp"][row] == c.deployment.tp
                assert cols["batch"][row] == int(b) and cols["draft_len"][row] == g
                assert cols["accept_length"][row] == res.accept_length[j]
                assert cols["t_decode_us"][row] == res.t_decode[i] * 1e6
                assert cols["t_verify_us"][row] == res.t_verify[j, i] * 1e6
                assert cols["speedup"][row] == res.speedup[j, i]
                assert cols["bound_verify"][row] == res.bound_verify[j, i]
                row += 1
    assert row == len(r) and np.all(np.isfinite(cols["speedup"]))
