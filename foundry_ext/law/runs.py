"""Read runs into :class:`~foundry_ext.law.trace.Trace`: a ``step,lr,loss`` CSV, or an MLflow run directory.

**CSV.** Columns ``step,lr,loss`` (a header naming them, in any order; more columns are ignored): ``lr`` is the LR
of the 0-indexed batch ``step``, the LR between two rows is linear (so a cosine needs a row every few hundred
batches, a step decay a row on each side of the step); ``loss`` is the loss after ``step`` batches, empty on rows
that only pin the LR. The trace covers batches ``0 .. last step``.

**MLflow** (a run directory of a local file store, ``mlruns/<experiment>/<run>``): the LR is ``lr_monitor``'s
``lr-<optimizer>/group0`` metric, the loss ``--metric`` (its value at step ``n``: after ``n`` batches). lr_monitor
logs at the end of each batch, after the scheduler stepped and the timestamp advanced: the value at step ``b`` is the
LR of 0-indexed batch ``b`` (steps ``1 .. N`` of an ``N``-batch run; the last is the LR a batch ``N`` would get), and
batch 0 trains with the LR of batch 1 (Composer evaluates both at timestamp 0; :mod:`foundry_ext.preview`).
Composer's MLflow logger drops a value equal to the one before it (``log_duplicated_metric_every_n_steps``), so a
batch without an LR value has the LR of the last one logged (a step function, not a line).
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import numpy as np

from foundry_ext.law.trace import Trace

__all__ = ["DEFAULT_METRIC", "RunError", "read_csv", "read_mlflow", "read_run"]

DEFAULT_METRIC = "metrics/eval/LanguageCrossEntropy"


class RunError(ValueError):
    """A run that cannot be read: the message is one line naming the file, the value and what is allowed."""


def read_run(path: str, metric: str = DEFAULT_METRIC, warmup: int | None = None) -> Trace:
    """A CSV file or an MLflow run directory, by what ``path`` is."""
    if os.path.isdir(path):
        return read_mlflow(path, metric, warmup)
    if not os.path.isfile(path):
        raise RunError(f"{path}: no such file or directory (expected a step,lr,loss CSV or an MLflow run directory)")
    return read_csv(path, warmup)


def _number(text: str, where: str, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RunError(f"{where}: {column} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise RunError(f"{where}: {column} {text} is not finite")
    return value


def read_csv(path: str, warmup: int | None = None) -> Trace:
    """A ``step,lr,loss`` CSV (see the module docstring)."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        cols = [c.strip().lower() for c in header] if header else []
        missing = [c for c in ("step", "lr", "loss") if c not in cols]
        if missing:
            raise RunError(
                f"{path}: the header must name the columns step,lr,loss; missing {','.join(missing)} "
                f"(header: {','.join(header or []) or 'none'})"
            )
        i_step, i_lr, i_loss = (cols.index(c) for c in ("step", "lr", "loss"))
        steps: list[int] = []
        lrs: list[float] = []
        loss_steps: list[int] = []
        losses: list[float] = []
        for lineno, row in enumerate(reader, start=2):
            if not any(c.strip() for c in row):
                continue
            where = f"{path}:{lineno}"
            cells = row + [""] * (len(cols) - len(row))
            step_f = _number(cells[i_step].strip(), where, "step")
            if step_f != int(step_f) or step_f < 0:
                raise RunError(f"{where}: step {cells[i_step].strip()} must be an integer >= 0 (a batch count)")
            step = int(step_f)
            if steps and step <= steps[-1]:
                raise RunError(f"{where}: step {step} does not increase (the row before has step {steps[-1]})")
            lr = _number(cells[i_lr].strip(), where, "lr")
            if lr < 0:
                raise RunError(f"{where}: lr {cells[i_lr].strip()} is negative")
            steps.append(step)
            lrs.append(lr)
            text = cells[i_loss].strip()
            if text:
                loss = _number(text, where, "loss")
                if loss <= 0:
                    raise RunError(f"{where}: loss {text} must be > 0 (a cross-entropy)")
                loss_steps.append(step)
                losses.append(loss)
    if not steps:
        raise RunError(f"{path}: no rows after the header")
    if steps[0] != 0:
        raise RunError(f"{path}: the first row must be step 0 (the LR of the first batch), not step {steps[0]}")
    batches = np.arange(steps[-1] + 1)
    lr_per_batch = np.interp(batches, np.asarray(steps, dtype=np.float64), np.asarray(lrs))
    return Trace(Path(path).stem, lr_per_batch, np.asarray(loss_steps), np.asarray(losses), warmup)


def _metric_file(run_dir: Path, key: str) -> Path:
    return run_dir / "metrics" / key


def _metric_keys(run_dir: Path) -> list[str]:
    root = run_dir / "metrics"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _read_metric(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """MLflow's file store: one ``timestamp value step`` line per logged value; the last value of a step wins."""
    by_step: dict[int, float] = {}
    with open(path) as f:
        for lineno, line in enumerate(f, start=1):
            parts = line.split()
            if len(parts) < 3:
                continue
            try:
                value, step = float(parts[1]), int(parts[2])
            except ValueError:
                raise RunError(f"{path}:{lineno}: expected 'timestamp value step', got {line.strip()!r}") from None
            if not math.isfinite(value):
                raise RunError(f"{path}:{lineno}: value {parts[1]} at step {step} is not finite")
            by_step[step] = value
    steps = np.asarray(sorted(by_step), dtype=np.int64)
    return steps, np.asarray([by_step[s] for s in steps.tolist()])


def read_mlflow(path: str, metric: str = DEFAULT_METRIC, warmup: int | None = None) -> Trace:
    """An MLflow run directory of a local file store (see the module docstring)."""
    run_dir = Path(path)
    if not (run_dir / "metrics").is_dir():
        raise RunError(f"{path}: not an MLflow run directory (no metrics/ folder; expected mlruns/<experiment>/<run>)")
    keys = _metric_keys(run_dir)
    lr_keys = [k for k in keys if k.startswith("lr-") and k.endswith("group0")]
    if not lr_keys:
        raise RunError(
            f"{path}: no lr_monitor metric (lr-<optimizer>/group0); add the lr_monitor callback to the run; "
            f"metrics it has: {', '.join(keys) or 'none'}"
        )
    if metric not in keys:
        raise RunError(f"{path}: no metric {metric!r} (--metric); metrics it has: {', '.join(keys) or 'none'}")
    lr_steps, lr_values = _read_metric(_metric_file(run_dir, lr_keys[0]))
    if (lr_values < 0).any():
        raise RunError(f"{path}: {lr_keys[0]} has a negative LR")
    if lr_steps[0] != 1:
        raise RunError(f"{path}: {lr_keys[0]} starts at step {lr_steps[0]}, not 1: the run resumed or lost values")
    loss_steps, losses = _read_metric(_metric_file(run_dir, metric))
    if (losses <= 0).any():
        raise RunError(f"{path}: {metric} has a value <= 0; expected a cross-entropy")
    # a batch without a logged LR repeats the last logged value (the logger drops duplicates)
    n = int(max(lr_steps[-1], loss_steps.max() if len(loss_steps) else 0))
    lr = lr_values[np.maximum(np.searchsorted(lr_steps, np.arange(n), side="right") - 1, 0)]  # batch 0: step 1's
    name = run_dir.name
    tags = run_dir / "tags" / "mlflow.runName"
    if tags.is_file():
        name = tags.read_text().strip() or name
    return Trace(name, lr, loss_steps, losses, warmup)
