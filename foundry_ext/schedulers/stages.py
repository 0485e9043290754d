"""``stages`` as a ComposerScheduler (the keys and the formula: :mod:`foundry_ext.schedules.stages`)."""

from __future__ import annotations

from foundry_ext.schedulers.base import ModelScheduler
from foundry_ext.schedules.stages import Stages

__all__ = ["StagesScheduler"]


class StagesScheduler(ModelScheduler):
    """``stages``: linear / cosine stages between multipliers, and an optional override decay.

    Args:
        stages (list[dict]): The stages in order, each ``{duration, end, shape: linear | cosine, start}``; ``start``
            defaults to the previous stage's ``end`` (1.0 for the first). Required.
        override_decay (dict, optional): ``{start, duration, end, shape}``: from ``start`` on, a decay from the
            multiplier the stages have at ``start`` to ``end`` over ``duration``; ``end`` holds after it.

    Raises:
        ConfigError: every bad key, one line each (``scheduler.stages[1].end: ...``), when the scheduler is built.
    """

    Config = Stages
