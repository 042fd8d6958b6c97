"""Proof-status reports: Markdown, JSON, a self-contained HTML page with the proof graph, and DOT.

:func:`build_report` runs the evidence producers and derives every claim's
status; :func:`write_report` renders the chosen formats and writes them
atomically (all files appear together, or none do).

Examples
--------
>>> from symtrans.context import Context
>>> report = build_report(Context(model=None))
>>> sorted(render(report, ["md", "dot"]))
['report.dot', 'report.md']
"""

from symtrans.report.build import SCHEMA, Report, build_report, formula_rows, load_previous
from symtrans.report.write import FILES, check_output_dir, parse_formats, render, write_report

__all__ = ["Report", "build_report", "load_previous", "formula_rows", "SCHEMA", "FILES", "parse_formats",
           "render", "write_report", "check_output_dir"]
