"""Render run directories into one self-contained HTML file: plotly.js and the data inlined, no
network needed to open it."""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from pathlib import Path

from kitchen.app.report.charts import figures
from kitchen.app.report.compare import config_rows, final_eval
from kitchen.app.report.rundata import RunData, load_run, unique_names
from kitchen.app.report.thumbnails import Thumbnails
from kitchen.app.report.transcripts import pair_columns, pair_steps, rollout_views
from kitchen.engine.errors import ConfigError


def _libraries() -> tuple[object, str]:
    try:
        import jinja2
        from plotly.offline import get_plotlyjs
    except ModuleNotFoundError as e:
        raise ConfigError(f"kitchen report needs {e.name}: pip install 'kitchen[report]'") from None
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kitchen.app.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env, get_plotlyjs()


def _script_json(value: object) -> str:
    """JSON safe inside a <script> element: no `</` can close it early."""
    return json.dumps(value).replace("</", "<\\/")


def render(runs: list[RunData], max_iterations: int = 40, max_groups: int = 8) -> str:
    env, plotly_js = _libraries()
    unique_names(runs)
    rows, same = config_rows(runs)
    pictures = {r.name: Thumbnails(r.path) for r in runs}
    template = env.get_template("report.html.j2")  # type: ignore[attr-defined]
    return str(
        template.render(
            runs=runs,
            title=" vs ".join(r.name for r in runs),
            generated=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            plotly_js=plotly_js.replace("</script", "<\\/script"),
            charts=figures(runs),
            script_json=_script_json,
            config_rows=rows,
            config_same=same,
            final_eval=final_eval(runs),
            rollouts={
                r.name: rollout_views(r.rollouts, max_iterations, max_groups, pictures[r.name].all)
                for r in runs
            },
            pictures=pictures,
            pair_columns={r.name: pair_columns(r.pairs) for r in runs},
            pair_steps={r.name: pair_steps(r.pairs, max_iterations) for r in runs},
        )
    )


def write_report(
    run_dirs: Sequence[str | Path],
    out: str | Path | None = None,
    max_iterations: int = 40,
    max_groups: int = 8,
) -> Path:
    """Write the report of `run_dirs` to `out` (default: report.html in the first run directory)."""
    if not run_dirs:
        raise ConfigError("kitchen report: give at least one run directory")
    runs = [load_run(Path(d)) for d in run_dirs]
    path = Path(out) if out is not None else Path(run_dirs[0]) / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(runs, max_iterations, max_groups))
    return path
