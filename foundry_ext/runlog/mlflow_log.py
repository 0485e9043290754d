"""MLflow runs, read through MLflow's own client (imported here only: ``import mlflow`` takes seconds).

A source is a run folder of a local file store (``mlruns/<experiment>/<run>``: the store is the folder two levels
up, the run id the folder's name) or ``runs:/RUN_ID``, resolved against ``MLFLOW_TRACKING_URI`` (MLflow's default,
``./mlruns``, when unset): a ``file:`` store, a database (``sqlite:///mlflow.db``, ``postgresql://...``) or a
tracking server (``http://host:5000``). A metric logged twice at one step keeps its last value.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from foundry_ext.runlog.csv_log import MAX_BATCHES, MAX_ROWS, MAX_SERIES_ROWS
from foundry_ext.runlog.errors import RunLogError
from foundry_ext.runlog.log import LrLossLog

__all__ = ["read_lr_loss_mlflow", "read_series_mlflow"]

MAX_STORE_BYTES = 256 * 1024**2  # metric files of one file-store run: MLflow holds every point as a Python object


def _sqlalchemy_compat() -> None:
    """Let MLflow 2.22's SQL store import under SQLAlchemy 2.1 (both in the lock).

    ``mlflow/store/db/utils.py`` imports ``sqlalchemy.pool.FallbackAsyncAdaptedQueuePool``, which SQLAlchemy 2.1
    removed (``AsyncAdaptedQueuePool`` took its place); MLflow only puts it in a table of pool classes chosen by
    name, so without this alias every ``sqlite:`` / database tracking URI fails with an ImportError. Remove when the
    lock has an MLflow that no longer imports it.
    """
    import sqlalchemy.pool

    if not hasattr(sqlalchemy.pool, "FallbackAsyncAdaptedQueuePool"):
        sqlalchemy.pool.FallbackAsyncAdaptedQueuePool = sqlalchemy.pool.AsyncAdaptedQueuePool  # type: ignore[attr-defined]


def _error_text(e: BaseException) -> str:
    text = getattr(e, "message", None) or str(e) or type(e).__name__
    return " ".join(str(text).split())[:300]


class _Run:
    """One MLflow run: its client, id, name and logged metric keys."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._metrics: Path | None = None  # a file store run's metrics folder: its lines are named when MLflow fails
        if source.startswith("runs:/"):
            run_id, _, rest = source.removeprefix("runs:/").strip("/").partition("/")
            if not run_id or rest:
                raise RunLogError(f"{source}: expected runs:/RUN_ID (a run of MLFLOW_TRACKING_URI)")
            uri = os.environ.get("MLFLOW_TRACKING_URI") or None
            db = uri.removeprefix("sqlite:///") if uri and uri.startswith("sqlite:///") else None
            if db and db != ":memory:" and not os.path.isfile(db):  # MLflow would create an empty database
                raise RunLogError(f"{source}: MLFLOW_TRACKING_URI={uri}: no such database file {db}")
            self.where = f"{source} (MLFLOW_TRACKING_URI={uri or 'unset: ./mlruns'})"
        else:
            folder = Path(source).resolve()
            runs = _experiment_runs(folder)
            if runs is not None:
                shown = ", ".join(runs[:3]) + (f" and {len(runs) - 3} more" if len(runs) > 3 else "")
                raise RunLogError(
                    f"{source}: an MLflow experiment folder (mlruns/<experiment>), not a run; name one of its runs, "
                    f"{source.rstrip('/')}/<run id> ({shown or 'it has none'}), or runs:/RUN_ID"
                )
            if not (folder / "meta.yaml").is_file():
                raise RunLogError(
                    f"{source}: a folder without MLflow's meta.yaml: expected an MLflow run folder "
                    "(mlruns/<experiment>/<run>), runs:/RUN_ID or a CSV file"
                )
            metrics = folder / "metrics"
            size = sum(p.stat().st_size for p in metrics.rglob("*") if p.is_file()) if metrics.is_dir() else 0
            if size > MAX_STORE_BYTES:
                raise RunLogError(
                    f"{source}: {size / 1024**2:,.0f} MB of metrics; at most {MAX_STORE_BYTES // 1024**2} MB are read "
                    "from a file store (MLflow holds every point in memory)"
                )
            run_id, uri = folder.name, folder.parent.parent.as_uri()
            self.where = source
            self._metrics = metrics
        _sqlalchemy_compat()
        from mlflow.tracking import MlflowClient

        self.run_id = run_id
        self.client = self._call(lambda: MlflowClient(uri), "cannot open the tracking URI")
        run = self._call(lambda: self.client.get_run(run_id), "cannot read the run")
        self.name = run.info.run_name or run_id
        self.keys = sorted(run.data.metrics)

    def _call(self, fn: Any, doing: str) -> Any:
        # a server that does not answer fails in seconds, not after MLflow's default 7 retries with backoff (unless
        # the user set these); the process's environment is left as it was
        bounded = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
        added = [k for k in bounded if k not in os.environ]
        os.environ.update({k: bounded[k] for k in added})
        # urllib3 logs each retry as a warning: with logging configured (Composer, llm-foundry and notebooks do) a
        # server that does not answer would print its lines before the one error line that names it
        retries = logging.getLogger("urllib3.connectionpool")
        level = retries.level
        retries.setLevel(logging.ERROR)
        try:
            return fn()
        except RunLogError:
            raise
        except Exception as e:  # MLflow's stores raise many kinds (MlflowException, ValueError, OSError, ...)
            bad = _bad_metric_line(self._metrics) if self._metrics is not None else None
            if bad:  # MLflow says "invalid literal for int()" without the metric, the file or the line
                raise RunLogError(f"{self.where}: {bad}") from None
            raise RunLogError(f"{self.where}: MLflow {doing}: {_error_text(e)}") from None
        finally:
            retries.setLevel(level)
            for k in added:
                os.environ.pop(k, None)

    def history(self, key: str, max_rows: int = MAX_ROWS) -> tuple[np.ndarray, np.ndarray]:
        """Steps and values of ``key``; the last value logged at a step wins; every value finite."""
        points = self._call(lambda: self.client.get_metric_history(self.run_id, key), f"cannot read metric {key!r}")
        if len(points) > max_rows:
            raise RunLogError(f"{self.where}: metric {key!r} has {len(points):,} values; at most {max_rows:,} are read")
        by_step: dict[int, float] = {}
        for m in sorted(points, key=lambda m: (m.step, m.timestamp)):
            by_step[int(m.step)] = float(m.value)
        if not by_step:
            raise RunLogError(f"{self.where}: metric {key!r} has no values")
        steps = np.fromiter(by_step, dtype=np.int64, count=len(by_step))
        values = np.fromiter(by_step.values(), dtype=np.float64, count=len(by_step))
        bad = np.nonzero(~np.isfinite(values))[0]
        if len(bad):
            raise RunLogError(
                f"{self.where}: metric {key!r} is {values[bad[0]]} at step {steps[bad[0]]}; expected finite values"
            )
        if steps[0] < 0:
            raise RunLogError(f"{self.where}: metric {key!r} has step {steps[0]}; expected steps >= 0 (batches)")
        return steps, values


def _experiment_runs(folder: Path) -> list[str] | None:
    """The run ids of ``folder`` when it is an MLflow experiment folder (its meta.yaml has no run_id), else None."""
    import yaml

    meta = folder / "meta.yaml"
    try:
        if not meta.is_file() or meta.stat().st_size > 1024**2:
            return None
        doc = yaml.safe_load(meta.read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return None
    if not isinstance(doc, dict) or "run_id" in doc or "experiment_id" not in doc:
        return None
    return sorted(p.name for p in folder.iterdir() if (p / "meta.yaml").is_file())


def _bad_metric_line(metrics: Path) -> str | None:
    """The first line of a file store's metric files that is not MLflow's ``timestamp value [step]``, named."""
    for path in sorted(p for p in metrics.rglob("*") if p.is_file()):
        try:
            with path.open(encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    parts = line.split()
                    try:
                        int(parts[0]), float(parts[1])
                        if len(parts) > 2:
                            int(parts[2])
                        if len(parts) > 3:
                            raise ValueError
                    except (ValueError, IndexError):
                        shown = line.rstrip("\n")
                        shown = repr(shown[:80] + "...") if len(shown) > 80 else repr(shown)
                        key = path.relative_to(metrics).as_posix()
                        return (
                            f"metric {key!r} ({path}, line {number}): {shown} is not MLflow's 'timestamp value step' "
                            "(integers but the value)"
                        )
        except UnicodeDecodeError as e:
            return f"metric {path.relative_to(metrics).as_posix()!r} ({path}): byte {e.start} is not UTF-8 text"
        except OSError:
            continue
    return None


def read_lr_loss_mlflow(source: str, metric: str) -> LrLossLog:
    """``lr_monitor``'s ``lr-<optimizer>/group0`` and the loss ``metric`` of an MLflow run.

    lr_monitor logs at the end of each batch, after the scheduler stepped: the value at step ``b`` is the LR of
    0-indexed batch ``b`` (steps ``1 .. N`` of an ``N``-batch run), and batch 0 trains with the LR of batch 1
    (Composer evaluates both at timestamp 0; :mod:`foundry_ext.preview`). Composer's MLflow logger drops a value
    equal to the one before it, so a batch without an LR value has the LR of the last one logged.
    """
    run = _Run(source)
    lr_keys = [k for k in run.keys if k.startswith("lr-") and k.endswith("group0")]
    if not lr_keys:
        raise RunLogError(
            f"{run.where}: no lr_monitor metric (lr-<optimizer>/group0); add the lr_monitor callback to the run; "
            f"metrics it has: {', '.join(run.keys) or 'none'}"
        )
    if metric not in run.keys:
        raise RunLogError(
            f"{run.where}: no metric {metric!r} (--metric); metrics it has: {', '.join(run.keys) or 'none'}"
        )
    lr_steps, lrs = run.history(lr_keys[0])
    if (lrs < 0).any():
        raise RunLogError(f"{run.where}: {lr_keys[0]} is {lrs[lrs < 0][0]}, a negative LR")
    if lr_steps[0] != 1:
        raise RunLogError(
            f"{run.where}: {lr_keys[0]} starts at step {lr_steps[0]}, not 1: the run resumed or lost values"
        )
    loss_steps, losses = run.history(metric)
    if (losses <= 0).any():
        raise RunLogError(f"{run.where}: {metric} is {losses[losses <= 0][0]}; expected a cross-entropy > 0")
    batches = int(max(lr_steps[-1], loss_steps[-1]))
    if batches > MAX_BATCHES:
        raise RunLogError(f"{run.where}: step {batches} is beyond the {MAX_BATCHES:,} batches a run log may cover")
    return LrLossLog(run.name, source, lr_steps, lrs, loss_steps, losses, batches, "mlflow")


def read_series_mlflow(source: str, key: str | None) -> list[tuple[int, float]]:
    """``(step, value)`` of metric ``key`` of an MLflow run (``step``: the batch timestamp Composer logged it at)."""
    from foundry_ext.config.errors import did_you_mean

    if not key:
        raise RunLogError(f"{source}: an MLflow run needs the scheduler's monitor to pick its metric")
    run = _Run(source)
    if key not in run.keys:
        raise RunLogError(
            f"{run.where}: the run has no metric {key!r}{did_you_mean(key, run.keys)}; "
            f"it logged: {', '.join(run.keys) or 'nothing'}"
        )
    steps, values = run.history(key, MAX_SERIES_ROWS)
    return list(zip(steps.tolist(), values.tolist(), strict=True))
