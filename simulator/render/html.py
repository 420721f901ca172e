"""The self-contained HTML report page (docs/MODEL.md §5.6): one file, no network.

Charts are drawn in the browser by BokehJS (the Bokeh package's own ``bokeh.min.js`` and ``bokeh-api.min.js``, 1.4
MB together, inlined once); the page logic (``report_app.js``) builds every chart from the JSON data block the
simulator wrote, so the controls switch between precomputed views without a server, and every plotted number can be
downloaded as CSV from the page. A Content-Security-Policy forbids every fetch (scripts and styles are inline, images
only ``data:``/``blob:``), so the page cannot load anything from outside even by mistake. Why Bokeh: a well-kept
library whose full browser runtime ships inside its Python wheel (Plotly's one bundle is 4.8 MB, too large for a
5 MB page; Vega-Lite's JavaScript is not in altair's wheel).

The page records every uncaught error, rejected promise, console error and blocked fetch (``window.__errors``), but
one: "ResizeObserver loop completed with undelivered notifications", which the Resize Observer specification
delivers as an error event when layout settles over more than one frame (BokehJS re-lays out a plot when it is
redrawn); Chromium never logs it to the console and it is no script error.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

__all__ = ["BOKEH_FILES", "CSP", "bokeh_js", "page"]

BOKEH_FILES = ("bokeh.min.js", "bokeh-api.min.js")
CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")
_JS: dict[str, str] = {}


def bokeh_js() -> str:
    """BokehJS from the installed Bokeh package (read once per process)."""
    if "bokeh" not in _JS:
        import bokeh

        folder = Path(bokeh.__file__).parent / "server" / "static" / "js"
        _JS["bokeh"] = "\n".join((folder / f).read_text(encoding="utf-8") for f in BOKEH_FILES)
        _JS["version"] = bokeh.__version__
    return _JS["bokeh"]


STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1280px;padding:12px 20px;
color:#222}
h1{font-size:20px;margin:6px 0}h2{font-size:16px;margin:18px 0 6px}
#controls{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;z-index:10}
#controls label{margin-right:16px;font-size:14px}#controls select{font-size:14px;max-width:260px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:10px}.chart{min-height:340px}
.note{color:#555;font-size:13px}pre{background:#f6f6f6;padding:8px;font-size:12px;overflow:auto;max-height:320px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:13px;border:1px solid #ccc;padding:8px}
dt{font-weight:600}dd{margin:0}button{font-size:12px;margin:2px 6px 2px 0}
@media (max-width:900px){.grid{grid-template-columns:1fr}}
"""


def _json_block(data: dict) -> str:
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("</", "<\\/")  # a string can never close the script element


def page(data: dict, title: str) -> str:
    """The report page for ``data`` (the views :mod:`simulator.sweep.htmlreport` assembles)."""
    app = (Path(__file__).with_name("report_app.js")).read_text(encoding="utf-8")
    t = html.escape(title)
    buttons = "".join(f'<button data-csv="{c}">CSV: {c}</button>'
                      for c in ("speedup", "throughput", "breakdown", "walk", "schedule"))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{t}</title><style>{STYLE}</style>
<script>window.__errors=[];window.addEventListener("error",e=>{{if(!/^ResizeObserver loop/.test(e.message))
window.__errors.push("error: "+e.message);}});
window.addEventListener("unhandledrejection",e=>window.__errors.push("rejection: "+e.reason));
document.addEventListener("securitypolicyviolation",e=>window.__errors.push("blocked fetch: "+e.blockedURI));
(function(){{const ce=console.error;console.error=function(){{window.__errors.push("console: "+
Array.from(arguments).join(" "));ce.apply(console,arguments);}};}})();</script>
<script>{bokeh_js()}</script>
</head><body>
<h1>{t}</h1>
<p class="note">{html.escape(data.get("subtitle", ""))}</p>
<div id="controls"></div>
<p class="note" id="view-note"></p>
<div class="grid">
<div id="chart-speedup" class="chart"></div><div id="chart-throughput" class="chart"></div>
<div id="chart-breakdown" class="chart"></div><div id="chart-walk" class="chart"></div>
</div>
<p>{buttons}<button data-csv="all">CSV: every view</button></p>
<h2>Draft-length table in this engine's syntax</h2>
<p class="note" id="schedule-summary"></p>
<pre id="schedule-text"></pre>
<h2>Assumptions</h2>
<dl id="assumptions"></dl>
<div id="plan-section" style="display:none"><h2>Deployment plan</h2>
<div id="chart-plan" class="chart"></div><button data-csv="plan">CSV: plan</button><pre id="plan-text"></pre></div>
<pre id="selftest" style="display:none"></pre>
<script type="application/json" id="report-data">{_json_block(data)}</script>
<script>{app}</script>
</body></html>
"""
