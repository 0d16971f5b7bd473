"""`kitchen report`: the curves, config, plan, checkpoints, evaluation and transcripts of one or
more run directories as one offline HTML page."""

from kitchen.app.report.page import render, write_report
from kitchen.app.report.rundata import RunData, load_run

__all__ = ["RunData", "load_run", "render", "write_report"]
