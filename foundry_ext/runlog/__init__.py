"""One reader of run logs, for every command: ``law fit``, ``law predict --trace/--metrics`` and ``plot --metrics``.

A run log is one of:

- **a CSV file**: ``step,lr,loss`` for the law (:func:`read_lr_loss`), ``batch,value`` for a plateau's monitored
  metric (:func:`read_series`). Read line by line in bounded memory (:mod:`.csv_log`).
- **an MLflow run**, read through MLflow's own client (:mod:`.mlflow_log`; MLflow is imported only then):
  a run folder of a local file store (``mlruns/<experiment>/<run>``), or ``runs:/RUN_ID`` resolved against
  ``MLFLOW_TRACKING_URI`` (a ``file:`` store, a database such as ``sqlite:///mlflow.db``, or a tracking server
  ``http://host:5000``), the way llm-foundry's ``MLFlowLogger`` logs them.

Every error is a :class:`RunLogError` whose message is one line naming the source (and line or key), the value and
what is allowed. numpy and the standard library only at import: no torch, no Composer, no MLflow.
"""

from __future__ import annotations

import os

from foundry_ext.runlog.csv_log import MAX_BATCHES, MAX_LINE, MAX_ROWS, read_lr_loss_csv, read_series_csv
from foundry_ext.runlog.errors import RunLogError
from foundry_ext.runlog.log import LrLossLog

__all__ = [
    "MAX_BATCHES",
    "MAX_LINE",
    "MAX_ROWS",
    "LrLossLog",
    "RunLogError",
    "is_mlflow",
    "read_lr_loss",
    "read_series",
    "unique_names",
]


def is_mlflow(source: str) -> bool:
    """Whether ``source`` names an MLflow run (``runs:/RUN_ID`` or a folder) rather than a CSV file."""
    return source.startswith("runs:/") or os.path.isdir(source)


def read_lr_loss(source: str, metric: str) -> LrLossLog:
    """The LR and loss of a run: a ``step,lr,loss`` CSV or an MLflow run (``metric``: its loss key)."""
    if is_mlflow(source):
        from foundry_ext.runlog.mlflow_log import read_lr_loss_mlflow

        return read_lr_loss_mlflow(source, metric)
    return read_lr_loss_csv(source)


def read_series(source: str, key: str | None) -> list[tuple[int, float]]:
    """``(batch, value)`` rows in order: a ``batch,value`` CSV, or metric ``key`` of an MLflow run."""
    if is_mlflow(source):
        from foundry_ext.runlog.mlflow_log import read_series_mlflow

        return read_series_mlflow(source, key)
    return read_series_csv(source)


def unique_names(logs: list[LrLossLog]) -> list[str]:
    """How reports name each run: its short name, or the source as given where two short names are the same.

    Two ``run.csv`` in two folders are two runs: the checks that compare runs (peak LRs, lengths) key them by name.
    """
    names = [log.name for log in logs]
    return [log.source if names.count(log.name) > 1 else log.name for log in logs]
