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


SCALE_RATIO = 4.0  # keys whose largest values differ more than this go on separate axes
# Families whose keys share one unit (seconds, tokens/s, GiB): a phase's time is read against the
# step's total, on one axis, however much smaller it is.
ONE_UNIT = frozenset({"Step time", "Throughput", "Memory", "Learning rate"})


def magnitude(points: list[tuple[int, float]]) -> float:
    return max((abs(y) for _, y in points), default=0.0)


def split_axes(magnitudes: dict[str, float]) -> tuple[list[str], list[str]]:
    """The keys of one chart as (left axis, right axis): all on the left when their scales are
    alike; else split at the widest gap between their sizes, the larger ones on the left. DPO's
    accuracy (0 to 1) beside margins of 15 would otherwise be a flat line at the bottom."""
    nonzero = sorted((m, k) for k, m in magnitudes.items() if m > 0)
    if len(nonzero) < 2 or nonzero[-1][0] <= SCALE_RATIO * nonzero[0][0]:
        return sorted(magnitudes), []
    ratios = [nonzero[i + 1][0] / nonzero[i][0] for i in range(len(nonzero) - 1)]
    cut = ratios.index(max(ratios)) + 1
    right = {k for _, k in nonzero[:cut]}
    return sorted(k for k in magnitudes if k not in right), sorted(right)


def figures(runs: list[RunData]) -> list[dict[str, Any]]:
    """[{"family", "id", "data", "layout", "axes"}] for Plotly.newPlot, in family order; "axes"
    says which keys each y axis holds."""
    series = [run.series() for run in runs]
    families = group_keys(key for s in series for key in s)
    out = []
    for n, (family, keys) in enumerate(families.items()):
        sizes = {
            key: max(magnitude(s.get(key) or []) for s in series)
            for key in keys
            if any(s.get(key) for s in series)
        }
        left, right = (sorted(sizes), []) if family in ONE_UNIT else split_axes(sizes)
        traces = []
        for r, (run, points_by_key) in enumerate(zip(runs, series, strict=True)):
            for k, key in enumerate(keys):
                points = points_by_key.get(key)
                if not points:
                    continue
                name = f"{run.name} · {key}" if len(runs) > 1 else key
                traces.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers" if len(points) < 30 else "lines",
                        "name": name + (" (right axis)" if key in right else ""),
                        "x": [p[0] for p in points],
                        "y": [p[1] for p in points],
                        "yaxis": "y2" if key in right else "y",
                        "line": {"color": COLORS[k % len(COLORS)], "dash": DASHES[r % len(DASHES)]},
                        "marker": {"size": 4},
                    }
                )
        # The legend sits at the bottom of the figure, below the x axis title (its margin grows to
        # hold both): placed against the plot area, a legend of several rows covered the title.
        rows = -(-len(traces) // 3)  # entries per row at the narrowest chart width
        layout: dict[str, Any] = {
            "title": {"text": family, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
            "xaxis": {"title": {"text": "step"}, "automargin": True},
            "margin": {"l": 55, "r": 55 if right else 10, "t": 35, "b": 40},
            "height": 300 + 20 * rows,
            "legend": {
                "orientation": "h",
                "yref": "container",
                "y": 0,
                "yanchor": "bottom",
                "x": 0,
                "font": {"size": 10},
            },
            "hovermode": "x unified",
        }
        if right:  # the legend names the keys on it: an axis title ran into the chart's title
            layout["yaxis2"] = {
                "overlaying": "y",
                "side": "right",
                "showgrid": False,
                "automargin": True,
            }
        out.append(
            {
                "family": family,
                "id": f"chart-{n}",
                "data": traces,
                "layout": layout,
                "axes": {"y": left, "y2": right},
            }
        )
    return out
