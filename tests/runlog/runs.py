"""Two runs logged to MLflow as Composer's ``lr_monitor`` and ``MLFlowLogger`` log them, and what a reader must give.

The LR of every batch is a known schedule; the loss a known multi-power law evaluated on it (so a fit on the runs
must recover the law). A value equal to the one logged before it is dropped, as Composer's MLflow logger does.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from foundry_ext.law import multipower

LAW = (2.0, 0.5, 0.5, 3.0, 2.0, 0.6, 0.6)  # L0, A, alpha, B, C, beta, gamma for LRs around 0.1
BATCHES, EVERY, WARMUP = 60, 3, 6
METRIC = "metrics/eval/Scripted"
LR_KEY = "lr-DecoupledAdamW/group0"


def _lr_at_step(name: str, step: int) -> float:
    """lr_monitor's value at ``step`` (the LR of 0-indexed batch ``step``)."""
    t = max(step - 1, 0)
    if t < WARMUP:
        return 0.1 * t / WARMUP
    if name == "cosine":
        return 0.1 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (t - WARMUP) / (BATCHES - WARMUP))))
    return 0.1 * (0.3 ** ((t >= 25) + (t >= 45)))


def expected(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The LR of every batch a reader must give, the loss steps and the losses."""
    lr = np.array([_lr_at_step(name, max(b, 1)) for b in range(BATCHES)])  # batch 0: step 1's value
    steps = np.arange(EVERY, BATCHES + 1, EVERY)
    return lr, steps, multipower.loss_exact(LAW, lr, steps)


def log_runs(uri: str, names: tuple[str, ...] = ("cosine", "steps")) -> dict[str, str]:
    """Log the runs to the tracking URI ``uri``; their ids by name."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from foundry_ext.runlog.mlflow_log import _sqlalchemy_compat

    _sqlalchemy_compat()
    client = MlflowClient(uri)
    experiment = client.create_experiment(f"law-{len(client.search_experiments())}")
    ids = {}
    for name in names:
        run_id = client.create_run(experiment, run_name=name).info.run_id
        _, steps, losses = expected(name)
        points, last = [], None
        for step in range(1, BATCHES + 1):
            value = _lr_at_step(name, step)
            if value != last:  # Composer's logger drops a value equal to the one before it
                points.append(Metric(LR_KEY, value, 1000 + step, step))
            last = value
        points += [Metric(METRIC, float(v), 1000 + int(s), int(s)) for s, v in zip(steps, losses, strict=True)]
        points.append(Metric("loss/train/total", 3.0, 1000, 0))
        client.log_batch(run_id, metrics=points)
        client.set_terminated(run_id)
        ids[name] = run_id
    return ids


def run_folder(root: Path, run_id: str) -> Path:
    """The folder of run ``run_id`` in the file store ``root``."""
    (meta,) = root.glob(f"*/{run_id}/meta.yaml")
    return meta.parent
