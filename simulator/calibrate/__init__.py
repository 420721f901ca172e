"""Calibration: the kernel curves and fixed costs of a profile fitted to measured per-op tables (:mod:`.fit`), the
guards that refuse fits to artefacts (:mod:`.guard`), the bundled and aiconfigurator-core tables read as ops
(:mod:`.measured`, :mod:`.aic_tables`), the profile write-back (:mod:`.profile_io`) and the reports
(:mod:`.report`). It prices through the cost engine and is read by ``calibrate``, ``validate ops`` and the studies;
the cost engine never imports it."""
