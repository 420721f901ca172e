"""Presentation: text tables fitted to the terminal (:mod:`.textable`), the figures of speedup curves and study
plots (:mod:`.figures`, :mod:`.panels`) and the Pillow rasteriser they draw with (:mod:`.raster`). Nothing here
prices anything: it draws and formats numbers the pricing and study layers hand it."""
