"""calibrate.blocks.hand_set: a refit of an engine block keeps what it did not fit (a kernel copied by hand from
another engine's fit, a stated band) and drops its own stale values (b200's hand-copied vLLM moe_min_latency
mxfp4 was lost by a refit before this)."""

from simulator.calibrate.blocks import hand_set, render

BLOCK = """\
  vllm:
    kernels:
      graphs: {sizes: [1, 2, 4], unit: tokens, source: E-v}
      classes:
        moe:
          mxfp4:
            fixed: {value: 20, unit: us, source: fit-vllm}
            tile_rows: {value: 128, unit: count, source: assumed, reason: "the fit's"}
        moe_min_latency:
          mxfp4:
            fixed: {value: 21.4, unit: us, source: flashinfer-mxfp8-sglang, note: "hand copy"}
            tile_rows: {value: 128, unit: count, source: assumed, reason: "the copy's"}
      step:
        launch_eager: {value: 13.5, unit: us, source: fit-vllm}
        host_overhead: {value: 30, unit: us, source: assumed, reason: "kept"}
      round:
        round_host: {low: 1, central: 2, high: 3, unit: ms, source: stated}
""".splitlines(keepends=True)


def test_hand_set_keeps_nodes_the_fit_does_not_write():
    kept = hand_set(BLOCK, "fit-vllm")
    copy = "kernels.classes.moe_min_latency.mxfp4."
    assert set(kept) == {copy + "fixed", copy + "tile_rows", "kernels.round.round_host"}
    assert kept["kernels.classes.moe_min_latency.mxfp4.fixed"].startswith("{value: 21.4")
    # another engine's source keeps everything but the graphs line
    assert len(hand_set(BLOCK, "fit-sglang")) == 7


def test_kept_leaves_render_back_in_place():
    lines = render(hand_set(BLOCK, "fit-vllm"), "kernels.", 6)
    assert lines[:3] == ["      classes:\n", "        moe_min_latency:\n", "          mxfp4:\n"]
    assert "      round:\n" in lines
