"""Issue 13 item 5: sweep figures as a model × GPU grid with one y range, sparse log2 batch ticks, split per GPU (or
model) beyond 24 panels with an index. Layout is tested without rendering; one small figure is rendered."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from simulator.render import figures, panels
from simulator.render.panels import MAX_PANELS, batch_ticks, panel_grid, split_panels, y_range
from simulator.sweep import run_sweep


def _keys(models: int, gpus: int) -> list[tuple[str, str]]:
    return [(f"m{i}", f"g{j}") for j in range(gpus) for i in range(models)]


@pytest.mark.parametrize("models, gpus, shape", [(1, 1, (1, 1)), (2, 2, (2, 2)), (3, 1, (1, 3)), (1, 3, (1, 3)),
                                                 (18, 1, (5, 4)), (2, 8, (8, 2)), (3, 4, (3, 4))])
def test_grid_shape(models, gpus, shape):
    g = panel_grid(_keys(models, gpus))
    assert g.shape == shape
    assert len(set(g.cells)) == models * gpus and all(r < shape[0] and c < shape[1] for r, c in g.cells)


def test_model_by_gpu_grid_puts_models_in_rows_and_gpus_in_columns():
    keys = _keys(2, 2)  # order: GPU-major, as a sweep prices them
    g = panel_grid(keys)
    for (m, gpu), (r, c) in zip(keys, g.cells, strict=True):
        assert (r, c) == (int(m[1:]), int(gpu[1:]))


def test_split_beyond_the_panel_limit():
    assert split_panels(_keys(18, 1)) == [("", list(range(18)))]
    one_gpu = split_panels(_keys(30, 1))  # pages of one GPU
    assert [s for s, _ in one_gpu] == ["-g0-1", "-g0-2"] and [len(i) for _, i in one_gpu] == [MAX_PANELS, 6]
    per_gpu = split_panels(_keys(18, 3))  # 54 panels: one file per GPU
    assert [s for s, _ in per_gpu] == ["-g0", "-g1", "-g2"]
    per_model = split_panels(_keys(3, 10))  # 30 panels: 3 files per model beat 10 per GPU
    assert [s for s, _ in per_model] == ["-m0", "-m1", "-m2"]
    for parts in (one_gpu, per_gpu, per_model):
        idx = sorted(i for _, ix in parts for i in ix)
        assert idx == list(range(len(idx))) and all(len(ix) <= MAX_PANELS for _, ix in parts)


def test_sparse_power_of_two_batch_ticks():
    assert batch_ticks([1, 2, 4, 8]) == [1, 2, 4, 8]
    dense = batch_ticks(list(range(1, 1025)))
    assert 3 <= len(dense) <= panels.MAX_XTICKS and dense[0] == 1
    assert all(t & (t - 1) == 0 for t in dense) and dense[-1] <= 1024
    assert batch_ticks([3, 5, 6]) == [4]


def test_one_y_range_covers_every_panel_and_reference():
    lo, hi, ticks = y_range([1.2, 2.9, 0.8], refs=[1.0, 4.0])
    assert lo < 0.8 and hi > 4.0 and len(ticks) <= 6 and all(lo <= t <= hi for t in ticks)
    assert y_range([1], fixed=(-0.3, 8.5), integer=True)[2] == [0, 2, 4, 6, 8]


def _fake_result(models: int, gpus: int):
    """A SweepResult-shaped stand-in for layout tests (cases with model, hardware, deployment, mode, result)."""
    from types import SimpleNamespace as NS

    batch = np.array([1.0, 2, 4, 8])
    gam = np.array([1, 2, 3])
    cases = []
    for j in range(gpus):
        for i in range(models):
            for mode, scale in (("prior", 1.0), ("refined", 1.5)):
                res = NS(batch=batch, gammas=gam, speedup=scale * (i + 1) * np.ones((3, 4)) * (j + 1),
                         verify_decode_ratio=np.ones((3, 4)))
                dep = NS(label="fp8_block tp8 ep8")
                cases.append(NS(model=NS(name=f"model-{i}"), hardware=NS(name=f"gpu-{j}"), deployment=dep, mode=mode,
                                variant="", result=res, key=(f"model-{i}", f"gpu-{j}")))
    return NS(cases=cases, drafter=NS(label="eagle"), acceptance=NS(label="alpha=0.75"),
              acceptances=(("alpha=0.75", None, ()),), context=1024)


def test_split_figures_share_one_y_range_and_write_an_index(tmp_path, monkeypatch):
    drawn = []

    def fake_draw(grid, built, **kw):
        drawn.append((grid.shape, len(built), kw["yr"], kw["title"]))
        return object()

    monkeypatch.setattr(figures, "draw_grid", fake_draw)
    monkeypatch.setattr(figures, "save", lambda fig, path, **kw: str(path))
    files = figures.plot_all(_fake_result(13, 2), tmp_path)  # 26 panels > 24: one file per GPU
    names = [f.rsplit("/", 1)[-1] for f in files]
    assert names[:2] == ["speedup_vs_batch-gpu-0.png", "speedup_vs_batch-gpu-1.png"] and len(files) == 7
    assert names[-1] == "figures.md" and "speedup_vs_batch-gpu-1.png" in (tmp_path / "figures.md").read_text()
    speed = drawn[:2]
    assert speed[0][2] == speed[1][2]  # one y range across the split files of a figure
    lo, hi, _ = speed[0][2]
    assert lo < 1.0 and hi > 1.5 * 13 * 2  # ... covering the largest speedup of either GPU
    assert [d[0] for d in speed] == [(4, 4), (4, 4)] and "gpu-1" in speed[1][3]


def test_no_index_when_nothing_is_split(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "draw_grid", lambda grid, built, **kw: object())
    monkeypatch.setattr(figures, "save", lambda fig, path, **kw: str(path))
    files = figures.plot_all(_fake_result(2, 2), tmp_path)
    assert len(files) == 3 and not (tmp_path / "figures.md").exists()


def _png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


def test_render_one_small_2x2_figure(tmp_path):
    r = run_sweep(["olmoe-1b-7b", "qwen3-30b-a3b"], ["h100-sxm", "b200"], batch=[1, 4, 16], draft_len=[1, 3])
    (path,) = figures.plot_speedup(r, tmp_path / "s.png")
    w, h = _png_size(path)
    p = panels
    assert w == round(100 * (p.LEFT + p.RIGHT + 2 * p.PANEL_W + p.GAP_W))  # two GPU columns, not four in a row
    # two model rows, under a title of 2 + k lines (it wraps to the canvas: issue 20)
    assert any(h == round(100 * (p.HEAD + k * p.TITLE_LINE + p.BOTTOM + 2 * p.PANEL_H + p.GAP_H)) for k in range(3))


@pytest.mark.parametrize("lo, hi, integer", [(0.7, 3.4, False), (-0.3, 8.5, True), (0.93, 1.07, False),
                                             (-0.3, 16.5, True), (0.0, 1e-3, False), (120.0, 980.0, False)])
def test_nice_ticks_are_round_evenly_spaced_and_inside_the_range(lo, hi, integer):
    t = np.asarray(panels.nice_ticks(lo, hi, integer=integer))
    assert 3 <= t.size <= 6 and lo <= t.min() and t.max() <= hi
    step = np.diff(t)
    assert np.allclose(step, step[0])
    mant = step[0] / 10 ** np.floor(np.log10(step[0]))
    assert min(abs(mant - m) for m in (1, 2, 2.5, 5)) < 1e-9  # 1, 2, 2.5 or 5 × 10^k
    assert np.allclose(t / step[0], np.round(t / step[0]))  # multiples of the step
    if integer:
        assert np.allclose(t, np.round(t))


def test_pillow_raster_draws_the_curves_grid_and_matches_the_matplotlib_fallback(tmp_path):
    from simulator.render import raster

    if raster.font_path() is None:
        pytest.skip("Pillow without FreeType: the Matplotlib fallback draws")
    r = run_sweep(["olmoe-1b-7b"], ["h100-sxm"], batch=[1, 4, 16], draft_len=[1, 3])
    keys = figures.panel_keys(r)
    built = [panels.Panel("t", [("refined", [1, 4, 16], [1.2, 1.5, 1.1], figures.style("refined")),
                                ("prior", [1, 4, 16], [1.4, 1.3, 1.0], figures.style("prior"))])]
    scene = panels.draw_grid(panel_grid(keys), built, title="T", xlabel="x", ylabel="y", batch=[1, 4, 16],
                             yr=y_range([1.0, 1.5]), refs=(("one", 1.0, {"color": "0.4", "linestyle": ":"}),))
    img = np.asarray(scene.to_image(100))
    colours = {tuple(c) for c in img.reshape(-1, 3)[::7].tolist()}
    assert (0x1b, 0x9e, 0x77) in colours and (0xd9, 0x5f, 0x02) in colours  # refined and prior curves
    assert img.shape[:2] == (round(100 * scene.height), round(100 * scene.width))
    grey = (np.abs(img.astype(int) - 224).max(axis=2) <= 6).sum()  # the 0.88-grey grid lines survive
    assert grey > 200
    fig = scene.to_matplotlib()  # the fallback draws the same scene
    assert tuple(fig.get_size_inches()) == pytest.approx((scene.width, scene.height))


def test_ratio_figure_draws_tree_cases_beside_chains(tmp_path):
    """A sweep with a draft tree (one size: its node count) draws the ratio figure: the tree's panel shows its
    own verify pass instead of failing on a draft length it does not have."""
    from simulator.render.figures import plot_ratio
    from simulator.sweep import run_sweep

    res = run_sweep("qwen3-30b-a3b", "h100-sxm", batch=[1, 4], draft_len=[1, 3], modes=["refined"],
                    trees=[(-1, 0, 0)])
    assert any(3 not in c.result.gammas for c in res.cases)
    files = plot_ratio(res, tmp_path / "ratio.png")
    assert files and all((tmp_path / f).exists() or __import__("pathlib").Path(f).exists() for f in files)


def test_long_figure_titles_wrap_to_the_width_never_clip():
    """Issue 20: a one-panel figure's long title wraps (each line within the canvas) and the head grows."""
    from simulator.render.panels import TITLE_PT, Panel, draw_grid, panel_grid, y_range
    from simulator.render.raster import text_inches

    words = "acceptance default: vLLM PR #24344 rates 0.77,0.45,0.24 + geometric tail, context 1024 tokens"
    args = {"xlabel": "batch", "ylabel": "speedup", "batch": [1, 4, 16], "yr": y_range([1.0, 2.0])}
    panels = [Panel("m", [("refined", [1, 4, 16], [1.5, 1.6, 1.7], {"color": "C0"})])]
    short = draw_grid(panel_grid([("m", "h")]), panels, title="Speedup vs batch", **args)
    long = draw_grid(panel_grid([("m", "h")]), panels, title="Speedup vs batch\n" + words * 2, **args)
    title = next(t for t in long.texts if t[2].startswith("Speedup vs batch"))[2]
    lines = title.split("\n")
    assert len(lines) >= 3 and " ".join(lines).split() == ("Speedup vs batch\n" + words * 2).split()
    assert max(text_inches(x, TITLE_PT) for x in lines) <= long.width
    assert long.height > short.height and long.width == short.width


def test_study_batch_panels_wrap_into_four_columns(tmp_path):
    """A study's log2-batch panels (the paper-curves figure) go through the sweep's panel renderer: five panels
    wrap into 4 columns and 2 rows on one canvas."""
    b = np.array([1.0, 4.0, 16.0])
    series = [("refined", b, np.array([2.0, 1.8, 1.2]), figures.style("refined"))]
    path = figures.batch_panels(tmp_path / "c.png", {f"model {i}": series for i in range(5)}, "title",
                                "speedup (x)", refs=(figures.NO_SPEEDUP,))
    w, h = _png_size(path)
    p = panels
    assert w == round(100 * (p.LEFT + p.RIGHT + 4 * p.PANEL_W + 3 * p.GAP_W))
    assert any(h == round(100 * (p.HEAD + k * p.TITLE_LINE + p.BOTTOM + 2 * p.PANEL_H + p.GAP_H)) for k in range(3))
