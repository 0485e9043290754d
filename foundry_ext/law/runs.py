"""Read runs into :class:`~foundry_ext.law.trace.Trace`: a ``step,lr,loss`` CSV or an MLflow run.

The reading is :mod:`foundry_ext.runlog`'s (CSV line by line within bounds; MLflow through its own client: a run
folder of a local file store, or ``runs:/RUN_ID`` of ``MLFLOW_TRACKING_URI``: a file store, a database or a
tracking server). Here a run log becomes a trace: the LR of every batch and the losses.

**CSV.** Columns ``step,lr,loss`` (a header naming them, in any order; more columns are ignored): ``lr`` is the LR
of the 0-indexed batch ``step``, the LR between two rows is linear (so a cosine needs a row every few hundred
batches, a step decay a row on each side of the step); ``loss`` is the loss after ``step`` batches, empty on rows
that only pin the LR. The trace covers batches ``0 .. last step``.

**MLflow**: the LR is ``lr_monitor``'s ``lr-<optimizer>/group0`` metric, the loss ``--metric`` (its value at step
``n``: after ``n`` batches). lr_monitor logs at the end of each batch, after the scheduler stepped and the timestamp
advanced: the value at step ``b`` is the LR of 0-indexed batch ``b`` (steps ``1 .. N`` of an ``N``-batch run; the
last is the LR a batch ``N`` would get), and batch 0 trains with the LR of batch 1 (Composer evaluates both at
timestamp 0; :mod:`foundry_ext.preview`). Composer's MLflow logger drops a value equal to the one before it
(``log_duplicated_metric_every_n_steps``), so a batch without an LR value has the LR of the last one logged (a step
function, not a line).
"""

from __future__ import annotations

from collections.abc import Sequence

from foundry_ext.law.trace import Trace
from foundry_ext.runlog import LrLossLog, RunLogError, is_mlflow, read_lr_loss, unique_names
from foundry_ext.runlog.csv_log import read_lr_loss_csv
from foundry_ext.runlog.mlflow_log import read_lr_loss_mlflow

__all__ = ["DEFAULT_METRIC", "RunError", "read_csv", "read_mlflow", "read_run", "read_runs"]

DEFAULT_METRIC = "metrics/eval/LanguageCrossEntropy"

RunError = RunLogError  # the name the law's callers know


def _trace(log: LrLossLog, warmup: int | None, name: str | None = None) -> Trace:
    return Trace(name or log.name, log.lr_per_batch(), log.loss_steps, log.losses, warmup)


def read_run(path: str, metric: str = DEFAULT_METRIC, warmup: int | None = None) -> Trace:
    """A CSV file or an MLflow run (a folder or ``runs:/RUN_ID``), by what ``path`` is."""
    return _trace(read_lr_loss(path, metric), warmup)


def read_runs(paths: Sequence[str], metric: str = DEFAULT_METRIC, warmup: int | None = None) -> list[Trace]:
    """Several runs, named so that no two are the same (``a/run.csv`` and ``b/run.csv`` by their paths)."""
    logs = [read_lr_loss(p, metric) for p in paths]
    return [_trace(log, warmup, name) for log, name in zip(logs, unique_names(logs), strict=True)]


def read_csv(path: str, warmup: int | None = None) -> Trace:
    """A ``step,lr,loss`` CSV (see the module docstring)."""
    return _trace(read_lr_loss_csv(path), warmup)


def read_mlflow(path: str, metric: str = DEFAULT_METRIC, warmup: int | None = None) -> Trace:
    """An MLflow run: a run folder of a local file store or ``runs:/RUN_ID`` (see the module docstring)."""
    if not is_mlflow(path):
        raise RunError(f"{path}: not an MLflow run (a run folder or runs:/RUN_ID)")
    return _trace(read_lr_loss_mlflow(path, metric), warmup)
