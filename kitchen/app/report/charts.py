"""One plotly.js figure per metric family, every run overlaid: a colour per key, a dash per run."""

from __future__ import annotations

from typing import Any

from kitchen.app.report.families import group_keys
from kitchen.app.report.rundata import RunData

COLORS = (
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def figures(runs: list[RunData]) -> list[dict[str, Any]]:
    """[{"family", "id", "data", "layout"}] for Plotly.newPlot, in family order."""
    series = [run.series() for run in runs]
    families = group_keys(key for s in series for key in s)
    out = []
    for n, (family, keys) in enumerate(families.items()):
        traces = []
        for r, (run, points_by_key) in enumerate(zip(runs, series, strict=True)):
            for k, key in enumerate(keys):
                points = points_by_key.get(key)
                if not points:
                    continue
                traces.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers" if len(points) < 30 else "lines",
                        "name": f"{run.name} · {key}" if len(runs) > 1 else key,
                        "x": [p[0] for p in points],
                        "y": [p[1] for p in points],
                        "line": {"color": COLORS[k % len(COLORS)], "dash": DASHES[r % len(DASHES)]},
                        "marker": {"size": 4},
                    }
                )
        layout = {
            "title": {"text": family, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
            "xaxis": {"title": {"text": "step"}},
            "margin": {"l": 55, "r": 10, "t": 35, "b": 40},
            "height": 320,
            "legend": {"orientation": "h", "y": -0.25, "font": {"size": 10}},
            "hovermode": "x unified",
        }
        out.append({"family": family, "id": f"chart-{n}", "data": traces, "layout": layout})
    return out
