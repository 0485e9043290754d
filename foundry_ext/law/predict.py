"""Predict a loss curve: a fitted law applied to the LR of every batch of a trace or of a train YAML's schedule."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from foundry_ext.law.forms import form_of
from foundry_ext.law.trace import Trace

__all__ = ["predict", "predict_points", "yaml_lrs"]


def predict_points(total: int, points: int, exact: Sequence[int] = ()) -> np.ndarray:
    """About ``points`` evenly spaced batch counts in ``1 .. total`` (always ``total``), plus each of ``exact``."""
    chosen = set(np.linspace(1, total, num=max(2, min(points, total)), dtype=np.int64).tolist())
    chosen.update(int(s) for s in exact if 1 <= s <= total)
    return np.asarray(sorted(chosen), dtype=np.int64)


def predict(form: str, params: Sequence[float], lr: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The law's loss after each of ``steps`` batches of the per-batch LR trace ``lr``."""
    trace = Trace("predict", lr, warmup=0)
    return form_of(form).design([(trace, steps)], 16).predict(params)  # type: ignore[attr-defined]


def yaml_lrs(config: str, overrides: Sequence[str], metrics: list[tuple[int, float]] | None = None) -> np.ndarray:
    """The LR of every batch of a train YAML's run, exactly as ``foundry-ext plot`` computes it (:mod:`preview`).

    ``metrics`` (``(timestamp, value)`` rows of a past run) replay ``reduce_lr_on_plateau``'s cuts, as ``plot
    --metrics`` does.

    Raises:
        ConfigError: the YAML or its schedule is invalid.
    """
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import load_train_config, optimizer_lr, run_clock
    from foundry_ext.preview import PlateauPreview, Preview, build_schedule, simulate_plateau

    cfg = load_train_config(config, list(overrides))
    clock = run_clock(cfg)
    block = cfg.get("scheduler")
    if not isinstance(block, dict) or not block.get("name"):
        raise ConfigError("scheduler.name", "missing; expected a block with a name, e.g. {name: cosine_with_warmup}")
    lr = optimizer_lr(cfg)
    if lr is None:
        raise ConfigError("optimizer.lr", "missing; the law needs the LR itself, not the multiplier")
    schedule = build_schedule(block, clock)
    cuts: list = []
    if metrics is not None:
        if not isinstance(schedule, PlateauPreview):
            raise ConfigError("scheduler.name", f"--metrics is only for reduce_lr_on_plateau, not {block['name']!r}")
        total = clock.total_batches
        cuts, _ = simulate_plateau(schedule, [(b, v) for b, v in metrics if b < total], [lr])
    preview = Preview(schedule, clock, lr, cuts)
    return np.fromiter((preview.lr(b) for b in range(clock.total_batches)), dtype=np.float64, count=clock.total_batches)
