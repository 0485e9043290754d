"""What the plateau says: the cut's line (on the console logger's stream), the ``lr_plateau/*`` metrics, the time."""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from composer.core import State

from foundry_ext.schedules.plateau_rule import Cut, PlateauState

__all__ = ["console_stream", "cut_line", "fmt", "plateau_metrics", "scales", "when"]


def cut_line(cut: Cut, state: State, monitor: str, patience: int) -> str:
    """The line that reports ``cut`` (one scale, or one per param group)."""
    if len(cut.new_scales) > 1:
        shown = f"scales {fmt(cut.old_scales)} -> {fmt(cut.new_scales)} (one per param group)"
    else:
        shown = f"scale {cut.old_scale:.6g} -> {cut.new_scale:.6g}"
    return (
        f"reduce_lr_on_plateau: cut LR {shown} at {when(state)}: "
        f"{monitor}={cut.value:.6g} has not improved on best {cut.best:.6g} for "
        f"{cut.evals_waited} evaluations (patience {patience})"
    )


def plateau_metrics(plateau: PlateauState, groups: int) -> dict[str, float]:
    """``lr_plateau/*`` at a check; with several param groups each group's scale too, so every series is complete."""
    best = plateau.best
    metrics: dict[str, float] = {
        "lr_plateau/scale": plateau.scale,
        "lr_plateau/best": math.nan if best is None else best,
        "lr_plateau/num_bad_evals": plateau.num_bad_evals,
        "lr_plateau/cuts": plateau.cuts,
    }
    if groups > 1:
        metrics.update({f"lr_plateau/scale/group{g}": s for g, s in enumerate(plateau.scales(groups))})
    return metrics


def console_stream(state: State) -> TextIO:
    """The stream of the run's ConsoleLogger (where Composer prints the evaluation's block), else stdout."""
    from composer.loggers import ConsoleLogger

    for callback in state.callbacks:
        if isinstance(callback, ConsoleLogger):
            return callback.stream  # type: ignore[return-value]
    return sys.stdout


def fmt(values: Any) -> str:
    """``[0.1, 0.01]``: each value in six significant digits."""
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


def scales(values: list[float]) -> str:
    """One number while every group has the same scale, else one per group."""
    return f"{values[0]:.6g}" if len(set(values)) == 1 else fmt(values)


def when(state: State) -> str:
    """The run's time, for a line: ``epoch 0, batch 40, 40960 tokens``."""
    ts = state.timestamp
    return f"epoch {ts.epoch.value}, batch {ts.batch.value}, {ts.token.value} tokens"
