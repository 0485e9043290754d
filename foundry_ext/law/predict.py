"""Predict a loss curve: a fitted law applied to the LR of every batch of a trace or of a train YAML's schedule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from foundry_ext.law.forms import form_of
from foundry_ext.law.trace import Trace

if TYPE_CHECKING:
    from foundry_ext.preview.pipeline import LRPipeline

__all__ = ["predict", "predict_points", "yaml_pipeline"]


def predict_points(total: int, points: int, exact: Sequence[int] = ()) -> np.ndarray:
    """About ``points`` evenly spaced batch counts in ``1 .. total`` (always ``total``), plus each of ``exact``."""
    chosen = set(np.linspace(1, total, num=max(2, min(points, total)), dtype=np.int64).tolist())
    chosen.update(int(s) for s in exact if 1 <= s <= total)
    return np.asarray(sorted(chosen), dtype=np.int64)


def predict(form: str, params: Sequence[float], lr: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The law's loss after each of ``steps`` batches of the per-batch LR trace ``lr``."""
    trace = Trace("predict", lr, warmup=0)
    return form_of(form).design([(trace, steps)], 16).predict(params)  # type: ignore[attr-defined]


def yaml_pipeline(config: str, overrides: Sequence[str], metrics: list[tuple[int, float]] | None = None) -> LRPipeline:
    """A train YAML's LR pipeline as ``foundry-ext plot`` builds it, checked for the law (``.lrs()``: every batch).

    ``metrics`` (``(timestamp, value)`` rows of a past run) replay ``reduce_lr_on_plateau``'s cuts, as ``plot
    --metrics`` does.

    Raises:
        ConfigError: the YAML or its schedule is invalid, sets no ``optimizer.lr``, or has a ``batch_size_schedule``.
        BatchesPerEpochNeeded: a duration is in epochs.
        ScheduleError: a scheduler of another package failed to build.
    """
    from foundry_ext.config.durations import UnknownBatchesPerEpoch
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import load_train_config, run_clock
    from foundry_ext.preview.pipeline import BatchesPerEpochNeeded, LRPipeline

    cfg = load_train_config(config, list(overrides))
    callbacks = cfg.get("callbacks")
    if cfg.get("batch_size_schedule") is not None or (
        isinstance(callbacks, dict) and callbacks.get("batch_size_schedule") is not None
    ):
        # the law maps an LR per step to a loss: it has no term for the batch, so a ramp's steps are not its steps
        raise ConfigError(
            "batch_size_schedule",
            "the loss law has no batch-size term, so it cannot predict a run whose batch grows; law predict and law "
            "tune refuse it (remove batch_size_schedule to predict the fixed-batch run)",
        )
    try:
        clock = run_clock(cfg)
    except UnknownBatchesPerEpoch as e:
        raise BatchesPerEpochNeeded(str(e)) from None
    return LRPipeline.from_config(cfg, clock, metrics=metrics, require_lr=True)
