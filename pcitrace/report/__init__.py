"""Batch reports: JSON (docs/report-schema.md), CSV, Markdown and HTML with plots.

``run_batch(tasks, options, jobs=, dask_address=)`` analyses captures in isolation (one
``report_one`` task each); ``pcitrace.report.writers`` and ``pcitrace.report.html`` turn the
results into text. The command is ``pcitrace report`` (pcitrace.report.commands).
"""
