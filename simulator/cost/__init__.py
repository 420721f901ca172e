"""Step-time cost engine: describe ops, then cost them (roofline + L2 + kernel curves + fixed costs)."""
